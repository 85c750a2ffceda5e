//! DestinationRule policies (pure): takes the DestinationRules visible to a gateway and yields, per cluster
//! (host, port, subset), the effective traffic policy applied to the Envoy `Cluster` (load balancing,
//! connection pool, outlier detection, upstream TLS), the consistent-hash policies for routes, and subsets.
//!
//! Rule choice, simplified from Istio: rules whose `workloadSelector` does not match the gateway or whose
//! `exportTo` hides them from the gateway namespace are ignored; an exact host beats a wildcard, a longer
//! wildcard beats a shorter one; on a tie the rule in the gateway namespace wins, then the one in the
//! service namespace, then the first by namespace/name.

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::{
    cluster, Cluster, OutlierDetection, UpstreamConnectionOptions,
};
use envoy_types::pb::envoy::config::core::v3::{
    transport_socket, Http1ProtocolOptions, Http2ProtocolOptions,
    HttpProtocolOptions as CoreHttpOptions, TcpKeepalive, TransportSocket,
};
use envoy_types::pb::envoy::config::route::v3::route_action::{hash_policy, HashPolicy};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    common_tls_context, subject_alt_name_matcher, CertificateValidationContext, CommonTlsContext,
    SdsSecretConfig, SubjectAltNameMatcher, UpstreamTlsContext,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    http_protocol_options, HttpProtocolOptions,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt32Value;
use envoy_types::pb::google::protobuf::UInt64Value;

use super::envoy::{ads, any, parse_duration, TLS_TRANSPORT};
use super::naming;
use super::secret;
use super::types::ClusterRef;
use super::types::Proxy;
use admitpilot_model::istio::destination_rule::{
    ClientTlsMode, ClientTlsSettings, ConnectionPoolSettings, DestinationRule, H2UpgradePolicy,
    LoadBalancerSettings, OutlierDetection as IstioOutlier, SimpleLb, Subset, TrafficPolicy,
};
use admitpilot_model::{ConfigObject, Kind, Snapshot, Spec};

/// Key of the upstream HTTP protocol options in `typed_extension_protocol_options`.
pub(super) const HTTP_PROTOCOL_OPTIONS: &str =
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// One DestinationRule with its host resolved.
#[derive(Debug, Clone)]
struct Rule {
    host: String,
    namespace: String,
    object: Arc<ConfigObject>,
}

impl Rule {
    fn spec(&self) -> Option<&DestinationRule> {
        match &self.object.spec {
            Spec::DestinationRule(rule) => Some(rule),
            _ => None,
        }
    }
}

/// The DestinationRules that apply to one gateway.
#[derive(Debug, Clone, Default)]
pub struct Policies {
    proxy_namespace: String,
    rules: Vec<Rule>,
}

/// The policy parts in force for one cluster after port-level and subset overrides.
#[derive(Debug, Clone, Copy, Default)]
struct Effective<'a> {
    load_balancer: Option<&'a LoadBalancerSettings>,
    connection_pool: Option<&'a ConnectionPoolSettings>,
    outlier_detection: Option<&'a IstioOutlier>,
    tls: Option<&'a ClientTlsSettings>,
}

impl<'a> Effective<'a> {
    fn overlay(&mut self, policy: &'a TrafficPolicy, port: u32) {
        self.load_balancer = policy.load_balancer.as_ref().or(self.load_balancer);
        self.connection_pool = policy.connection_pool.as_ref().or(self.connection_pool);
        self.outlier_detection = policy.outlier_detection.as_ref().or(self.outlier_detection);
        self.tls = policy.tls.as_ref().or(self.tls);
        if let Some(level) = policy
            .port_level_settings
            .iter()
            .find(|l| l.port.as_ref().and_then(|p| p.number) == Some(port))
        {
            self.load_balancer = level.load_balancer.as_ref().or(self.load_balancer);
            self.connection_pool = level.connection_pool.as_ref().or(self.connection_pool);
            self.outlier_detection = level.outlier_detection.as_ref().or(self.outlier_detection);
            self.tls = level.tls.as_ref().or(self.tls);
        }
    }
}

fn visible(export_to: &[String], own: &str, namespace: &str) -> bool {
    export_to.is_empty()
        || export_to
            .iter()
            .any(|e| e == "*" || e == namespace || (e == "." && own == namespace))
}

