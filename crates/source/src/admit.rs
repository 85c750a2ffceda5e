//! The sources' gate: takes one raw document (JSON value) and yields a [`Verdict`]: the valid object, the errors
//! that keep it out, or "not ours". Fills in the default namespace first, then runs the shared validation.
//!
//! The higress-config ConfigMap is handled item by item, as Higress does: the valid items of the new version
//! are applied on top of the last good config and each invalid item keeps its last good value
//! ([`merge_valid_items`]); which items kept their value is logged as a warning, which items changed
//! ([`diff`]) at info level.

use std::sync::Arc;

use serde_json::Value;

use super::metrics::SourceMetrics;
use admitpilot_model::decode::{decode_lenient, DecodeOptions, DocumentHeader};
use admitpilot_model::higress_config::{decode_configmap, diff, HigressConfig, Item, HIGRESS_PATH};
use admitpilot_model::{ConfigObject, Finding, Kind, ObjectKey, ObjectMeta, Spec};
use admitpilot_validate::higress_config::merge_valid_items;
use admitpilot_validate::validate_document;

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
    /// The document is valid, or (higress-config only) valid once its invalid items keep their last good value.
    Accept {
        /// The decoded object (namespace filled in).
        object: Box<ConfigObject>,
        /// Warnings to log.
        warnings: Vec<Finding>,
        /// Errors of the parts that were left out (higress-config items); report them like a rejection.
        rejected: Vec<Finding>,
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

/// A [`Verdict`] after the handling every source shares: warnings logged, rejections counted.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Serve the object.
    Serve {
        /// The object's key.
        key: ObjectKey,
        /// The decoded object (namespace filled in).
        object: Box<ConfigObject>,
        /// Errors of the parts that were left out (higress-config items), already counted; report them.
        rejected: Vec<Finding>,
    },
    /// Do not serve the document (already counted).
    Refuse {
        /// The object's key, when kind and name could be read (used to keep its last good version).
        key: Option<ObjectKey>,
        /// At least one error.
        errors: Vec<Finding>,
    },
    /// A kind admitpilot does not handle: skipped silently.
    Ignore,
}

impl Verdict {
    /// The kind of the document, when recognised.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            Verdict::Accept { object, .. } => Some(object.kind()),
            Verdict::Reject { kind, .. } => *kind,
            Verdict::Ignore => None,
        }
    }

    /// Logs an accepted object's warnings through `log_warning` and counts a rejection (of the whole document, or of
    /// some of its parts) in `metrics`, the same way for every source.
    pub fn settle(
        self,
        metrics: &SourceMetrics,
        log_warning: impl Fn(&ObjectKey, &Finding),
    ) -> Admission {
        match self {
            Verdict::Accept {
                object,
                warnings,
                rejected,
            } => {
                let key = object.key();
                for warning in &warnings {
                    log_warning(&key, warning);
                }
                if !rejected.is_empty() {
                    metrics.reject(Some(key.kind), "invalid");
                }
                Admission::Serve {
                    key,
                    object,
                    rejected,
                }
            }
            Verdict::Reject {
                kind,
                key,
                errors,
                reason,
            } => {
                metrics.reject(kind, reason.as_str());
                Admission::Refuse { key, errors }
            }
            Verdict::Ignore => Admission::Ignore,
        }
    }
}

