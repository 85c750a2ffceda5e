//! RequestAuthentication on gateways (pure): takes the snapshot and a proxy, yields the `envoy.filters.http.jwt_authn`
//! filter that runs before authorization, with Istio's semantics (mirrors `buildJwtFilter` in
//! istio/pilot/pkg/security/authn): one provider per JWT rule of every RequestAuthentication that applies; a request
//! with a token that no provider validates gets 401, a request without a token passes (an AuthorizationPolicy
//! requiring `requestPrincipals` then denies it). The validated payload goes to dynamic metadata under
//! [`PAYLOAD_KEY`], where [`super::authz`] matches request principals and claims.
//!
//! Keys are inline (`jwks`, a single key given to Envoy as a one-key set, see [`admitpilot_model::jwks`]) or fetched by Envoy from `jwksUri` (`remote_jwks`, on the first request that needs them)
//! through the cluster `outbound|<port>||<host>`: a Service or ServiceEntry for that host defines it,
//! otherwise the translator adds a DNS cluster for it ([`JwksUpstream`]), with TLS checked against the system roots
//! for `https`. A rule whose URI names no host is left out (the webhook warns), so its tokens are rejected.

use envoy_types::pb::envoy::config::core::v3::{data_source, http_uri, DataSource, HttpUri};
use envoy_types::pb::envoy::config::route::v3::{route_match, RouteMatch};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    jwt_provider, jwt_requirement, requirement_rule, JwtAuthentication, JwtClaimToHeader,
    JwtHeader, JwtProvider, JwtRequirement, JwtRequirementOrList, RemoteJwks, RequirementRule,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpFilter,
};

use super::envoy::{any, millis, parse_duration};
use super::naming;
use super::types::{target_refs, Proxy};
use admitpilot_model::istio::request_authentication::{JwtRule, RequestAuthentication};
use admitpilot_model::{Kind, Snapshot, Spec};

/// Name of Envoy's JWT authentication filter (also the namespace of the metadata it writes).
pub const JWT_AUTHN: &str = "envoy.filters.http.jwt_authn";
/// The dynamic metadata key the validated payload is written under.
pub const PAYLOAD_KEY: &str = "payload";
/// How long Envoy waits for a JWKS fetch when the rule gives no `timeout` (Istio's default).
const DEFAULT_JWKS_TIMEOUT_MS: u64 = 5_000;

pub use admitpilot_model::istio::request_authentication::{jwks_upstream, JwksUpstream};

/// The cluster Envoy fetches a JWKS through, named as Istio names the service port's cluster.
pub fn jwks_cluster_name(upstream: &JwksUpstream) -> String {
    naming::cluster(upstream.port, "", &upstream.host)
}

/// The JWT filter of one gateway and the servers it fetches keys from.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtAuthn {
    /// The `envoy.filters.http.jwt_authn` filter.
    pub filter: HttpFilter,
    /// The `jwksUri` servers of its providers, sorted, without duplicates.
    pub upstreams: Vec<JwksUpstream>,
}

