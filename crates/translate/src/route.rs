//! Routes (pure): takes one VirtualService as bound to one gateway port and yields the Envoy routes of its
//! HTTP rules (matches, forwarding, redirects, direct responses, rewrites, retries, faults, mirrors, CORS,
//! header operations, delegation) plus the TCP/TLS destinations of its L4 rules, with every cluster they name.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use base64::Engine;
use envoy_types::pb::envoy::config::core::v3::{
    data_source, header_value_option, DataSource, HeaderValue, HeaderValueOption,
    RuntimeFractionalPercent,
};
use envoy_types::pb::envoy::config::route::v3::{
    header_matcher, query_parameter_matcher, redirect_action, retry_policy, route, route_action,
    route_match, virtual_host, weighted_cluster, DirectResponseAction, HeaderMatcher,
    QueryParameterMatcher, RedirectAction, RetryPolicy, Route, RouteAction, RouteConfiguration,
    RouteMatch, VirtualHost, WeightedCluster,
};
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{fault_delay, FaultDelay};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{
    fault_abort, FaultAbort, HttpFault,
};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    regex_matcher, string_matcher, RegexMatchAndSubstitute, RegexMatcher, StringMatcher,
};
use envoy_types::pb::envoy::r#type::v3::{fractional_percent, FractionalPercent};
use envoy_types::pb::google::protobuf::{Any, BoolValue, UInt32Value};

use super::envoy::{any, millis, parse_duration};
use super::naming;
use super::policy::Policies;
use super::services::Registry;
use super::types::ClusterRef;
use admitpilot_model::istio::virtual_service::{
    Destination, FaultAbort as IstioAbort, FaultDelay as IstioDelay, HeaderOperations, Headers,
    HttpMatchRequest, HttpRoute, Percent, RedirectPortSelection, StringMatch, GRPC_STATUS_NAMES,
};
use admitpilot_model::istio::VirtualService;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

/// Istio's default retry conditions.
const DEFAULT_RETRY_ON: &str =
    "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes";
/// Istio's default number of retries.
const DEFAULT_RETRY_ATTEMPTS: u32 = 2;
/// Name of the CORS HTTP filter (key of per-route config).
const CORS_FILTER: &str = "envoy.filters.http.cors";
/// Name of the fault HTTP filter (key of per-route config).
const FAULT_FILTER: &str = "envoy.filters.http.fault";

impl ClusterRef {
    /// Returns the Istio cluster name.
    pub fn name(&self) -> String {
        naming::cluster(self.port, &self.subset, &self.host)
    }
}

/// What the routes depend on besides the VirtualService itself.
#[derive(Debug, Clone, Copy)]
pub struct Env<'a> {
    /// Known services (default destination ports).
    pub registry: &'a Registry,
    /// DestinationRules (consistent-hash policies).
    pub policies: &'a Policies,
    /// DNS suffix for short names.
    pub domain_suffix: &'a str,
}

/// Where the VirtualService is being applied.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// Gateway server port.
    pub port: u32,
    /// Namespace of the gateway in use.
    pub gateway_namespace: &'a str,
    /// Name of the gateway in use.
    pub gateway_name: &'a str,
}

/// The routes of one VirtualService for one scope, and the clusters they use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpRoutes {
    /// Routes in rule order.
    pub routes: Vec<Route>,
    /// Every cluster named by the routes.
    pub clusters: BTreeSet<ClusterRef>,
}

/// Finds a delegate VirtualService by namespace and name.
pub type DelegateLookup<'a> = dyn Fn(&str, &str) -> Option<&'a VirtualService> + 'a;

/// The VirtualService of an object, if it is one.
pub(crate) fn vs_spec(object: &ConfigObject) -> Option<&VirtualService> {
    match &object.spec {
        Spec::VirtualService(vs) => Some(vs),
        _ => None,
    }
}

