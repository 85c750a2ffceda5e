//! Sidecar rules: takes a decoded istio Sidecar spec and its metadata, records findings with field paths (workload
//! selector, ingress listeners and their TLS/connection pools, egress listeners and hosts, outbound policy).

use std::collections::{BTreeMap, BTreeSet};

use super::common::{
    self, validate_connection_pool, validate_destination, validate_server_tls, FieldPath,
    NsHostContext, Protocol, UNIX_PREFIX,
};
use admitpilot_model::istio::gateway::{Port, ServerTlsMode};
use admitpilot_model::istio::sidecar::{
    CaptureMode, IstioEgressListener, IstioIngressListener, OutboundTrafficMode,
    OutboundTrafficPolicy,
};
use admitpilot_model::{istio::Sidecar, Findings, ObjectMeta};

/// Istio's `ValidateSidecar` text for a listener port with a targetPort.
const TARGET_PORT_NO_IMPACT: &str = "targetPort has no impact on Sidecars";

/// Istio's `ValidateSidecar` text for a port number repeated among IP-bound (non-zero port) listeners.
const IP_PORTS_UNIQUE: &str = "sidecar: ports on IP bound listeners must be unique";

/// Validates one Sidecar, recording every error and warning.
pub fn validate(spec: &Sidecar, meta: &ObjectMeta, out: &mut Findings) {
    let mut p = FieldPath::new("spec");
    if let Some(selector) = &spec.workload_selector {
        common::validate_workload_selector(
            &selector.labels,
            &p.child("workloadSelector.labels"),
            out,
        );
    }
    // Mirrors Istio's `ValidateSidecar` (pkg/config/validation/validation.go), with its text.
    if spec.egress.is_empty()
        && spec.ingress.is_empty()
        && spec.outbound_traffic_policy.is_none()
        && spec.inbound_connection_pool.is_none()
    {
        out.error(p.as_str(), "sidecar: empty configuration provided");
        return;
    }
    {
        let mut ingress = p.field("ingress");
        let mut ports = BTreeSet::new();
        for (i, listener) in spec.ingress.iter().enumerate() {
            validate_ingress(listener, &mut ports, &mut ingress.index(i), out);
        }
    }
    if let Some(pool) = &spec.inbound_connection_pool {
        validate_connection_pool(pool, &mut p.field("inboundConnectionPool"), out);
    }
    validate_egress_listeners(&spec.egress, &meta.namespace, &mut p.field("egress"), out);
    if let Some(policy) = &spec.outbound_traffic_policy {
        validate_outbound_policy(policy, &mut p.field("outboundTrafficPolicy"), out);
    }
}

/// Mirrors Istio's `validateSidecarIngressPortAndBind` (pkg/config/validation/validation.go), which is also the
/// non-zero-port branch of `validateSidecarEgressPortBindAndCaptureMode`: an optional port name (`ValidatePortName`),
/// the protocol (`ValidateProtocol`), the number (`agent.ValidatePort`) and an optional IP bind
/// (`agent.ValidateIPAddress`).
fn validate_listener_port(port: &Port, bind: &str, p: &mut FieldPath, out: &mut Findings) {
    if !port.name.is_empty() {
        common::validate_port_name(&port.name, &p.child("port.name"), out);
    }
    common::validate_protocol(&port.protocol, &p.child("port.protocol"), out);
    common::validate_port(port.number.unwrap_or(0), &p.child("port.number"), out);
    if !bind.is_empty() {
        if let Err(e) = common::check_ip(bind) {
            out.error(p.child("bind"), e);
        }
    }
}

