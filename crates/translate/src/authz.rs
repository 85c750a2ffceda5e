//! AuthorizationPolicy on gateways (pure): takes the snapshot and a proxy, yields the `envoy.filters.http.rbac`
//! filters its HTTP connection managers run first and the `envoy.filters.network.rbac` filters its TCP and
//! TLS-passthrough chains run before the TCP proxy, with Istio's semantics: AUDIT, then DENY, then ALLOW filters
//! (mirrors `BuildHTTP` and `BuildTCP` in istio/pilot/pkg/security/authz/builder); an ALLOW policy that matches
//! nothing denies every request not allowed by another; `istio.io/dry-run` policies (the annotation read as Go's
//! `strconv.ParseBool`, as `isDryRun`) become shadow rules (stats only). On TCP, a rule using HTTP-only attributes
//! (hosts, methods, paths, request principals, `request.*` conditions) is dropped from an ALLOW policy and applied
//! without them in a DENY or AUDIT policy, so TCP is never less strict than HTTP (as Istio does, and as the
//! webhook's warning says).
//!
//! Which policies apply: those in the proxy's namespace or the root namespace (the mesh config's `rootNamespace`,
//! [`Snapshot::mesh_settings`]) whose `selector` labels the proxy carries (no selector: every workload of that
//! namespace), and for a Gateway API gateway those whose `targetRefs` name its Gateway ([`Proxy::attaches`]).
//! CUSTOM policies come first, through the extension provider's server ([`super::ext_authz`]); `targetRefs` naming
//! anything but a Gateway API Gateway (a Service, a GatewayClass) is not enforced, the webhook says so (see
//! `admitpilot_validate::enforcement`).
//!
//! One Envoy policy per rule, named `ns[<namespace>]-policy[<name>]-rule[<index>]` as Istio names them; a rule's
//! permissions are its `to` operations (OR of entries, AND of fields, OR of values) and its principals its `from`
//! sources, with each `when` condition added to the side it belongs to (mirrors `model.New` and `generator.go`);
//! each attribute's matcher mirrors the generator Istio uses for it (named on each function below), with the
//! matchers of `pilot/pkg/security/authz/matcher`.

use envoy_types::pb::envoy::config::core::v3::{CidrRange, TypedExtensionConfig};
use envoy_types::pb::envoy::config::listener::v3::{filter, Filter};
use envoy_types::pb::envoy::config::rbac::v3::{
    permission, principal, rbac, MetadataSource, Permission, Policy, Principal, Rbac,
    SourcedMetadata,
};
use envoy_types::pb::envoy::config::route::v3::{header_matcher, HeaderMatcher};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::envoy::extensions::path::r#match::uri_template::v3::UriTemplateMatchConfig;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    list_matcher, metadata_matcher, path_matcher, string_matcher, value_matcher, ListMatcher,
    MetadataMatcher, OrMatcher, PathMatcher, RegexMatcher, StringMatcher, ValueMatcher,
};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::authn::{JWT_AUTHN, PAYLOAD_KEY};
use super::envoy::any;
use super::types::{target_refs, Proxy};
use admitpilot_model::istio::authorization_policy::{
    Action, AuthorizationPolicy, Condition, Operation, Rule, Source,
};
use admitpilot_model::peer_identity::{self, IdentityMatch};
use admitpilot_model::{parse_go_bool, ConfigObject, Kind, Snapshot, Spec};

/// Name of Envoy's HTTP RBAC filter.
pub const HTTP_RBAC: &str = "envoy.filters.http.rbac";
/// Name of Envoy's network RBAC filter.
pub const NETWORK_RBAC: &str = "envoy.filters.network.rbac";
/// Annotation that makes a policy a dry run (shadow rules).
pub const DRY_RUN_ANNOTATION: &str = "istio.io/dry-run";

/// The AuthorizationPolicies that apply to `proxy`, in namespace/name order.
pub fn gateway_policies<'s>(
    snapshot: &'s Snapshot,
    proxy: &Proxy,
) -> Vec<(&'s ConfigObject, &'s AuthorizationPolicy)> {
    let mesh = snapshot.mesh_settings();
    let root_namespace = mesh.root_namespace();
    snapshot
        .of_kind(Kind::AuthorizationPolicy)
        .filter_map(|object| match &object.spec {
            Spec::AuthorizationPolicy(policy) => Some((object.as_ref(), policy)),
            _ => None,
        })
        .filter(|(object, policy)| {
            proxy.attaches(
                &object.metadata.namespace,
                policy.selector.as_ref().map(|s| &s.match_labels),
                target_refs(policy.target_ref.as_ref(), &policy.target_refs),
                root_namespace,
            )
        })
        .collect()
}

