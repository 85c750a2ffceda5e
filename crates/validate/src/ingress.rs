//! Ingress rules (pure): takes a networking.k8s.io/v1 Ingress spec and yields the API server's own findings for it,
//! with its field paths and words, mirroring `ValidateIngressSpec` and the functions it calls in
//! k8s.io/kubernetes `pkg/apis/networking/validation/validation.go` (v1.34): a default backend or rules; host names
//! (DNS-1123 subdomains, `*.` wildcards, no IP addresses as `ParseIPSloppy` reads them, leading zeros included);
//! paths per `pathType`; backends (a Service by DNS-1035 name with a port name or number, or a resource by API
//! group, kind and name, not both); TLS hosts and secret names; the class name. These are the create rules
//! (`ValidateIngressCreate`, feature gate `RelaxedServiceNameValidation` off as in v1.34); the allowances an update
//! keeps for stored objects are not mirrored. Checked against a real kube-apiserver by
//! `tests/kube/kube_ingress_validation.rs`.
//! Higress's annotations are checked apart (issue 33, not yet).

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::api::networking::v1::{IngressBackend, IngressSpec};

use super::common::go_netip::is_ip_sloppy;
use super::common::metadata::{dns1123_subdomain_errors, field_invalid, DNS1123_SUBDOMAIN_ERROR};
use admitpilot_model::finding::Findings;

/// Path pieces an `Exact` or `Prefix` path must not contain (`invalidPathSequences`).
const INVALID_PATH_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
/// Endings such a path must not have (`invalidPathSuffixes`).
const INVALID_PATH_SUFFIXES: [&str; 2] = ["/..", "/."];

/// apimachinery's `IsWildcardDNS1123Subdomain` text.
const WILDCARD_ERROR: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS \
subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric \
character (e.g. '*.example.com', regex used for validation is \
'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// apimachinery's `IsDNS1035Label` text (Service names).
const DNS1035_ERROR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used \
for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// apimachinery's `IsWildcardDNS1123Subdomain`.
fn wildcard_errors(host: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if host.len() > 253 {
        errors.push("must be no more than 253 characters");
    }
    // The pattern only (`*.` and a DNS-1123 subdomain's pattern): the length is the whole name's, checked above.
    let valid = host.strip_prefix("*.").is_some_and(|rest| {
        !rest.is_empty() && !dns1123_subdomain_errors(rest).contains(&DNS1123_SUBDOMAIN_ERROR)
    });
    if !valid {
        errors.push(WILDCARD_ERROR);
    }
    errors
}

/// The errors of a host name (rule host or TLS host): a wildcard or a plain DNS-1123 subdomain.
fn host_errors(host: &str) -> Vec<&'static str> {
    if host.contains('*') {
        wildcard_errors(host)
    } else {
        dns1123_subdomain_errors(host)
    }
}

/// apimachinery's `IsDNS1035Label` (a Service name).
fn dns1035_errors(name: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if name.len() > 63 {
        errors.push("must be no more than 63 characters");
    }
    let bytes = name.as_bytes();
    let valid = bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && bytes
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !valid {
        errors.push(DNS1035_ERROR);
    }
    errors
}

/// apimachinery's `IsValidPortName`.
fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if name.len() > 15 {
        errors.push("must be no more than 15 characters");
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errors.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|c| c.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errors.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("must not begin or end with a hyphen");
    }
    errors
}

/// apimachinery's `path.IsValidPathSegmentName`: a name that can be a path segment of the REST API.
fn path_segment_errors(name: &str) -> Vec<&'static str> {
    match name {
        "." => return vec!["may not be '.'"],
        ".." => return vec!["may not be '..'"],
        _ => {}
    }
    [("/", "may not contain '/'"), ("%", "may not contain '%'")]
        .into_iter()
        .filter(|(piece, _)| name.contains(piece))
        .map(|(_, error)| error)
        .collect()
}

