//! Gateway rules: takes a decoded istio Gateway spec and its metadata, records findings with field paths (name,
//! servers, hosts, ports, binds, server TLS). The server-TLS check, shared with Sidecar ingress listeners, is in
//! [`super::common::server_tls`].

use std::collections::BTreeSet;

use super::common::{self, validate_server_tls, FieldPath, NsHostContext, Protocol, UNIX_PREFIX};
use admitpilot_model::istio::gateway::{Port, Server, ServerTlsMode};
use admitpilot_model::{istio::Gateway, Findings, ObjectMeta};

/// Annotation set on Gateways generated from the Kubernetes Gateway API.
const GATEWAY_SEMANTICS_ANNOTATION: &str = "internal.istio.io/gateway-semantics";
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
    // Mirrors Istio's `ValidateGateway` (pkg/config/validation/validation.go): at least one server, with its text.
    if spec.servers.is_empty() {
        out.error(p.child("servers"), "gateway must have at least one server");
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
                // Same function: httpsRedirect on a non-HTTP server is warned, with its text.
                out.warning(
                    at.child("tls.httpsRedirect"),
                    "tls.httpsRedirect should only be used with http servers",
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
    // Mirrors Istio's `validateServer` TLS/protocol agreement (checked only when the port is valid), with its texts.
    if let (true, Some(port)) = (port_ok, &server.port) {
        let protocol = Protocol::parse(&port.protocol);
        match &server.tls {
            None if protocol.is_tls() => {
                out.error(
                    p.child("tls"),
                    "server must have TLS settings for HTTPS/TLS protocols",
                );
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
                        "server cannot have TLS settings for non HTTPS/TLS ports",
                    );
                } else if !passthrough || has_files {
                    out.error(
                        p.child("tls"),
                        "server cannot have TLS settings for plain text HTTP ports",
                    );
                }
            }
            _ => {}
        }
    }
}

/// Validates a gateway server port; returns whether it had no errors. Mirrors Istio's `validateServerPort`
/// (pkg/config/validation/validation.go), with its texts: a known protocol, a valid number unless bound to a unix
/// domain socket (`agent.ValidatePort`), no targetPort, a name.
fn validate_server_port(port: &Port, bind: &str, p: &mut FieldPath, out: &mut Findings) -> bool {
    let before = out.0.len();
    if Protocol::parse(&port.protocol) == Protocol::Unsupported {
        out.error(
            p.child("protocol"),
            format!(
                "invalid protocol {}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP",
                common::go_quote(&port.protocol)
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
            "targetPort has no impact on Gateways",
        );
    }
    if port.name.is_empty() {
        out.error(
            p.child("name"),
            format!("port name must be set: {}", port_text(port)),
        );
    }
    out.0.len() == before
}

/// Mirrors Istio's `validateServerBind` (pkg/config/validation/validation.go), with its texts: a `unix://` bind is a
/// valid socket address (`ValidateUnixAddress`) and needs port number 0; any other bind is an IP
/// (`agent.ValidateIPAddress`).
fn validate_bind(port: Option<&Port>, bind: &str, path: &str, out: &mut Findings) {
    if let Some(socket) = bind.strip_prefix(UNIX_PREFIX) {
        if let Err(e) = common::check_unix_address(socket) {
            out.error(path, e);
        }
        if let Some(port) = port.filter(|p| p.number.unwrap_or(0) != 0) {
            out.error(
                path,
                format!(
                    "port number must be 0 for unix domain socket: {}",
                    port_text(port)
                ),
            );
        }
    } else if !bind.is_empty() {
        if let Err(e) = common::check_ip(bind) {
            out.error(path, e);
        }
    }
}

/// A port as Istio's texts print it with `%v`: the protobuf text format on one line (Go protobuf's `String`), fields
/// in field-number order (`number`, `protocol`, `name`, `target_port`), zero values left out, strings quoted with
/// `"`, `\\`, `\n`, `\r`, `\t` and other control characters (`\xNN`) escaped. Go's protobuf writes a second space
/// between fields in some builds (its `detrand`, to keep the text unstable); this writes one.
fn port_text(port: &Port) -> String {
    let quote = |s: &str| {
        let mut q = String::from('"');
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' => q.push_str("\\n"),
                '\r' => q.push_str("\\r"),
                '\t' => q.push_str("\\t"),
                c if u32::from(c) < 0x20 => q.push_str(&format!("\\x{:02x}", u32::from(c))),
                c => q.push(c),
            }
        }
        q.push('"');
        q
    };
    let mut fields = Vec::new();
    if let Some(n) = port.number.filter(|n| *n != 0) {
        fields.push(format!("number:{n}"));
    }
    if !port.protocol.is_empty() {
        fields.push(format!("protocol:{}", quote(&port.protocol)));
    }
    if !port.name.is_empty() {
        fields.push(format!("name:{}", quote(&port.name)));
    }
    if let Some(n) = port.target_port.filter(|n| *n != 0) {
        fields.push(format!("target_port:{n}"));
    }
    fields.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run_named(name: &str, spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
        crate::testing::run_rules(spec, &crate::testing::meta(name, "ns"), validate)
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
        assert_eq!(e[1], "spec.servers: gateway must have at least one server");
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
        // Istio's `validateServerPort` and `validateServerBind` texts.
        for text in [
            r#"spec.servers[0].port.protocol: invalid protocol "SMTP", supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP"#,
            "spec.servers[0].port.targetPort: targetPort has no impact on Gateways",
            r#"spec.servers[0].port.name: port name must be set: number:70000 protocol:"SMTP" target_port:8080"#,
            r#"spec.servers[4].bind: port number must be 0 for unix domain socket: number:83 protocol:"HTTP" name:"r""#,
        ] {
            assert!(e.iter().any(|m| m == text), "{text} not in {e:?}");
        }
    }

    #[test]
    fn port_text_is_protobuf_text_format() {
        let port = Port {
            number: Some(0),
            protocol: "a\"b\\c\n\u{1}é".into(),
            ..Port::default()
        };
        assert_eq!(port_text(&port), r#"protocol:"a\"b\\c\n\x01é""#);
        assert_eq!(port_text(&Port::default()), "");
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
        // Istio's `validateServer` texts.
        assert_eq!(
            e[..3],
            [
                "spec.servers[0].tls: server must have TLS settings for HTTPS/TLS protocols",
                "spec.servers[1].tls: server cannot have TLS settings for plain text HTTP ports",
                "spec.servers[2].tls: server cannot have TLS settings for non HTTPS/TLS ports",
            ]
        );
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
        // Istio's `ValidateGateway` warning.
        let (_, w) = run(json!({"servers": [
            {"port": {"number": 90, "name": "t", "protocol": "TCP"}, "hosts": ["*"], "tls": {"httpsRedirect": true}}
        ]}));
        assert!(
            w.iter().any(|m| m == "spec.servers[0].tls.httpsRedirect: tls.httpsRedirect should only be used with http servers"),
            "{w:?}"
        );
    }
}
