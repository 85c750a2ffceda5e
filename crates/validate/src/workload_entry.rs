//! WorkloadEntry rules: takes a decoded istio WorkloadEntry spec and its metadata, records findings with field
//! paths (address, ports, labels). The endpoint check, shared with ServiceEntry endpoints, is in
//! [`super::common::endpoint`].

use super::common::{validate_endpoint, FieldPath};
use admitpilot_model::{istio::WorkloadEntry, Findings, ObjectMeta};

/// Validates one WorkloadEntry, recording every error and warning.
pub fn validate(spec: &WorkloadEntry, _meta: &ObjectMeta, out: &mut Findings) {
    validate_endpoint(spec, None, true, &mut FieldPath::new("spec"), out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> (usize, usize) {
        let we: WorkloadEntry = serde_json::from_value(spec).unwrap();
        let mut out = Findings::default();
        validate(&we, &ObjectMeta::default(), &mut out);
        let errors = out.0.iter().filter(|f| f.is_error()).count();
        (errors, out.0.len() - errors)
    }

    #[test]
    fn accepts_ip_fqdn_and_unix() {
        assert_eq!(
            run(json!({"address": "10.0.0.1", "ports": {"http": 8080}, "labels": {"app": "vm"}})),
            (0, 0)
        );
        assert_eq!(run(json!({"address": "vm.example.com"})), (0, 0));
        assert_eq!(run(json!({"address": "unix:///var/run/app.sock"})), (0, 0));
        assert_eq!(run(json!({"network": "net1"})), (0, 1));
    }

    #[test]
    fn rejects_bad_entries() {
        assert_eq!(run(json!({})), (1, 0));
        assert_eq!(
            run(json!({"address": "unix://relative", "ports": {"a": 1}})),
            (2, 0)
        );
        assert_eq!(run(json!({"address": "bad address"})), (1, 0));
        assert_eq!(
            run(json!({"address": "1.2.3.4", "ports": {"Bad_Name": 0}, "labels": {"a b": "c"}})),
            (3, 0)
        );
    }
}