fn host_matches(pattern: &str, host: &str) -> Option<usize> {
    if pattern == host {
        Some(usize::MAX)
    } else if let Some(suffix) = pattern.strip_prefix('*') {
        host.ends_with(suffix).then_some(suffix.len())
    } else {
        None
    }
}

impl Policies {
    /// Collects the DestinationRules that apply to the proxy.
    pub fn build(snapshot: &Snapshot, proxy: &Proxy, domain_suffix: &str) -> Policies {
        let rules = snapshot
            .of_kind(Kind::DestinationRule)
            .filter_map(|object| {
                let Spec::DestinationRule(rule) = &object.spec else {
                    return None;
                };
                let namespace = object.metadata.namespace.clone();
                if !visible(&rule.export_to, &namespace, &proxy.namespace) {
                    return None;
                }
                if let Some(selector) = &rule.workload_selector {
                    let selects =
                        namespace == proxy.namespace && proxy.has_labels(&selector.match_labels);
                    if !selects {
                        return None;
                    }
                }
                Some(Rule {
                    host: naming::resolve_short_name(&rule.host, &namespace, domain_suffix),
                    namespace,
                    object: Arc::clone(object),
                })
            })
            .collect();
        Policies {
            proxy_namespace: proxy.namespace.clone(),
            rules,
        }
    }

    /// Returns the DestinationRule in force for a host (see the module rules).
    pub fn rule_for(&self, host: &str, service_namespace: &str) -> Option<&DestinationRule> {
        self.rules
            .iter()
            .filter_map(|rule| {
                let specificity = host_matches(&rule.host, host)?;
                let ns_rank = if rule.namespace == self.proxy_namespace {
                    0
                } else if rule.namespace == service_namespace {
                    1
                } else {
                    2
                };
                Some(((std::cmp::Reverse(specificity), ns_rank), rule))
            })
            .min_by(|a, b| a.0.cmp(&b.0))
            .and_then(|(_, rule)| rule.spec())
    }

    /// Returns the subsets defined for a host.
    pub fn subsets(&self, host: &str, service_namespace: &str) -> &[Subset] {
        self.rule_for(host, service_namespace)
            .map(|r| r.subsets.as_slice())
            .unwrap_or_default()
    }

    fn effective<'a>(&'a self, cluster: &ClusterRef, service_namespace: &str) -> Effective<'a> {
        let mut effective = Effective::default();
        let Some(rule) = self.rule_for(&cluster.host, service_namespace) else {
            return effective;
        };
        if let Some(policy) = &rule.traffic_policy {
            effective.overlay(policy, cluster.port);
        }
        if !cluster.subset.is_empty() {
            if let Some(policy) = rule
                .subsets
                .iter()
                .find(|s| s.name == cluster.subset)
                .and_then(|s| s.traffic_policy.as_ref())
            {
                effective.overlay(policy, cluster.port);
            }
        }
        effective
    }

    /// Returns the route hash policies for a destination whose rule asks for consistent hashing.
    pub fn hash_policies(&self, cluster: &ClusterRef) -> Vec<HashPolicy> {
        let effective = self.effective(cluster, "");
        let Some(hash) = effective
            .load_balancer
            .and_then(|lb| lb.consistent_hash.as_ref())
        else {
            return Vec::new();
        };
        let specifier = if let Some(header) = &hash.http_header_name {
            hash_policy::PolicySpecifier::Header(hash_policy::Header {
                header_name: header.clone(),
                ..Default::default()
            })
        } else if let Some(cookie) = &hash.http_cookie {
            hash_policy::PolicySpecifier::Cookie(hash_policy::Cookie {
                name: cookie.name.clone(),
                path: cookie.path.clone(),
                ttl: cookie.ttl.as_deref().and_then(parse_duration),
                ..Default::default()
            })
        } else if hash.use_source_ip == Some(true) {
            hash_policy::PolicySpecifier::ConnectionProperties(hash_policy::ConnectionProperties {
                source_ip: true,
            })
        } else if let Some(name) = &hash.http_query_parameter_name {
            hash_policy::PolicySpecifier::QueryParameter(hash_policy::QueryParameter {
                name: name.clone(),
            })
        } else {
            return Vec::new();
        };
        vec![HashPolicy {
            policy_specifier: Some(specifier),
            terminal: false,
        }]
    }

    /// Applies the effective policy to a cluster; `protocol` is the service port's protocol (HTTP2/GRPC
    /// ports get HTTP/2 upstream, as in Istio). Returns the SDS credential names the cluster uses.
    pub fn apply(
        &self,
        out: &mut Cluster,
        cluster: &ClusterRef,
        service_namespace: &str,
        protocol: &str,
    ) -> Vec<String> {
        let effective = self.effective(cluster, service_namespace);
        if let Some(lb) = effective.load_balancer {
            apply_load_balancer(out, lb);
        }
        apply_connection_pool(out, effective.connection_pool, protocol);
        if let Some(outlier) = effective.outlier_detection {
            apply_outlier_detection(out, outlier);
        }
        effective
            .tls
            .map(|tls| apply_tls(out, tls))
            .unwrap_or_default()
    }
}