/// Gives `doc` the default namespace when it names none, then decodes and validates it. `last_good` looks up
/// the version of an object currently in force (used for higress-config's per-item merge).
pub fn admit(
    mut doc: Value,
    options: &AdmitOptions,
    last_good: &dyn Fn(&ObjectKey) -> Option<Arc<ConfigObject>>,
) -> Verdict {
    fill_namespace(&mut doc, &options.default_namespace);
    let header = DocumentHeader::read(&doc);
    let (group, _) = Kind::split_api_version(&header.api_version);
    if Kind::from_group_kind(group, &header.kind) == Some(Kind::HigressConfig)
        && header.name == options.decode.higress_name
        && header.namespace == options.decode.higress_namespace
    {
        return admit_higress_config(&doc, header, options, last_good);
    }
    let report = validate_document(&doc, &options.decode);
    if report.unrecognized {
        return Verdict::Ignore;
    }
    let valid = report.is_valid();
    let kind = report.kind;
    match report.object {
        Some(object) if valid => Verdict::Accept {
            object: Box::new(object),
            warnings: report.findings,
            rejected: Vec::new(),
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

/// Applies the valid items of a higress-config version on top of the last good one.
fn admit_higress_config(
    doc: &Value,
    header: DocumentHeader,
    options: &AdmitOptions,
    last_good: &dyn Fn(&ObjectKey) -> Option<Arc<ConfigObject>>,
) -> Verdict {
    let key = ObjectKey::new(Kind::HigressConfig, header.namespace, header.name);
    let report = validate_document(doc, &options.decode);
    let mut metadata_findings = Vec::new();
    let metadata: Option<ObjectMeta> =
        decode_lenient(&doc["metadata"], "metadata", &mut metadata_findings, false);
    let (Some(metadata), Some(fields)) = (metadata, doc.as_object()) else {
        return Verdict::Reject {
            kind: Some(Kind::HigressConfig),
            key: Some(key),
            errors: report
                .findings
                .into_iter()
                .filter(Finding::is_error)
                .collect(),
            reason: RejectReason::Undecodable,
        };
    };
    let candidate = decode_configmap(fields);
    let last = last_good(&key)
        .and_then(|object| match &object.spec {
            Spec::HigressConfig(config) => Some(config.as_ref().clone()),
            _ => None,
        })
        .unwrap_or_default();
    let (effective, kept) = merge_valid_items(&last, &candidate);
    let (errors, warnings): (Vec<Finding>, Vec<Finding>) =
        report.findings.into_iter().partition(Finding::is_error);
    log_items(
        &key,
        &last,
        &effective,
        &kept,
        &errors,
        candidate.has_higress,
    );
    Verdict::Accept {
        object: Box::new(ConfigObject {
            api_version: header.api_version,
            metadata,
            spec: Spec::HigressConfig(Box::new(effective)),
        }),
        warnings,
        rejected: errors,
    }
}

/// Logs which higress-config items kept their last good value (loudly) and which changed.
fn log_items(
    key: &ObjectKey,
    last: &HigressConfig,
    effective: &HigressConfig,
    kept: &[Item],
    errors: &[Finding],
    has_higress: bool,
) {
    if !has_higress {
        tracing::warn!(object = %key, "higress-config has no data.higress key; ignored, the last good config stays");
    }
    for item in kept {
        let reasons: Vec<String> = errors
            .iter()
            .filter(|e| item_of(&e.field) == Some(*item))
            .map(ToString::to_string)
            .collect();
        if has_higress && !reasons.is_empty() {
            tracing::warn!(object = %key, item = %item, errors = ?reasons,
                "higress-config item is invalid; it keeps its last good value");
        }
    }
    let changed = diff(last, effective).changed();
    if !changed.is_empty() {
        let names: Vec<&str> = changed.iter().map(|i| i.name()).collect();
        tracing::info!(object = %key, items = ?names, "higress-config items changed");
    }
}

/// The higress-config item a finding's field path (`data.higress.<field>...`) belongs to.
fn item_of(field: &str) -> Option<Item> {
    let rest = field.strip_prefix(HIGRESS_PATH)?.strip_prefix('.')?;
    let first = rest.split(['.', '[']).next()?;
    Item::of_field(first)
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
            "metadata": {"name": "vs"},
            "spec": {"hosts": ["a.example.com"], "http": [{"route": [{"destination": {"host": "a"}}]}]}});
        match admit(doc, &options(), &|_| None) {
            Verdict::Accept { object, .. } => assert_eq!(object.metadata.namespace, "team-a"),
            other => panic!("expected accept, got {other:?}"),
        }
    }

    #[test]
    fn keeps_an_explicit_namespace() {
        let doc = json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "edge"},
            "spec": {"servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}});
        match admit(doc, &options(), &|_| None) {
            Verdict::Accept { object, .. } => assert_eq!(object.metadata.namespace, "edge"),
            other => panic!("expected accept, got {other:?}"),
        }
    }

    #[test]
    fn undecodable_documents_are_rejected_with_their_key() {
        let doc = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "vs"}, "spec": {}, "bogus": 1});
        match admit(doc, &options(), &|_| None) {
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

    fn higress_config(higress: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "higress-config", "namespace": "higress-system"},
            "data": {"higress": higress}})
    }

    fn accepted_config(verdict: Verdict) -> (HigressConfig, Vec<Finding>) {
        match verdict {
            Verdict::Accept {
                object, rejected, ..
            } => match object.spec {
                Spec::HigressConfig(config) => (*config, rejected),
                other => panic!("expected a higress-config, got {other:?}"),
            },
            other => panic!("expected an accepted higress-config, got {other:?}"),
        }
    }

    #[test]
    fn invalid_higress_config_items_keep_their_last_good_value() {
        let first = admit(
            higress_config("gzip:\n  minContentLength: 2048\n"),
            &options(),
            &|_| None,
        );
        let (first, rejected) = accepted_config(first);
        assert!(rejected.is_empty(), "{rejected:?}");
        assert_eq!(first.gzip.as_ref().unwrap().min_content_length, 2048);
        let last_good = Arc::new(ConfigObject {
            api_version: "v1".into(),
            metadata: ObjectMeta::default(),
            spec: Spec::HigressConfig(Box::new(first)),
        });

        // gzip turns invalid while a global option changes: gzip keeps 2048, the global option applies.
        let second = admit(
            higress_config("gzip:\n  memoryLevel: 0\naddXRealIpHeader: true\n"),
            &options(),
            &|key| (key.kind == Kind::HigressConfig).then(|| last_good.clone()),
        );
        let (second, rejected) = accepted_config(second);
        assert_eq!(second.gzip.as_ref().unwrap().min_content_length, 2048);
        assert_eq!(second.gzip.as_ref().unwrap().memory_level, 5);
        assert!(second.add_x_real_ip_header);
        assert_eq!(rejected.len(), 1, "{rejected:?}");
        assert_eq!(rejected[0].field, "data.higress.gzip.memoryLevel");
        assert_eq!(item_of(&rejected[0].field), Some(Item::Gzip));
    }

    #[test]
    fn higress_config_without_metadata_is_rejected() {
        let mut doc = higress_config("");
        doc["metadata"]["labels"] = json!("not-a-map");
        assert!(matches!(
            admit(doc, &options(), &|_| None),
            Verdict::Reject { .. }
        ));
    }

    #[test]
    fn foreign_kinds_are_ignored() {
        let doc = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
        assert_eq!(admit(doc, &options(), &|_| None), Verdict::Ignore);
    }
}
