//! Gateway rules: takes a decoded istio Gateway spec and its metadata, records findings with field paths (name,
//! servers, hosts, ports, binds, server TLS). The server-TLS check is shared with Sidecar ingress listeners.

use std::collections::BTreeSet;

use super::common::{self, FieldPath, NsHostContext, Protocol};
use crate::model::istio::gateway::{Port, Server, ServerTlsMode, ServerTlsSettings, TlsProtocol};
use crate::model::{istio::Gateway, Findings, ObjectMeta};

/// Annotation set on Gateways generated from the Kubernetes Gateway API.
const GATEWAY_SEMANTICS_ANNOTATION: &str = "internal.istio.io/gateway-semantics";
/// Prefix of Unix domain socket bind addresses.
pub(super) const UNIX_PREFIX: &str = "unix://";
/// Cipher suites Envoy accepts by name.
const CIPHER_SUITES: &[&str] = &[
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// Validates one Gateway, recording every error and warning.
pub fn validate(spec: &Gateway, meta: &ObjectMeta, out: &mut Findings) {
    let gateway_semantics = meta
        .annotations
        .get(GATEWAY_SEMANTICS_ANNOTATION)
        .is_some_and(|v| v == "gateway");
    // Mirrors Istio's `ValidateGateway`: the name is a DNS-1123 label (`labels.IsDNS1123Label`, no dots), unless
    // it has Gateway API semantics; same text.
    if !gateway_semantics && !common::is_dns1123_label(&meta.name) {
        out.error(
            "metadata.name",
            format!("invalid gateway name: {}", common::go_quote(&meta.name)),
        );
    }
    let mut p = FieldPath::new("spec");
    if spec.servers.is_empty() {
        out.error(p.child("servers"), "a gateway needs at least one server");
    }
    let mut servers = p.field("servers");
    let mut port_names = BTreeSet::new();
    for (i, server) in spec.servers.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        let mut at = servers.index(i);
        validate_server(server, gateway_semantics, &mut at, out);
        if let Some(port) = &server.port {
            // Mirrors Istio's `ValidateGateway` unique port names, with its text.
            if !port_names.insert(port.name.as_str()) {
                out.error(
                    at.child("port.name"),
                    format!(
                        "port names in servers must be unique: duplicate name {}",
                        port.name
                    ),
                );
            }
            let redirect = server.tls.as_ref().and_then(|t| t.https_redirect) == Some(true);
            if redirect && !Protocol::parse(&port.protocol).is_http() {
                out.warning(
                    at.child("tls.httpsRedirect"),
                    "httpsRedirect only makes sense on HTTP servers",
                );
            }
        }
    }
}

fn validate_server(
    server: &Server,
    gateway_semantics: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let context = if gateway_semantics {
        NsHostContext::GatewayApi
    } else {
        NsHostContext::Gateway
    };
    if server.hosts.is_empty() {
        out.error(
            p.child("hosts"),
            "server config must contain at least one host",
        );
    }
    {
        // Mirrors Istio's `validateServer`: each host through `ValidateNamespaceSlashWildcardHostname`.
        let mut hosts = p.field("hosts");
        for (i, host) in server.hosts.iter().enumerate() {
            common::validate_namespace_slash_host(host, context, hosts.index(i).as_str(), out);
        }
    }
    let port_ok = match &server.port {
        None => {
            out.error(p.child("port"), "port is required");
            false
        }
        Some(port) => validate_server_port(port, &server.bind, &mut p.field("port"), out),
    };
    validate_bind(server.port.as_ref(), &server.bind, &p.child("bind"), out);
    if let Some(tls) = &server.tls {
        validate_server_tls(tls, &mut p.field("tls"), out);
    }
    if let (true, Some(port)) = (port_ok, &server.port) {
        let protocol = Protocol::parse(&port.protocol);
        match &server.tls {
            None if protocol.is_tls() => {
                out.error(p.child("tls"), "HTTPS and TLS servers need TLS settings");
            }
            Some(tls) if !protocol.is_tls() => {
                let passthrough = matches!(
                    tls.mode,
                    Some(ServerTlsMode::Passthrough | ServerTlsMode::AutoPassthrough) | None
                );
                let has_files = !tls.ca_certificates.is_empty()
                    || !tls.private_key.is_empty()
                    || !tls.server_certificate.is_empty();
                if !protocol.is_http() {
                    out.error(
                        p.child("tls"),
                        "only HTTPS and TLS servers may have TLS settings",
                    );
                } else if !passthrough || has_files {
                    out.error(
                        p.child("tls"),
                        "plain-text HTTP servers may only use TLS settings for httpsRedirect",
                    );
                }
            }
            _ => {}
        }
    }
}

