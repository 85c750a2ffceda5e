//! McpBridge rules: takes a decoded higress McpBridge spec and its metadata, records findings with field paths.
//!
//! Enforces what Higress's registry reconciler and watchers need to turn a registry into services: a supported
//! registry type, a unique `type/name`, an address (for `static` a list of `ip:port`, for `dns` a list of domain
//! names), a port, a known protocol, and egress proxies that exist, are unique and are only used by single-endpoint
//! DNS registries. Settings the chosen registry type ignores get warnings.

use std::collections::{BTreeMap, BTreeSet};

use admitpilot_model::higress::mcp_bridge::{ProxyConfig, RegistryConfig, VPort};
use admitpilot_model::{higress::McpBridge, Findings, ObjectMeta};

use super::common::{
    check_dns1123_labels, check_fqdn, check_ip, check_port, check_wildcard_domain,
    dns1123_subdomain_errors, is_dns1123_label, is_ip,
};

/// Registry types Higress's reconciler builds watchers for (`Reconciler.generateWatcherFromRegistryConfig`,
/// `registry/reconcile/reconcile.go`; any other type fails with "unsupported registry type:<type>").
const REGISTRY_TYPES: &[&str] = &[
    "nacos",
    "nacos2",
    "nacos3",
    "zookeeper",
    "consul",
    "eureka",
    "static",
    "dns",
];
/// Protocols Higress parses (case-insensitive): the names Higress's `common.ParseProtocol` (`pkg/common/protocol.go`)
/// does not map to `Unsupported`.
const PROTOCOLS: &[&str] = &[
    "tcp", "http", "https", "http2", "grpc", "triple", "tri", "grpcs", "dubbo",
];
/// Proxy types Higress knows, and the one it implements (`common.ParseProxyType`; `registry/proxy/factory.go` has
/// a config-patch builder for http only).
const PROXY_TYPES: &[&str] = &["http", "https", "socks4", "socks5"];
const IMPLEMENTED_PROXY_TYPE: &str = "http";
/// The only McpBridge name Higress's controller reads (`DefaultMcpbridgeName`, `pkg/ingress/config/ingress_config.go`).
const DEFAULT_NAME: &str = "default";
/// Refresh intervals below this many nanoseconds are raised to it by the watchers.
const MIN_REFRESH_INTERVAL_NANOS: i64 = 10_000_000_000;

/// Validates one McpBridge.
pub fn validate(spec: &McpBridge, meta: &ObjectMeta, out: &mut Findings) {
    if meta.name != DEFAULT_NAME {
        out.warning(
            "metadata.name",
            format!(
                "Higress only reads the McpBridge named {DEFAULT_NAME:?}; this one has no effect"
            ),
        );
    }
    let proxies = validate_proxies(&spec.proxies, out);
    let mut seen = BTreeSet::new();
    for (i, registry) in spec.registries.iter().enumerate() {
        let path = format!("spec.registries[{i}]");
        validate_registry(registry, &path, &proxies, out);
        // Higress's `Reconciler.reconcileRegistries` (`registry/reconcile/reconcile.go`) keys registries by
        // `path.Join(type, name)`: a second registry with the same key silently replaces the first. Higress has
        // no check; admitpilot refuses the duplicate so no registry is dropped unseen.
        if !seen.insert((registry.type_.as_str(), registry.name.as_str())) {
            out.error(
                format!("{path}.name"),
                format!(
                    "registry {}/{} is declared twice (type and name must be unique)",
                    registry.type_, registry.name
                ),
            );
        }
    }
}