/// `validateIngressTypedLocalObjectReference`: a resource backend.
fn validate_resource(resource: &TypedLocalObjectReference, path: &str, out: &mut Findings) {
    if let Some(group) = &resource.api_group {
        for error in dns1123_subdomain_errors(group) {
            out.error(format!("{path}.apiGroup"), field_invalid(group, error));
        }
    }
    for (field, value) in [("kind", &resource.kind), ("name", &resource.name)] {
        if value.is_empty() {
            out.error(format!("{path}.{field}"), "Required value");
        }
        for error in path_segment_errors(value) {
            out.error(format!("{path}.{field}"), field_invalid(value, error));
        }
    }
}

/// `validateIngressBackend`.
fn validate_backend(backend: &IngressBackend, path: &str, out: &mut Findings) {
    match (&backend.resource, &backend.service) {
        (Some(_), Some(_)) => out.error(
            path,
            field_invalid("", "cannot set both resource and service backends"),
        ),
        (Some(resource), None) => validate_resource(resource, &format!("{path}.resource"), out),
        (None, Some(service)) => {
            if service.name.is_empty() {
                out.error(format!("{path}.service.name"), "Required value");
            } else {
                for error in dns1035_errors(&service.name) {
                    out.error(
                        format!("{path}.service.name"),
                        field_invalid(&service.name, error),
                    );
                }
            }
            let port = service.port.as_ref();
            let name = port.and_then(|p| p.name.as_deref()).unwrap_or_default();
            let number = port.and_then(|p| p.number).unwrap_or_default();
            match (name.is_empty(), number == 0) {
                (false, false) => out.error(
                    path,
                    field_invalid("", "cannot set both port name & port number"),
                ),
                (false, true) => {
                    for error in port_name_errors(name) {
                        out.error(
                            format!("{path}.service.port.name"),
                            field_invalid(name, error),
                        );
                    }
                }
                (true, false) => {
                    if !(1..=65535).contains(&number) {
                        out.error(
                            format!("{path}.service.port.number"),
                            format!(
                                "Invalid value: {number}: must be between 1 and 65535, inclusive"
                            ),
                        );
                    }
                }
                (true, true) => out.error(path, "Required value: port name or number is required"),
            }
        }
        (None, None) => out.error(
            path,
            field_invalid("", "resource or service backend is required"),
        ),
    }
}