/// Validates a gateway server port; returns whether it had no errors.
fn validate_server_port(port: &Port, bind: &str, p: &mut FieldPath, out: &mut Findings) -> bool {
    let before = out.0.len();
    if Protocol::parse(&port.protocol) == Protocol::Unsupported {
        out.error(
            p.child("protocol"),
            format!(
                "unsupported protocol {:?}; use HTTP, HTTPS, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP or TLS",
                port.protocol
            ),
        );
    }
    let number = port.number.unwrap_or(0);
    if number > 0 || !bind.starts_with(UNIX_PREFIX) {
        common::validate_port(number, &p.child("number"), out);
    }
    if port.target_port.unwrap_or(0) > 0 {
        out.error(
            p.child("targetPort"),
            "targetPort has no effect on gateways",
        );
    }
    // Istio's `validateServerPort` requires a name too; its text prints the Go port struct (`%v`), so ours differs.
    if port.name.is_empty() {
        out.error(p.child("name"), "port name is required");
    }
    out.0.len() == before
}

fn validate_bind(port: Option<&Port>, bind: &str, path: &str, out: &mut Findings) {
    if let Some(socket) = bind.strip_prefix(UNIX_PREFIX) {
        if let Err(e) = common::check_unix_address(socket) {
            out.error(path, e);
        }
        if port.and_then(|p| p.number).unwrap_or(0) != 0 {
            out.error(
                path,
                "the port number must be 0 when binding to a unix domain socket",
            );
        }
    } else if !bind.is_empty() {
        // Mirrors Istio's `validateServerBind`: a bind other than `unix://` is an IP (`ValidateIPAddress`).
        if let Err(e) = common::check_ip(bind) {
            out.error(path, e);
        }
    }
}

