//! Objects the API server stored although validation refuses them ([`Refusal`]), per source scope: the sources set
//! them as they admit documents, the status writer and `/debug/configz` read them ([`Refusals::all`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::Scope;
use admitpilot_model::refusal::Refusal;
use admitpilot_model::ObjectKey;

/// The refused objects of every scope.
#[derive(Debug, Clone, Default)]
pub struct Refusals {
    scopes: Arc<Mutex<BTreeMap<Scope, BTreeMap<ObjectKey, Refusal>>>>,
}

impl Refusals {
    /// Replaces what `scope` refuses.
    pub fn set(&self, scope: &Scope, refused: BTreeMap<ObjectKey, Refusal>) {
        let mut scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        if refused.is_empty() {
            scopes.remove(scope);
        } else {
            scopes.insert(scope.clone(), refused);
        }
    }

    /// Every refused object (the first scope in name order wins a key refused twice), in key order.
    pub fn all(&self) -> Vec<Refusal> {
        let scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut all: BTreeMap<&ObjectKey, &Refusal> = BTreeMap::new();
        for refused in scopes.values() {
            for (key, refusal) in refused {
                all.entry(key).or_insert(refusal);
            }
        }
        all.into_values().cloned().collect()
    }
}