/// Checks one ingress listener. Mirrors the ingress loop of Istio's `ValidateSidecar`
/// (pkg/config/validation/validation.go), with its texts.
fn validate_ingress(
    listener: &IstioIngressListener,
    ports: &mut BTreeSet<u32>,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let Some(port) = &listener.port else {
        out.error(
            p.child("port"),
            "sidecar: port is required for ingress listeners",
        );
        return;
    };
    if port.target_port.unwrap_or(0) > 0 {
        out.error(p.child("port.targetPort"), TARGET_PORT_NO_IMPACT);
    }
    validate_listener_port(port, &listener.bind, p, out);
    // Mirrors the ingress port-uniqueness rule of Istio's `ValidateSidecar` (pkg/config/validation/validation.go),
    // with its text.
    if !ports.insert(port.number.unwrap_or(0)) {
        out.error(p.child("port.number"), IP_PORTS_UNIQUE);
    }
    if !listener.default_endpoint.is_empty() {
        validate_default_endpoint(&listener.default_endpoint, &p.child("defaultEndpoint"), out);
    }
    if let Some(tls) = &listener.tls {
        let mut t = p.field("tls");
        for (set, field, what) in [
            (
                !tls.subject_alt_names.is_empty(),
                "subjectAltNames",
                "sidecar: subjectAltNames is not supported in ingress tls",
            ),
            (
                tls.https_redirect == Some(true),
                "httpsRedirect",
                "sidecar: httpsRedirect is not supported",
            ),
            (
                !tls.credential_name.is_empty(),
                "credentialName",
                "sidecar: credentialName is not currently supported",
            ),
            (
                !tls.credential_names.is_empty(),
                "credentialNames",
                "sidecar: credentialNames is not currently supported",
            ),
            (
                !tls.tls_certificates.is_empty(),
                "tlsCertificates",
                "sidecar: tls_certificates is not currently supported",
            ),
        ] {
            if set {
                out.error(t.child(field), what);
            }
        }
        let refused_mode = match tls.mode {
            Some(ServerTlsMode::IstioMutual) => Some("ISTIO_MUTUAL"),
            Some(ServerTlsMode::AutoPassthrough) => Some("AUTO_PASSTHROUGH"),
            _ => None,
        };
        if let Some(mode) = refused_mode {
            out.error(
                t.child("mode"),
                format!(
                    "configuration is invalid: cannot set mode to {mode} in sidecar ingress tls"
                ),
            );
        }
        if !Protocol::parse(&port.protocol).is_tls() {
            out.error(
                t.as_str(),
                "server cannot have TLS settings for non HTTPS/TLS ports",
            );
        }
        validate_server_tls(tls, &mut t, out);
    }
    if let Some(pool) = &listener.connection_pool {
        validate_connection_pool(pool, &mut p.field("connectionPool"), out);
        if pool.http.is_some() && !Protocol::parse(&port.protocol).is_http() {
            out.warning(
                p.child("connectionPool.http"),
                format!(
                    "sidecar: HTTP connection pool settings are configured for port {} ({}) but its protocol is not HTTP ({}); only TCP settings will apply",
                    port.number.unwrap_or(0),
                    common::go_quote(&port.name),
                    port.protocol
                ),
            );
        }
    }
}

/// Checks an ingress `defaultEndpoint`: `unix://path`, or `host:port` with a loopback/any host (or none). Mirrors
/// the `defaultEndpoint` rule of Istio's `ValidateSidecar` (`net.SplitHostPort`, `strconv.Atoi`, `ValidatePort`),
/// with its texts.
fn validate_default_endpoint(endpoint: &str, path: &str, out: &mut Findings) {
    if let Some(socket) = endpoint.strip_prefix(UNIX_PREFIX) {
        if let Err(e) = common::check_unix_address(socket) {
            out.error(path, e);
        }
        return;
    }
    let (host, port) = match split_host_port(endpoint) {
        Ok(parts) => parts,
        Err(e) => {
            out.error(path, e);
            ("", "")
        }
    };
    if !matches!(host, "" | "127.0.0.1" | "0.0.0.0" | "::1" | "::") {
        out.error(
            path,
            "sidecar: defaultEndpoint must be of form 127.0.0.1:<port>,0.0.0.0:<port>,[::1]:port,[::]:port,unix://filepath or unset",
        );
    }
    match port.parse::<i64>() {
        Ok(number) => match u32::try_from(number) {
            Ok(number) => common::validate_port(number, path, out),
            // `ValidatePort`'s text, for a number beyond u32.
            Err(_) => out.error(
                path,
                format!("port number {number} must be in the range 1..65535"),
            ),
        },
        Err(_) => out.error(
            path,
            format!(
                "sidecar: defaultEndpoint port ({port}) is not a number: {}",
                atoi_error(port)
            ),
        ),
    }
}