/// The RBAC filters of `policies` (AUDIT, then DENY, then ALLOW; one HTTP and one network filter per action some
/// policy has): the HTTP ones for HTTP connection managers, the network ones for TCP and TLS-passthrough chains.
pub fn rbac_filters(
    policies: &[(&ConfigObject, &AuthorizationPolicy)],
) -> (Vec<HttpFilter>, Vec<Filter>) {
    let mut http_filters = Vec::new();
    let mut tcp_filters = Vec::new();
    for (action, envoy_action, stat) in [
        (Action::Audit, rbac::Action::Log, "audit"),
        (Action::Deny, rbac::Action::Deny, "deny"),
        (Action::Allow, rbac::Action::Allow, "allow"),
    ] {
        let of_action: Vec<_> = policies
            .iter()
            .filter(|(_, policy)| policy.action == action)
            .collect();
        if of_action.is_empty() {
            continue;
        }
        let shadow_rules_stat_prefix = format!("istio_dry_run_{stat}_");
        let [http, tcp] = [false, true].map(|tcp| rules(&of_action, action, envoy_action, tcp));
        http_filters.push(HttpFilter {
            name: HTTP_RBAC.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(HttpRbac {
                rules: http.0,
                shadow_rules: http.1,
                shadow_rules_stat_prefix: shadow_rules_stat_prefix.clone(),
                ..Default::default()
            }))),
            ..Default::default()
        });
        tcp_filters.push(Filter {
            name: NETWORK_RBAC.into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(NetworkRbac {
                rules: tcp.0,
                shadow_rules: tcp.1,
                stat_prefix: "tcp.".into(),
                shadow_rules_stat_prefix,
                ..Default::default()
            }))),
        });
    }
    (http_filters, tcp_filters)
}

/// The enforced and the shadow (dry-run) rules of the policies of one action. The enforced rules are absent when
/// every policy is a dry run (an absent `rules` enforces nothing), present and empty when policies apply but no rule
/// does (which, for ALLOW, denies everything); the shadow rules likewise, so a dry-run ALLOW whose rules all drop
/// out on TCP shadow-denies every connection, as enforcing it would. Mirrors the enforce/dry-run split of Istio's
/// `Builder.build`.
fn rules(
    policies: &[&(&ConfigObject, &AuthorizationPolicy)],
    action: Action,
    envoy_action: rbac::Action,
    tcp: bool,
) -> (Option<Rbac>, Option<Rbac>) {
    let mut enforced = Rbac {
        action: envoy_action as i32,
        ..Default::default()
    };
    let mut shadow = enforced.clone();
    let (mut any_enforced, mut any_dry_run) = (false, false);
    for (object, policy) in policies {
        let dry_run = is_dry_run(object);
        any_enforced |= !dry_run;
        any_dry_run |= dry_run;
        let target = if dry_run { &mut shadow } else { &mut enforced };
        for (index, rule) in policy.rules.iter().enumerate() {
            if tcp && action == Action::Allow && has_http_only(rule) {
                continue;
            }
            let name = format!(
                "ns[{}]-policy[{}]-rule[{index}]",
                object.metadata.namespace, object.metadata.name
            );
            target
                .policies
                .insert(name, rule_policy(rule, tcp, &object.metadata.namespace));
        }
    }
    (
        any_enforced.then_some(enforced),
        any_dry_run.then_some(shadow),
    )
}

/// Whether a policy is a dry run: its `istio.io/dry-run` annotation read as Go's `strconv.ParseBool` reads it
/// (mirrors `isDryRun` in istio/pilot/pkg/security/authz/builder): `1`, `t`, `T`, `TRUE`, `true`, `True` are true;
/// anything else, unparsable values included (Istio logs those and enforces the policy), is false.
fn is_dry_run(object: &ConfigObject) -> bool {
    object
        .metadata
        .annotations
        .get(DRY_RUN_ANNOTATION)
        .and_then(|value| parse_go_bool(value))
        .unwrap_or(false)
}

/// Whether a rule uses attributes only HTTP requests have.
fn has_http_only(rule: &Rule) -> bool {
    let operation = rule
        .to
        .iter()
        .flatten()
        .filter_map(|to| to.operation.as_ref())
        .any(|op| {
            [
                &op.hosts,
                &op.not_hosts,
                &op.methods,
                &op.not_methods,
                &op.paths,
                &op.not_paths,
            ]
            .iter()
            .any(|values| !values.is_empty())
        });
    let source = rule
        .from
        .iter()
        .flatten()
        .filter_map(|from| from.source.as_ref())
        .any(|src| !src.request_principals.is_empty() || !src.not_request_principals.is_empty());
    operation || source || rule.when.iter().any(|c| is_http_only(&c.key))
}