/// The delegate VirtualServices the HTTP rules of `vs` (defined in `namespace`) name, in rule order, as found in
/// `snapshot` (`None` when missing).
pub(crate) fn delegate_objects(
    snapshot: &Snapshot,
    vs: &VirtualService,
    namespace: &str,
) -> Vec<Option<Arc<ConfigObject>>> {
    vs.http
        .iter()
        .filter_map(|r| r.delegate.as_ref())
        .map(|d| {
            let ns = if d.namespace.is_empty() {
                namespace
            } else {
                d.namespace.as_str()
            };
            snapshot
                .get(&ObjectKey::new(Kind::VirtualService, ns, &d.name))
                .cloned()
        })
        .collect()
}

/// Tells whether a `gateways:` list (entries `ns/name` or `name` relative to `namespace`) names the gateway.
pub fn binds_gateway(entries: &[String], namespace: &str, scope: &Scope<'_>) -> bool {
    entries.iter().any(|entry| match entry.split_once('/') {
        Some((ns, name)) => ns == scope.gateway_namespace && name == scope.gateway_name,
        None => namespace == scope.gateway_namespace && entry == scope.gateway_name,
    })
}

/// Translates the HTTP rules of a VirtualService defined in `namespace`.
pub fn http_routes(
    vs: &VirtualService,
    namespace: &str,
    scope: &Scope<'_>,
    env: &Env<'_>,
    delegates: &DelegateLookup<'_>,
) -> HttpRoutes {
    let mut out = HttpRoutes::default();
    for rule in &vs.http {
        if let Some(delegate) = &rule.delegate {
            let ns = if delegate.namespace.is_empty() {
                namespace
            } else {
                delegate.namespace.as_str()
            };
            let Some(child) = delegates(ns, &delegate.name) else {
                continue;
            };
            for child_rule in &child.http {
                if child_rule.delegate.is_some() {
                    continue; // Istio supports one level of delegation only.
                }
                if let Some(merged) = merge_delegate(rule, child_rule) {
                    translate_rule(&merged, ns, scope, env, &mut out);
                }
            }
            continue;
        }
        translate_rule(rule, namespace, scope, env, &mut out);
    }
    out
}

/// Combines a root rule's matches with a delegate rule's: each pair is AND-ed; a pair whose URI matches
/// cannot both hold (the delegate's URI must lie within the root's prefix) is dropped. The delegate's
/// actions are used; root fields fill what the delegate leaves unset.
fn merge_delegate(root: &HttpRoute, child: &HttpRoute) -> Option<HttpRoute> {
    let mut merged = child.clone();
    if merged.name.is_empty() {
        merged.name.clone_from(&root.name);
    }
    let roots: Vec<HttpMatchRequest> = if root.matches.is_empty() {
        vec![HttpMatchRequest::default()]
    } else {
        root.matches.clone()
    };
    let children: Vec<HttpMatchRequest> = if child.matches.is_empty() {
        vec![HttpMatchRequest::default()]
    } else {
        child.matches.clone()
    };
    let mut matches = Vec::new();
    for r in &roots {
        for c in &children {
            if let Some(m) = merge_match(r, c) {
                matches.push(m);
            }
        }
    }
    if matches.is_empty() {
        return None;
    }
    merged.matches = matches;
    macro_rules! inherit {
        ($($field:ident),*) => { $( if merged.$field.is_none() { merged.$field.clone_from(&root.$field); } )* };
    }
    inherit!(
        timeout,
        retries,
        fault,
        cors_policy,
        headers,
        rewrite,
        mirror,
        mirror_percentage
    );
    Some(merged)
}

