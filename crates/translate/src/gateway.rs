//! Gateway servers (pure): takes the Gateways of a snapshot and a proxy and yields the servers that proxy
//! serves, grouped by port, plus the host rules that bind VirtualServices to them and the downstream TLS
//! context of terminating servers.

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::{data_source, DataSource};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    certificate_validation_context, common_tls_context, subject_alt_name_matcher, tls_parameters,
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    SubjectAltNameMatcher, TlsCertificate, TlsParameters,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use envoy_types::pb::google::protobuf::BoolValue;

use super::envoy::ads;
use super::naming;
use super::types::Proxy;
use admitpilot_model::istio::gateway::{Server, ServerTlsMode, ServerTlsSettings, TlsProtocol};
use admitpilot_model::istio::Gateway;
use admitpilot_model::{ConfigObject, Kind, Snapshot, Spec};

/// How a server handles connections, which decides the listener's filter chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Plain-text HTTP (HTTP, HTTP2, GRPC, GRPC-WEB).
    Http,
    /// TLS-terminating HTTP (HTTPS with SIMPLE, MUTUAL or OPTIONAL_MUTUAL).
    Https,
    /// TLS forwarded by SNI without termination (TLS/HTTPS with PASSTHROUGH).
    Passthrough,
    /// Opaque TCP, optionally after TLS termination (TCP, MONGO, …; TLS with SIMPLE/MUTUAL).
    Tcp,
}

impl ServerKind {
    /// Tells whether two kinds can share a port: plain-text HTTP and TCP-like kinds share it through SNI
    /// filter chains.
    fn shares_port_with(self, other: ServerKind) -> bool {
        self == other || (self != ServerKind::Http && other != ServerKind::Http)
    }
}

/// One server of one Gateway, as applied to the proxy.
#[derive(Debug, Clone)]
pub struct BoundServer {
    /// The Gateway object.
    pub gateway: Arc<ConfigObject>,
    /// Index of the server in the Gateway.
    pub index: usize,
    /// Port number.
    pub port: u32,
    /// What the server does.
    pub kind: ServerKind,
}

impl BoundServer {
    /// Returns the server spec.
    pub fn server(&self) -> Option<&Server> {
        match &self.gateway.spec {
            Spec::Gateway(gateway) => gateway.servers.get(self.index),
            _ => None,
        }
    }

    /// Returns the Gateway namespace.
    pub fn namespace(&self) -> &str {
        &self.gateway.metadata.namespace
    }

    /// Returns the Gateway name.
    pub fn name(&self) -> &str {
        &self.gateway.metadata.name
    }

    /// Returns the server's TLS settings.
    pub fn tls(&self) -> Option<&ServerTlsSettings> {
        self.server().and_then(|s| s.tls.as_ref())
    }
}

fn server_kind(server: &Server) -> Option<ServerKind> {
    let protocol = server.port.as_ref()?.protocol.to_ascii_uppercase();
    // Istio reads an unset mode as its zero value, PASSTHROUGH (and MCP, being proto3, cannot tell them apart).
    let mode = server
        .tls
        .as_ref()
        .map(|t| t.mode.unwrap_or(ServerTlsMode::Passthrough));
    match protocol.as_str() {
        "HTTP" | "HTTP2" | "GRPC" | "GRPC-WEB" => Some(ServerKind::Http),
        "HTTPS" => match mode {
            Some(ServerTlsMode::Passthrough) => Some(ServerKind::Passthrough),
            Some(ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual) => {
                Some(ServerKind::Https)
            }
            // AUTO_PASSTHROUGH and ISTIO_MUTUAL need mesh SNI clusters and mesh certificates.
            _ => None,
        },
        "TLS" => match mode {
            Some(ServerTlsMode::Passthrough) => Some(ServerKind::Passthrough),
            Some(ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual) => {
                Some(ServerKind::Tcp)
            }
            _ => None,
        },
        "TCP" | "MONGO" | "REDIS" | "MYSQL" => Some(ServerKind::Tcp),
        _ => None,
    }
}