fn validate_registry(r: &RegistryConfig, path: &str, proxies: &BTreeSet<&str>, out: &mut Findings) {
    let ty = r.type_.as_str();
    if ty.is_empty() {
        out.error(format!("{path}.type"), "registry type is required");
    } else if !REGISTRY_TYPES.contains(&ty) {
        out.error(
            format!("{path}.type"),
            format!(
                "unsupported registry type {ty:?}; use one of {}",
                REGISTRY_TYPES.join(", ")
            ),
        );
    }
    let direct = matches!(ty, "static" | "dns");
    let nacos = ty.starts_with("nacos");
    // Higress has no check on the name. Its direct watcher (`registry/direct/watcher.go`, `watcher.Run`) serves a
    // static or DNS registry as the ServiceEntry host `<name>.<type>`, and the other watchers use the name in theirs,
    // so it is held to Istio's `validateDNS1123Labels` (pkg/config/validation/validation.go), with its texts
    // ([`check_dns1123_labels`]).
    if r.name.is_empty() {
        if direct {
            out.error(
                format!("{path}.name"),
                "name is required: static and dns registries are served as host <name>.<type>",
            );
        } else {
            out.warning(format!("{path}.name"), "registry has no name");
        }
    } else if let Err(e) = check_dns1123_labels(&r.name) {
        out.error(format!("{path}.name"), e);
    }
    validate_domain(r, path, out);
    match r.port {
        None | Some(0) => out.error(format!("{path}.port"), "port is required"),
        Some(port) => {
            if let Err(e) = check_port(port) {
                out.error(format!("{path}.port"), e);
            }
        }
    }
    // Mirrors Higress's direct `NewWatcher` (`registry/direct/watcher.go`), with its text: a protocol
    // `common.ParseProtocol` does not know fails the watcher ("invalid protocol:%s"). Only static and DNS registries
    // read `protocol`; admitpilot refuses an unknown one on every type, as it is never usable.
    if !r.protocol.is_empty()
        && !PROTOCOLS
            .iter()
            .any(|p| p.eq_ignore_ascii_case(&r.protocol))
    {
        out.error(
            format!("{path}.protocol"),
            format!("invalid protocol:{}", r.protocol),
        );
    }
    if !r.auth_secret_name.is_empty() {
        if let Err(e) = check_secret_name(&r.auth_secret_name) {
            out.error(format!("{path}.authSecretName"), e);
        }
    }
    // Higress has no check on `sni`: its direct watcher (`registry/direct/watcher.go`, `getSni`) puts it as it is
    // into the generated DestinationRule's `tls.sni` and the proxy's upstream SNI. admitpilot holds it to Istio's
    // `ValidateFQDN` (pkg/config/validation/agent/validation.go), with its texts, as a TLS server name is a host
    // name.
    if !r.sni.is_empty() {
        if let Err(e) = check_fqdn(&r.sni) {
            out.error(format!("{path}.sni"), e);
        }
    }
    for (field, interval) in [
        ("nacosRefreshInterval", r.nacos_refresh_interval),
        ("consulRefreshInterval", r.consul_refresh_interval),
    ] {
        if let Some(ns) = interval.filter(|ns| *ns != 0 && *ns < MIN_REFRESH_INTERVAL_NANOS) {
            out.warning(
                format!("{path}.{field}"),
                format!("refresh interval {ns}ns is below the 10s minimum; Higress uses 10s"),
            );
        }
    }
    warn_ignored(r, path, nacos, out);
    validate_mcp_server(r, path, out);
    // Mirrors Higress's `validateServiceWrapperForProxy` (`pkg/ingress/config/ingress_config.go`): only DNS
    // registries with a single endpoint are proxied (Higress logs "registry type %s is not supported for proxying"
    // / "has multiple endpoints" and builds no EnvoyFilter). A `proxyName` naming no proxy is logged by Higress's
    // `constructProxyEnvoyFilters` ("no corresponding proxy wrapper found") and ignored; admitpilot refuses
    // all three, as the registry would silently bypass the proxy.
    if !r.proxy_name.is_empty() {
        let proxy_path = format!("{path}.proxyName");
        if !proxies.contains(r.proxy_name.as_str()) {
            out.error(
                &proxy_path,
                format!("no proxy named {:?} in spec.proxies", r.proxy_name),
            );
        }
        if ty != "dns" {
            out.error(
                &proxy_path,
                "only dns registries can be reached through a proxy",
            );
        } else if r.domain.split(',').count() > 1 {
            out.error(
                &proxy_path,
                "a registry reached through a proxy must have exactly one domain",
            );
        }
    }
    if let Some(vport) = &r.vport {
        validate_vport(vport, &format!("{path}.vport"), out);
    }
}

