//! CUSTOM AuthorizationPolicy on gateways (pure): takes the CUSTOM policies that apply to a proxy, the mesh config's
//! `extensionProviders` and the service registry, yields the filters that ask the external authorization server,
//! as istiod builds them (`pilot/pkg/security/authz/builder/extauthz.go`, Istio 1.30+ naming):
//! - HTTP: an `envoy.filters.http.rbac` filter holding the policies' rules as DENY *shadow* rules (stat prefix
//!   `istio_ext_authz_`), then `envoy.filters.http.ext_authz`, enabled only when that shadow engine matched a policy
//!   of the provider (`istio_ext_authz_shadow_effective_policy_id` starts with `istio-ext-authz-<provider>`): only
//!   requests the rules match are checked. Both come first, before `jwt_authn` and the other RBAC filters.
//! - TCP and TLS-passthrough chains: the same pair as network filters, for gRPC providers only (an HTTP server
//!   cannot check a TCP connection; istiod skips it too).
//! - A provider that is not in the mesh config (which only holds providers that validated), is not an external
//!   authorization server, or names a service or port the gateway does not have, and policies naming more than one provider on one gateway (istiod's default), make the rules of the
//!   policies concerned *deny* what they match (`…-deny-due-to-bad-CUSTOM-action`), as istiod does: a broken
//!   provider never lets matched requests through. (`istio.io/dry-run` is refused on CUSTOM policies, as by Istio.)

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::{
    grpc_service, http_uri, ApiVersion, GrpcService, HeaderValue, HttpUri,
};
use envoy_types::pb::envoy::config::listener::v3::{filter, Filter};
use envoy_types::pb::envoy::config::rbac::v3::{rbac, Policy, Rbac};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    ext_authz, AuthorizationRequest, AuthorizationResponse, BufferSettings, ExtAuthz, HttpService,
};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::ext_authz::v3::ExtAuthz as NetworkExtAuthz;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    metadata_matcher, string_matcher, value_matcher, ListStringMatcher, MetadataMatcher,
    StringMatcher, ValueMatcher,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use envoy_types::pb::google::protobuf::Duration;

use super::authz::{rule_policy, HTTP_RBAC, NETWORK_RBAC};
use super::envoy::{any, parse_duration};
use super::services::Registry;
use admitpilot_model::istio::authorization_policy::{Action, AuthorizationPolicy};
use admitpilot_model::mesh_config::{
    parse_status, BodyInCheck, ExtAuthzGrpc, ExtAuthzHttp, MeshConfig, Provider,
};
use admitpilot_model::ConfigObject;

/// Name of Envoy's HTTP external authorization filter.
pub const HTTP_EXT_AUTHZ: &str = "envoy.filters.http.ext_authz";
/// Name of Envoy's network external authorization filter.
pub const NETWORK_EXT_AUTHZ: &str = "envoy.filters.network.ext_authz";
/// Stat prefix of the shadow rules that select requests for the check (Istio's
/// `RBACExtAuthzShadowRulesStatPrefix`); Envoy writes the matched policy under `<prefix>shadow_effective_policy_id`.
const SHADOW_PREFIX: &str = "istio_ext_authz_";
/// Prefix of the policy names of CUSTOM rules (Istio's `extAuthzMatchPrefix`).
const MATCH_PREFIX: &str = "istio-ext-authz";
/// Suffix of the policy names that deny because the provider cannot be used (Istio's `badCustomActionSuffix`).
const BAD_SUFFIX: &str = "-deny-due-to-bad-CUSTOM-action";
/// How long a check may take when the provider sets no timeout (Istio's `timeoutOrDefault`).
const DEFAULT_TIMEOUT_SECONDS: i64 = 600;

/// The CUSTOM filters of one gateway.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CustomFilters {
    /// For HTTP connection managers, first.
    pub http: Vec<HttpFilter>,
    /// For TCP and TLS-passthrough chains, first.
    pub tcp: Vec<Filter>,
}

/// An external authorization server ready to use: its settings and the cluster and authority to reach it.
struct Resolved<'m> {
    server: Server<'m>,
    cluster: String,
    authority: String,
}