/// Orders objects as Istio does (`sortConfigByCreationTime`): creation time, then name, then namespace.
pub fn istio_order(a: &ConfigObject, b: &ConfigObject) -> std::cmp::Ordering {
    (
        &a.metadata.creation_timestamp,
        &a.metadata.name,
        &a.metadata.namespace,
    )
        .cmp(&(
            &b.metadata.creation_timestamp,
            &b.metadata.name,
            &b.metadata.namespace,
        ))
}

/// Returns the servers of every Gateway selecting the proxy (selector ⊆ pod labels; Gateways of every
/// namespace apply, as with Istio's default `PILOT_SCOPE_GATEWAY_TO_NAMESPACE=false`), grouped by port.
/// On a port, the first server (oldest Gateway first) decides between plain-text HTTP, TCP and the TLS
/// kinds; servers of a conflicting kind are dropped, as Istio does.
pub fn servers_by_port(snapshot: &Snapshot, proxy: &Proxy) -> BTreeMap<u32, Vec<BoundServer>> {
    let mut gateways: Vec<&Arc<ConfigObject>> = snapshot
        .of_kind(Kind::Gateway)
        .filter(|object| match &object.spec {
            Spec::Gateway(Gateway { selector, .. }) => proxy.has_labels(selector),
            _ => false,
        })
        .collect();
    gateways.sort_by(|a, b| istio_order(a, b));
    let mut ports: BTreeMap<u32, Vec<BoundServer>> = BTreeMap::new();
    for object in gateways {
        let Spec::Gateway(gateway) = &object.spec else {
            continue;
        };
        for (index, server) in gateway.servers.iter().enumerate() {
            let (Some(port), Some(kind)) = (
                server.port.as_ref().and_then(|p| p.number),
                server_kind(server),
            ) else {
                continue;
            };
            let list = ports.entry(port).or_default();
            if list
                .first()
                .is_some_and(|first| !first.kind.shares_port_with(kind))
            {
                continue;
            }
            list.push(BoundServer {
                gateway: Arc::clone(object),
                index,
                port,
                kind,
            });
        }
    }
    ports
}

/// Splits a server host `ns/host` into its namespace rule and host (`*` when no namespace is given).
pub fn split_server_host<'h>(host: &'h str, gateway_namespace: &'h str) -> (&'h str, &'h str) {
    match host.split_once('/') {
        Some((".", h)) => (gateway_namespace, h),
        Some((ns, h)) => (ns, h),
        None => ("*", host),
    }
}

/// Returns the more specific of two hosts when they overlap (`*` and `*.x` wildcards), else `None`.
pub fn intersect_hosts(a: &str, b: &str) -> Option<String> {
    let covers = |wild: &str, host: &str| {
        wild == "*"
            || wild == host
            || wild
                .strip_prefix('*')
                .is_some_and(|suffix| host.ends_with(suffix) && host.len() > suffix.len())
    };
    if covers(a, b) {
        Some(b.to_string())
    } else if covers(b, a) {
        Some(a.to_string())
    } else {
        None
    }
}

/// Returns the hosts a VirtualService (in `vs_namespace`, with `vs_hosts`) gets on a server.
pub fn server_vs_hosts(
    server: &BoundServer,
    vs_namespace: &str,
    vs_hosts: &[String],
) -> Vec<String> {
    let Some(spec) = server.server() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for server_host in &spec.hosts {
        let (ns, host) = split_server_host(server_host, server.namespace());
        if ns != "*" && ns != vs_namespace {
            continue;
        }
        for vs_host in vs_hosts {
            if let Some(h) = intersect_hosts(host, vs_host) {
                if !out.contains(&h) {
                    out.push(h);
                }
            }
        }
    }
    out
}