fn apply_load_balancer(out: &mut Cluster, lb: &LoadBalancerSettings) {
    if let Some(simple) = &lb.simple {
        out.lb_policy = match simple {
            SimpleLb::RoundRobin => cluster::LbPolicy::RoundRobin,
            SimpleLb::Random => cluster::LbPolicy::Random,
            SimpleLb::Passthrough => {
                out.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(
                    cluster::DiscoveryType::OriginalDst as i32,
                ));
                out.eds_cluster_config = None;
                out.load_assignment = None;
                cluster::LbPolicy::ClusterProvided
            }
            SimpleLb::Unspecified | SimpleLb::LeastConn | SimpleLb::LeastRequest => {
                cluster::LbPolicy::LeastRequest
            }
        } as i32;
    } else if let Some(hash) = &lb.consistent_hash {
        if let Some(maglev) = &hash.maglev {
            out.lb_policy = cluster::LbPolicy::Maglev as i32;
            out.lb_config = Some(cluster::LbConfig::MaglevLbConfig(cluster::MaglevLbConfig {
                table_size: maglev.table_size.map(|value| UInt64Value { value }),
            }));
        } else {
            out.lb_policy = cluster::LbPolicy::RingHash as i32;
            let minimum = hash
                .ring_hash
                .as_ref()
                .and_then(|r| r.minimum_ring_size)
                .or(hash.minimum_ring_size);
            out.lb_config = Some(cluster::LbConfig::RingHashLbConfig(
                cluster::RingHashLbConfig {
                    minimum_ring_size: minimum.map(|value| UInt64Value { value }),
                    ..Default::default()
                },
            ));
        }
    }
}

fn positive(value: Option<i32>) -> Option<UInt32Value> {
    value
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0)
        .map(|value| UInt32Value { value })
}

fn apply_connection_pool(out: &mut Cluster, pool: Option<&ConnectionPoolSettings>, protocol: &str) {
    let http2_port = matches!(protocol, "HTTP2" | "GRPC");
    let mut common = CoreHttpOptions::default();
    let mut http2 = http2_port;
    let mut use_client_protocol = false;
    if let Some(pool) = pool {
        if let Some(thresholds) = out
            .circuit_breakers
            .as_mut()
            .and_then(|cb| cb.thresholds.first_mut())
        {
            if let Some(tcp) = &pool.tcp {
                if let Some(v) = positive(tcp.max_connections) {
                    thresholds.max_connections = Some(v);
                }
            }
            if let Some(http) = &pool.http {
                if let Some(v) = positive(http.http1_max_pending_requests) {
                    thresholds.max_pending_requests = Some(v);
                }
                if let Some(v) = positive(http.http2_max_requests) {
                    thresholds.max_requests = Some(v);
                }
                if let Some(v) = positive(http.max_retries) {
                    thresholds.max_retries = Some(v);
                }
            }
        }
        if let Some(tcp) = &pool.tcp {
            if let Some(timeout) = tcp.connect_timeout.as_deref().and_then(parse_duration) {
                out.connect_timeout = Some(timeout);
            }
            if let Some(keepalive) = &tcp.tcp_keepalive {
                let seconds = |d: &Option<String>| {
                    d.as_deref()
                        .and_then(parse_duration)
                        .and_then(|d| u32::try_from(d.seconds).ok())
                        .map(|value| UInt32Value { value })
                };
                out.upstream_connection_options = Some(UpstreamConnectionOptions {
                    tcp_keepalive: Some(TcpKeepalive {
                        keepalive_probes: keepalive.probes.map(|value| UInt32Value { value }),
                        keepalive_time: seconds(&keepalive.time),
                        keepalive_interval: seconds(&keepalive.interval),
                    }),
                    ..Default::default()
                });
            }
            common.max_connection_duration = tcp
                .max_connection_duration
                .as_deref()
                .and_then(parse_duration);
            common.idle_timeout = tcp.idle_timeout.as_deref().and_then(parse_duration);
        }
        if let Some(http) = &pool.http {
            if let Some(idle) = http.idle_timeout.as_deref().and_then(parse_duration) {
                common.idle_timeout = Some(idle);
            }
            common.max_requests_per_connection = positive(http.max_requests_per_connection);
            if http.h2_upgrade_policy == Some(H2UpgradePolicy::Upgrade) {
                http2 = true;
            }
            use_client_protocol = http.use_client_protocol == Some(true);
        }
    }
    let has_common = common != CoreHttpOptions::default();
    if !(has_common || http2 || use_client_protocol) {
        return;
    }
    let upstream = if use_client_protocol {
        http_protocol_options::UpstreamProtocolOptions::UseDownstreamProtocolConfig(
            http_protocol_options::UseDownstreamHttpConfig {
                http_protocol_options: Some(Http1ProtocolOptions::default()),
                http2_protocol_options: Some(Http2ProtocolOptions::default()),
                ..Default::default()
            },
        )
    } else {
        let config = if http2 {
            http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                Http2ProtocolOptions::default(),
            )
        } else {
            http_protocol_options::explicit_http_config::ProtocolConfig::HttpProtocolOptions(
                Http1ProtocolOptions::default(),
            )
        };
        http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
            http_protocol_options::ExplicitHttpConfig {
                protocol_config: Some(config),
            },
        )
    };
    let options = HttpProtocolOptions {
        common_http_protocol_options: has_common.then_some(common),
        upstream_protocol_options: Some(upstream),
        ..Default::default()
    };
    out.typed_extension_protocol_options
        .insert(HTTP_PROTOCOL_OPTIONS.into(), any(options));
}