/// The two kinds of external authorization server.
#[derive(Clone, Copy)]
enum Server<'m> {
    Http(&'m ExtAuthzHttp),
    Grpc(&'m ExtAuthzGrpc),
}

/// Builds the CUSTOM filters for `policies` (the AuthorizationPolicies that apply to the gateway, any action).
pub fn custom_filters(
    policies: &[(&ConfigObject, &AuthorizationPolicy)],
    mesh: Option<&MeshConfig>,
    registry: &Registry,
    proxy_namespace: &str,
) -> CustomFilters {
    let mut by_provider: BTreeMap<&str, Vec<(&ConfigObject, &AuthorizationPolicy)>> =
        BTreeMap::new();
    for (object, policy) in policies {
        if policy.action != Action::Custom {
            continue;
        }
        let name = policy.provider.as_ref().map_or("", |p| p.name.as_str());
        by_provider.entry(name).or_default().push((object, policy));
    }
    let mut out = CustomFilters::default();
    let several = by_provider.len() > 1;
    for (name, policies) in &by_provider {
        match resolve(name, mesh, registry, proxy_namespace) {
            Ok(resolved) if !several => add_checked(&mut out, name, policies, &resolved),
            _ => add_denying(&mut out, name, policies),
        }
    }
    out
}

/// The server of provider `name` as a gateway in `proxy_namespace` reaches it, or why it cannot be used.
fn resolve<'m>(
    name: &str,
    mesh: Option<&'m MeshConfig>,
    registry: &Registry,
    proxy_namespace: &str,
) -> Result<Resolved<'m>, String> {
    let Some(mesh) = mesh else {
        return Err(format!(
            "no mesh config defines extension provider {name:?}"
        ));
    };
    let Some(provider) = mesh.provider(name) else {
        let known: Vec<&str> = mesh
            .extension_providers
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        return Err(format!(
            "available providers are {known:?} but found {name:?}"
        ));
    };
    let (server, service, port) = match &provider.provider {
        Provider::EnvoyExtAuthzHttp(http) => (Server::Http(http), &http.service, http.port),
        Provider::EnvoyExtAuthzGrpc(grpc) => (Server::Grpc(grpc), &grpc.service, grpc.port),
        other => {
            return Err(format!(
                "extension provider {name:?} is {}, not an external authorization server",
                other.key()
            ))
        }
    };
    let (cluster, authority) = registry.provider_cluster(service, port, proxy_namespace)?;
    Ok(Resolved {
        server,
        cluster,
        authority,
    })
}

/// Istio's policy name of a CUSTOM rule.
fn policy_name(provider: &str, object: &ConfigObject, index: usize) -> String {
    format!(
        "{MATCH_PREFIX}-{provider}-ns[{}]-policy[{}]-rule[{index}]",
        object.metadata.namespace, object.metadata.name
    )
}

/// The policies' rules, named for `provider` (with `suffix`), as DENY rules.
fn deny_rules(
    provider: &str,
    policies: &[(&ConfigObject, &AuthorizationPolicy)],
    suffix: &str,
    tcp: bool,
) -> Rbac {
    let policies: BTreeMap<String, Policy> = policies
        .iter()
        .flat_map(|(object, policy)| {
            policy.rules.iter().enumerate().map(move |(index, rule)| {
                (
                    format!("{}{suffix}", policy_name(provider, object, index)),
                    rule_policy(rule, tcp, &object.metadata.namespace),
                )
            })
        })
        .collect();
    Rbac {
        action: rbac::Action::Deny as i32,
        policies: policies.into_iter().collect(),
        ..Default::default()
    }
}

/// The shadow engine and the check that runs when it matched.
fn add_checked(
    out: &mut CustomFilters,
    name: &str,
    policies: &[(&ConfigObject, &AuthorizationPolicy)],
    resolved: &Resolved<'_>,
) {
    let enabled = MetadataMatcher {
        filter: HTTP_RBAC.into(),
        path: vec![metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(format!(
                "{SHADOW_PREFIX}shadow_effective_policy_id"
            ))),
        }],
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::StringMatch(prefix(&format!(
                "{MATCH_PREFIX}-{name}"
            )))),
        }),
        invert: false,
    };
    out.http
        .push(http_rbac(None, Some(deny_rules(name, policies, "", false))));
    out.http.push(HttpFilter {
        name: HTTP_EXT_AUTHZ.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(http_ext_authz(
            resolved,
            enabled.clone(),
        )))),
        ..Default::default()
    });
    if let Server::Grpc(grpc) = resolved.server {
        out.tcp.push(network_rbac(
            None,
            Some(deny_rules(name, policies, "", true)),
        ));
        out.tcp.push(Filter {
            name: NETWORK_EXT_AUTHZ.into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(NetworkExtAuthz {
                stat_prefix: "tcp.".into(),
                grpc_service: Some(grpc_service_of(resolved, grpc.timeout.as_deref())),
                failure_mode_allow: grpc.fail_open,
                transport_api_version: ApiVersion::V3 as i32,
                filter_enabled_metadata: Some(MetadataMatcher {
                    filter: NETWORK_RBAC.into(),
                    ..enabled
                }),
                ..Default::default()
            }))),
        });
    }
}

/// Enforcing DENY filters for policies whose provider cannot be used.
fn add_denying(
    out: &mut CustomFilters,
    name: &str,
    policies: &[(&ConfigObject, &AuthorizationPolicy)],
) {
    out.http.push(http_rbac(
        Some(deny_rules(name, policies, BAD_SUFFIX, false)),
        None,
    ));
    out.tcp.push(network_rbac(
        Some(deny_rules(name, policies, BAD_SUFFIX, true)),
        None,
    ));
}

fn http_rbac(rules: Option<Rbac>, shadow_rules: Option<Rbac>) -> HttpFilter {
    let shadow_rules_stat_prefix = if shadow_rules.is_some() {
        SHADOW_PREFIX.into()
    } else {
        String::new()
    };
    HttpFilter {
        name: HTTP_RBAC.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(HttpRbac {
            rules,
            shadow_rules,
            shadow_rules_stat_prefix,
            ..Default::default()
        }))),
        ..Default::default()
    }
}