/// Returns the SNI names of a server: its hosts without namespace; empty when one is `*`.
pub fn server_names(server: &BoundServer) -> Vec<String> {
    let Some(spec) = server.server() else {
        return Vec::new();
    };
    let mut names: Vec<String> = spec
        .hosts
        .iter()
        .map(|h| split_server_host(h, server.namespace()).1.to_string())
        .collect();
    if names.iter().any(|n| n == "*") {
        return Vec::new();
    }
    names.sort();
    names.dedup();
    names
}

/// The credentials a terminating server needs from Kubernetes Secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Secrets holding certificate + key.
    pub certificates: Vec<String>,
    /// Secret whose CA bundle validates client certificates (MUTUAL), if any.
    pub ca: Option<String>,
}

/// Returns the Secrets a server's TLS settings name.
pub fn credentials(tls: &ServerTlsSettings) -> Credentials {
    let mut certificates: Vec<String> = Vec::new();
    if !tls.credential_name.is_empty() {
        certificates.push(tls.credential_name.clone());
    }
    certificates.extend(tls.credential_names.iter().cloned());
    let mutual = matches!(
        tls.mode,
        Some(ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual)
    );
    let ca = if !mutual {
        None
    } else if !tls.ca_cert_credential_name.is_empty() {
        Some(tls.ca_cert_credential_name.clone())
    } else if tls.ca_certificates.is_empty() {
        certificates.first().cloned()
    } else {
        None
    };
    Credentials { certificates, ca }
}

fn tls_version(version: Option<&TlsProtocol>, default: tls_parameters::TlsProtocol) -> i32 {
    (match version {
        Some(TlsProtocol::TlsV1_0) => tls_parameters::TlsProtocol::TlSv10,
        Some(TlsProtocol::TlsV1_1) => tls_parameters::TlsProtocol::TlSv11,
        Some(TlsProtocol::TlsV1_2) => tls_parameters::TlsProtocol::TlSv12,
        Some(TlsProtocol::TlsV1_3) => tls_parameters::TlsProtocol::TlSv13,
        Some(TlsProtocol::TlsAuto) | None => default,
    }) as i32
}

fn sds(name: String) -> SdsSecretConfig {
    SdsSecretConfig {
        name,
        sds_config: Some(ads()),
    }
}

fn file(path: &str) -> Option<DataSource> {
    (!path.is_empty()).then(|| DataSource {
        specifier: Some(data_source::Specifier::Filename(path.to_string())),
        ..Default::default()
    })
}

