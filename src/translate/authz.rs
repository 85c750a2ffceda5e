//! AuthorizationPolicy on gateways (pure): takes the snapshot and a proxy, yields the `envoy.filters.http.rbac`
//! filters its HTTP connection managers run first and the `envoy.filters.network.rbac` filters its TCP and
//! TLS-passthrough chains run before the TCP proxy, with Istio's semantics: AUDIT, then DENY, then ALLOW filters
//! (mirrors `BuildHTTP` and `BuildTCP` in istio/pilot/pkg/security/authz/builder); an ALLOW policy that matches
//! nothing denies every request not allowed by another; `istio.io/dry-run` policies become shadow rules (stats
//! only). On TCP, a rule using HTTP-only attributes (hosts, methods, paths, request principals, `request.*`
//! conditions) is dropped from an ALLOW policy and applied without them in a DENY or AUDIT policy, so TCP is
//! never less strict than HTTP (as Istio does, and as the webhook's warning says).
//!
//! Which policies apply: those in the proxy's namespace or a root namespace whose `selector` labels the proxy carries
//! (no selector: every workload of that namespace), and for a Gateway API gateway those whose `targetRefs` name
//! its Gateway ([`Proxy::attaches`]).
//! CUSTOM policies come first, through the extension provider's server ([`super::ext_authz`]); `targetRefs` naming
//! anything but a Gateway API Gateway (a Service, a GatewayClass) is not enforced, the webhook says so (see
//! [`crate::validate::enforcement`]).
//!
//! One Envoy policy per rule, named `ns[<namespace>]-policy[<name>]-rule[<index>]` as Istio names them; a rule's
//! permissions are its `to` operations (OR of entries, AND of fields, OR of values) and its principals its `from`
//! sources, with each `when` condition added to the side it belongs to (mirrors `model.New` and `generator.go`).

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
use crate::model::istio::authorization_policy::{
    Action, AuthorizationPolicy, Condition, Operation, Rule, Source,
};
use crate::model::{ConfigObject, Kind, Snapshot, Spec};

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
    root_namespaces: &[String],
) -> Vec<(&'s ConfigObject, &'s AuthorizationPolicy)> {
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
                root_namespaces,
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
/// does (which, for ALLOW, denies everything).
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
    let mut any_enforced = false;
    for (object, policy) in policies {
        let dry_run = object
            .metadata
            .annotations
            .get(DRY_RUN_ANNOTATION)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        any_enforced |= !dry_run;
        let target = if dry_run { &mut shadow } else { &mut enforced };
        for (index, rule) in policy.rules.iter().enumerate() {
            if tcp && action == Action::Allow && has_http_only(rule) {
                continue;
            }
            let name = format!(
                "ns[{}]-policy[{}]-rule[{index}]",
                object.metadata.namespace, object.metadata.name
            );
            target.policies.insert(name, rule_policy(rule, tcp));
        }
    }
    (
        any_enforced.then_some(enforced),
        (!shadow.policies.is_empty()).then_some(shadow),
    )
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
pub(crate) fn rule_policy(rule: &Rule, tcp: bool) -> Policy {
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
                .map(|src| source(src, tcp)),
        ));
    }
    for condition in rule.when.iter().filter(|c| !(tcp && is_http_only(&c.key))) {
        match condition_side(condition) {
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
    field(&op.ports, &op.not_ports, &port_permission);
    if !tcp {
        field(&op.hosts, &op.not_hosts, &host_permission);
        field(&op.methods, &op.not_methods, &|m| {
            permission(permission::Rule::Header(header(":method", exact(m))))
        });
        field(&op.paths, &op.not_paths, &path_permission);
    }
    and_permissions(all)
}

fn source(src: &Source, tcp: bool) -> Principal {
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
    field(&src.principals, &src.not_principals, &peer_principal);
    if !tcp {
        field(
            &src.request_principals,
            &src.not_request_principals,
            &request_principal,
        );
    }
    field(&src.namespaces, &src.not_namespaces, &|ns| {
        authenticated(regex(&format!(".*/ns/{}/.*", regex::escape(ns))))
    });
    field(&src.service_accounts, &src.not_service_accounts, &|sa| {
        let (ns, name) = sa.split_once('/').unwrap_or(("", sa));
        let ns = if ns.is_empty() {
            "[^/]+".to_string()
        } else {
            regex::escape(ns)
        };
        authenticated(regex(&format!(".*/ns/{ns}/sa/{}", regex::escape(name))))
    });
    field(&src.trust_domains, &src.not_trust_domains, &|td| {
        authenticated(wildcard(&format!("spiffe://{td}/*")))
    });
    field(&src.ip_blocks, &src.not_ip_blocks, &|ip| {
        principal(principal::Identifier::DirectRemoteIp(cidr(ip)))
    });
    field(&src.remote_ip_blocks, &src.not_remote_ip_blocks, &|ip| {
        principal(principal::Identifier::RemoteIp(cidr(ip)))
    });
    and_principals(all)
}

enum Side {
    Permission(Permission),
    Principal(Principal),
}

/// A `when` condition: `values` ORed, `notValues` negated (mirrors `generator.go`'s attribute generators).
fn condition_side(c: &Condition) -> Side {
    let key = c.key.as_str();
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
    let each = |v: &str| -> Principal {
        if let Some(name) = key
            .strip_prefix("request.headers[")
            .and_then(|rest| rest.strip_suffix(']'))
        {
            return principal(principal::Identifier::Header(header(name, wildcard(v))));
        }
        match key {
            "source.ip" => principal(principal::Identifier::DirectRemoteIp(cidr(v))),
            "remote.ip" => principal(principal::Identifier::RemoteIp(cidr(v))),
            "source.namespace" => authenticated(regex(&format!(".*/ns/{}/.*", regex::escape(v)))),
            "source.principal" => peer_principal(v),
            "request.auth.principal" => request_principal(v),
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

/// Host match, case-insensitive, with or without a port (as Istio matches the `Host` header).
fn host_permission(host: &str) -> Permission {
    if host == "*" {
        return permission(permission::Rule::Any(true));
    }
    let pattern = if let Some(suffix) = host.strip_prefix('*') {
        format!("(?i).*{}(:[0-9]+)?", regex::escape(suffix))
    } else if let Some(prefix) = host.strip_suffix('*') {
        format!("(?i){}.*", regex::escape(prefix))
    } else {
        format!("(?i){}(:[0-9]+)?", regex::escape(host))
    };
    permission(permission::Rule::Header(header(
        ":authority",
        regex(&pattern),
    )))
}

fn port_permission(port: &str) -> Permission {
    // Validation admits only decimal ports; anything else matches nothing rather than everything.
    match port.parse::<u32>() {
        Ok(port) => permission(permission::Rule::DestinationPort(port)),
        Err(_) => not_permission(permission(permission::Rule::Any(true))),
    }
}

/// Path match: exact, `*` prefix or suffix, or an Istio `{*}`/`{**}` template (Envoy's URI template matcher).
fn path_permission(path: &str) -> Permission {
    if path.contains('{') {
        let config = UriTemplateMatchConfig {
            path_template: path.to_string(),
        };
        return permission(permission::Rule::UriTemplate(TypedExtensionConfig {
            name: "envoy.path.match.uri_template.uri_template_matcher".into(),
            typed_config: Some(any(config)),
        }));
    }
    if path == "*" {
        return permission(permission::Rule::Any(true));
    }
    permission(permission::Rule::UrlPath(PathMatcher {
        rule: Some(path_matcher::Rule::Path(wildcard(path))),
    }))
}

/// A peer identity from mTLS (`spiffe://<principal>`); gateways that do not ask for client certificates never
/// have one.
fn peer_principal(value: &str) -> Principal {
    if value == "*" {
        return authenticated(regex(".+"));
    }
    authenticated(wildcard(&format!("spiffe://{value}")))
}

/// A JWT principal, from the payload the JWT filter validated. Istio matches the text `<iss>/<sub>` exactly, by
/// prefix (`X*`) or by suffix (`*X`); the payload holds `iss` and `sub` apart, so the text is split at its last `/`
/// (a subject holds no `/`): a prefix may end inside the issuer or go on into the subject, a suffix that holds a `/`
/// ends the issuer and names the whole subject.
fn request_principal(value: &str) -> Principal {
    let iss = |v: &str| claim(&["iss"], v);
    let sub = |v: &str| claim(&["sub"], v);
    if value == "*" {
        return iss("*");
    }
    if let Some(prefix) = value.strip_suffix('*') {
        let within_issuer = iss(value);
        return match prefix.rsplit_once('/') {
            Some((issuer, subject)) => or_principals(
                [
                    within_issuer,
                    and_principals(vec![iss(issuer), sub(&format!("{subject}*"))]),
                ]
                .into_iter(),
            ),
            None => within_issuer,
        };
    }
    if let Some(suffix) = value.strip_prefix('*') {
        return match suffix.rsplit_once('/') {
            Some((issuer_end, subject)) => {
                and_principals(vec![iss(&format!("*{issuer_end}")), sub(subject)])
            }
            None => sub(value),
        };
    }
    match value.rsplit_once('/') {
        Some((issuer, subject)) => and_principals(vec![iss(issuer), sub(subject)]),
        None => iss(value),
    }
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
            .map(|key| metadata_matcher::PathSegment {
                segment: Some(metadata_matcher::path_segment::Segment::Key(key.into())),
            })
            .collect(),
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
                value_matchers: vec![string, element],
            })),
        }),
        ..Default::default()
    };
    principal(principal::Identifier::SourcedMetadata(SourcedMetadata {
        metadata_matcher: Some(matcher),
        metadata_source: MetadataSource::Dynamic as i32,
    }))
}

fn authenticated(name: StringMatcher) -> Principal {
    principal(principal::Identifier::Authenticated(
        principal::Authenticated {
            principal_name: Some(name),
        },
    ))
}

/// `*` anywhere at the start or the end of `value` as Istio reads it: `*` alone is presence, `*x` a suffix,
/// `x*` a prefix, anything else exact.
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

fn header(name: &str, value: StringMatcher) -> HeaderMatcher {
    HeaderMatcher {
        name: name.into(),
        header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(value)),
        ..Default::default()
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