fn is_http_only(key: &str) -> bool {
    key.starts_with("request.")
}

/// One rule: its operations and permission-side conditions, its sources and principal-side conditions.
/// On TCP (`tcp`), HTTP-only attributes are left out.
pub(crate) fn rule_policy(rule: &Rule, tcp: bool, namespace: &str) -> Policy {
    let mut permissions = Vec::new();
    if let Some(to) = &rule.to {
        permissions.push(or_permissions(
            to.iter()
                .filter_map(|to| to.operation.as_ref())
                .map(|op| operation(op, tcp)),
        ));
    }
    let mut principals = Vec::new();
    if let Some(from) = &rule.from {
        principals.push(or_principals(
            from.iter()
                .filter_map(|from| from.source.as_ref())
                .map(|src| source(src, tcp, namespace)),
        ));
    }
    for condition in rule.when.iter().filter(|c| !(tcp && is_http_only(&c.key))) {
        match condition_side(condition, namespace) {
            Side::Permission(p) => permissions.push(p),
            Side::Principal(p) => principals.push(p),
        }
    }
    Policy {
        permissions: vec![and_permissions(permissions)],
        principals: vec![and_principals(principals)],
        ..Default::default()
    }
}

/// One `to` operation: hosts, methods, paths and ports, each an OR of its values, `not*` negated (the order of
/// Istio's `model.New`).
fn operation(op: &Operation, tcp: bool) -> Permission {
    let mut all = Vec::new();
    let mut field = |values: &[String], negated: &[String], each: &dyn Fn(&str) -> Permission| {
        if !values.is_empty() {
            all.push(or_permissions(values.iter().map(|v| each(v))));
        }
        if !negated.is_empty() {
            all.push(not_permission(or_permissions(
                negated.iter().map(|v| each(v)),
            )));
        }
    };
    if !tcp {
        field(&op.hosts, &op.not_hosts, &host_permission);
        field(&op.methods, &op.not_methods, &|m| {
            permission(permission::Rule::Header(header_matcher(":method", m)))
        });
        field(&op.paths, &op.not_paths, &path_permission);
    }
    field(&op.ports, &op.not_ports, &port_permission);
    and_permissions(all)
}

/// One `from` source, its fields in the order of Istio's `model.New`; `namespace` is the policy's (a service
/// account without one is in it).
fn source(src: &Source, tcp: bool, namespace: &str) -> Principal {
    let mut all = Vec::new();
    let mut field = |values: &[String], negated: &[String], each: &dyn Fn(&str) -> Principal| {
        if !values.is_empty() {
            all.push(or_principals(values.iter().map(|v| each(v))));
        }
        if !negated.is_empty() {
            all.push(not_principal(or_principals(
                negated.iter().map(|v| each(v)),
            )));
        }
    };
    field(&src.principals, &src.not_principals, &|v| {
        identity(peer_identity::principal(v))
    });
    field(&src.service_accounts, &src.not_service_accounts, &|sa| {
        identity(peer_identity::service_account(namespace, sa))
    });
    field(&src.trust_domains, &src.not_trust_domains, &|v| {
        identity(peer_identity::trust_domain(v))
    });
    field(&src.namespaces, &src.not_namespaces, &|v| {
        identity(peer_identity::namespace(v))
    });
    field(&src.remote_ip_blocks, &src.not_remote_ip_blocks, &|ip| {
        principal(principal::Identifier::RemoteIp(cidr(ip)))
    });
    field(&src.ip_blocks, &src.not_ip_blocks, &|ip| {
        principal(principal::Identifier::DirectRemoteIp(cidr(ip)))
    });
    if !tcp {
        // Request principals match as a list (`extendedPrincipal`): the OR of the values, negated whole.
        if !src.request_principals.is_empty() {
            all.push(request_principals(&src.request_principals));
        }
        if !src.not_request_principals.is_empty() {
            all.push(not_principal(request_principals(
                &src.not_request_principals,
            )));
        }
    }
    and_principals(all)
}

enum Side {
    Permission(Permission),
    Principal(Principal),
}

