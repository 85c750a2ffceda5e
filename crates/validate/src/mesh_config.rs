//! Mesh config rules (pure): takes the decoded [`MeshConfig`] of the `istio` ConfigMap, records findings under
//! `data.mesh`. Istio reads this ConfigMap without any admission check; a provider istiod cannot build makes
//! every CUSTOM policy naming it deny the requests it matches, so the same checks run here at `kubectl apply`.
//! Mirrors `validateExtensionProvider`, `ValidateExtensionProviderEnvoyExtAuthzHTTP`/`GRPC` and
//! `ValidateExtensionProviderEnvoyOtelAls`
//! (istio/pkg/config/validation/agent/extensionprovider.go), with their texts.

use std::collections::BTreeSet;

use admitpilot_model::mesh_config::{parse_status, MeshConfig, Provider, MESH_PATH};
use admitpilot_model::Findings;

use super::common::{
    bad_escape, check_fqdn, check_ip, check_port, go_quote, validate_namespace_slash_host,
    NsHostContext,
};

/// Validates the extension providers: unique names, and the external authorization servers' settings.
pub fn validate(config: &MeshConfig, out: &mut Findings) {
    let mut names = BTreeSet::new();
    for (index, provider) in config.extension_providers.iter().enumerate() {
        let path = format!("{MESH_PATH}.extensionProviders[{index}]");
        if provider.name.is_empty() {
            out.error(format!("{path}.name"), "empty extension provider name");
        } else if !names.insert(provider.name.as_str()) {
            out.error(
                format!("{path}.name"),
                format!("duplicate extension provider name {}", provider.name),
            );
        }
        match &provider.provider {
            Provider::EnvoyExtAuthzHttp(http) => {
                let at = format!("{path}.envoyExtAuthzHttp");
                if let Err(e) = check_port(http.port) {
                    out.error(format!("{at}.port"), e);
                }
                validate_service(&http.service, &format!("{at}.service"), out);
                validate_status_on_error(
                    &http.status_on_error,
                    &format!("{at}.statusOnError"),
                    out,
                );
                validate_path_prefix(&http.path_prefix, &format!("{at}.pathPrefix"), out);
            }
            Provider::EnvoyExtAuthzGrpc(grpc) => {
                let at = format!("{path}.envoyExtAuthzGrpc");
                if let Err(e) = check_port(grpc.port) {
                    out.error(format!("{at}.port"), format!("invalid service port: {e}"));
                }
                validate_service(&grpc.service, &format!("{at}.service"), out);
                validate_status_on_error(
                    &grpc.status_on_error,
                    &format!("{at}.statusOnError"),
                    out,
                );
            }
            Provider::EnvoyOtelAls(otel) => {
                // Mirrors Istio's `ValidateExtensionProviderEnvoyOtelAls`.
                let at = format!("{path}.envoyOtelAls");
                if let Err(e) = check_port(otel.port) {
                    out.error(format!("{at}.port"), e);
                }
                validate_service(&otel.service, &format!("{at}.service"), out);
            }
            // Istio checks nothing of a file access log (`validateExtensionProviderEnvoyFileAccessLog`).
            Provider::EnvoyFileAccessLog(_) | Provider::Other(_) => {}
        }
    }
}

/// A provider's `service`: a host name or IP, or `namespace/host`. Mirrors Istio's
/// `validateExtensionProviderService`, with its texts.
fn validate_service(service: &str, path: &str, out: &mut Findings) {
    if service.is_empty() {
        out.error(path, "service must not be empty");
    } else if !service.contains('/') {
        if check_fqdn(service).is_err() {
            if let Err(e) = check_ip(service) {
                out.error(path, format!("invalid service fmt {service}: {e}"));
            }
        }
    } else {
        validate_namespace_slash_host(service, NsHostContext::Sidecar, path, out);
    }
}

/// Envoy's `type.v3.StatusCode` values (what `statusOnError` may name).
const ENVOY_STATUS_CODES: &[i32] = &[
    0, 100, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 307,
    308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417,
    421, 422, 423, 424, 426, 428, 429, 431, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
];

/// `statusOnError`: empty, or a decimal Envoy status code. Mirrors Istio's
/// `validateExtensionProviderEnvoyExtAuthzStatusOnError` (Go's `strconv.ParseInt(s, 10, 32)`).
fn validate_status_on_error(status: &str, path: &str, out: &mut Findings) {
    if status.is_empty() {
        return;
    }
    match parse_status(status) {
        Err(why) => out.error(path, format!("invalid statusOnError value {status}: {why}")),
        Ok(code) if !ENVOY_STATUS_CODES.contains(&code) => out.error(
            path,
            format!("unsupported statusOnError value {status}, supported values: Envoy's type.v3.StatusCode codes"),
        ),
        Ok(_) => {}
    }
}