/// `domain`: for static a comma-separated `ip:port` list, for dns a comma-separated domain list, otherwise the
/// registry's host name or IP (nacos may use an address server instead). `domain` is `REQUIRED` in Higress's
/// `RegistryConfig` (`api/networking/v1/mcp_bridge.proto`).
fn validate_domain(r: &RegistryConfig, path: &str, out: &mut Findings) {
    let path = format!("{path}.domain");
    if r.domain.is_empty() {
        let uses_address_server =
            r.type_.starts_with("nacos") && !r.nacos_address_server.is_empty();
        if !uses_address_server {
            out.error(path, "domain is required");
        }
        return;
    }
    match r.type_.as_str() {
        "static" => {
            for entry in r.domain.split(',') {
                if let Err(e) = check_static_endpoint(entry) {
                    out.error(&path, e);
                }
            }
        }
        "dns" => {
            for entry in r.domain.split(',') {
                if !is_dns_domain(entry) {
                    out.error(&path, format!("invalid domain format:{entry}"));
                }
            }
        }
        _ => {
            // Higress has no check: the nacos, zookeeper, consul and eureka watchers dial `domain:port` as the
            // registry's server address, so a value that is neither an IP (Istio's `ValidateIPAddress` semantics,
            // [`is_ip`]) nor a host name (Istio's `ValidateFQDN`) never connects.
            if !is_ip(&r.domain) && check_fqdn(&r.domain).is_err() {
                out.error(
                    &path,
                    format!("{:?} is not a host name or IP address", r.domain),
                );
            }
        }
    }
}

/// `ip:port` or `[ipv6]:port`, as Higress's static watcher reads it. Mirrors Higress's `generateServiceEntry`
/// (`registry/direct/watcher.go`), with its log texts (Higress logs them and serves nothing for the registry).
/// Higress's `strconv.ParseUint` takes any 32-bit port; admitpilot also refuses 0 and ports above 65535, which
/// Envoy cannot use.
fn check_static_endpoint(entry: &str) -> Result<(), String> {
    let (ip, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (ip, after) = rest
            .rsplit_once(']')
            .ok_or_else(|| format!("invalid IPv6 endpoint format:{entry} with static type"))?;
        let port = after.strip_prefix(':').ok_or_else(|| {
            format!("invalid IPv6 endpoint format:{entry} with static type, missing colon after bracket")
        })?;
        (ip, port)
    } else {
        match entry.split(':').collect::<Vec<_>>().as_slice() {
            [ip, port] => (*ip, *port),
            _ => return Err(format!("invalid endpoint:{entry} with static type")),
        }
    };
    // Go's ParseUint: decimal digits only (no sign), within 32 bits.
    let number = Some(port)
        .filter(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|p| p.parse::<u32>().ok())
        .ok_or_else(|| format!("invalid port:{port} of endpoint:{entry}"))?;
    check_ip(ip).map_err(|_| format!("invalid ip:{ip} of endpoint:{entry}"))?;
    check_port(number).map_err(|e| format!("endpoint {entry:?}: {e}"))
}

/// Higress's DNS registry rule: dotted DNS labels ending in an alphabetic top-level label of 2–63 letters. Mirrors
/// Higress's `domainRegex` (`registry/direct/watcher.go`).
fn is_dns_domain(entry: &str) -> bool {
    let Some((head, tld)) = entry.rsplit_once('.') else {
        return false;
    };
    (2..=63).contains(&tld.len())
        && tld.bytes().all(|c| c.is_ascii_alphabetic())
        && head.split('.').all(is_dns1123_label)
}