/// A `when` condition: `values` ORed, `notValues` negated (mirrors the attribute generators of `generator.go`,
/// keyed as `model.New` keys them). `namespace` is the policy's.
fn condition_side(c: &Condition, namespace: &str) -> Side {
    let key = c.key.as_str();
    if let Some(filter) = key.strip_prefix(ENVOY_FILTER_ATTRIBUTE) {
        // Matched as a list of values (`envoyFilterGenerator.extendedPermission`).
        let mut all = Vec::new();
        if !c.values.is_empty() {
            all.push(envoy_filter_metadata(filter, &c.values));
        }
        if !c.not_values.is_empty() {
            all.push(not_permission(envoy_filter_metadata(filter, &c.not_values)));
        }
        return Side::Permission(and_permissions(all));
    }
    let is_permission = matches!(
        key,
        "destination.ip" | "destination.port" | "connection.sni"
    );
    if is_permission {
        let each = |v: &str| match key {
            "destination.ip" => permission(permission::Rule::DestinationIp(cidr(v))),
            "destination.port" => port_permission(v),
            _ => permission(permission::Rule::RequestedServerName(wildcard(v))),
        };
        let mut all = Vec::new();
        if !c.values.is_empty() {
            all.push(or_permissions(c.values.iter().map(|v| each(v))));
        }
        if !c.not_values.is_empty() {
            all.push(not_permission(or_permissions(
                c.not_values.iter().map(|v| each(v)),
            )));
        }
        return Side::Permission(and_permissions(all));
    }
    if key == "request.auth.principal" {
        let mut all = Vec::new();
        if !c.values.is_empty() {
            all.push(request_principals(&c.values));
        }
        if !c.not_values.is_empty() {
            all.push(not_principal(request_principals(&c.not_values)));
        }
        return Side::Principal(and_principals(all));
    }
    let each = |v: &str| -> Principal {
        if let Some(name) = key
            .strip_prefix("request.headers[")
            .and_then(|rest| rest.strip_suffix(']'))
        {
            return principal(principal::Identifier::Header(header_matcher(name, v)));
        }
        match key {
            "source.ip" => principal(principal::Identifier::DirectRemoteIp(cidr(v))),
            "remote.ip" => principal(principal::Identifier::RemoteIp(cidr(v))),
            "source.namespace" => identity(peer_identity::namespace(v)),
            "source.serviceAccount" => identity(peer_identity::service_account(namespace, v)),
            "source.trustDomain" => identity(peer_identity::trust_domain(v)),
            "source.principal" => identity(peer_identity::principal(v)),
            "request.auth.audiences" => claim(&["aud"], v),
            "request.auth.presenter" => claim(&["azp"], v),
            // request.auth.claims[a][b]…: a (nested) claim of the validated token.
            _ => {
                let path: Vec<&str> = key
                    .strip_prefix("request.auth.claims[")
                    .and_then(|rest| rest.strip_suffix(']'))
                    .map(|inner| inner.split("][").collect())
                    .unwrap_or_default();
                claim(&path, v)
            }
        }
    };
    let mut all = Vec::new();
    if !c.values.is_empty() {
        all.push(or_principals(c.values.iter().map(|v| each(v))));
    }
    if !c.not_values.is_empty() {
        all.push(not_principal(or_principals(
            c.not_values.iter().map(|v| each(v)),
        )));
    }
    Side::Principal(and_principals(all))
}

/// Prefix of the `when` keys that read the dynamic metadata another filter set.
const ENVOY_FILTER_ATTRIBUTE: &str = "experimental.";

/// `experimental.envoy.filters.<filter>[<key>]`: the dynamic metadata `key` of the filter `envoy.filters.<filter>`
/// is one of `values`; a value written `[v]` matches a list holding `v`. Mirrors
/// `envoyFilterGenerator.extendedPermission` (the key is split at its first `[`). A key without `[` matches
/// nothing (Istio: an invalid key; validation refuses it).
fn envoy_filter_metadata(filter: &str, values: &[String]) -> Permission {
    let Some((filter, key)) = filter.trim_end_matches(']').split_once('[') else {
        return not_permission(permission(permission::Rule::Any(true)));
    };
    let matchers: Vec<ValueMatcher> = values
        .iter()
        .map(|value| {
            let string = |v: &str| ValueMatcher {
                match_pattern: Some(value_matcher::MatchPattern::StringMatch(wildcard(v))),
            };
            match value
                .strip_prefix('[')
                .and_then(|rest| rest.strip_suffix(']'))
            {
                Some(element) => ValueMatcher {
                    match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(
                        ListMatcher {
                            match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(
                                string(element),
                            ))),
                        },
                    ))),
                },
                None => string(value),
            }
        })
        .collect();
    permission(permission::Rule::SourcedMetadata(dynamic(
        MetadataMatcher {
            filter: filter.to_string(),
            path: vec![key_segment(key)],
            value: Some(or_values(matchers)),
            ..Default::default()
        },
    )))
}

/// One value matcher stands for itself; more are ORed (Istio's `matcher.OrMatcher`).
fn or_values(mut matchers: Vec<ValueMatcher>) -> ValueMatcher {
    if matchers.len() == 1 {
        return matchers.remove(0);
    }
    ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
            value_matchers: matchers,
        })),
    }
}