fn merge_match(root: &HttpMatchRequest, child: &HttpMatchRequest) -> Option<HttpMatchRequest> {
    let mut m = child.clone();
    m.uri = match (&root.uri, &child.uri) {
        (None, c) => c.clone(),
        (r, None) => r.clone(),
        (Some(r), Some(c)) => {
            let within = match (&r.prefix, &c.prefix, &c.exact) {
                (Some(rp), Some(cp), _) => cp.starts_with(rp.as_str()),
                (Some(rp), _, Some(ce)) => ce.starts_with(rp.as_str()),
                _ => r == c,
            };
            if !within {
                return None;
            }
            Some(c.clone())
        }
    };
    for (name, value) in &root.headers {
        match m.headers.get(name) {
            Some(existing) if existing != value => return None,
            _ => {
                m.headers.insert(name.clone(), value.clone());
            }
        }
    }
    for (name, value) in &root.query_params {
        m.query_params
            .entry(name.clone())
            .or_insert_with(|| value.clone());
    }
    for (name, value) in &root.without_headers {
        m.without_headers
            .entry(name.clone())
            .or_insert_with(|| value.clone());
    }
    macro_rules! inherit {
        ($($field:ident),*) => { $( if m.$field.is_none() { m.$field.clone_from(&root.$field); } )* };
    }
    inherit!(scheme, method, authority, port, ignore_uri_case);
    if m.gateways.is_empty() {
        m.gateways.clone_from(&root.gateways);
    }
    Some(m)
}

fn translate_rule(
    rule: &HttpRoute,
    namespace: &str,
    scope: &Scope<'_>,
    env: &Env<'_>,
    out: &mut HttpRoutes,
) {
    let Some(template) = route_template(rule, namespace, scope, env, &mut out.clusters) else {
        return;
    };
    let no_match = [HttpMatchRequest::default()];
    let matches: &[HttpMatchRequest] = if rule.matches.is_empty() {
        &no_match
    } else {
        &rule.matches
    };
    for m in matches {
        if m.port.is_some_and(|p| p != scope.port) {
            continue;
        }
        if !m.gateways.is_empty() && !binds_gateway(&m.gateways, namespace, scope) {
            continue;
        }
        let mut r = template.clone();
        r.r#match = Some(route_match(m));
        if !m.name.is_empty() {
            r.name = if rule.name.is_empty() {
                m.name.clone()
            } else {
                format!("{}.{}", rule.name, m.name)
            };
        }
        out.routes.push(r);
    }
}

/// Tells whether a route matches every request (Istio moves these to the end of a virtual host).
pub fn is_catch_all(r: &Route) -> bool {
    let Some(m) = &r.r#match else {
        return true;
    };
    let path_all = match &m.path_specifier {
        None => true,
        Some(route_match::PathSpecifier::Prefix(p)) => p == "/" || p.is_empty(),
        Some(route_match::PathSpecifier::SafeRegex(re)) => re.regex == "*" || re.regex == ".*",
        Some(_) => false,
    };
    path_all && m.headers.is_empty() && m.query_parameters.is_empty()
}

/// Builds the parts of a route shared by all its matches; `None` when the rule has nothing to do.
fn route_template(
    rule: &HttpRoute,
    namespace: &str,
    scope: &Scope<'_>,
    env: &Env<'_>,
    clusters: &mut BTreeSet<ClusterRef>,
) -> Option<Route> {
    let mut r = Route {
        name: rule.name.clone(),
        ..Default::default()
    };
    let mut per_filter: HashMap<String, Any> = HashMap::new();
    if let Some(redirect) = &rule.redirect {
        r.action = Some(route::Action::Redirect(redirect_action(
            redirect, scope.port,
        )));
    } else if let Some(direct) = &rule.direct_response {
        let body = direct.body.as_ref().and_then(|b| {
            if let Some(text) = &b.string {
                Some(data_source::Specifier::InlineString(text.clone()))
            } else {
                b.bytes.as_ref().and_then(|encoded| {
                    base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .ok()
                        .map(data_source::Specifier::InlineBytes)
                })
            }
        });
        r.action = Some(route::Action::DirectResponse(DirectResponseAction {
            status: direct.status.unwrap_or(200),
            body: body.map(|specifier| DataSource {
                specifier: Some(specifier),
                ..Default::default()
            }),
            ..Default::default()
        }));
    } else if !rule.route.is_empty() {
        r.action = Some(route::Action::Route(route_action(
            rule, namespace, scope, env, clusters,
        )?));
        if let Some(fault) = &rule.fault {
            per_filter.insert(
                FAULT_FILTER.into(),
                any(http_fault(&fault.delay, &fault.abort)),
            );
        }
    } else {
        return None;
    }
    if let Some(cors) = &rule.cors_policy {
        per_filter.insert(CORS_FILTER.into(), any(cors_policy(cors)));
    }
    r.typed_per_filter_config = per_filter;
    let single_destination_headers = match rule.route.as_slice() {
        [only] => only.headers.as_ref(),
        _ => None,
    };
    for headers in [rule.headers.as_ref(), single_destination_headers]
        .into_iter()
        .flatten()
    {
        apply_headers(headers, &mut r);
    }
    Some(r)
}