/// Warns about settings that only another registry type reads.
fn warn_ignored(r: &RegistryConfig, path: &str, nacos: bool, out: &mut Findings) {
    let ty = r.type_.as_str();
    let checks: [(&str, bool, bool); 9] = [
        (
            "nacosAddressServer",
            !r.nacos_address_server.is_empty(),
            nacos,
        ),
        ("nacosAccessKey", !r.nacos_access_key.is_empty(), nacos),
        ("nacosSecretKey", !r.nacos_secret_key.is_empty(), nacos),
        ("nacosNamespaceId", !r.nacos_namespace_id.is_empty(), nacos),
        ("nacosGroups", !r.nacos_groups.is_empty(), nacos),
        (
            "zkServicesPath",
            !r.zk_services_path.is_empty(),
            ty == "zookeeper",
        ),
        (
            "consulDatacenter",
            !r.consul_datacenter.is_empty(),
            ty == "consul",
        ),
        (
            "consulServiceTag",
            !r.consul_service_tag.is_empty(),
            ty == "consul",
        ),
        (
            "consulNamespace",
            !r.consul_namespace.is_empty(),
            ty == "consul",
        ),
    ];
    for (field, set, applies) in checks {
        if set && !applies && REGISTRY_TYPES.contains(&ty) {
            out.warning(
                format!("{path}.{field}"),
                format!("{field} is ignored by {ty} registries"),
            );
        }
    }
}

/// MCP server export (Nacos 2/3 registries): base URL is a path, export domains are (wildcard) domains. Higress's
/// MCP server watcher (`registry/nacos/mcpserver/watcher.go`) checks neither.
fn validate_mcp_server(r: &RegistryConfig, path: &str, out: &mut Findings) {
    if r.enable_mcp_server == Some(true) && !matches!(r.type_.as_str(), "nacos2" | "nacos3") {
        out.warning(
            format!("{path}.enableMCPServer"),
            format!(
                "MCP servers are only exported from nacos2/nacos3 registries, not {:?}",
                r.type_
            ),
        );
    }
    if !r.mcp_server_base_url.is_empty() && !r.mcp_server_base_url.starts_with('/') {
        out.error(
            format!("{path}.mcpServerBaseUrl"),
            "mcpServerBaseUrl must be a path starting with '/'",
        );
    }
    // The export domains become the hosts of the Gateway and VirtualService Higress generates for each MCP server
    // (`buildVirtualServiceForMcpServer`, which uses `*` when none is listed); admitpilot holds them to Istio's
    // `ValidateWildcardDomain` (pkg/config/validation/agent/validation.go), with its texts, as Istio checks such hosts.
    for (k, domain) in r.mcp_server_export_domains.iter().enumerate() {
        if let Err(e) = check_wildcard_domain(domain) {
            out.error(format!("{path}.mcpServerExportDomains[{k}]"), e);
        }
    }
    // `allowMcpServers` is only declared in Higress's `RegistryConfig` (`api/networking/v1/mcp_bridge.proto`); no
    // Higress code or CRD rule checks its entries. An empty name matches no MCP server, so admitpilot refuses it.
    for (k, server) in r.allow_mcp_servers.iter().enumerate() {
        if server.is_empty() {
            out.error(
                format!("{path}.allowMcpServers[{k}]"),
                "MCP server name must not be empty",
            );
        }
    }
}

fn validate_vport(vport: &VPort, path: &str, out: &mut Findings) {
    if let Some(port) = vport.default {
        if let Err(e) = check_port(port) {
            out.error(format!("{path}.default"), e);
        }
    }
    for (k, service) in vport.services.iter().enumerate() {
        let item = format!("{path}.services[{k}]");
        // Higress's `GetServiceVport` (`registry/watcher.go`) picks the entry whose name equals the service host
        // (case-insensitively) and whose port `isValidPort` (1–65535) accepts; entries failing either are skipped
        // without a log. Higress has no check; admitpilot refuses an unnamed entry, which no host can match.
        if service.name.is_empty() {
            out.error(format!("{item}.name"), "service name is required");
        }
        match service.value {
            None => out.error(format!("{item}.value"), "port is required"),
            Some(port) => {
                if let Err(e) = check_port(port) {
                    out.error(format!("{item}.value"), e);
                }
            }
        }
    }
}