/// Validates server-side TLS settings (Istio's `validateTLSOptions`); shared with Sidecar ingress.
pub(super) fn validate_server_tls(tls: &ServerTlsSettings, p: &mut FieldPath, out: &mut Findings) {
    let path = p.as_str();
    if matches!(
        tls.min_protocol_version,
        Some(TlsProtocol::TlsV1_0 | TlsProtocol::TlsV1_1)
    ) && tls.cipher_suites.is_empty()
    {
        out.warning(
            p.child("minProtocolVersion"),
            "TLS versions below 1.2 need compatible cipherSuites set; the defaults no longer include any",
        );
    }
    validate_cipher_suites(&tls.cipher_suites, &p.child("cipherSuites"), out);
    if !tls.credential_name.is_empty() && !tls.credential_names.is_empty() {
        out.error(
            path,
            "only one of credentialName and credentialNames may be set",
        );
    }
    for (field, len) in [
        ("credentialNames", tls.credential_names.len()),
        ("tlsCertificates", tls.tls_certificates.len()),
    ] {
        if len > 2 {
            out.error(
                p.child(field),
                format!("{field} may hold at most 2 entries"),
            );
        }
    }
    let mode = tls.mode.unwrap_or(ServerTlsMode::Passthrough);
    if mode == ServerTlsMode::IstioMutual {
        for (set, field) in [
            (!tls.server_certificate.is_empty(), "serverCertificate"),
            (!tls.private_key.is_empty(), "privateKey"),
            (!tls.ca_certificates.is_empty(), "caCertificates"),
            (!tls.tls_certificates.is_empty(), "tlsCertificates"),
            (!tls.credential_name.is_empty(), "credentialName"),
            (!tls.credential_names.is_empty(), "credentialNames"),
        ] {
            if set {
                out.error(
                    p.child(field),
                    format!("ISTIO_MUTUAL mode cannot have {field}"),
                );
            }
        }
        return;
    }
    if matches!(
        mode,
        ServerTlsMode::Passthrough | ServerTlsMode::AutoPassthrough
    ) && (!tls.ca_crl.is_empty()
        || !tls.server_certificate.is_empty()
        || !tls.private_key.is_empty()
        || !tls.ca_certificates.is_empty()
        || !tls.tls_certificates.is_empty()
        || !tls.credential_name.is_empty()
        || !tls.credential_names.is_empty())
    {
        out.warning(
            path,
            "passthrough modes do not use certificates; they are ignored",
        );
    }
    let sources = usize::from(!tls.server_certificate.is_empty() && !tls.private_key.is_empty())
        + usize::from(!tls.credential_name.is_empty())
        + usize::from(!tls.credential_names.is_empty())
        + usize::from(!tls.tls_certificates.is_empty());
    if sources > 1 {
        out.error(
            path,
            "only one of credentialName, credentialNames, serverCertificate/privateKey and tlsCertificates may be set",
        );
    }
    let terminating = matches!(
        mode,
        ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
    );
    let has_credential = !tls.credential_name.is_empty() || !tls.credential_names.is_empty();
    if terminating && !has_credential {
        let what = if mode == ServerTlsMode::Simple {
            "SIMPLE"
        } else {
            "MUTUAL"
        };
        if mode != ServerTlsMode::Simple && tls.ca_certificates.is_empty() {
            out.error(
                p.child("caCertificates"),
                format!("{what} TLS needs a client CA bundle (caCertificates)"),
            );
        }
        if tls.tls_certificates.is_empty() {
            check_cert_pair(&tls.server_certificate, &tls.private_key, what, path, out);
        } else {
            let mut certs = p.field("tlsCertificates");
            for (i, cert) in tls.tls_certificates.iter().enumerate() {
                check_cert_pair(
                    &cert.server_certificate,
                    &cert.private_key,
                    what,
                    certs.index(i).as_str(),
                    out,
                );
            }
        }
    }
    if !tls.ca_crl.is_empty() {
        if !tls.credential_name.is_empty() {
            out.error(
                p.child("caCrl"),
                "caCrl cannot be combined with credentialName; put the CRL in the credential",
            );
        }
        if mode == ServerTlsMode::Simple {
            out.error(p.child("caCrl"), "caCrl is not supported with SIMPLE TLS");
        }
    }
}

fn check_cert_pair(cert: &str, key: &str, what: &str, path: &str, out: &mut Findings) {
    if cert.is_empty() {
        out.error(path, format!("{what} TLS needs a server certificate"));
    }
    if key.is_empty() {
        out.error(path, format!("{what} TLS needs a private key"));
    }
}