fn apply_headers(headers: &Headers, r: &mut Route) {
    if let Some(request) = &headers.request {
        r.request_headers_to_add.extend(header_options(request));
        r.request_headers_to_remove
            .extend(request.remove.iter().cloned());
    }
    if let Some(response) = &headers.response {
        r.response_headers_to_add.extend(header_options(response));
        r.response_headers_to_remove
            .extend(response.remove.iter().cloned());
    }
}

/// Converts set/add operations: `set` overwrites, `add` appends.
fn header_options(ops: &HeaderOperations) -> Vec<HeaderValueOption> {
    let option = |key: &String, value: &String, action| HeaderValueOption {
        header: Some(HeaderValue {
            key: key.clone(),
            value: value.clone(),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    };
    let set = ops.set.iter().map(|(k, v)| {
        option(
            k,
            v,
            header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd,
        )
    });
    let add = ops.add.iter().map(|(k, v)| {
        option(
            k,
            v,
            header_value_option::HeaderAppendAction::AppendIfExistsOrAdd,
        )
    });
    set.chain(add).collect()
}

/// Resolves a destination to its cluster: short hosts in `namespace`; the port from the destination, else
/// the service's only port, else the gateway port (Istio's rule).
pub fn cluster_ref(
    destination: &Destination,
    namespace: &str,
    gateway_port: u32,
    env: &Env<'_>,
) -> ClusterRef {
    let host = naming::resolve_short_name(&destination.host, namespace, env.domain_suffix);
    let port = destination
        .port
        .as_ref()
        .and_then(|p| p.number)
        .or_else(|| {
            env.registry
                .get(&host)
                .and_then(|s| match s.ports.as_slice() {
                    [only] => Some(only.number),
                    _ => None,
                })
        })
        .unwrap_or(gateway_port);
    ClusterRef {
        host,
        port,
        subset: destination.subset.clone(),
    }
}

/// Resolves weighted destinations: zero-weight entries are dropped when others carry weight; when none
/// carries weight each gets 1 (an unweighted single destination takes all traffic).
pub fn weighted<'d>(
    entries: impl Iterator<Item = (Option<&'d Destination>, Option<u32>)>,
    namespace: &str,
    gateway_port: u32,
    env: &Env<'_>,
) -> Vec<(ClusterRef, u32, usize)> {
    let resolved: Vec<(ClusterRef, u32, usize)> = entries
        .enumerate()
        .filter_map(|(i, (d, w))| {
            d.map(|d| {
                (
                    cluster_ref(d, namespace, gateway_port, env),
                    w.unwrap_or(0),
                    i,
                )
            })
        })
        .collect();
    if resolved.iter().all(|(_, w, _)| *w == 0) {
        return resolved.into_iter().map(|(c, _, i)| (c, 1, i)).collect();
    }
    resolved.into_iter().filter(|(_, w, _)| *w > 0).collect()
}

fn route_action(
    rule: &HttpRoute,
    namespace: &str,
    scope: &Scope<'_>,
    env: &Env<'_>,
    clusters: &mut BTreeSet<ClusterRef>,
) -> Option<RouteAction> {
    let targets = weighted(
        rule.route
            .iter()
            .map(|d| (d.destination.as_ref(), d.weight)),
        namespace,
        scope.port,
        env,
    );
    let first = targets.first()?.0.clone();
    let specifier = if let [(only, _, _)] = targets.as_slice() {
        route_action::ClusterSpecifier::Cluster(only.name())
    } else {
        route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: targets
                .iter()
                .map(|(cluster, weight, index)| {
                    let mut w = weighted_cluster::ClusterWeight {
                        name: cluster.name(),
                        weight: Some(UInt32Value { value: *weight }),
                        ..Default::default()
                    };
                    if let Some(headers) = rule.route.get(*index).and_then(|d| d.headers.as_ref()) {
                        if let Some(request) = &headers.request {
                            w.request_headers_to_add = header_options(request);
                            w.request_headers_to_remove.clone_from(&request.remove);
                        }
                        if let Some(response) = &headers.response {
                            w.response_headers_to_add = header_options(response);
                            w.response_headers_to_remove.clone_from(&response.remove);
                        }
                    }
                    w
                })
                .collect(),
            ..Default::default()
        })
    };
    clusters.extend(targets.iter().map(|(c, _, _)| c.clone()));
    let mut action = RouteAction {
        cluster_specifier: Some(specifier),
        timeout: Some(
            rule.timeout
                .as_deref()
                .and_then(parse_duration)
                .unwrap_or(millis(0)),
        ),
        retry_policy: retry_policy_of(rule),
        hash_policy: env.policies.hash_policies(&first),
        ..Default::default()
    };
    if let Some(rewrite) = &rule.rewrite {
        if !rewrite.uri.is_empty() {
            action.prefix_rewrite.clone_from(&rewrite.uri);
        }
        if let Some(regex) = &rewrite.uri_regex_rewrite {
            action.regex_rewrite = Some(RegexMatchAndSubstitute {
                pattern: Some(regex_matcher_of(&regex.pattern)),
                substitution: regex.rewrite.clone(),
            });
        }
        if !rewrite.authority.is_empty() {
            action.host_rewrite_specifier = Some(
                route_action::HostRewriteSpecifier::HostRewriteLiteral(rewrite.authority.clone()),
            );
        }
    }
    let mut mirrors: Vec<(&Destination, Option<f64>)> = Vec::new();
    if let Some(mirror) = &rule.mirror {
        let pct = rule
            .mirror_percentage
            .as_ref()
            .and_then(|p| p.value)
            .or(rule.mirror_percent.map(f64::from));
        mirrors.push((mirror, pct));
    }
    for m in &rule.mirrors {
        if let Some(d) = &m.destination {
            mirrors.push((d, m.percentage.as_ref().and_then(|p| p.value)));
        }
    }
    for (destination, pct) in mirrors {
        let cluster = cluster_ref(destination, namespace, scope.port, env);
        action
            .request_mirror_policies
            .push(route_action::RequestMirrorPolicy {
                cluster: cluster.name(),
                runtime_fraction: Some(RuntimeFractionalPercent {
                    default_value: Some(fraction(pct.unwrap_or(100.0))),
                    ..Default::default()
                }),
                ..Default::default()
            });
        clusters.insert(cluster);
    }
    Some(action)
}