/// Validates the proxies and returns the names declared (for `registries[].proxyName`).
fn validate_proxies<'a>(proxies: &'a [ProxyConfig], out: &mut Findings) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    let mut listener_ports: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, p) in proxies.iter().enumerate() {
        let path = format!("spec.proxies[{i}]");
        let ty = p.type_.to_ascii_lowercase();
        if ty.is_empty() {
            out.error(format!("{path}.type"), "proxy type is required");
        } else if !PROXY_TYPES.contains(&ty.as_str()) {
            out.error(
                format!("{path}.type"),
                format!(
                    "unsupported proxy type {:?}; use one of {}",
                    p.type_,
                    PROXY_TYPES.join(", ")
                ),
            );
        } else if ty != IMPLEMENTED_PROXY_TYPE {
            out.warning(
                format!("{path}.type"),
                format!("Higress only implements http proxies; this {ty} proxy is ignored"),
            );
        }
        // `name` is `REQUIRED` in Higress's `ProxyConfig` (`api/networking/v1/mcp_bridge.proto`). Higress has no
        // check on its form: `buildClusterName` (`registry/proxy/factory.go`) makes it a DNS label of the cluster
        // host `outbound|<port>||<name>.proxy`, so it is held to Istio's `labels.IsDNS1123Label` (case-insensitive,
        // [`is_dns1123_label`]). `Reconciler.reconcileProxies` (`registry/reconcile/reconcile.go`) keys proxies by
        // name, so a second proxy of the same name silently replaces the first; admitpilot refuses it.
        if p.name.is_empty() {
            out.error(format!("{path}.name"), "proxy name is required");
        } else if !is_dns1123_label(&p.name) {
            out.error(
                format!("{path}.name"),
                format!("proxy name {:?} must be a DNS-1123 label", p.name),
            );
        } else if !names.insert(p.name.as_str()) {
            out.error(
                format!("{path}.name"),
                format!("proxy name {:?} is used twice", p.name),
            );
        }
        // Mirrors Higress's `BuildProxyWrapper` (`registry/proxy/factory.go`), which builds nothing for an empty
        // `serverAddress`. Higress has no check on its form (`buildConfigPatchesForHttpProxy` makes a STATIC
        // cluster for an IPv4 address, else STRICT_DNS); admitpilot refuses what is neither an IP nor a host name
        // (Istio's `ValidateFQDN`), which Envoy could not resolve.
        if p.server_address.is_empty() {
            out.error(format!("{path}.serverAddress"), "serverAddress is required");
        } else if !is_ip(&p.server_address) && check_fqdn(&p.server_address).is_err() {
            out.error(
                format!("{path}.serverAddress"),
                format!("{:?} is not a host name or IP address", p.server_address),
            );
        }
        match p.server_port {
            None | Some(0) => out.error(format!("{path}.serverPort"), "serverPort is required"),
            Some(port) => {
                if let Err(e) = check_port(port) {
                    out.error(format!("{path}.serverPort"), e);
                }
            }
        }
        if let Some(port) = p.listener_port.filter(|p| *p != 0) {
            if let Err(e) = check_port(port) {
                out.error(format!("{path}.listenerPort"), e);
            } else if let Some(first) = listener_ports.insert(port, i) {
                out.error(
                    format!("{path}.listenerPort"),
                    format!("listener port {port} is already used by spec.proxies[{first}]"),
                );
            }
        }
    }
    names
}