fn key_segment(key: &str) -> metadata_matcher::PathSegment {
    metadata_matcher::PathSegment {
        segment: Some(metadata_matcher::path_segment::Segment::Key(key.into())),
    }
}

/// A `hosts` value against `:authority`, case-insensitive: `*` is presence, `*x` a suffix, `x*` a prefix, anything
/// else the whole authority (a `Host` carrying a port matches only a value naming that port). Mirrors
/// `hostGenerator` and `matcher.HostMatcher`.
fn host_permission(host: &str) -> Permission {
    let mut matcher = header_matcher(":authority", host);
    if let Some(header_matcher::HeaderMatchSpecifier::StringMatch(string)) =
        &mut matcher.header_match_specifier
    {
        string.ignore_case = true;
    }
    permission(permission::Rule::Header(matcher))
}

/// A header (`:method`, `request.headers[…]`) against a value: `*` is presence, `*x` a suffix, `x*` a prefix,
/// anything else exact. Mirrors `matcher.HeaderMatcher`.
fn header_matcher(name: &str, value: &str) -> HeaderMatcher {
    let specifier = if value == "*" {
        header_matcher::HeaderMatchSpecifier::PresentMatch(true)
    } else {
        header_matcher::HeaderMatchSpecifier::StringMatch(wildcard(value))
    };
    HeaderMatcher {
        name: name.into(),
        header_match_specifier: Some(specifier),
        ..Default::default()
    }
}

/// The port the connection arrived on (Envoy's `destination_port`, the local port). That is the port Envoy
/// listens on: admitpilot's gateway listeners listen on the Gateway server's port number (`0.0.0.0_<number>`),
/// so `ports` and `destination.port` name it; Istio's gateways listen on the gateway Service's `targetPort`, which
/// equals the server port when the Service maps the port to itself.
fn port_permission(port: &str) -> Permission {
    // Validation admits only decimal ports; anything else matches nothing rather than everything.
    match port.parse::<u32>() {
        Ok(port) => permission(permission::Rule::DestinationPort(port)),
        Err(_) => not_permission(permission(permission::Rule::Any(true))),
    }
}

/// Istio's one-segment path template.
const MATCH_ONE_TEMPLATE: &str = "{*}";
/// Istio's rest-of-the-path template.
const MATCH_ANY_TEMPLATE: &str = "{**}";

/// A path: one holding Istio's `{*}` or `{**}` becomes Envoy's URI template (`*`, `**`), anything else the
/// exact, prefix (`x*`), suffix (`*x`) or presence (`*`) match of the path without its query. Mirrors
/// `pathGenerator`, `matcher.PathTemplateMatcher` and `matcher.PathMatcher`.
fn path_permission(path: &str) -> Permission {
    if path.contains(MATCH_ONE_TEMPLATE) || path.contains(MATCH_ANY_TEMPLATE) {
        let config = UriTemplateMatchConfig {
            path_template: envoy_path_template(path),
        };
        return permission(permission::Rule::UriTemplate(TypedExtensionConfig {
            name: "uri-template".into(),
            typed_config: Some(any(config)),
        }));
    }
    permission(permission::Rule::UrlPath(PathMatcher {
        rule: Some(path_matcher::Rule::Path(wildcard(path))),
    }))
}

/// Istio's path template in Envoy's URI template syntax: `{**}` becomes `**` and `{*}` becomes `*`, left to
/// right, everything else as written (Istio's `sanitizePathTemplate`).
fn envoy_path_template(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(MATCH_ONE_TEMPLATE) {
            out.push('*');
            rest = after;
        } else if let Some(after) = rest.strip_prefix(MATCH_ANY_TEMPLATE) {
            out.push_str("**");
            rest = after;
        } else {
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
        }
    }
    out
}

/// A peer identity from mTLS, matched as Istio's generator matches the value (see [`peer_identity`]). Gateways
/// that do not ask for client certificates never have one.
fn identity(matched: IdentityMatch) -> Principal {
    authenticated(match matched {
        IdentityMatch::Regex(re) => regex(&re),
        IdentityMatch::Prefix(prefix) => matcher(string_matcher::MatchPattern::Prefix(prefix)),
        IdentityMatch::Exact(value) => exact(&value),
    })
}