/// `pathPrefix`: starts with `/` and parses as a URL (Go's `url.Parse` refuses control characters and bad `%`
/// escapes). Mirrors the pathPrefix checks of Istio's `ValidateExtensionProviderEnvoyExtAuthzHTTP`, with its texts
/// (`%q` as Go writes it, as `url.Error` does).
fn validate_path_prefix(prefix: &str, path: &str, out: &mut Findings) {
    if prefix.is_empty() {
        return;
    }
    if prefix.bytes().any(|c| c < 0x20 || c == 0x7f) {
        out.error(
            path,
            format!(
                "invalid pathPrefix {prefix}: parse {}: net/url: invalid control character in URL",
                go_quote(prefix)
            ),
        );
    } else if let Some(bad) = bad_escape(prefix) {
        out.error(
            path,
            format!(
                "invalid pathPrefix {prefix}: parse {}: invalid URL escape {}",
                go_quote(prefix),
                go_quote(bad)
            ),
        );
    }
    if !prefix.starts_with('/') {
        out.error(
            path,
            format!(
                "pathPrefix should begin with `/` but found {}",
                go_quote(prefix)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::mesh_config::decode_configmap;
    use serde_json::json;

    fn errors(mesh: &str) -> Vec<String> {
        let doc = json!({"data": {"mesh": mesh}});
        let decoded = decode_configmap(doc.as_object().unwrap());
        assert!(decoded.findings.is_empty(), "{:?}", decoded.findings);
        let mut out = Findings::default();
        validate(&decoded.config, &mut out);
        out.into_vec()
            .into_iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect()
    }

    #[test]
    fn valid_providers_pass() {
        assert_eq!(
            errors("extensionProviders:\n- name: a\n  envoyExtAuthzHttp: {service: authz.foo.svc.cluster.local, port: 8000, statusOnError: '503', pathPrefix: /check}\n- name: b\n  envoyExtAuthzGrpc: {service: foo/authz.foo.svc.cluster.local, port: 9000}\n- name: c\n  envoyExtAuthzGrpc: {service: 10.0.0.1, port: 9000}\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_rule_names_its_field_with_istios_text() {
        let found = errors(
            "extensionProviders:\n- name: a\n  envoyExtAuthzHttp: {service: '', port: 0, statusOnError: abc, pathPrefix: 'x%zz'}\n- name: a\n  envoyExtAuthzGrpc: {service: bad_host, port: 70000, statusOnError: '499'}\n",
        );
        let p = "data.mesh.extensionProviders";
        assert_eq!(
            found,
            [
                format!("{p}[0].envoyExtAuthzHttp.port: port number 0 must be in the range 1..65535"),
                format!("{p}[0].envoyExtAuthzHttp.service: service must not be empty"),
                format!(r#"{p}[0].envoyExtAuthzHttp.statusOnError: invalid statusOnError value abc: strconv.ParseInt: parsing "abc": invalid syntax"#),
                format!(r#"{p}[0].envoyExtAuthzHttp.pathPrefix: invalid pathPrefix x%zz: parse "x%zz": invalid URL escape "%zz""#),
                format!(r#"{p}[0].envoyExtAuthzHttp.pathPrefix: pathPrefix should begin with `/` but found "x%zz""#),
                format!("{p}[1].name: duplicate extension provider name a"),
                format!("{p}[1].envoyExtAuthzGrpc.port: invalid service port: port number 70000 must be in the range 1..65535"),
                format!("{p}[1].envoyExtAuthzGrpc.service: invalid service fmt bad_host: bad_host is not a valid IP"),
                format!("{p}[1].envoyExtAuthzGrpc.statusOnError: unsupported statusOnError value 499, supported values: Envoy's type.v3.StatusCode codes"),
            ]
        );
    }

    #[test]
    fn path_prefixes_are_quoted_as_go_does() {
        let mut out = Findings::default();
        validate_path_prefix("/a\u{7f}é", "p", &mut out);
        let messages: Vec<String> = out.into_vec().into_iter().map(|f| f.message).collect();
        assert_eq!(
            messages,
            ["invalid pathPrefix /a\u{7f}é: parse \"/a\\x7fé\": net/url: invalid control character in URL"]
        );
    }
}