/// Builds the downstream TLS context of a terminating server: certificates from SDS (`credentialName`)
/// or files, TLS 1.2 minimum unless the server says otherwise, ALPN h2/http1.1 for HTTPS, and client
/// certificate validation for MUTUAL/OPTIONAL_MUTUAL.
pub fn downstream_tls(tls: &ServerTlsSettings, http: bool) -> DownstreamTlsContext {
    let creds = credentials(tls);
    let mut common = CommonTlsContext {
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: tls_version(
                tls.min_protocol_version.as_ref(),
                tls_parameters::TlsProtocol::TlSv12,
            ),
            tls_maximum_protocol_version: tls_version(
                tls.max_protocol_version.as_ref(),
                tls_parameters::TlsProtocol::TlsAuto,
            ),
            cipher_suites: tls.cipher_suites.clone(),
            ..Default::default()
        }),
        alpn_protocols: if http {
            vec!["h2".into(), "http/1.1".into()]
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    if creds.certificates.is_empty() {
        common.tls_certificates.push(TlsCertificate {
            certificate_chain: file(&tls.server_certificate),
            private_key: file(&tls.private_key),
            ..Default::default()
        });
        for extra in &tls.tls_certificates {
            common.tls_certificates.push(TlsCertificate {
                certificate_chain: file(&extra.server_certificate),
                private_key: file(&extra.private_key),
                ..Default::default()
            });
        }
    } else {
        common.tls_certificate_sds_secret_configs = creds
            .certificates
            .iter()
            .map(|c| sds(naming::credential_secret(c)))
            .collect();
    }
    let mutual = matches!(
        tls.mode,
        Some(ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual)
    );
    if mutual {
        let sans: Vec<SubjectAltNameMatcher> = tls
            .subject_alt_names
            .iter()
            .map(|san| SubjectAltNameMatcher {
                san_type: subject_alt_name_matcher::SanType::Dns as i32,
                matcher: Some(StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Exact(san.clone())),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        let default_validation = CertificateValidationContext {
            match_typed_subject_alt_names: sans,
            verify_certificate_spki: tls.verify_certificate_spki.clone(),
            verify_certificate_hash: tls.verify_certificate_hash.clone(),
            trust_chain_verification: if tls.accept_untrusted_client_certificates {
                certificate_validation_context::TrustChainVerification::AcceptUntrusted as i32
            } else {
                certificate_validation_context::TrustChainVerification::VerifyTrustChain as i32
            },
            ..Default::default()
        };
        common.validation_context_type = Some(match &creds.ca {
            Some(ca) => common_tls_context::ValidationContextType::CombinedValidationContext(
                common_tls_context::CombinedCertificateValidationContext {
                    default_validation_context: Some(default_validation),
                    validation_context_sds_secret_config: Some(sds(naming::credential_ca_secret(
                        ca,
                    ))),
                    ..Default::default()
                },
            ),
            None => common_tls_context::ValidationContextType::ValidationContext(
                CertificateValidationContext {
                    trusted_ca: file(&tls.ca_certificates),
                    crl: file(&tls.ca_crl),
                    ..default_validation
                },
            ),
        });
    }
    DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: (tls.mode == Some(ServerTlsMode::Mutual))
            .then_some(BoolValue { value: true }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::istio::gateway::Port;

    #[test]
    fn hosts_intersect_like_istio() {
        assert_eq!(intersect_hosts("*", "a.com").as_deref(), Some("a.com"));
        assert_eq!(
            intersect_hosts("*.a.com", "b.a.com").as_deref(),
            Some("b.a.com")
        );
        assert_eq!(
            intersect_hosts("b.a.com", "*.a.com").as_deref(),
            Some("b.a.com")
        );
        assert_eq!(
            intersect_hosts("*.a.com", "*.b.a.com").as_deref(),
            Some("*.b.a.com")
        );
        assert_eq!(intersect_hosts("a.com", "b.com"), None);
        assert_eq!(intersect_hosts("*.a.com", "a.com"), None);
    }

    #[test]
    fn server_hosts_carry_namespace_rules() {
        assert_eq!(split_server_host("./a.com", "gw"), ("gw", "a.com"));
        assert_eq!(split_server_host("ns/a.com", "gw"), ("ns", "a.com"));
        assert_eq!(split_server_host("a.com", "gw"), ("*", "a.com"));
    }

    #[test]
    fn tls_without_a_mode_is_passthrough() {
        let server = |protocol: &str, tls: Option<ServerTlsSettings>| Server {
            port: Some(Port {
                number: Some(443),
                protocol: protocol.into(),
                name: "p".into(),
                target_port: None,
            }),
            tls,
            ..Server::default()
        };
        let unset = Some(ServerTlsSettings::default());
        let passthrough = Some(ServerTlsSettings {
            mode: Some(ServerTlsMode::Passthrough),
            ..ServerTlsSettings::default()
        });
        for protocol in ["HTTPS", "TLS"] {
            assert_eq!(
                server_kind(&server(protocol, unset.clone())),
                Some(ServerKind::Passthrough)
            );
            assert_eq!(
                server_kind(&server(protocol, passthrough.clone())),
                Some(ServerKind::Passthrough)
            );
            assert_eq!(server_kind(&server(protocol, None)), None);
        }
    }

    #[test]
    fn kinds_share_ports_only_through_tls() {
        assert!(ServerKind::Https.shares_port_with(ServerKind::Passthrough));
        assert!(!ServerKind::Http.shares_port_with(ServerKind::Https));
        assert!(ServerKind::Http.shares_port_with(ServerKind::Http));
    }
}