/// Go's `strconv.Atoi` error for a string that did not parse as an `i64`.
fn atoi_error(s: &str) -> String {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let why = if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!("strconv.Atoi: parsing {}: {why}", common::go_quote(s))
}

/// Splits `host:port` or `[v6]:port` as Go's `net.SplitHostPort` does, with its error texts.
fn split_host_port(s: &str) -> Result<(&str, &str), String> {
    let error = |why: &str| format!("address {s}: {why}");
    let Some(colon) = s.rfind(':') else {
        return Err(error("missing port in address"));
    };
    let (host, rest_from) = if let Some(inner) = s.strip_prefix('[') {
        let Some(end) = inner.find(']').map(|e| e + 1) else {
            return Err(error("missing ']' in address"));
        };
        if end + 1 == s.len() {
            return Err(error("missing port in address"));
        }
        if end + 1 != colon {
            let why = if s.as_bytes()[end + 1] == b':' {
                "too many colons in address"
            } else {
                "missing port in address"
            };
            return Err(error(why));
        }
        (&s[1..end], (1, end + 1))
    } else {
        let host = &s[..colon];
        if host.contains(':') {
            return Err(error("too many colons in address"));
        }
        (host, (0, 0))
    };
    if s[rest_from.0..].contains('[') {
        return Err(error("unexpected '[' in address"));
    }
    if s[rest_from.1..].contains(']') {
        return Err(error("unexpected ']' in address"));
    }
    Ok((host, &s[colon + 1..]))
}

fn validate_egress_listeners(
    listeners: &[IstioEgressListener],
    namespace: &str,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let mut ports = BTreeSet::new();
    let mut sockets = BTreeSet::new();
    let mut catch_all = false;
    for (i, listener) in listeners.iter().enumerate() {
        let mut at = p.index(i);
        match &listener.port {
            // Mirrors the catch-all rule of Istio's `ValidateSidecar`, with its texts: one port-less listener, last.
            None if catch_all => {
                out.error(
                    at.as_str(),
                    "sidecar: egress can have only one listener with empty port",
                );
                continue;
            }
            None if i + 1 == listeners.len() => catch_all = true,
            None => out.error(
                at.as_str(),
                "sidecar: the egress listener with empty port should be the last listener in the list",
            ),
            Some(port) => {
                if port.target_port.unwrap_or(0) > 0 {
                    out.error(at.child("port.targetPort"), TARGET_PORT_NO_IMPACT);
                }
                validate_egress_port(port, listener, &mut at, out);
                // Mirrors the egress uniqueness rules of Istio's `ValidateSidecar`
                // (pkg/config/validation/validation.go): port-0 listeners by their bind, the others by number.
                let number = port.number.unwrap_or(0);
                if number == 0 {
                    if !sockets.insert(listener.bind.as_str()) {
                        out.error(
                            at.child("bind"),
                            "sidecar: unix domain socket values for listeners must be unique",
                        );
                    }
                } else if !ports.insert(number) {
                    out.error(at.child("port.number"), IP_PORTS_UNIQUE);
                }
            }
        }
        validate_egress_hosts(&listener.hosts, namespace, &mut at.field("hosts"), out);
    }
}

/// Mirrors Istio's `validateSidecarEgressPortBindAndCaptureMode` (pkg/config/validation/validation.go), with its
/// texts: a non-zero port is checked as an ingress one; port 0 needs a `unix://` bind with a valid socket address and
/// captureMode DEFAULT or NONE.
fn validate_egress_port(
    port: &Port,
    listener: &IstioEgressListener,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    if port.number.unwrap_or(0) != 0 {
        validate_listener_port(port, &listener.bind, p, out);
        return;
    }
    if !port.name.is_empty() {
        common::validate_port_name(&port.name, &p.child("port.name"), out);
    }
    common::validate_protocol(&port.protocol, &p.child("port.protocol"), out);
    match listener.bind.strip_prefix(UNIX_PREFIX) {
        None => out.error(
            p.child("bind"),
            "sidecar: ports with 0 value must have a unix domain socket bind address",
        ),
        Some(socket) => {
            if let Err(e) = common::check_unix_address(socket) {
                out.error(p.child("bind"), e);
            }
        }
    }
    if matches!(listener.capture_mode, Some(CaptureMode::Iptables)) {
        out.error(
            p.child("captureMode"),
            "sidecar: captureMode must be DEFAULT/NONE for unix domain socket listeners",
        );
    }
}