/// Converts a percentage to a per-million fraction (Istio's precision).
fn fraction(pct: f64) -> FractionalPercent {
    let clamped = pct.clamp(0.0, 100.0);
    // Bounded to [0, 1_000_000] by the clamp above, so the cast cannot truncate.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let numerator = (clamped * 10_000.0).round() as u32;
    FractionalPercent {
        numerator,
        denominator: fractional_percent::DenominatorType::Million as i32,
    }
}

fn percent_or(percentage: Option<&Percent>, legacy: Option<i32>) -> FractionalPercent {
    fraction(
        percentage
            .and_then(|p| p.value)
            .or(legacy.map(f64::from))
            .unwrap_or(100.0),
    )
}

fn retry_policy_of(rule: &HttpRoute) -> Option<RetryPolicy> {
    let previous_hosts = retry_policy::RetryHostPredicate {
        name: "envoy.retry_host_predicates.previous_hosts".into(),
        config_type: Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(
            any(PreviousHostsPredicate {}),
        )),
    };
    let mut policy = RetryPolicy {
        retry_on: DEFAULT_RETRY_ON.into(),
        num_retries: Some(UInt32Value {
            value: DEFAULT_RETRY_ATTEMPTS,
        }),
        retriable_status_codes: vec![503],
        retry_host_predicate: vec![previous_hosts],
        host_selection_retry_max_attempts: 5,
        ..Default::default()
    };
    let Some(retries) = &rule.retries else {
        return Some(policy);
    };
    let attempts = u32::try_from(retries.attempts.unwrap_or(0)).unwrap_or(0);
    if attempts == 0 {
        return None;
    }
    policy.num_retries = Some(UInt32Value { value: attempts });
    if !retries.retry_on.is_empty() {
        let mut conditions = Vec::new();
        let mut codes = Vec::new();
        for item in retries.retry_on.split(',').map(str::trim) {
            match item.parse::<u32>() {
                Ok(code) => codes.push(code),
                Err(_) if !item.is_empty() => conditions.push(item.to_string()),
                Err(_) => {}
            }
        }
        if !codes.is_empty() && !conditions.iter().any(|c| c == "retriable-status-codes") {
            conditions.push("retriable-status-codes".into());
        }
        policy.retry_on = conditions.join(",");
        policy.retriable_status_codes = codes;
    }
    if let Some(timeout) = retries.per_try_timeout.as_deref().and_then(parse_duration) {
        policy.per_try_timeout = Some(timeout);
    }
    if retries.retry_ignore_previous_hosts == Some(false) {
        policy.retry_host_predicate.clear();
        policy.host_selection_retry_max_attempts = 0;
    }
    if let Some(base) = retries.backoff.as_deref().and_then(parse_duration) {
        policy.retry_back_off = Some(retry_policy::RetryBackOff {
            base_interval: Some(base),
            ..Default::default()
        });
    }
    Some(policy)
}