/// `validateHTTPIngressPath`.
fn validate_path(
    rule_path: &k8s_openapi::api::networking::v1::HTTPIngressPath,
    at: &str,
    out: &mut Findings,
) {
    let path = rule_path.path.as_deref().unwrap_or_default();
    let absolute =
        || (!path.starts_with('/')).then(|| field_invalid(path, "must be an absolute path"));
    match rule_path.path_type.as_str() {
        "" => {
            out.error(format!("{at}.pathType"), PATH_TYPE_REQUIRED);
            return;
        }
        "Exact" | "Prefix" => {
            if let Some(error) = absolute() {
                out.error(format!("{at}.path"), error);
            }
            if !path.is_empty() {
                for sequence in INVALID_PATH_SEQUENCES {
                    if path.contains(sequence) {
                        out.error(
                            format!("{at}.path"),
                            field_invalid(path, &format!("must not contain '{sequence}'")),
                        );
                    }
                }
                for suffix in INVALID_PATH_SUFFIXES {
                    if path.ends_with(suffix) {
                        out.error(
                            format!("{at}.path"),
                            field_invalid(path, &format!("cannot end with '{suffix}'")),
                        );
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !path.is_empty() {
                if let Some(error) = absolute() {
                    out.error(format!("{at}.path"), error);
                }
            }
        }
        other => out.error(format!("{at}.pathType"), unsupported_path_type(other)),
    }
    validate_backend(&rule_path.backend, &format!("{at}.backend"), out);
}

/// `field.NotSupported` for a `pathType` (`validateHTTPIngressPath`).
fn unsupported_path_type(value: &str) -> String {
    format!(
        "Unsupported value: {value:?}: supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\""
    )
}

/// The Required text of a missing `pathType` (`validateHTTPIngressPath`).
const PATH_TYPE_REQUIRED: &str = "Required value: pathType must be specified";

/// What the typed spec cannot tell apart: a `pathType` written as `""` is, to Go, a pointer to the empty string,
/// an unsupported value (`field.NotSupported`), not a missing one. Rewrites the Required finding of each such path
/// in `findings` (of the Ingress document `doc`).
pub fn empty_path_types(doc: &serde_json::Value, findings: &mut [admitpilot_model::Finding]) {
    let rules = doc["spec"]["rules"].as_array().into_iter().flatten();
    for (i, rule) in rules.enumerate() {
        let paths = rule["http"]["paths"].as_array().into_iter().flatten();
        for (j, path) in paths.enumerate() {
            if path.get("pathType").and_then(serde_json::Value::as_str) != Some("") {
                continue;
            }
            let field = format!("spec.rules[{i}].http.paths[{j}].pathType");
            for finding in findings.iter_mut() {
                if finding.field == field && finding.message == PATH_TYPE_REQUIRED {
                    finding.message = unsupported_path_type("");
                }
            }
        }
    }
}

/// `ValidateIngressSpec`: the API server's rules for an Ingress spec.
pub fn validate(spec: &IngressSpec, out: &mut Findings) {
    let rules = spec.rules.as_deref().unwrap_or_default();
    if rules.is_empty() && spec.default_backend.is_none() {
        // The value shown is `spec.rules` as JSON: `null` when absent, `[]` when empty.
        let shown = if spec.rules.is_some() { "[]" } else { "null" };
        out.error(
            "spec",
            format!("Invalid value: {shown}: either `defaultBackend` or `rules` must be specified"),
        );
    }
    if let Some(backend) = &spec.default_backend {
        validate_backend(backend, "spec.defaultBackend", out);
    }
    for (i, rule) in rules.iter().enumerate() {
        let host = rule.host.as_deref().unwrap_or_default();
        if !host.is_empty() {
            let at = format!("spec.rules[{i}].host");
            if is_ip_sloppy(host) {
                out.error(
                    &at,
                    field_invalid(host, "must be a DNS name, not an IP address"),
                );
            }
            for error in host_errors(host) {
                out.error(&at, field_invalid(host, error));
            }
        }
        if let Some(http) = &rule.http {
            let at = format!("spec.rules[{i}].http");
            if http.paths.is_empty() {
                out.error(format!("{at}.paths"), "Required value");
            }
            for (j, path) in http.paths.iter().enumerate() {
                validate_path(path, &format!("{at}.paths[{j}]"), out);
            }
        }
    }
    for (i, tls) in spec.tls.iter().flatten().enumerate() {
        for (j, host) in tls.hosts.iter().flatten().enumerate() {
            for error in host_errors(host) {
                out.error(
                    format!("spec.tls[{i}].hosts[{j}]"),
                    field_invalid(host, error),
                );
            }
        }
        if let Some(secret) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) {
            for error in dns1123_subdomain_errors(secret) {
                out.error(
                    format!("spec.tls[{i}].secretName"),
                    field_invalid(secret, error),
                );
            }
        }
    }
    if let Some(class) = &spec.ingress_class_name {
        for error in dns1123_subdomain_errors(class) {
            out.error("spec.ingressClassName", field_invalid(class, error));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(yaml: &str) -> Vec<String> {
        let spec: IngressSpec = serde_yaml_ng::from_str(yaml).unwrap();
        let mut out = Findings::default();
        validate(&spec, &mut out);
        out.into_vec()
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect()
    }

    #[test]
    fn a_valid_ingress_has_no_findings() {
        let yaml = "
ingressClassName: higress
tls: [{hosts: ['*.example.com'], secretName: web-cert}]
rules:
- host: '*.example.com'
  http:
    paths:
    - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
    - {path: /api, pathType: Exact, backend: {service: {name: api, port: {name: http}}}}
    - {pathType: ImplementationSpecific, backend: {service: {name: api, port: {name: http}}}}
";
        assert_eq!(findings(yaml), Vec::<String>::new());
    }

    #[test]
    fn the_api_servers_rules_are_reported_with_its_words() {
        let got = findings(
            "
rules:
- host: 10.0.0.1
  http:
    paths:
    - {path: 'a//b', pathType: Prefix, backend: {service: {name: Web, port: {number: 70000}}}}
    - {path: /x, backend: {service: {name: web, port: {number: 80}}}}
    - {path: /x, pathType: Regex, backend: {service: {name: web, port: {name: http, number: 80}}}}
- host: 'a.*.com'
  http: {paths: []}
",
        );
        let expected = [
            "spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
            "spec.rules[0].http.paths[0].path: Invalid value: \"a//b\": must be an absolute path",
            "spec.rules[0].http.paths[0].path: Invalid value: \"a//b\": must not contain '//'",
            "spec.rules[0].http.paths[0].backend.service.name: Invalid value: \"Web\": a DNS-1035 label",
            "spec.rules[0].http.paths[0].backend.service.port.number: Invalid value: 70000: must be between 1 \
             and 65535, inclusive",
            "spec.rules[0].http.paths[1].pathType: Required value: pathType must be specified",
            "spec.rules[0].http.paths[2].pathType: Unsupported value: \"Regex\"",
            "spec.rules[0].http.paths[2].backend: Invalid value: \"\": cannot set both port name & port number",
            "spec.rules[1].host: Invalid value: \"a.*.com\": a wildcard DNS-1123 subdomain",
            "spec.rules[1].http.paths: Required value",
        ];
        for want in expected {
            assert!(
                got.iter().any(|g| g.starts_with(want)),
                "missing {want:?} in {got:#?}"
            );
        }
        assert!(findings("{}")[0].contains("either `defaultBackend` or `rules` must be specified"));
    }

    /// What a real kube-apiserver v1.34 answered (tests/kube/kube_ingress_validation.rs), where an earlier version of
    /// these rules differed.
    #[test]
    fn the_api_servers_details_are_mirrored() {
        assert_eq!(
            findings("{rules: []}"),
            ["spec: Invalid value: []: either `defaultBackend` or `rules` must be specified"]
        );
        assert_eq!(
            findings("{rules: null}"),
            ["spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"]
        );
        let ip = "{rules: [{host: 010.001.0.1}]}";
        assert_eq!(
            findings(ip),
            ["spec.rules[0].host: Invalid value: \"010.001.0.1\": must be a DNS name, not an IP address"]
        );
        let long = format!("{{rules: [{{host: '*.{}'}}]}}", "a".repeat(260));
        assert_eq!(
            findings(&long),
            [format!(
                "spec.rules[0].host: Invalid value: \"*.{}\": must be no more than 253 characters",
                "a".repeat(260)
            )]
        );
        let resource = "
defaultBackend: {resource: {apiGroup: Bad_Group, kind: a/b%, name: ..}}
";
        let got = findings(resource);
        assert_eq!(got.len(), 4, "{got:#?}");
        assert!(got[0]
            .starts_with("spec.defaultBackend.resource.apiGroup: Invalid value: \"Bad_Group\""));
        assert_eq!(
            got[1..],
            [
                "spec.defaultBackend.resource.kind: Invalid value: \"a/b%\": may not contain '/'",
                "spec.defaultBackend.resource.kind: Invalid value: \"a/b%\": may not contain '%'",
                "spec.defaultBackend.resource.name: Invalid value: \"..\": may not be '..'",
            ]
        );
    }

    #[test]
    fn ip_addresses_are_read_as_parse_ip_sloppy_reads_them() {
        for ip in [
            "10.0.0.1",
            "010.001.000.001",
            "0000255.0.0.0",
            "::",
            "::1",
            "fe80::1",
            "00001::",
            "1:2:3:4:5:6:7:8",
            "::ffff:1.2.3.4",
            "1:2:3:4:5:6:01.2.3.4",
            "1::02.3.4.5",
        ] {
            assert!(is_ip_sloppy(ip), "{ip}");
        }
        for not_ip in [
            "",
            "1.2.3",
            "1.2.3.4.",
            "1.2.3.256",
            "1.2.3.4.5",
            "a.b.c.d",
            "foo.com",
            ":",
            ":::",
            "1::2::3",
            "1:2:3:4:5:6:7:8:9",
            "1:2:3:4:5:6:7::8",
            "1:2:3:4:5:6:7:8::",
            "10000::",
            "1:2:3:4:5:1.2.3.4",
            "1:",
            "fe80::1%eth0",
        ] {
            assert!(!is_ip_sloppy(not_ip), "{not_ip}");
        }
    }
}
