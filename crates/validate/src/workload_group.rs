//! WorkloadGroup rules: takes a decoded istio WorkloadGroup spec and its metadata, records findings with field
//! paths (template required, metadata labels, template ports, readiness probe).

use std::collections::BTreeMap;

use super::common::{self, validate_endpoint_ports, FieldPath};
use admitpilot_model::istio::workload_group::ReadinessProbe;
use admitpilot_model::{istio::WorkloadGroup, Findings, ObjectMeta};

/// Validates one WorkloadGroup, recording every error and warning.
pub fn validate(spec: &WorkloadGroup, _meta: &ObjectMeta, out: &mut Findings) {
    let mut p = FieldPath::new("spec");
    match &spec.template {
        None => out.error(p.child("template"), "template is required"),
        // Address and the like are filled in at registration, so only the shape is checked here. Istio's
        // `ValidateWorkloadGroup` skips the template; these checks follow its CRD's `x-kubernetes-validations`
        // (unix address, no ports with one, port names and numbers), which the API server applies first.
        Some(template) => {
            let mut t = p.field("template");
            if let Some(socket) = template.address.strip_prefix(common::UNIX_PREFIX) {
                if let Err(e) = common::check_unix_address(socket) {
                    out.error(t.child("address"), e);
                }
                if !template.ports.is_empty() {
                    out.error(t.child("ports"), "UDS may not include ports");
                }
            }
            validate_endpoint_ports(template, None, &mut t, out);
        }
    }
    if let Some(meta) = &spec.metadata {
        validate_metadata_labels(&meta.labels, &p.child("metadata.labels"), out);
    }
    if let Some(probe) = &spec.probe {
        validate_probe(probe, &mut p.field("probe"), out);
    }
}

/// Validates the labels given to generated entries. Mirrors Istio's `ValidateWorkloadGroup` (`labels.Instance`
/// `Validate`, its error wrapped as `invalid labels: …`).
fn validate_metadata_labels(labels: &BTreeMap<String, String>, path: &str, out: &mut Findings) {
    for (key, value) in labels {
        let checks = [
            common::check_label_key(key),
            common::check_label_value(value),
        ];
        for e in checks.into_iter().filter_map(Result::err) {
            out.error(path, format!("invalid labels: {e}"));
        }
    }
}

fn validate_probe(probe: &ReadinessProbe, p: &mut FieldPath, out: &mut Findings) {
    for (field, value) in [
        ("periodSeconds", probe.period_seconds),
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        if value.is_some_and(|v| v < 0) {
            out.error(p.child(field), format!("{field} must not be negative"));
        }
    }
    let methods = usize::from(probe.http_get.is_some())
        + usize::from(probe.tcp_socket.is_some())
        + usize::from(probe.exec.is_some())
        + usize::from(probe.grpc.is_some());
    if methods > 1 {
        out.error(
            p.as_str(),
            "only one of httpGet, tcpSocket, exec and grpc may be set",
        );
    }
    if let Some(http) = &probe.http_get {
        let mut h = p.field("httpGet");
        common::validate_port(http.port.unwrap_or(0), &h.child("port"), out);
        if !http.scheme.is_empty() && http.scheme != "HTTP" && http.scheme != "HTTPS" {
            out.error(h.child("scheme"), "httpGet scheme must be HTTP or HTTPS");
        }
        let mut headers = h.field("httpHeaders");
        for (i, header) in http.http_headers.iter().enumerate() {
            common::validate_probe_header_name(&header.name, &headers.index(i).child("name"), out);
        }
    } else if let Some(tcp) = &probe.tcp_socket {
        common::validate_port(tcp.port.unwrap_or(0), &p.child("tcpSocket.port"), out);
    } else if let Some(exec) = &probe.exec {
        if exec.command.is_empty() {
            out.error(p.child("exec.command"), "exec.command is required");
        }
    } else if let Some(grpc) = &probe.grpc {
        common::validate_port(grpc.port.unwrap_or(0), &p.child("grpc.port"), out);
    } else {
        out.error(
            p.as_str(),
            "a probe needs one of httpGet, tcpSocket, exec or grpc",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        crate::testing::run_rules(spec, &ObjectMeta::default(), validate).0
    }

    #[test]
    fn accepts_a_typical_group() {
        let e = errors(
            json!({"metadata": {"labels": {"app": "vm"}}, "template": {"serviceAccount": "sa", "ports": {"http": 80}},
            "probe": {"periodSeconds": 5, "httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTPS", "httpHeaders": [{"name": "x-a", "value": "b"}]}}}),
        );
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn rejects_bad_groups() {
        assert_eq!(
            errors(json!({})),
            vec!["spec.template: template is required"]
        );
        let e = errors(json!({"template": {}, "metadata": {"labels": {"a b": "c"}},
            "probe": {"failureThreshold": -1, "httpGet": {"port": 0, "scheme": "FTP", "httpHeaders": [{"name": "a_b"}]}}}));
        assert_eq!(e.len(), 5, "{e:?}");
        assert_eq!(
            errors(json!({"template": {}, "probe": {"exec": {}}})).len(),
            1
        );
        assert_eq!(errors(json!({"template": {}, "probe": {}})).len(), 1);
        assert_eq!(errors(json!({"template": {}, "probe": {"tcpSocket": {"port": 1}, "exec": {"command": ["x"]}}})).len(), 1);
    }
}
