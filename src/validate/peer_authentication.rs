//! PeerAuthentication rules: takes a decoded istio PeerAuthentication spec and its metadata, records findings with
//! field paths. Follows Istio's webhook (`ValidatePeerAuthentication`) and the CRD's CEL rules: per-port mTLS
//! needs a selector with labels, must not be empty, and its keys are ports 1..65535.

use crate::model::{istio::PeerAuthentication, Findings, ObjectMeta};

use super::common::{check_port, validate_policy_attachment};

/// Validates one PeerAuthentication.
pub fn validate(spec: &PeerAuthentication, _meta: &ObjectMeta, out: &mut Findings) {
    validate_policy_attachment(spec.selector.as_ref(), None, &[], out);
    let Some(ports) = &spec.port_level_mtls else {
        return;
    };
    let has_labels = spec
        .selector
        .as_ref()
        .is_some_and(|s| !s.match_labels.is_empty());
    if !has_labels {
        out.error(
            "spec.portLevelMtls",
            "portLevelMtls requires a selector with labels (it cannot apply to a whole namespace or mesh)",
        );
    }
    if ports.is_empty() {
        out.error(
            "spec.portLevelMtls",
            "portLevelMtls, when present, must list at least one port",
        );
    }
    for port in ports.keys() {
        if let Err(e) = check_port(*port) {
            out.error(format!("spec.portLevelMtls.{port}"), e);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::validate::testing::errors_of(
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
        assert_eq!(
            error_paths(json!({"portLevelMtls": {}})),
            vec!["spec.portLevelMtls", "spec.portLevelMtls"]
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