/// The JWT filter for the RequestAuthentications that apply to `proxy`, or `None` when none gives a rule with
/// keys (inline, or a `jwksUri` naming a host).
pub fn jwt_filter(snapshot: &Snapshot, proxy: &Proxy) -> Option<JwtAuthn> {
    let mesh = snapshot.mesh_settings();
    let root_namespace = mesh.root_namespace();
    let rules: Vec<(&JwtRule, Keys<'_>)> = snapshot
        .of_kind(Kind::RequestAuthentication)
        .filter_map(|object| match &object.spec {
            Spec::RequestAuthentication(ra) => Some((object, ra)),
            _ => None,
        })
        .filter(|(object, ra)| {
            proxy.attaches(
                &object.metadata.namespace,
                ra.selector.as_ref().map(|s| &s.match_labels),
                target_refs(ra.target_ref.as_ref(), &ra.target_refs),
                root_namespace,
            )
        })
        .flat_map(|(_, ra): (_, &RequestAuthentication)| ra.jwt_rules.iter())
        .filter_map(|rule| Some((rule, keys(rule)?)))
        .collect();
    if rules.is_empty() {
        return None;
    }
    let mut filter = JwtAuthentication::default();
    let mut requirements = Vec::new();
    let mut upstreams = Vec::new();
    for (index, (rule, keys)) in rules.into_iter().enumerate() {
        let name = format!("origins-{index}");
        let jwks = match keys {
            Keys::Inline(jwks) => jwt_provider::JwksSourceSpecifier::LocalJwks(DataSource {
                specifier: Some(data_source::Specifier::InlineString(
                    admitpilot_model::jwks::envoy_form(jwks).into_owned(),
                )),
                ..Default::default()
            }),
            Keys::Remote(uri, upstream) => {
                let remote = remote_jwks(uri, &upstream, rule.timeout.as_deref());
                upstreams.push(upstream);
                jwt_provider::JwksSourceSpecifier::RemoteJwks(remote)
            }
        };
        let mut provider = provider(rule);
        provider.jwks_source_specifier = Some(jwks);
        filter.providers.insert(name.clone(), provider);
        requirements.push(JwtRequirement {
            requires_type: Some(jwt_requirement::RequiresType::ProviderName(name)),
        });
    }
    // A token must validate with some provider; no token at all is let through.
    requirements.push(JwtRequirement {
        requires_type: Some(jwt_requirement::RequiresType::AllowMissing(
            Default::default(),
        )),
    });
    filter.rules.push(RequirementRule {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        requirement_type: Some(requirement_rule::RequirementType::Requires(
            JwtRequirement {
                requires_type: Some(jwt_requirement::RequiresType::RequiresAny(
                    JwtRequirementOrList { requirements },
                )),
            },
        )),
    });
    upstreams.sort();
    upstreams.dedup();
    Some(JwtAuthn {
        filter: HttpFilter {
            name: JWT_AUTHN.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(filter))),
            ..Default::default()
        },
        upstreams,
    })
}

/// Where a rule's keys come from.
enum Keys<'r> {
    Inline(&'r str),
    Remote(&'r str, JwksUpstream),
}

/// The keys of a rule: inline `jwks` first, else a `jwksUri` naming a host; `None` when it has neither.
fn keys(rule: &JwtRule) -> Option<Keys<'_>> {
    if let Some(jwks) = rule.jwks.as_deref().filter(|jwks| !jwks.is_empty()) {
        return Some(Keys::Inline(jwks));
    }
    let uri = rule.jwks_uri.as_deref()?;
    Some(Keys::Remote(uri, jwks_upstream(uri)?))
}

/// Fetches the JWKS at `uri` through the upstream's cluster when a request first needs it (requests wait for the
/// fetch; listeners are not held warming by it), keeping it for Envoy's default cache duration.
fn remote_jwks(uri: &str, upstream: &JwksUpstream, timeout: Option<&str>) -> RemoteJwks {
    RemoteJwks {
        http_uri: Some(HttpUri {
            uri: uri.to_string(),
            timeout: Some(
                timeout
                    .and_then(parse_duration)
                    .unwrap_or_else(|| millis(DEFAULT_JWKS_TIMEOUT_MS)),
            ),
            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(jwks_cluster_name(
                upstream,
            ))),
        }),
        ..Default::default()
    }
}

fn provider(rule: &JwtRule) -> JwtProvider {
    JwtProvider {
        issuer: rule.issuer.clone().unwrap_or_default(),
        audiences: rule.audiences.clone(),
        forward: rule.forward_original_token.unwrap_or(false),
        from_headers: rule
            .from_headers
            .iter()
            .map(|h| JwtHeader {
                name: h.name.clone().unwrap_or_default(),
                value_prefix: h.prefix.clone(),
            })
            .collect(),
        from_params: rule.from_params.clone(),
        from_cookies: rule.from_cookies.clone(),
        forward_payload_header: rule.output_payload_to_header.clone().unwrap_or_default(),
        payload_in_metadata: PAYLOAD_KEY.into(),
        claim_to_headers: rule
            .output_claim_to_headers
            .iter()
            .map(|c| JwtClaimToHeader {
                header_name: c.header.clone().unwrap_or_default(),
                claim_name: c.claim.clone().unwrap_or_default(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