fn validate_egress_hosts(hosts: &[String], namespace: &str, p: &mut FieldPath, out: &mut Findings) {
    if hosts.is_empty() {
        out.error(
            p.as_str(),
            "sidecar: egress listener must contain at least one host",
        );
        return;
    }
    // Mirrors Istio's `ValidateSidecar` egress host rules (duplicates and `*/*` warned, each host through
    // `ValidateNamespaceSlashWildcardHostname`), with its texts. namespace → names already listed.
    let mut listed: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (i, host) in hosts.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        let at = p.index(i);
        if let Some((ns, name)) = host.split_once('/').filter(|(ns, _)| !ns.starts_with('~')) {
            let ns = if ns == "." { namespace } else { ns };
            let names = listed.entry(ns).or_default();
            let duplicate = if name == "*" {
                !names.is_empty()
            } else {
                names.contains(name) || names.contains("*")
            };
            if duplicate {
                out.warning(at.as_str(), format!("duplicated egress host: {host}"));
            }
            names.insert(name);
        }
        common::validate_namespace_slash_host(host, NsHostContext::Sidecar, at.as_str(), out);
    }
    if listed.get("*").is_some_and(|names| names.contains("*")) && listed.len() != 1 {
        out.warning(
            p.as_str(),
            "`*/*` host select all resources, no other hosts can be added",
        );
    }
}

