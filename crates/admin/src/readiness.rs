//! Readiness: named conditions that subsystems register and flip; the process is ready when all are true.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

/// A shared set of named readiness conditions; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    conditions: Arc<RwLock<BTreeMap<String, bool>>>,
}

/// One registered condition; setting it updates the shared [`Readiness`].
#[derive(Debug, Clone)]
pub struct Condition {
    name: String,
    conditions: Arc<RwLock<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// Creates an empty set (ready, since no condition is pending).
    pub fn new() -> Self {
        Readiness::default()
    }

    /// Registers a condition, initially false, and returns its handle. Registering a name twice returns a
    /// handle to the same condition.
    pub fn register(&self, name: impl Into<String>) -> Condition {
        let name = name.into();
        self.conditions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.clone())
            .or_insert(false);
        Condition {
            name,
            conditions: self.conditions.clone(),
        }
    }

    /// Returns every condition and its state, sorted by name.
    pub fn snapshot(&self) -> Vec<(String, bool)> {
        self.conditions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, ok)| (name.clone(), *ok))
            .collect()
    }

    /// Tells whether every registered condition is true.
    pub fn is_ready(&self) -> bool {
        self.conditions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .all(|ok| *ok)
    }
}

impl Condition {
    /// Sets the condition.
    pub fn set(&self, ok: bool) {
        if let Some(state) = self
            .conditions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&self.name)
        {
            *state = ok;
        }
    }

    /// Returns the condition's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_condition_is_true() {
        let readiness = Readiness::new();
        assert!(readiness.is_ready());
        let cert = readiness.register("certificate loaded");
        let synced = readiness.register("sources synced");
        assert!(!readiness.is_ready());
        cert.set(true);
        assert!(!readiness.is_ready());
        synced.set(true);
        assert!(readiness.is_ready());
        cert.set(false);
        assert_eq!(
            readiness.snapshot(),
            vec![
                ("certificate loaded".to_string(), false),
                ("sources synced".to_string(), true)
            ]
        );
    }
}