/// Envoy's redirect for an Istio one on a route of port `port`. As istiod (`pilot/pkg/networking/core/route`):
/// `derivePort: FROM_REQUEST_PORT` becomes that port (Envoy cannot take the request's port, but routes are built
/// per port), `FROM_PROTOCOL_DEFAULT` no port (the scheme's default).
fn redirect_action(
    redirect: &admitpilot_model::istio::virtual_service::HttpRedirect,
    port: u32,
) -> RedirectAction {
    let response_code = match redirect.redirect_code.unwrap_or(301) {
        302 => redirect_action::RedirectResponseCode::Found,
        303 => redirect_action::RedirectResponseCode::SeeOther,
        307 => redirect_action::RedirectResponseCode::TemporaryRedirect,
        308 => redirect_action::RedirectResponseCode::PermanentRedirect,
        _ => redirect_action::RedirectResponseCode::MovedPermanently,
    };
    let path_rewrite_specifier = if !redirect.uri.is_empty() {
        Some(redirect_action::PathRewriteSpecifier::PathRedirect(
            redirect.uri.clone(),
        ))
    } else if !redirect.prefix_rewrite.is_empty() {
        Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(
            redirect.prefix_rewrite.clone(),
        ))
    } else {
        None
    };
    RedirectAction {
        host_redirect: redirect.authority.clone(),
        port_redirect: match (redirect.port, redirect.derive_port) {
            (Some(port), _) => port,
            (None, Some(RedirectPortSelection::FromRequestPort)) => port,
            (None, _) => 0,
        },
        response_code: response_code as i32,
        scheme_rewrite_specifier: (!redirect.scheme.is_empty()).then(|| {
            redirect_action::SchemeRewriteSpecifier::SchemeRedirect(redirect.scheme.clone())
        }),
        path_rewrite_specifier,
        ..Default::default()
    }
}