/// JWT principals (`<iss>/<sub>`), any of `values`. Each is split at its last `/` (an issuer may be a URL) and
/// matched as issuer AND subject of the validated token: `*` any token; `*x/y` an issuer ending in `x` (any for
/// `*`) and subject `y`; `*x` without `/` any issuer and a subject ending in `x`; `x/y*` issuer `x` and a subject
/// starting with `y` (any for `*`); `x*` without `/` an issuer starting with `x` and any subject; anything else
/// issuer and subject exactly (no `/`: the whole value is the issuer, the subject empty). Mirrors
/// `requestPrincipalGenerator.extendedPrincipal`.
fn request_principals(values: &[String]) -> Principal {
    let any = || regex(".+");
    let prefix = |p: &str| matcher(string_matcher::MatchPattern::Prefix(p.into()));
    let suffix = |s: &str| matcher(string_matcher::MatchPattern::Suffix(s.into()));
    or_principals(values.iter().map(|value| {
        let split = value.rsplit_once('/');
        let (iss, sub) = split.unwrap_or((value.as_str(), ""));
        let (match_iss, match_sub) = if value == "*" {
            (any(), any())
        } else if let Some(without_star) = value.strip_prefix('*') {
            match split {
                Some(_) if iss == "*" => (any(), exact(sub)),
                Some(_) => (suffix(iss.strip_prefix('*').unwrap_or(iss)), exact(sub)),
                None => (any(), suffix(without_star)),
            }
        } else if let Some(without_star) = value.strip_suffix('*') {
            match split {
                Some(_) if sub == "*" => (exact(iss), any()),
                Some(_) => (exact(iss), prefix(sub.strip_suffix('*').unwrap_or(sub))),
                None => (prefix(without_star), any()),
            }
        } else {
            (exact(iss), exact(sub))
        };
        principal(principal::Identifier::AndIds(principal::Set {
            ids: vec![jwt_claim("iss", match_iss), jwt_claim("sub", match_sub)],
        }))
    }))
}

/// A string claim of the validated token (`MetadataStringMatcherForJWTClaim`).
fn jwt_claim(claim: &str, value: StringMatcher) -> Principal {
    principal(principal::Identifier::SourcedMetadata(dynamic(
        MetadataMatcher {
            filter: JWT_AUTHN.into(),
            path: vec![key_segment(PAYLOAD_KEY), key_segment(claim)],
            value: Some(ValueMatcher {
                match_pattern: Some(value_matcher::MatchPattern::StringMatch(value)),
            }),
            ..Default::default()
        },
    )))
}

/// A claim (by its path in the payload) of the validated token: a string claim matching `value`, or a list claim
/// with an element matching it. Without a validated token there is no payload, and nothing matches.
fn claim(path: &[&str], value: &str) -> Principal {
    if path.is_empty() {
        return not_principal(principal(principal::Identifier::Any(true)));
    }
    let string = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::StringMatch(wildcard(value))),
    };
    let element = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(
            ListMatcher {
                match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(string.clone()))),
            },
        ))),
    };
    let matcher = MetadataMatcher {
        filter: JWT_AUTHN.into(),
        path: std::iter::once(PAYLOAD_KEY)
            .chain(path.iter().copied())
            .map(key_segment)
            .collect(),
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
                value_matchers: vec![string, element],
            })),
        }),
        ..Default::default()
    };
    principal(principal::Identifier::SourcedMetadata(dynamic(matcher)))
}

/// A match on the request's dynamic metadata (what earlier filters set), as Istio's deprecated `metadata` field
/// reads it.
fn dynamic(matcher: MetadataMatcher) -> SourcedMetadata {
    SourcedMetadata {
        metadata_matcher: Some(matcher),
        metadata_source: MetadataSource::Dynamic as i32,
    }
}

fn authenticated(name: StringMatcher) -> Principal {
    principal(principal::Identifier::Authenticated(
        principal::Authenticated {
            principal_name: Some(name),
        },
    ))
}

/// `*` at the start or the end of `value` as Istio reads it (`matcher.StringMatcher`): `*` alone is any non-empty
/// value, `*x` a suffix, `x*` a prefix, anything else exact.
fn wildcard(value: &str) -> StringMatcher {
    if value == "*" {
        regex(".+")
    } else if let Some(suffix) = value.strip_prefix('*') {
        matcher(string_matcher::MatchPattern::Suffix(suffix.into()))
    } else if let Some(prefix) = value.strip_suffix('*') {
        matcher(string_matcher::MatchPattern::Prefix(prefix.into()))
    } else {
        exact(value)
    }
}

fn exact(value: &str) -> StringMatcher {
    matcher(string_matcher::MatchPattern::Exact(value.into()))
}

fn regex(pattern: &str) -> StringMatcher {
    matcher(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
        regex: pattern.into(),
        ..Default::default()
    }))
}

fn matcher(pattern: string_matcher::MatchPattern) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(pattern),
        ignore_case: false,
    }
}

