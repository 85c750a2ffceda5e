//! Policy attachment (pure; security, telemetry and extensions kinds, section owned by istio-sec): takes a policy's
//! selector and target references, records Istio's `validatePolicyTargetReference` and selector errors.

use super::host::DNS1123_LABEL_MAX;
use super::labels::validate_workload_selector;
use super::metadata::field_too_long;
use super::target::{validate_one_selector_kind, validate_target_ref};
use admitpilot_model::istio::proxy_config::TypeWorkloadSelector;
use admitpilot_model::istio::PolicyTargetReference;
use admitpilot_model::Findings;

/// Most `targetRefs` entries a policy may list (the CRD's `maxItems`).
pub const MAX_TARGET_REFS: usize = 16;
/// Longest `targetRef(s)[].name` (Istio's `PolicyTargetReference.name` CRD rule `maxLength: 253`, from
/// `+kubebuilder:validation:MaxLength=253` in istio/api `type/v1beta1/selector.proto`).
pub const TARGET_REF_NAME_MAX: usize = 253;

/// Validates how a policy attaches to workloads: at most one of `selector`, `targetRef` and `targetRefs`, the
/// selector's labels ([`validate_workload_selector`], plus the CRD's 63-character value limit), and every
/// target reference ([`validate_target_ref`]). Paths are under `spec`.
pub fn validate_policy_attachment(
    selector: Option<&TypeWorkloadSelector>,
    target_ref: Option<&PolicyTargetReference>,
    target_refs: &[PolicyTargetReference],
    out: &mut Findings,
) {
    validate_one_selector_kind(
        selector.is_some(),
        target_ref.is_some(),
        !target_refs.is_empty(),
        "spec",
        out,
    );
    if let Some(selector) = selector {
        let path = "spec.selector.matchLabels";
        validate_workload_selector(&selector.match_labels, path, out);
        // The CRD rule of Istio's `WorkloadSelector.matchLabels` (`+kubebuilder:map-value-validation:MaxLength=63`
        // in istio/api `type/v1beta1/selector.proto`): the API server refuses a longer value with apimachinery's
        // `field.TooLong` text before the webhook sees the object. (kube-openapi's `MaxLength` counts characters,
        // admitpilot counts bytes: they differ only for non-ASCII values.)
        for (key, value) in &selector.match_labels {
            if value.len() > DNS1123_LABEL_MAX {
                out.error(format!("{path}.{key}"), field_too_long(DNS1123_LABEL_MAX));
            }
        }
    }
    if let Some(r) = target_ref {
        validate_policy_target_ref(r, "spec.targetRef", out);
    }
    if target_refs.len() > MAX_TARGET_REFS {
        out.error(
            "spec.targetRefs",
            format!(
                "at most {MAX_TARGET_REFS} targetRefs may be listed, found {}",
                target_refs.len()
            ),
        );
    }
    for (i, r) in target_refs.iter().enumerate() {
        validate_policy_target_ref(r, &format!("spec.targetRefs[{i}]"), out);
    }
}

fn validate_policy_target_ref(r: &PolicyTargetReference, path: &str, out: &mut Findings) {
    validate_target_ref(&r.group, &r.kind, &r.name, &r.namespace, path, out);
    // The CRD rule [`TARGET_REF_NAME_MAX`]: the API server refuses a longer name with apimachinery's `field.TooLong`
    // text (at the name field, which admitpilot reports at the reference).
    if r.name.len() > TARGET_REF_NAME_MAX {
        out.error(path, field_too_long(TARGET_REF_NAME_MAX));
    }
}