/// Mirrors Istio's `validateSidecarOutboundTrafficPolicy` (pkg/config/validation/validation.go), with its texts: an
/// egress proxy only with mode ALLOW_ANY, its host a `ValidateFQDN` name, a port required, then `validateDestination`.
/// (ALLOW_ANY_DYNAMIC_DNS, which Istio refuses here too, is not a Sidecar mode in the model and fails decoding.)
fn validate_outbound_policy(policy: &OutboundTrafficPolicy, p: &mut FieldPath, out: &mut Findings) {
    let Some(proxy) = &policy.egress_proxy else {
        return;
    };
    if policy.mode != Some(OutboundTrafficMode::AllowAny) {
        out.error(
            p.child("egressProxy"),
            "sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode",
        );
        return;
    }
    let mut e = p.field("egressProxy");
    if let Err(err) = common::check_fqdn(&proxy.host) {
        out.error(e.child("host"), err);
    }
    if proxy.port.is_none() {
        out.error(
            e.child("port"),
            "sidecar: egress_proxy port must be non-nil",
        );
        return;
    }
    validate_destination(proxy, &mut e, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
        crate::testing::run_rules(spec, &crate::testing::meta("sc", "ns1"), validate)
    }

    #[test]
    fn accepts_a_typical_sidecar() {
        let (e, w) = run(json!({
            "workloadSelector": {"labels": {"app": "ratings"}},
            "ingress": [{"port": {"number": 9080, "protocol": "HTTP", "name": "somename"}, "defaultEndpoint": "127.0.0.1:8080",
                         "connectionPool": {"http": {"http1MaxPendingRequests": 100}}},
                        {"port": {"number": 9443, "protocol": "HTTPS", "name": "tls"}, "defaultEndpoint": "unix:///var/run/app.sock",
                         "tls": {"mode": "SIMPLE", "serverCertificate": "/c", "privateKey": "/k"}}],
            "egress": [{"port": {"number": 9080, "protocol": "HTTP", "name": "egresshttp"}, "hosts": ["prod-us1/*"]},
                       {"hosts": ["istio-system/*", "./*.example.com"]}],
            "outboundTrafficPolicy": {"mode": "ALLOW_ANY", "egressProxy": {"host": "proxy.example.com", "port": {"number": 3128}}}
        }));
        assert!(e.is_empty(), "{e:?}");
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn empty_sidecar_is_rejected() {
        let (e, _) = run(json!({}));
        assert_eq!(e, ["spec: sidecar: empty configuration provided"]);
        let (e, w) = run(
            json!({"workloadSelector": {}, "outboundTrafficPolicy": {"mode": "REGISTRY_ONLY"}}),
        );
        assert!(e.is_empty());
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn ingress_rules() {
        let (e, w) = run(json!({"ingress": [
            {},
            {"port": {"number": 80, "protocol": "HTTP", "name": "a", "targetPort": 8080}, "defaultEndpoint": "10.0.0.1:80"},
            {"port": {"number": 80, "protocol": "BOGUS", "name": "Bad_Name"}, "bind": "nope", "defaultEndpoint": "127.0.0.1:x"},
            {"port": {"number": 81, "protocol": "HTTP", "name": "b"}, "tls": {"mode": "ISTIO_MUTUAL", "credentialName": "c"}},
            {"port": {"number": 82, "protocol": "TCP", "name": "c"}, "connectionPool": {"http": {"maxRetries": 1}}}
        ]}));
        // no port; targetPort, endpoint host; protocol, name, bind, duplicate port, endpoint port;
        // credentialName, mode, non-TLS port, ISTIO_MUTUAL+credentialName
        assert_eq!(e.len(), 12, "{e:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        // Istio's `ValidateSidecar` texts.
        for text in [
            "spec.ingress[0].port: sidecar: port is required for ingress listeners",
            "spec.ingress[1].port.targetPort: targetPort has no impact on Sidecars",
            "spec.ingress[3].tls.credentialName: sidecar: credentialName is not currently supported",
            "spec.ingress[3].tls.mode: configuration is invalid: cannot set mode to ISTIO_MUTUAL in sidecar ingress tls",
            "spec.ingress[3].tls: server cannot have TLS settings for non HTTPS/TLS ports",
        ] {
            assert!(e.iter().any(|m| m == text), "{text} not in {e:?}");
        }
        assert_eq!(
            w,
            [
                r#"spec.ingress[4].connectionPool.http: sidecar: HTTP connection pool settings are configured for port 82 ("c") but its protocol is not HTTP (TCP); only TCP settings will apply"#
            ]
        );
        let (e, _) = run(
            json!({"ingress": [{"port": {"number": 443, "protocol": "HTTPS", "name": "s"},
            "tls": {"mode": "AUTO_PASSTHROUGH", "subjectAltNames": ["a"], "httpsRedirect": true,
                    "credentialNames": ["a"], "tlsCertificates": [{"serverCertificate": "/c", "privateKey": "/k"}]}}]}),
        );
        for text in [
            "spec.ingress[0].tls.subjectAltNames: sidecar: subjectAltNames is not supported in ingress tls",
            "spec.ingress[0].tls.httpsRedirect: sidecar: httpsRedirect is not supported",
            "spec.ingress[0].tls.credentialNames: sidecar: credentialNames is not currently supported",
            "spec.ingress[0].tls.tlsCertificates: sidecar: tls_certificates is not currently supported",
            "spec.ingress[0].tls.mode: configuration is invalid: cannot set mode to AUTO_PASSTHROUGH in sidecar ingress tls",
        ] {
            assert!(e.iter().any(|m| m == text), "{text} not in {e:?}");
        }
    }

    /// Istio reads `defaultEndpoint` with Go's `net.SplitHostPort` and `strconv.Atoi`; their texts come through.
    #[test]
    fn default_endpoint_texts() {
        let errors = |endpoint: &str| {
            let mut out = Findings::default();
            validate_default_endpoint(endpoint, "e", &mut out);
            out.0.iter().map(|f| f.message.clone()).collect::<Vec<_>>()
        };
        assert!(errors("127.0.0.1:8080").is_empty());
        assert!(errors("[::1]:8080").is_empty());
        assert!(errors(":8080").is_empty());
        assert!(errors("127.0.0.1:+80").is_empty());
        assert_eq!(
            errors("127.0.0.1"),
            [
                "address 127.0.0.1: missing port in address",
                r#"sidecar: defaultEndpoint port () is not a number: strconv.Atoi: parsing "": invalid syntax"#
            ]
        );
        assert_eq!(
            errors("::1:80")[0],
            "address ::1:80: too many colons in address"
        );
        assert_eq!(
            errors("[::1]x:80")[0],
            "address [::1]x:80: missing port in address"
        );
        assert_eq!(
            errors("127.0.0.1:99999999999999999999"),
            [
                r#"sidecar: defaultEndpoint port (99999999999999999999) is not a number: strconv.Atoi: parsing "99999999999999999999": value out of range"#
            ]
        );
        assert_eq!(
            errors("0.0.0.0:70000"),
            ["port number 70000 must be in the range 1..65535"]
        );
        assert_eq!(
            errors("127.0.0.1:-1"),
            ["port number -1 must be in the range 1..65535"]
        );
    }

    #[test]
    fn egress_rules() {
        let (e, w) = run(json!({"egress": [
            {"hosts": ["*/*"]},
            {"port": {"number": 0}, "bind": "10.0.0.1", "captureMode": "IPTABLES", "hosts": ["ns/a.com", "ns/a.com", "*/*"]},
            {"port": {"number": 80, "protocol": "HTTP"}, "hosts": []},
            {"port": {"number": 80, "protocol": "HTTP"}, "hosts": ["bad", "ns/short"]},
            {"hosts": ["*/*"]}
        ]}));
        // catch-all not last (the final port-less listener is the accepted catch-all); bind, capture;
        // no hosts; dup port, bad host form, short name
        assert_eq!(e.len(), 7, "{e:?}");
        assert_eq!(
            e[0],
            "spec.egress[0]: sidecar: the egress listener with empty port should be the last listener in the list"
        );
        // As in Istio, only the last port-less listener is the catch-all; earlier ones are misplaced.
        let (e, _) =
            run(json!({"egress": [{"hosts": ["*/*"]}, {"hosts": ["*/*"]}, {"hosts": ["*/*"]}]}));
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(w.len(), 2, "{w:?}");
    }

    /// The listener port texts of Istio's `ValidateSidecar`, `validateSidecarIngressPortAndBind` and
    /// `validateSidecarEgressPortBindAndCaptureMode`.
    #[test]
    fn listener_port_texts() {
        let (e, _) = run(json!({
            "ingress": [{"port": {"number": 80, "protocol": "HTTP", "name": "a"}},
                        {"port": {"number": 80, "protocol": "HTTP", "name": "b"}}],
            "egress": [{"port": {"number": 0, "protocol": "HTTP"}, "bind": "10.0.0.1", "captureMode": "IPTABLES", "hosts": ["*/*"]},
                       {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix:///s", "hosts": ["*/*"]},
                       {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix:///s", "hosts": ["*/*"]},
                       {"port": {"number": 81, "protocol": "HTTP"}, "hosts": ["*/*"]},
                       {"port": {"number": 81, "protocol": "HTTP"}, "hosts": ["*/*"]}]
        }));
        assert_eq!(
            e,
            [
                "spec.ingress[1].port.number: sidecar: ports on IP bound listeners must be unique",
                "spec.egress[0].bind: sidecar: ports with 0 value must have a unix domain socket bind address",
                "spec.egress[0].captureMode: sidecar: captureMode must be DEFAULT/NONE for unix domain socket listeners",
                "spec.egress[2].bind: sidecar: unix domain socket values for listeners must be unique",
                "spec.egress[4].port.number: sidecar: ports on IP bound listeners must be unique",
            ]
        );
    }

    #[test]
    fn outbound_policy() {
        // Istio's `validateSidecarOutboundTrafficPolicy` texts.
        let (e, _) = run(
            json!({"outboundTrafficPolicy": {"mode": "REGISTRY_ONLY", "egressProxy": {"host": "p.com", "port": {"number": 1}}}}),
        );
        assert_eq!(
            e,
            ["spec.outboundTrafficPolicy.egressProxy: sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode"]
        );
        let (e, _) = run(
            json!({"outboundTrafficPolicy": {"mode": "ALLOW_ANY", "egressProxy": {"host": "p.com"}}}),
        );
        assert_eq!(
            e,
            ["spec.outboundTrafficPolicy.egressProxy.port: sidecar: egress_proxy port must be non-nil"]
        );
        let r: Result<Sidecar, _> = serde_json::from_value(
            json!({"outboundTrafficPolicy": {"mode": "ALLOW_ANY_DYNAMIC_DNS"}}),
        );
        assert!(r.is_err(), "ALLOW_ANY_DYNAMIC_DNS is not a Sidecar mode");
        assert_eq!(split_host_port("[::1]:80"), Ok(("::1", "80")));
        assert_eq!(split_host_port(":80"), Ok(("", "80")));
        assert!(split_host_port("::1:80").is_err());
    }
}