fn apply_outlier_detection(out: &mut Cluster, outlier: &IstioOutlier) {
    let u32v = |v: Option<u32>| v.map(|value| UInt32Value { value });
    let consecutive_5xx = outlier.consecutive_5xx_errors.or(outlier
        .consecutive_errors
        .and_then(|v| u32::try_from(v).ok()));
    let enforce = |set: bool| {
        Some(UInt32Value {
            value: if set { 100 } else { 0 },
        })
    };
    let mut detection = OutlierDetection {
        consecutive_5xx: u32v(consecutive_5xx),
        enforcing_consecutive_5xx: enforce(consecutive_5xx.is_some_and(|v| v > 0)),
        consecutive_gateway_failure: u32v(outlier.consecutive_gateway_errors),
        enforcing_consecutive_gateway_failure: enforce(
            outlier.consecutive_gateway_errors.is_some_and(|v| v > 0),
        ),
        enforcing_success_rate: enforce(false),
        interval: outlier.interval.as_deref().and_then(parse_duration),
        base_ejection_time: outlier
            .base_ejection_time
            .as_deref()
            .and_then(parse_duration),
        max_ejection_percent: outlier
            .max_ejection_percent
            .and_then(|v| u32::try_from(v).ok())
            .map(|value| UInt32Value { value }),
        split_external_local_origin_errors: outlier.split_external_local_origin_errors
            == Some(true),
        ..Default::default()
    };
    if detection.split_external_local_origin_errors {
        detection.consecutive_local_origin_failure =
            u32v(outlier.consecutive_local_origin_failures);
    }
    out.outlier_detection = Some(detection);
    if let Some(min_health) = outlier.min_health_percent {
        out.common_lb_config = Some(cluster::CommonLbConfig {
            healthy_panic_threshold: Some(Percent {
                value: f64::from(min_health),
            }),
            ..Default::default()
        });
    }
}

fn sds(name: String) -> SdsSecretConfig {
    SdsSecretConfig {
        name,
        sds_config: Some(ads()),
    }
}