fn http_fault(delay: &Option<IstioDelay>, abort: &Option<IstioAbort>) -> HttpFault {
    HttpFault {
        delay: delay.as_ref().and_then(|d| {
            let fixed = d.fixed_delay.as_deref().and_then(parse_duration)?;
            Some(FaultDelay {
                percentage: Some(percent_or(d.percentage.as_ref(), d.percent)),
                fault_delay_secifier: Some(fault_delay::FaultDelaySecifier::FixedDelay(fixed)),
            })
        }),
        abort: abort.as_ref().and_then(|a| {
            let error_type = if let Some(status) = a.http_status {
                fault_abort::ErrorType::HttpStatus(u32::try_from(status).ok()?)
            } else {
                fault_abort::ErrorType::GrpcStatus(grpc_code(a.grpc_status.as_deref()?)?)
            };
            Some(FaultAbort {
                percentage: Some(percent_or(a.percentage.as_ref(), None)),
                error_type: Some(error_type),
                ..Default::default()
            })
        }),
        ..Default::default()
    }
}

/// Maps a gRPC status name (`UNAVAILABLE`) or number to its code.
fn grpc_code(name: &str) -> Option<u32> {
    name.parse::<u32>().ok().or_else(|| {
        GRPC_STATUS_NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .and_then(|i| u32::try_from(i).ok())
    })
}

fn cors_policy(cors: &admitpilot_model::istio::virtual_service::CorsPolicy) -> CorsPolicy {
    use admitpilot_model::istio::virtual_service::UnmatchedPreflights;
    let mut origins: Vec<StringMatcher> = cors
        .allow_origin
        .iter()
        .map(|o| StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::Exact(o.clone())),
            ..Default::default()
        })
        .collect();
    origins.extend(cors.allow_origins.iter().filter_map(string_matcher_of));
    CorsPolicy {
        allow_origin_string_match: origins,
        allow_methods: cors.allow_methods.join(","),
        allow_headers: cors.allow_headers.join(","),
        expose_headers: cors.expose_headers.join(","),
        max_age: cors
            .max_age
            .as_deref()
            .and_then(parse_duration)
            .map(|d| d.seconds.to_string())
            .unwrap_or_default(),
        allow_credentials: cors.allow_credentials.map(|value| BoolValue { value }),
        forward_not_matching_preflights: match cors.unmatched_preflights {
            Some(UnmatchedPreflights::Ignore) => Some(BoolValue { value: false }),
            Some(UnmatchedPreflights::Forward) => Some(BoolValue { value: true }),
            _ => None,
        },
        ..Default::default()
    }
}

fn regex_matcher_of(regex: &str) -> RegexMatcher {
    RegexMatcher {
        regex: regex.to_string(),
        engine_type: None::<regex_matcher::EngineType>,
    }
}

/// Converts an Istio string match; `None` when it sets no field (meaning "present").
fn string_matcher_of(m: &StringMatch) -> Option<StringMatcher> {
    let pattern = if let Some(exact) = &m.exact {
        string_matcher::MatchPattern::Exact(exact.clone())
    } else if let Some(prefix) = &m.prefix {
        string_matcher::MatchPattern::Prefix(prefix.clone())
    } else if let Some(regex) = &m.regex {
        string_matcher::MatchPattern::SafeRegex(regex_matcher_of(regex))
    } else {
        return None;
    };
    Some(StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    })
}

fn header_matcher(name: &str, m: &StringMatch, invert: bool) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_string(),
        invert_match: invert,
        header_match_specifier: Some(match string_matcher_of(m) {
            Some(matcher) => header_matcher::HeaderMatchSpecifier::StringMatch(matcher),
            None => header_matcher::HeaderMatchSpecifier::PresentMatch(true),
        }),
        ..Default::default()
    }
}

