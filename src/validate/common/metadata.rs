//! Metadata (pure): takes an object's kind and metadata, records Istio's and Kubernetes' name, namespace, label and
//! annotation errors.

use super::host::is_dns1123_label;
use crate::model::Findings;
use crate::model::Kind;
use crate::model::ObjectMeta;

/// Annotation that turns an AuthorizationPolicy into a dry run.
pub const DRY_RUN_ANNOTATION: &str = "istio.io/dry-run";
/// Annotation that makes the webhook reject the object (used to probe that validation works).
pub const ALWAYS_REJECT_ANNOTATION: &str = "internal.istio.io/webhook-always-reject";
/// Internal annotations users may not set (they would escalate privileges).
pub const INTERNAL_ANNOTATIONS: &[&str] = &[
    "internal.istio.io/parent-namespace",
    "internal.istio.io/parents",
];

/// Checks metadata rules every Istio kind shares (Istio's `validateMetadata`): `istio.io/dry-run` only on
/// AuthorizationPolicy with a boolean value (the policy validator checks the action), the always-reject
/// annotation rejects, and internal annotations are refused. ConfigMaps and Kubernetes kinds are skipped.
pub fn validate_metadata(kind: Kind, meta: &ObjectMeta, out: &mut Findings) {
    if matches!(
        kind,
        Kind::HigressConfig | Kind::MeshConfig | Kind::Service | Kind::EndpointSlice | Kind::Secret
    ) {
        return;
    }
    if !meta.name.is_empty() && !is_k8s_object_name(&meta.name) {
        out.error(
            "metadata.name",
            format!(
                "name {:?} must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.'; at most 253 characters)",
                meta.name
            ),
        );
    }
    if !meta.namespace.is_empty() && !is_k8s_namespace(&meta.namespace) {
        out.error(
            "metadata.namespace",
            format!(
                "namespace {:?} must be a lowercase RFC 1123 label",
                meta.namespace
            ),
        );
    }
    if let Some(value) = meta.annotations.get(DRY_RUN_ANNOTATION) {
        let path = format!("metadata.annotations.{DRY_RUN_ANNOTATION}");
        if kind != Kind::AuthorizationPolicy {
            out.error(
                path,
                format!("annotation {DRY_RUN_ANNOTATION} is only supported on AuthorizationPolicy; remove it"),
            );
        } else if !is_go_bool(value) {
            out.error(
                path,
                format!("annotation {DRY_RUN_ANNOTATION} must be a boolean, got {value:?}"),
            );
        }
    }
    if meta.annotations.contains_key(ALWAYS_REJECT_ANNOTATION) {
        out.error(
            format!("metadata.annotations.{ALWAYS_REJECT_ANNOTATION}"),
            format!("annotation {ALWAYS_REJECT_ANNOTATION} is set: the object is always rejected"),
        );
    }
    for internal in INTERNAL_ANNOTATIONS {
        if meta.annotations.contains_key(*internal) {
            out.error(
                format!("metadata.annotations.{internal}"),
                format!("annotation {internal} is internal and may not be set by users"),
            );
        }
    }
}

/// Tells whether `s` is a valid Kubernetes object name: a lowercase RFC 1123 subdomain of 1–253 characters.
/// Mirrors apimachinery's `IsDNS1123Subdomain`: dot-separated parts of `[a-z0-9-]`, each starting and ending
/// alphanumeric, with **no** 63-character limit per part (that limit belongs to `IsDNS1123Label`).
pub fn is_k8s_object_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty()
                && alnum(&b[0])
                && alnum(&b[b.len() - 1])
                && b.iter().all(|c| alnum(c) || *c == b'-')
        })
}

/// Tells whether `s` is a lowercase RFC 1123 label (Kubernetes namespace names). Mirrors apimachinery's
/// `IsDNS1123Label` (at most 63 characters of `[a-z0-9-]`, starting and ending alphanumeric).
pub fn is_k8s_namespace(s: &str) -> bool {
    is_dns1123_label(s) && !s.bytes().any(|c| c.is_ascii_uppercase())
}

/// Tells whether `s` is a boolean as Go's strconv.ParseBool reads it.
pub fn is_go_bool(s: &str) -> bool {
    matches!(
        s,
        "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false" | "False"
    )
}
