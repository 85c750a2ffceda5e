//! ProxyConfig rules: takes a decoded istio ProxyConfig spec and its metadata, records findings with field paths
//! (selector, concurrency, environment variables).

use super::common::{self, FieldPath};
use admitpilot_model::{istio::ProxyConfig, Findings, ObjectMeta};

/// Longest environment variable value the CRD accepts.
const ENV_VALUE_MAX: usize = 2048;

/// Validates one ProxyConfig, recording every error and warning.
pub fn validate(spec: &ProxyConfig, _meta: &ObjectMeta, out: &mut Findings) {
    let p = FieldPath::new("spec");
    if let Some(selector) = &spec.selector {
        common::validate_workload_selector(
            &selector.match_labels,
            &p.child("selector.matchLabels"),
            out,
        );
    }
    if spec.concurrency.is_some_and(|c| c < 0) {
        out.error(p.child("concurrency"), "concurrency must not be negative");
    }
    for (name, value) in &spec.environment_variables {
        if value.len() > ENV_VALUE_MAX {
            out.error(
                p.child("environmentVariables"),
                format!("value of {name:?} is longer than {ENV_VALUE_MAX} characters"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> (usize, usize) {
        let pc: ProxyConfig = serde_json::from_value(spec).unwrap();
        let mut out = Findings::default();
        validate(&pc, &ObjectMeta::default(), &mut out);
        let errors = out.0.iter().filter(|f| f.is_error()).count();
        (errors, out.0.len() - errors)
    }

    #[test]
    fn proxy_config_rules() {
        assert_eq!(
            run(
                json!({"concurrency": 0, "selector": {"matchLabels": {"app": "a"}}, "image": {"imageType": "distroless"}})
            ),
            (0, 0)
        );
        assert_eq!(run(json!({"concurrency": -1})), (1, 0));
        assert_eq!(run(json!({"selector": {}})), (0, 1));
        assert_eq!(
            run(json!({"selector": {"matchLabels": {"app": "*"}}})),
            (1, 0)
        );
        assert_eq!(
            run(json!({"environmentVariables": {"A": "x".repeat(2049)}})),
            (1, 0)
        );
    }
}
