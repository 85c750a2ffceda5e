//! Policy attachment (pure; security, telemetry and extensions kinds, section owned by istio-sec): takes a policy's
//! selector and target references, records Istio's `validatePolicyTargetReference` and selector errors.

use super::host::DNS1123_LABEL_MAX;
use super::labels::validate_workload_selector;
use super::target::{validate_one_selector_kind, validate_target_ref};
use crate::model::istio::proxy_config::TypeWorkloadSelector;
use crate::model::istio::PolicyTargetReference;
use crate::model::Findings;

/// Most `targetRefs` entries a policy may list (the CRD's `maxItems`).
pub const MAX_TARGET_REFS: usize = 16;

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
        for (key, value) in &selector.match_labels {
            if value.len() > DNS1123_LABEL_MAX {
                out.error(
                    format!("{path}.{key}"),
                    "selector label value is longer than 63 characters",
                );
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
    if r.name.len() > 253 {
        out.error(path, "targetRef name is longer than 253 characters");
    }
}