fn network_rbac(rules: Option<Rbac>, shadow_rules: Option<Rbac>) -> Filter {
    let shadow_rules_stat_prefix = if shadow_rules.is_some() {
        SHADOW_PREFIX.into()
    } else {
        String::new()
    };
    Filter {
        name: NETWORK_RBAC.into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(NetworkRbac {
            rules,
            shadow_rules,
            stat_prefix: "tcp.".into(),
            shadow_rules_stat_prefix,
            ..Default::default()
        }))),
    }
}

/// The HTTP filter's config (Istio's `generateHTTPConfig` / `generateGRPCConfig`).
fn http_ext_authz(resolved: &Resolved<'_>, enabled: MetadataMatcher) -> ExtAuthz {
    let common = ExtAuthz {
        transport_api_version: ApiVersion::V3 as i32,
        filter_enabled_metadata: Some(enabled),
        ..Default::default()
    };
    match resolved.server {
        Server::Http(http) => ExtAuthz {
            services: Some(ext_authz::Services::HttpService(http_service(
                resolved, http,
            ))),
            allowed_headers: header_list(if http.include_request_headers_in_check.is_empty() {
                &http.include_headers_in_check
            } else {
                &http.include_request_headers_in_check
            }),
            failure_mode_allow: http.fail_open,
            status_on_error: status(&http.status_on_error),
            with_request_body: http.include_request_body_in_check.as_ref().map(buffer),
            ..common
        },
        Server::Grpc(grpc) => ExtAuthz {
            services: Some(ext_authz::Services::GrpcService(grpc_service_of(
                resolved,
                grpc.timeout.as_deref(),
            ))),
            failure_mode_allow: grpc.fail_open,
            status_on_error: status(&grpc.status_on_error),
            with_request_body: grpc.include_request_body_in_check.as_ref().map(buffer),
            ..common
        },
    }
}

fn http_service(resolved: &Resolved<'_>, http: &ExtAuthzHttp) -> HttpService {
    let headers_to_add: Vec<HeaderValue> = http
        .include_additional_headers_in_check
        .iter()
        .map(|(key, value)| HeaderValue {
            key: key.clone(),
            value: value.clone(),
            ..Default::default()
        })
        .collect();
    let lists = [
        &http.headers_to_upstream_on_allow,
        &http.headers_to_downstream_on_deny,
        &http.headers_to_downstream_on_allow,
    ];
    HttpService {
        server_uri: Some(HttpUri {
            uri: format!("http://{}", resolved.authority),
            timeout: Some(timeout(http.timeout.as_deref())),
            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(
                resolved.cluster.clone(),
            )),
        }),
        path_prefix: http.path_prefix.clone(),
        authorization_request: (!headers_to_add.is_empty()).then(|| AuthorizationRequest {
            headers_to_add,
            ..Default::default()
        }),
        authorization_response: lists.iter().any(|l| !l.is_empty()).then(|| {
            AuthorizationResponse {
                allowed_upstream_headers: header_list(lists[0]),
                allowed_client_headers: header_list(lists[1]),
                allowed_client_headers_on_success: header_list(lists[2]),
                ..Default::default()
            }
        }),
        ..Default::default()
    }
}

fn grpc_service_of(resolved: &Resolved<'_>, timeout_text: Option<&str>) -> GrpcService {
    GrpcService {
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
            grpc_service::EnvoyGrpc {
                cluster_name: resolved.cluster.clone(),
                authority: resolved.authority.clone(),
                ..Default::default()
            },
        )),
        timeout: Some(timeout(timeout_text)),
        ..Default::default()
    }
}

fn timeout(text: Option<&str>) -> Duration {
    text.and_then(parse_duration).unwrap_or(Duration {
        seconds: DEFAULT_TIMEOUT_SECONDS,
        nanos: 0,
    })
}

fn status(text: &str) -> Option<HttpStatus> {
    parse_status(text).ok().map(|code| HttpStatus { code })
}

fn buffer(body: &BodyInCheck) -> BufferSettings {
    BufferSettings {
        max_request_bytes: body.max_request_bytes,
        allow_partial_message: body.allow_partial_message,
        pack_as_bytes: body.pack_as_bytes,
    }
}

/// Istio's header matchers (`generateHeaders`): `*x` suffix, `x*` prefix, else exact; all ignoring case.
fn header_list(headers: &[String]) -> Option<ListStringMatcher> {
    (!headers.is_empty()).then(|| ListStringMatcher {
        patterns: headers
            .iter()
            .map(|h| {
                let pattern = if let Some(suffix) = h.strip_prefix('*') {
                    string_matcher::MatchPattern::Suffix(suffix.into())
                } else if let Some(prefix) = h.strip_suffix('*') {
                    string_matcher::MatchPattern::Prefix(prefix.into())
                } else {
                    string_matcher::MatchPattern::Exact(h.clone())
                };
                StringMatcher {
                    match_pattern: Some(pattern),
                    ignore_case: true,
                }
            })
            .collect(),
    })
}

fn prefix(value: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::Prefix(value.into())),
        ignore_case: false,
    }
}
