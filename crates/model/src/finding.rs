//! Findings: what a decoder or validator says about one object (severity, field path, message).

use std::fmt;

/// How serious a finding is: errors reject the object, warnings only inform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The object is invalid and must not be admitted or served.
    Error,
    /// The object is accepted, but something looks wrong.
    Warning,
}

/// One problem found in one object, located by a field path such as `spec.http[0].route[1].weight`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Dotted field path from the object root; empty when the finding is about the whole document.
    pub field: String,
    /// Human-readable message; for higress-config items this is Higress's own error string.
    pub message: String,
}

impl Finding {
    /// Builds an error at `field`.
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Error,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Builds a warning at `field`.
    pub fn warning(field: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Warning,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Tells whether this finding rejects the object.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        if self.field.is_empty() {
            write!(f, "{severity}: {}", self.message)
        } else {
            write!(f, "{severity}: {}: {}", self.field, self.message)
        }
    }
}

/// Collects findings while walking an object; validators push into it with the current field path.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    /// Records an error at `field`.
    pub fn error(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Finding::error(field, message));
    }

    /// Records a warning at `field`.
    pub fn warning(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Finding::warning(field, message));
    }

    /// Tells whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Finding::is_error)
    }

    /// Returns the recorded findings.
    pub fn into_vec(self) -> Vec<Finding> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_field_and_message() {
        let f = Finding::error("spec.hosts[0]", "host must not be empty");
        assert_eq!(
            f.to_string(),
            "error: spec.hosts[0]: host must not be empty"
        );
        assert_eq!(Finding::warning("", "odd").to_string(), "warning: odd");
    }

    #[test]
    fn findings_know_whether_they_hold_errors() {
        let mut all = Findings::default();
        all.warning("a", "w");
        assert!(!all.has_errors());
        all.error("b", "e");
        assert!(all.has_errors());
        assert_eq!(all.into_vec().len(), 2);
    }
}
