//! PeerAuthentication rules: takes a decoded istio PeerAuthentication spec and its metadata, records findings with
//! field paths. Follows Istio's webhook (`ValidatePeerAuthentication`) and the CRD's CEL rules: per-port mTLS
//! needs a selector with labels, must not be empty, and its keys are ports 1..65535.

use admitpilot_model::{istio::PeerAuthentication, Findings, ObjectMeta};

use super::common::validate_policy_attachment;

/// Validates one PeerAuthentication. The port-level rules mirror Istio's `ValidatePeerAuthentication`
/// (pkg/config/validation/validation.go), with its texts: port-level mTLS only with a selector that has labels, a
/// present `portLevelMtls` not empty, each port in 1..65535. (The CRD's CEL rules, "portLevelMtls requires
/// selector", `minProperties: 1` and "port must be between 1-65535", reject the same objects.)
pub fn validate(spec: &PeerAuthentication, _meta: &ObjectMeta, out: &mut Findings) {
    validate_policy_attachment(spec.selector.as_ref(), None, &[], out);
    let Some(ports) = &spec.port_level_mtls else {
        return;
    };
    let has_labels = spec
        .selector
        .as_ref()
        .is_some_and(|s| !s.match_labels.is_empty());
    if !has_labels && !ports.is_empty() {
        out.error(
            "spec.portLevelMtls",
            "mesh/namespace peer authentication cannot have port level mTLS",
        );
    }
    if ports.is_empty() {
        out.error(
            "spec.portLevelMtls",
            "port level mTLS, if defined, must have at least one element",
        );
    }
    for port in ports.keys() {
        if !(1..=65535).contains(port) {
            out.error(
                format!("spec.portLevelMtls.{port}"),
                "port must be in range 1..65535",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        crate::testing::run_rules(spec, &crate::testing::meta("p", "ns"), super::validate).0
    }

    /// `ValidatePeerAuthentication`'s texts.
    #[test]
    fn istio_texts() {
        assert_eq!(
            errors(json!({"portLevelMtls": {"80": {"mode": "STRICT"}}})),
            ["spec.portLevelMtls: mesh/namespace peer authentication cannot have port level mTLS"]
        );
        assert_eq!(
            errors(json!({"portLevelMtls": {}})),
            ["spec.portLevelMtls: port level mTLS, if defined, must have at least one element"]
        );
        assert_eq!(
            errors(json!({"selector": {"matchLabels": {"a": "b"}}, "portLevelMtls": {"0": {}}})),
            ["spec.portLevelMtls.0: port must be in range 1..65535"]
        );
    }

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::testing::errors_of(
            "security.istio.io/v1",
            "PeerAuthentication",
            json!({"name": "p"}),
            spec,
        )
    }

    #[test]
    fn accepts_modes_and_port_levels_with_selector() {
        assert!(error_paths(json!({"mtls": {"mode": "STRICT"}})).is_empty());
        assert!(
            error_paths(json!({"selector": {"matchLabels": {"app": "a"}},
            "portLevelMtls": {"8080": {"mode": "DISABLE"}}}))
            .is_empty()
        );
    }

    #[test]
    fn rejects_bad_port_levels() {
        assert_eq!(
            error_paths(json!({"portLevelMtls": {"80": {"mode": "STRICT"}}})),
            vec!["spec.portLevelMtls"]
        );
        // Istio's webhook reports only the empty map here (its selector rule needs ports).
        assert_eq!(
            error_paths(json!({"portLevelMtls": {}})),
            vec!["spec.portLevelMtls"]
        );
        let sel = json!({"matchLabels": {"a": "b"}});
        assert_eq!(
            error_paths(json!({"selector": sel, "portLevelMtls": {"0": {}, "70000": {}}})),
            vec!["spec.portLevelMtls.0", "spec.portLevelMtls.70000"]
        );
        // Not a number, or an unknown mode: decode errors at the field.
        assert_eq!(
            error_paths(json!({"selector": sel, "portLevelMtls": {"acd": {}}})).len(),
            1
        );
        assert_eq!(
            error_paths(json!({"mtls": {"mode": "BLAH"}})),
            vec!["spec.mtls.mode"]
        );
    }
}