/// The system CA bundle of the Istio and Higress gateway images (Debian and Ubuntu based), read when a client TLS
/// setting asks for subject alternative names without giving a CA.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Sets the upstream TLS socket; returns the credential names (SDS: Secret names, `file-cert:`/`file-root:` names)
/// it needs. ISTIO_MUTUAL needs mesh
/// certificates admitpilot does not issue, so it (like DISABLE) leaves the cluster in plain text.
pub fn apply_tls(out: &mut Cluster, tls: &ClientTlsSettings) -> Vec<String> {
    let mutual = match tls.mode {
        Some(ClientTlsMode::Simple) => false,
        Some(ClientTlsMode::Mutual) => true,
        _ => return Vec::new(),
    };
    let mut credentials = Vec::new();
    let mut common = CommonTlsContext::default();
    let skip_verify = tls.insecure_skip_verify == Some(true);
    // A name with a scheme (`spiffe://…`) is a URI SAN; any other a DNS one.
    let sans: Vec<SubjectAltNameMatcher> = tls
        .subject_alt_names
        .iter()
        .map(|san| SubjectAltNameMatcher {
            san_type: if san.contains("://") {
                subject_alt_name_matcher::SanType::Uri
            } else {
                subject_alt_name_matcher::SanType::Dns
            } as i32,
            r#matcher: Some(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(san.clone())),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    if !tls.credential_name.is_empty() {
        credentials.push(tls.credential_name.clone());
        if mutual {
            common
                .tls_certificate_sds_secret_configs
                .push(sds(naming::credential_secret(&tls.credential_name)));
        }
        if !skip_verify {
            let ca = sds(naming::credential_ca_secret(&tls.credential_name));
            // The names are checked too, as istiod's `ApplyCustomSDSToClientCommonTLSContext` does.
            common.validation_context_type = Some(if sans.is_empty() {
                common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(ca)
            } else {
                common_tls_context::ValidationContextType::CombinedValidationContext(
                    common_tls_context::CombinedCertificateValidationContext {
                        default_validation_context: Some(CertificateValidationContext {
                            match_typed_subject_alt_names: sans,
                            ..Default::default()
                        }),
                        validation_context_sds_secret_config: Some(ca),
                        ..Default::default()
                    },
                )
            });
        }
    } else {
        // Files on the gateway are read through SDS (`file-cert:`/`file-root:`), so a missing file fails that
        // secret, and the clusters using it, rather than the whole cluster update.
        if mutual {
            let name = naming::file_cert_secret(&tls.client_certificate, &tls.private_key);
            common
                .tls_certificate_sds_secret_configs
                .push(sds(name.clone()));
            credentials.push(name);
        }
        if !skip_verify {
            // Envoy refuses name checks against its built-in system roots, so those read the system bundle.
            let ca = match tls.ca_certificates.as_str() {
                "" if sans.is_empty() && tls.ca_crl.is_empty() => None,
                "" => Some(SYSTEM_CA_BUNDLE),
                path => Some(path),
            };
            // A revocation list stays a file of the cluster itself (Istio's SDS names have no place for it).
            let crl = (!tls.ca_crl.is_empty()).then(|| secret::file(&tls.ca_crl));
            common.validation_context_type = Some(match ca {
                None => common_tls_context::ValidationContextType::ValidationContext(
                    CertificateValidationContext {
                        system_root_certs: Some(Default::default()),
                        ..Default::default()
                    },
                ),
                Some(ca) => {
                    let name = naming::file_root_secret(ca);
                    credentials.push(name.clone());
                    common_tls_context::ValidationContextType::CombinedValidationContext(
                        common_tls_context::CombinedCertificateValidationContext {
                            default_validation_context: Some(CertificateValidationContext {
                                match_typed_subject_alt_names: sans,
                                crl,
                                ..Default::default()
                            }),
                            validation_context_sds_secret_config: Some(sds(name)),
                            ..Default::default()
                        },
                    )
                }
            });
        }
    }
    if !tls.presented_credential.is_empty() {
        common
            .tls_certificate_sds_secret_configs
            .push(sds(naming::credential_secret(&tls.presented_credential)));
        credentials.push(tls.presented_credential.clone());
    }
    let context = UpstreamTlsContext {
        common_tls_context: Some(common),
        sni: tls.sni.clone(),
        ..Default::default()
    };
    out.transport_socket = Some(TransportSocket {
        name: TLS_TRANSPORT.into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(context))),
    });
    credentials
}

/// Tells whether an endpoint's labels carry every label of a subset.
pub fn subset_selects(subset: &Subset, labels: &BTreeMap<String, String>) -> bool {
    subset.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_host_beats_wildcard() {
        assert!(host_matches("a.b.c", "a.b.c") > host_matches("*.b.c", "a.b.c"));
        assert!(host_matches("*.c", "a.b.c") < host_matches("*.b.c", "a.b.c"));
        assert_eq!(host_matches("x.b.c", "a.b.c"), None);
    }
}
