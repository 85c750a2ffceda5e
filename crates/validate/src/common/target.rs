//! Policy targets (pure): takes a policy's `targetRef`/`targetRefs` and selector, records Istio's errors for the
//! kinds and combinations it refuses.

use admitpilot_model::Findings;

/// The group/kinds a policy `targetRef` may point at (core Service, ServiceEntry, Gateway API Gateway/GatewayClass).
pub const ALLOWED_TARGET_KINDS: &[(&str, &str)] = &[
    ("", "Service"),
    ("networking.istio.io", "ServiceEntry"),
    ("gateway.networking.k8s.io", "Gateway"),
    ("gateway.networking.k8s.io", "GatewayClass"),
];

/// Validates one policy target reference: name required, no namespace, and an allowed group/kind. Mirrors Istio's
/// `validatePolicyTargetReference`; its first two texts are Istio's, the third names the kinds in words where
/// Istio prints its Go list of group/version/kinds.
pub fn validate_target_ref(
    group: &str,
    kind: &str,
    name: &str,
    namespace: &str,
    path: &str,
    out: &mut Findings,
) {
    if name.is_empty() {
        out.error(path, "targetRef name must be set");
    }
    if !namespace.is_empty() {
        out.error(
            path,
            "targetRef namespace must not be set; cross namespace referencing is not supported",
        );
    }
    let group_norm = if group == "core" { "" } else { group };
    if !ALLOWED_TARGET_KINDS
        .iter()
        .any(|(g, k)| *g == group_norm && *k == kind)
    {
        out.error(
            path,
            format!(
                "targetRef must point at a Service, ServiceEntry, Gateway or GatewayClass, not {group}/{kind}"
            ),
        );
    }
}

/// Records an error at `path` when more than one of workload selector, `targetRef` and `targetRefs` is set.
/// Mirrors Istio's `validateOneOfSelectorType`, with its text.
pub fn validate_one_selector_kind(
    has_selector: bool,
    has_target_ref: bool,
    has_target_refs: bool,
    path: &str,
    out: &mut Findings,
) {
    let set =
        usize::from(has_selector) + usize::from(has_target_ref) + usize::from(has_target_refs);
    if set > 1 {
        out.error(
            path,
            "only one of targetRefs or workloadSelector can be set",
        );
    }
}