/// Converts an Istio HTTP match into an Envoy route match (no URI matches every path).
pub fn route_match(m: &HttpMatchRequest) -> RouteMatch {
    let path_specifier = match &m.uri {
        Some(StringMatch {
            exact: Some(exact), ..
        }) => route_match::PathSpecifier::Path(exact.clone()),
        Some(StringMatch {
            prefix: Some(prefix),
            ..
        }) => route_match::PathSpecifier::Prefix(prefix.clone()),
        Some(StringMatch {
            regex: Some(regex), ..
        }) => route_match::PathSpecifier::SafeRegex(regex_matcher_of(regex)),
        _ => route_match::PathSpecifier::Prefix("/".into()),
    };
    let mut headers = Vec::new();
    for (pseudo, value) in [
        (":scheme", &m.scheme),
        (":method", &m.method),
        (":authority", &m.authority),
    ] {
        if let Some(value) = value {
            headers.push(header_matcher(pseudo, value, false));
        }
    }
    headers.extend(
        m.headers
            .iter()
            .map(|(name, value)| header_matcher(name, value, false)),
    );
    headers.extend(
        m.without_headers
            .iter()
            .map(|(name, value)| header_matcher(name, value, true)),
    );
    let query_parameters = m
        .query_params
        .iter()
        .map(|(name, value)| QueryParameterMatcher {
            name: name.clone(),
            query_parameter_match_specifier: Some(match string_matcher_of(value) {
                Some(matcher) => {
                    query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(matcher)
                }
                None => query_parameter_matcher::QueryParameterMatchSpecifier::PresentMatch(true),
            }),
        })
        .collect();
    RouteMatch {
        path_specifier: Some(path_specifier),
        case_sensitive: m
            .ignore_uri_case
            .filter(|ignore| *ignore)
            .map(|_| BoolValue { value: false }),
        headers,
        query_parameters,
        ..Default::default()
    }
}

/// Builds the virtual host of `host` on `port` from the routes of the VirtualServices bound to it, in order;
/// `redirect` makes it require TLS. Istio keeps rule order but moves catch-all routes behind the others.
pub(crate) fn virtual_host<'a>(
    host: &str,
    redirect: bool,
    sources: impl Iterator<Item = &'a HttpRoutes>,
    port: u32,
) -> VirtualHost {
    let (specific, catch_all): (Vec<&Route>, Vec<&Route>) = sources
        .flat_map(|routes| routes.routes.iter())
        .partition(|r| !is_catch_all(r));
    VirtualHost {
        name: naming::virtual_host(host, port),
        domains: if host == "*" {
            vec!["*".into()]
        } else {
            vec![host.to_string(), format!("{host}:*")]
        },
        routes: specific.into_iter().chain(catch_all).cloned().collect(),
        require_tls: if redirect {
            virtual_host::TlsRequirementType::All as i32
        } else {
            virtual_host::TlsRequirementType::None as i32
        },
        include_request_attempt_count: true,
        ..Default::default()
    }
}

/// A route configuration named `name` holding `virtual_hosts` (Istio's settings for gateway routes).
pub(crate) fn route_configuration(
    name: String,
    virtual_hosts: Vec<VirtualHost>,
) -> RouteConfiguration {
    RouteConfiguration {
        name,
        validate_clusters: Some(BoolValue { value: false }),
        virtual_hosts,
        ..Default::default()
    }
}

/// The name (before `:<port>`) of the virtual host of a port without any other.
pub(crate) const BLACKHOLE: &str = "blackhole";

/// Istio's answer for a port without any virtual host: 404 for everything.
pub(crate) fn blackhole(port: u32) -> VirtualHost {
    fixed_answer(format!("{BLACKHOLE}:{port}"), vec!["*".into()], 404)
}

/// The prefix of the name of a virtual host that answers with a fixed status ([`answering_host`]).
pub(crate) const ANSWER: &str = "answer~";

/// The virtual host that answers every request for `host` on `port` with `status` (a server's answered hosts:
/// 421 Misdirected Request on a Gateway API HTTPS listener). Its name starts with [`ANSWER`].
pub(crate) fn answering_host(host: &str, port: u32, status: u32) -> VirtualHost {
    let domains = if host == "*" {
        vec!["*".into()]
    } else {
        vec![host.to_string(), format!("{host}:*")]
    };
    fixed_answer(format!("{ANSWER}{host}:{port}"), domains, status)
}

fn fixed_answer(name: String, domains: Vec<String>, status: u32) -> VirtualHost {
    VirtualHost {
        name,
        domains,
        routes: vec![Route {
            name: "block_all".into(),
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            action: Some(route::Action::DirectResponse(DirectResponseAction {
                status,
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}