/// Checks a Secret name as apimachinery's `IsDNS1123Subdomain` does ([`dns1123_subdomain_errors`]: no 63-character
/// limit per part), with its texts joined by `; `. Higress's `Reconciler.getAuthOption`
/// (`registry/reconcile/reconcile.go`) looks the Secret up without checking the name; a name Kubernetes cannot
/// store never resolves, and the registry's watcher is then never built.
fn check_secret_name(name: &str) -> Result<(), String> {
    let errors = dns1123_subdomain_errors(name);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn endpoint_checks_never_panic(s in r"([a-z0-9:.\[\],]|é){0,32}") {
            let _ = check_static_endpoint(&s);
            let _ = is_dns_domain(&s);
        }
    }
    use crate::validate_document;
    use admitpilot_model::decode::DecodeOptions;
    use serde_json::json;

    fn findings(spec: serde_json::Value) -> Vec<(String, bool)> {
        crate::testing::findings_of(
            "networking.higress.io/v1",
            "McpBridge",
            json!({"name": "default", "namespace": "higress-system"}),
            spec,
        )
    }

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::testing::error_fields(findings(spec))
    }

    /// apimachinery's `IsDNS1123Subdomain` has no 63-character limit per part: a 64-character part is a valid
    /// Secret name; 253 characters in all are allowed, 254 are not.
    #[test]
    fn secret_names_follow_is_dns1123_subdomain() {
        assert!(check_secret_name(&"a".repeat(64)).is_ok());
        assert!(check_secret_name(&format!("{}.b", "a".repeat(251))).is_ok());
        assert_eq!(
            check_secret_name(&"a".repeat(254)).unwrap_err(),
            "must be no more than 253 characters"
        );
        for bad in ["Bad", "a_b", "a..b", "-a", "a."] {
            assert!(
                check_secret_name(bad)
                    .unwrap_err()
                    .starts_with("a lowercase RFC 1123 subdomain must consist"),
                "{bad}"
            );
        }
    }

    /// Higress's direct `NewWatcher` (`registry/direct/watcher.go`) fails with "invalid protocol:%s" for a protocol
    /// `common.ParseProtocol` does not know; names are matched case-insensitively.
    #[test]
    fn unknown_protocols_use_higress_text() {
        let spec = |protocol: &str| {
            json!({"registries": [{"type": "dns", "name": "a", "domain": "a.example.com", "port": 80,
                "protocol": protocol}]})
        };
        let meta = crate::testing::meta("default", "higress-system");
        let (errors, _) = crate::testing::run_rules(spec("quic"), &meta, validate);
        assert_eq!(
            errors,
            ["spec.registries[0].protocol: invalid protocol:quic"]
        );
        assert_eq!(error_paths(spec("Triple")), Vec::<String>::new());
    }

    #[test]
    fn accepts_typical_bridges() {
        let spec = json!({
            "registries": [
                {"type": "nacos2", "name": "my-nacos", "domain": "nacos.example.com", "port": 8848,
                 "nacosNamespaceId": "public", "authSecretName": "nacos-auth", "nacosGroups": ["DEFAULT_GROUP"], "nacosRefreshInterval": 30_000_000_000_i64,
                 "enableMCPServer": true, "mcpServerBaseUrl": "/mcp", "mcpServerExportDomains": ["*.example.com"]},
                {"type": "static", "name": "backend", "domain": "10.0.0.1:8080,[2001:db8::1]:80", "port": 80, "protocol": "HTTP"},
                {"type": "dns", "name": "api", "domain": "api.example.com", "port": 443, "protocol": "https",
                 "sni": "api.example.com", "proxyName": "egress"},
                {"type": "zookeeper", "name": "zk", "domain": "10.0.0.2", "port": 2181, "zkServicesPath": ["/dubbo"]},
                {"type": "consul", "name": "c", "domain": "consul.svc", "port": 8500, "consulDatacenter": "dc1",
                 "vport": {"default": 80, "services": [{"name": "s", "value": 8080}]}},
                {"type": "nacos", "name": "n", "nacosAddressServer": "http://addr", "port": 8848}
            ],
            "proxies": [{"type": "http", "name": "egress", "serverAddress": "proxy.corp", "serverPort": 3128,
                         "listenerPort": 50001, "connectTimeout": 500}]
        });
        assert_eq!(findings(spec), vec![]);
    }

    #[test]
    fn rejects_bad_registries() {
        let spec = json!({"registries": [
            {"type": "etcd", "name": "x", "domain": "a.b", "port": 1, "authSecretName": "Bad_Secret"},
            {"type": "static", "domain": "10.0.0.1,1.2.3.4:99999,[::1]", "port": 0, "protocol": "quic"},
            {"type": "dns", "name": "a", "domain": "bad_domain,example.c0m", "port": 80, "proxyName": "none"},
            {"type": "nacos", "name": "Bad_Name", "domain": "nacos", "port": 70000, "mcpServerBaseUrl": "mcp"},
            {"type": "nacos", "name": "Bad_Name", "port": 8848, "mcpServerExportDomains": ["a.*.com"]},
            {"type": "consul", "name": "c", "domain": "c.svc", "port": 1, "proxyName": "p",
             "vport": {"default": 0, "services": [{"value": 80}]}}
        ]});
        assert_eq!(
            error_paths(spec),
            vec![
                "spec.registries[0].type",
                "spec.registries[0].authSecretName",
                "spec.registries[1].name",
                "spec.registries[1].domain",
                "spec.registries[1].domain",
                "spec.registries[1].domain",
                "spec.registries[1].port",
                "spec.registries[1].protocol",
                "spec.registries[2].domain",
                "spec.registries[2].domain",
                "spec.registries[2].proxyName",
                "spec.registries[2].proxyName",
                "spec.registries[3].name",
                "spec.registries[3].port",
                "spec.registries[3].mcpServerBaseUrl",
                "spec.registries[4].name",
                "spec.registries[4].domain",
                "spec.registries[4].mcpServerExportDomains[0]",
                "spec.registries[4].name",
                "spec.registries[5].proxyName",
                "spec.registries[5].proxyName",
                "spec.registries[5].vport.default",
                "spec.registries[5].vport.services[0].name",
            ]
        );
    }

    #[test]
    fn rejects_bad_proxies_and_types() {
        let spec = json!({"proxies": [
            {"type": "http", "name": "p", "serverAddress": "1.2.3.4", "serverPort": 8080, "listenerPort": 50001},
            {"type": "ftp", "name": "p", "serverAddress": "bad host", "listenerPort": 50001},
            {"type": "socks5", "name": "q", "serverAddress": "h.example", "serverPort": 1080}
        ]});
        assert_eq!(
            findings(spec),
            vec![
                ("spec.proxies[1].type".to_string(), true),
                ("spec.proxies[1].name".to_string(), true),
                ("spec.proxies[1].serverAddress".to_string(), true),
                ("spec.proxies[1].serverPort".to_string(), true),
                ("spec.proxies[1].listenerPort".to_string(), true),
                ("spec.proxies[2].type".to_string(), false),
            ]
        );
        // Ports are unsigned: a negative value is a decode error at the field.
        assert_eq!(
            error_paths(
                json!({"registries": [{"type": "dns", "name": "a", "domain": "a.com", "port": -1}]})
            ),
            vec!["spec.registries[0].port"]
        );
    }

    #[test]
    fn warns_on_settings_the_type_ignores() {
        let spec = json!({"registries": [{"type": "static", "name": "s", "domain": "1.1.1.1:80", "port": 80,
            "nacosGroups": ["g"], "zkServicesPath": ["/x"], "enableMCPServer": true, "consulRefreshInterval": 5}]});
        assert_eq!(
            findings(spec),
            vec![
                (
                    "spec.registries[0].consulRefreshInterval".to_string(),
                    false
                ),
                ("spec.registries[0].nacosGroups".to_string(), false),
                ("spec.registries[0].zkServicesPath".to_string(), false),
                ("spec.registries[0].enableMCPServer".to_string(), false),
            ]
        );
    }

    #[test]
    fn warns_when_not_named_default() {
        let doc = json!({"apiVersion": "networking.higress.io/v1", "kind": "McpBridge",
            "metadata": {"name": "other"}, "spec": {}});
        let report = validate_document(&doc, &DecodeOptions::default());
        assert!(report.is_valid());
        assert_eq!(
            report
                .warnings()
                .map(|f| f.field.as_str())
                .collect::<Vec<_>>(),
            vec!["metadata.name"]
        );
    }

    #[test]
    fn static_endpoints_and_dns_domains() {
        assert!(check_static_endpoint("1.2.3.4:80").is_ok());
        assert!(check_static_endpoint("[::1]:80").is_ok());
        assert!(check_static_endpoint("host:80").is_err());
        assert!(check_static_endpoint("[::1]80").is_err());
        // Go's strconv.ParseUint takes no sign: Higress drops "+80".
        assert_eq!(
            check_static_endpoint("1.2.3.4:+80").unwrap_err(),
            "invalid port:+80 of endpoint:1.2.3.4:+80"
        );
        assert_eq!(
            check_static_endpoint("1.2.3.4:a:80").unwrap_err(),
            "invalid endpoint:1.2.3.4:a:80 with static type"
        );
        assert_eq!(
            check_static_endpoint("1.2.3:80").unwrap_err(),
            "invalid ip:1.2.3 of endpoint:1.2.3:80"
        );
        assert!(is_dns_domain("a.example.com"));
        assert!(!is_dns_domain("localhost"));
        assert!(!is_dns_domain("a.b1"));
    }
}