/// An IP or CIDR as Envoy's range (a bare address is a /32 or /128).
fn cidr(value: &str) -> CidrRange {
    let (address, length) = match value.split_once('/') {
        Some((address, length)) => (address, length.parse().ok()),
        None => (value, None),
    };
    let full = if address.contains(':') { 128 } else { 32 };
    CidrRange {
        address_prefix: address.into(),
        prefix_len: Some(UInt32Value {
            value: length.unwrap_or(full),
        }),
    }
}

fn permission(rule: permission::Rule) -> Permission {
    Permission { rule: Some(rule) }
}

fn principal(identifier: principal::Identifier) -> Principal {
    Principal {
        identifier: Some(identifier),
    }
}

fn not_permission(p: Permission) -> Permission {
    permission(permission::Rule::NotRule(Box::new(p)))
}

fn not_principal(p: Principal) -> Principal {
    principal(principal::Identifier::NotId(Box::new(p)))
}

/// All of `rules` (any request when empty); one rule stands for itself.
fn and_permissions(mut rules: Vec<Permission>) -> Permission {
    match rules.len() {
        0 => permission(permission::Rule::Any(true)),
        1 => rules.remove(0),
        _ => permission(permission::Rule::AndRules(permission::Set { rules })),
    }
}

/// Any of `rules` (no request when empty); one rule stands for itself.
fn or_permissions(rules: impl Iterator<Item = Permission>) -> Permission {
    let mut rules: Vec<Permission> = rules.collect();
    match rules.len() {
        0 => not_permission(permission(permission::Rule::Any(true))),
        1 => rules.remove(0),
        _ => permission(permission::Rule::OrRules(permission::Set { rules })),
    }
}

/// All of `ids` (anybody when empty); one stands for itself.
fn and_principals(mut ids: Vec<Principal>) -> Principal {
    match ids.len() {
        0 => principal(principal::Identifier::Any(true)),
        1 => ids.remove(0),
        _ => principal(principal::Identifier::AndIds(principal::Set { ids })),
    }
}

