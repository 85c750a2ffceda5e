//! The sources' gate: takes one raw document (JSON value) and yields a [`Verdict`]: the valid object, the errors
//! that keep it out, or "not ours". Fills in the default namespace first, then runs the shared validation.

use serde_json::Value;

use crate::model::decode::DecodeOptions;
use crate::model::{ConfigObject, Finding, Kind, ObjectKey};
use crate::validate::validate_document;

/// How sources decode documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitOptions {
    /// Where the higress-config ConfigMap lives.
    pub decode: DecodeOptions,
    /// `--default-namespace`: the namespace given to objects that name none (default `default`).
    pub default_namespace: String,
}

/// What a source does with one document.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The document is valid; `warnings` may be non-empty.
    Accept {
        /// The decoded object (namespace filled in).
        object: ConfigObject,
        /// Warnings to log.
        warnings: Vec<Finding>,
    },
    /// The document is of a kind admitpilot handles but is invalid; it must not be served.
    Reject {
        /// The kind, when recognised.
        kind: Option<Kind>,
        /// The object's key, when kind and name could be read (used to keep its last good version).
        key: Option<ObjectKey>,
        /// At least one error.
        errors: Vec<Finding>,
        /// `undecodable` when the document did not decode, `invalid` when a validation rule failed.
        reason: RejectReason,
    },
    /// A kind admitpilot does not handle (or another ConfigMap): skipped silently.
    Ignore,
}

/// Why a document was rejected (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The document did not decode (wrong types, unknown top-level fields, no name).
    Undecodable,
    /// The document decoded but a validation rule failed.
    Invalid,
}

impl RejectReason {
    /// Returns the metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Undecodable => "undecodable",
            RejectReason::Invalid => "invalid",
        }
    }
}

/// Gives `doc` the default namespace when it names none, then decodes and validates it.
pub fn admit(mut doc: Value, options: &AdmitOptions) -> Verdict {
    fill_namespace(&mut doc, &options.default_namespace);
    let report = validate_document(&doc, &options.decode);
    if report.unrecognized {
        return Verdict::Ignore;
    }
    let valid = report.is_valid();
    let kind = report.kind;
    match report.object {
        Some(object) if valid => Verdict::Accept {
            object,
            warnings: report.findings,
        },
        object => {
            let reason = if object.is_some() {
                RejectReason::Invalid
            } else {
                RejectReason::Undecodable
            };
            let key = match (&object, kind) {
                (Some(object), _) => Some(object.key()),
                (None, Some(kind)) if !report.header.name.is_empty() => Some(ObjectKey::new(
                    kind,
                    report.header.namespace.clone(),
                    report.header.name.clone(),
                )),
                _ => None,
            };
            Verdict::Reject {
                kind,
                key,
                errors: report
                    .findings
                    .into_iter()
                    .filter(Finding::is_error)
                    .collect(),
                reason,
            }
        }
    }
}

/// Sets `metadata.namespace` when it is missing or empty (documents that are not objects are left alone).
fn fill_namespace(doc: &mut Value, default_namespace: &str) {
    let Some(fields) = doc.as_object_mut() else {
        return;
    };
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(metadata) = metadata.as_object_mut() {
        let missing = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if missing {
            metadata.insert(
                "namespace".into(),
                Value::String(default_namespace.to_string()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options() -> AdmitOptions {
        AdmitOptions {
            decode: DecodeOptions::default(),
            default_namespace: "team-a".into(),
        }
    }

    #[test]
    fn fills_in_the_default_namespace() {
        let doc = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "vs"}, "spec": {}});
        match admit(doc, &options()) {
            Verdict::Accept { object, .. } => assert_eq!(object.metadata.namespace, "team-a"),
            other => panic!("expected accept, got {other:?}"),
        }
    }

    #[test]
    fn keeps_an_explicit_namespace() {
        let doc = json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "edge"}, "spec": {}});
        match admit(doc, &options()) {
            Verdict::Accept { object, .. } => assert_eq!(object.metadata.namespace, "edge"),
            other => panic!("expected accept, got {other:?}"),
        }
    }

    #[test]
    fn undecodable_documents_are_rejected_with_their_key() {
        let doc = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "vs"}, "spec": {}, "bogus": 1});
        match admit(doc, &options()) {
            Verdict::Reject {
                key,
                errors,
                reason,
                ..
            } => {
                assert_eq!(
                    key,
                    Some(ObjectKey::new(Kind::VirtualService, "team-a", "vs"))
                );
                assert_eq!(reason, RejectReason::Undecodable);
                assert_eq!(errors[0].field, "bogus");
            }
            other => panic!("expected reject, got {other:?}"),
        }
    }

    #[test]
    fn foreign_kinds_are_ignored() {
        let doc = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
        assert_eq!(admit(doc, &options()), Verdict::Ignore);
    }
}