fn validate_cipher_suites(suites: &[String], path: &str, out: &mut Findings) {
    let mut invalid = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut duplicate = BTreeSet::new();
    for suite in suites {
        let operator = suite.chars().next().is_some_and(|c| !c.is_alphanumeric());
        let valid = suite.is_empty()
            || suite == "ALL"
            || operator
            || CIPHER_SUITES.contains(&suite.as_str());
        if !valid {
            invalid.insert(suite.as_str());
        } else if !seen.insert(suite.as_str()) {
            duplicate.insert(suite.as_str());
        }
    }
    if !invalid.is_empty() {
        out.warning(path, format!("ignoring unknown cipher suites {invalid:?}"));
    }
    if !duplicate.is_empty() {
        out.warning(
            path,
            format!("ignoring duplicate cipher suites {duplicate:?}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run_named(name: &str, spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
        crate::validate::testing::run_rules(
            spec,
            &crate::validate::testing::meta(name, "ns"),
            validate,
        )
    }

    fn run(spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
        run_named("gw", spec)
    }

    #[test]
    fn accepts_typical_gateways() {
        let (e, w) = run(json!({"selector": {"istio": "ingressgateway"}, "servers": [
            {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"], "tls": {"httpsRedirect": true}},
            {"port": {"number": 443, "name": "https", "protocol": "HTTPS"}, "hosts": ["ns/*.example.com"],
             "tls": {"mode": "SIMPLE", "credentialName": "cert"}},
            {"port": {"number": 8443, "name": "mtls", "protocol": "HTTPS"}, "hosts": ["a.com"],
             "tls": {"mode": "MUTUAL", "serverCertificate": "/c", "privateKey": "/k", "caCertificates": "/ca"}},
            {"port": {"number": 15443, "name": "tls", "protocol": "TLS"}, "hosts": ["*.local"], "tls": {"mode": "AUTO_PASSTHROUGH"}},
            {"port": {"number": 0, "name": "uds", "protocol": "HTTP"}, "bind": "unix:///var/run/gw.sock", "hosts": ["*"]}
        ]}));
        assert!(e.is_empty(), "{e:?}");
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn name_and_servers() {
        let (e, _) = run_named("bad.name", json!({"servers": []}));
        assert_eq!(e.len(), 2, "{e:?}");
        let (e, _) = run(json!({"servers": [{"hosts": []}]}));
        assert_eq!(e.len(), 2, "{e:?}"); // no hosts, no port
    }

    #[test]
    fn ports() {
        let (e, _) = run(json!({"servers": [
            {"port": {"number": 70000, "name": "", "protocol": "SMTP", "targetPort": 8080}, "hosts": ["*"]},
            {"port": {"number": 80, "name": "p", "protocol": "HTTP"}, "hosts": ["*"]},
            {"port": {"number": 81, "name": "p", "protocol": "HTTP"}, "hosts": ["*"]},
            {"port": {"number": 82, "name": "q", "protocol": "HTTP"}, "bind": "not-an-ip", "hosts": ["*"]},
            {"port": {"number": 83, "name": "r", "protocol": "HTTP"}, "bind": "unix:///x.sock", "hosts": ["*"]}
        ]}));
        // protocol, number, targetPort, name, duplicate name, bind ip, unix + port
        assert_eq!(e.len(), 7, "{e:?}");
    }

    #[test]
    fn hosts() {
        let (e, _) = run(
            json!({"servers": [{"port": {"number": 80, "name": "h", "protocol": "HTTP"},
            "hosts": ["ns/a.com", "*/b.com", "./c.com", "1.2.3.4", "Bad_NS/d.com", "ns/short", "ns/*x.com"]}]}),
        );
        assert_eq!(e.len(), 3, "{e:?}");
    }

    #[test]
    fn tls_requirements() {
        let (e, _) = run(json!({"servers": [
            {"port": {"number": 443, "name": "a", "protocol": "HTTPS"}, "hosts": ["*"]},
            {"port": {"number": 80, "name": "b", "protocol": "HTTP"}, "hosts": ["*"], "tls": {"mode": "SIMPLE", "credentialName": "x"}},
            {"port": {"number": 90, "name": "c", "protocol": "TCP"}, "hosts": ["*"], "tls": {"httpsRedirect": true}},
            {"port": {"number": 444, "name": "d", "protocol": "HTTPS"}, "hosts": ["*"], "tls": {"mode": "SIMPLE"}},
            {"port": {"number": 445, "name": "e", "protocol": "HTTPS"}, "hosts": ["*"], "tls": {"mode": "MUTUAL", "credentialName": "x", "caCrl": "/crl"}},
            {"port": {"number": 446, "name": "f", "protocol": "HTTPS"}, "hosts": ["*"], "tls": {"mode": "ISTIO_MUTUAL", "privateKey": "/k"}},
            {"port": {"number": 447, "name": "g", "protocol": "HTTPS"}, "hosts": ["*"],
             "tls": {"mode": "SIMPLE", "credentialName": "x", "credentialNames": ["y"]}}
        ]}));
        // missing tls, tls on http, tls on tcp, simple cert+key (2), crl+credentialName, istio_mutual key,
        // credentialName+credentialNames (2: pair rule and source count)
        assert_eq!(e.len(), 9, "{e:?}");
    }

    #[test]
    fn tls_warnings() {
        let (e, w) = run(json!({"servers": [
            {"port": {"number": 443, "name": "a", "protocol": "HTTPS"}, "hosts": ["*"],
             "tls": {"mode": "SIMPLE", "credentialName": "x", "minProtocolVersion": "TLSV1_1",
                     "cipherSuites": ["NOPE", "AES128-SHA", "AES128-SHA", "-ALL"]}},
            {"port": {"number": 444, "name": "b", "protocol": "TLS"}, "hosts": ["*"], "tls": {"mode": "PASSTHROUGH", "credentialName": "x"}}
        ]}));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(w.len(), 3, "{w:?}");
    }
}