/// Any of `ids` (nobody when empty); one stands for itself.
fn or_principals(ids: impl Iterator<Item = Principal>) -> Principal {
    let mut ids: Vec<Principal> = ids.collect();
    match ids.len() {
        0 => not_principal(principal(principal::Identifier::Any(true))),
        1 => ids.remove(0),
        _ => principal(principal::Identifier::OrIds(principal::Set { ids })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(m: &StringMatcher) -> (&'static str, String) {
        match m.match_pattern.as_ref().unwrap() {
            string_matcher::MatchPattern::Exact(v) => ("exact", v.clone()),
            string_matcher::MatchPattern::Prefix(v) => ("prefix", v.clone()),
            string_matcher::MatchPattern::Suffix(v) => ("suffix", v.clone()),
            string_matcher::MatchPattern::SafeRegex(r) => ("regex", r.regex.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn path_templates_become_envoy_globs() {
        assert_eq!(envoy_path_template("/a/{*}/b/{**}"), "/a/*/b/**");
        assert_eq!(envoy_path_template("/{**}"), "/**");
        assert_eq!(envoy_path_template("/é/{*}"), "/é/*");
        let Some(permission::Rule::UriTemplate(config)) = path_permission("/x/{**}").rule else {
            panic!("a template is a URI template match");
        };
        assert_eq!(config.name, "uri-template");
        assert!(matches!(
            path_permission("/x/*").rule,
            Some(permission::Rule::UrlPath(_))
        ));
    }

    #[test]
    fn headers_match_like_istio_header_matcher() {
        let spec = |v: &str| header_matcher(":method", v).header_match_specifier.unwrap();
        assert_eq!(
            spec("*"),
            header_matcher::HeaderMatchSpecifier::PresentMatch(true)
        );
        for (value, expected) in [
            ("P*", ("prefix", "P")),
            ("*T", ("suffix", "T")),
            ("GET", ("exact", "GET")),
        ] {
            let header_matcher::HeaderMatchSpecifier::StringMatch(m) = spec(value) else {
                panic!("{value}");
            };
            assert_eq!(pattern(&m), (expected.0, expected.1.to_string()));
            assert!(!m.ignore_case);
        }
        let Some(permission::Rule::Header(host)) = host_permission("Example.com").rule else {
            panic!("a host is a header match");
        };
        let Some(header_matcher::HeaderMatchSpecifier::StringMatch(m)) =
            host.header_match_specifier
        else {
            panic!("{host:?}");
        };
        assert_eq!(
            (pattern(&m), m.ignore_case),
            (("exact", "Example.com".to_string()), true)
        );
    }

    /// The (issuer, subject) matchers of one request principal value.
    fn principal_parts(value: &str) -> [(&'static str, String); 2] {
        let Some(principal::Identifier::AndIds(set)) =
            request_principals(&[value.to_string()]).identifier
        else {
            panic!("{value}");
        };
        set.ids
            .iter()
            .map(|id| {
                let Some(principal::Identifier::SourcedMetadata(sourced)) = &id.identifier else {
                    panic!("{id:?}");
                };
                let m = sourced.metadata_matcher.as_ref().unwrap();
                let Some(value_matcher::MatchPattern::StringMatch(s)) =
                    m.value.as_ref().unwrap().match_pattern.as_ref()
                else {
                    panic!("{m:?}");
                };
                pattern(s)
            })
            .collect::<Vec<_>>()
            .try_into()
            .unwrap()
    }

    #[test]
    fn request_principals_split_at_the_last_slash() {
        let any = ("regex", ".+".to_string());
        let p = |kind: &'static str, v: &str| (kind, v.to_string());
        assert_eq!(principal_parts("*"), [any.clone(), any.clone()]);
        assert_eq!(
            principal_parts("https://idp.test/*"),
            [p("exact", "https://idp.test"), any.clone()]
        );
        assert_eq!(
            principal_parts("https://idp.test/b*"),
            [p("exact", "https://idp.test"), p("prefix", "b")]
        );
        assert_eq!(
            principal_parts("*/alice"),
            [any.clone(), p("exact", "alice")]
        );
        assert_eq!(
            principal_parts("*.test/alice"),
            [p("suffix", ".test"), p("exact", "alice")]
        );
        assert_eq!(principal_parts("*ice"), [any.clone(), p("suffix", "ice")]);
        assert_eq!(principal_parts("issuer*"), [p("prefix", "issuer"), any]);
        assert_eq!(
            principal_parts("https://idp.test/alice"),
            [p("exact", "https://idp.test"), p("exact", "alice")]
        );
        assert_eq!(
            principal_parts("issuer"),
            [p("exact", "issuer"), p("exact", "")]
        );
    }

    #[test]
    fn envoy_filter_conditions_read_dynamic_metadata() {
        let Some(permission::Rule::SourcedMetadata(sourced)) = envoy_filter_metadata(
            "envoy.filters.http.a[k]",
            &["v".to_string(), "[w]".to_string()],
        )
        .rule
        else {
            panic!("a metadata match");
        };
        let m = sourced.metadata_matcher.unwrap();
        assert_eq!(m.filter, "envoy.filters.http.a");
        assert_eq!(m.path, vec![key_segment("k")]);
        let Some(value_matcher::MatchPattern::OrMatch(or)) = m.value.unwrap().match_pattern else {
            panic!("two values are ORed");
        };
        assert!(matches!(
            or.value_matchers[1].match_pattern,
            Some(value_matcher::MatchPattern::ListMatch(_))
        ));
    }

    #[test]
    fn dry_run_reads_go_booleans() {
        let object = |value: &str| {
            let mut object = ConfigObject {
                api_version: "security.istio.io/v1".into(),
                metadata: Default::default(),
                spec: Spec::AuthorizationPolicy(Default::default()),
            };
            object
                .metadata
                .annotations
                .insert(DRY_RUN_ANNOTATION.into(), value.into());
            object
        };
        for (value, dry) in [
            ("1", true),
            ("t", true),
            ("T", true),
            ("TRUE", true),
            ("True", true),
            ("true", true),
            ("0", false),
            ("F", false),
            ("false", false),
            ("tRuE", false),
            ("yes", false),
        ] {
            assert_eq!(is_dry_run(&object(value)), dry, "{value}");
        }
    }

    #[test]
    fn a_dry_run_allow_of_http_rules_shadow_denies_tcp() {
        let policy: AuthorizationPolicy = serde_json::from_value(serde_json::json!(
            {"action": "ALLOW", "rules": [{"to": [{"operation": {"paths": ["/a"]}}]}]}
        ))
        .unwrap();
        let mut object = ConfigObject {
            api_version: "security.istio.io/v1".into(),
            metadata: Default::default(),
            spec: Spec::AuthorizationPolicy(policy.clone()),
        };
        object
            .metadata
            .annotations
            .insert(DRY_RUN_ANNOTATION.into(), "true".into());
        let pair = (&object, &policy);
        let (enforced, shadow) = rules(&[&pair], Action::Allow, rbac::Action::Allow, true);
        assert!(enforced.is_none());
        // Istio's TCP filter keeps an empty shadow ALLOW engine: the dry run predicts every connection denied.
        assert_eq!(shadow.map(|s| s.policies.len()), Some(0));
    }
}
