//! Istio `VirtualService` spec (networking.istio.io v1/v1beta1/v1alpha3 share it): takes Kubernetes camelCase JSON,
//! yields typed routing rules (HTTP/TLS/TCP routes, matches, destinations, retries, faults, CORS, header operations).
//! Also defines the small types other networking kinds reuse: [`Destination`], [`PortSelector`], [`Percent`],
//! [`StringMatch`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `spec` of a VirtualService.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualService {
    /// Destination hosts the rules apply to; empty for a delegate VirtualService.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Gateways (`ns/name`, or `mesh`) the rules apply to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// HTTP routes, evaluated in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub http: Vec<HttpRoute>,
    /// TLS (SNI) routes for passthrough traffic.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls: Vec<TlsRoute>,
    /// Opaque TCP routes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tcp: Vec<TcpRoute>,
    /// Namespaces this VirtualService is visible to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
}

/// A destination service (and optionally subset and port) traffic is forwarded to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Destination {
    /// Service host name from the registry (required).
    pub host: String,
    /// Subset name defined in a DestinationRule.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subset: String,
    /// Port on the destination host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<PortSelector>,
}

/// Selects a port by number.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortSelector {
    /// Port number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
}

/// A percentage in `[0.0, 100.0]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Percent {
    /// The percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

/// One HTTP route: match conditions and what to do with matching requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRoute {
    /// Route name (for logs and stats).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Match conditions; OR-ed together. Empty matches everything.
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<HttpMatchRequest>,
    /// Weighted destinations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<HttpRouteDestination>,
    /// Redirect instead of forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<HttpRedirect>,
    /// Answer directly instead of forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_response: Option<HttpDirectResponse>,
    /// Delegate routing to another VirtualService.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegate: Option<Delegate>,
    /// URI/authority rewrite before forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<HttpRewrite>,
    /// Request timeout (protobuf duration such as `1.5s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Retry policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<HttpRetry>,
    /// Fault injection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<HttpFaultInjection>,
    /// Single mirror destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<Destination>,
    /// Several mirror destinations (exclusive with `mirror`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<HttpMirrorPolicy>,
    /// Deprecated integer mirror percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "mirror_percent")]
    pub mirror_percent: Option<u32>,
    /// Fraction of traffic mirrored to `mirror`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_percentage: Option<Percent>,
    /// CORS policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors_policy: Option<CorsPolicy>,
    /// Request/response header manipulation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Headers>,
    /// Session persistence (sticky sessions) by cookie or header; a newer istio/api field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_persistence: Option<SessionPersistence>,
}

/// Session persistence for an HTTP route. The shape follows istio/api test data (`type`, timeouts and one of
/// `cookie`/`header`); `type` is kept as text because the API is newer than the protos this model was built from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionPersistence {
    /// `COOKIE` (the default) or `HEADER`.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Session lifetime from its start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub absolute_timeout: Option<String>,
    /// Session lifetime since its last use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<String>,
    /// Cookie settings (type COOKIE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie: Option<SessionCookie>,
    /// Header settings (type HEADER).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<SessionHeader>,
}

/// The cookie carrying a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionCookie {
    /// Cookie name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Cookie path.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// `PERMANENT` or `SESSION`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lifetime_type: String,
}

/// The header carrying a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionHeader {
    /// Header name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Names the VirtualService an HTTP route delegates to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Delegate {
    /// VirtualService name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// VirtualService namespace; defaults to the delegating one's.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// Header manipulation for requests and responses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Headers {
    /// Applied to requests before forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<HeaderOperations>,
    /// Applied to responses before returning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<HeaderOperations>,
}

/// Set, append and remove header operations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderOperations {
    /// Overwrite these headers.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Append these headers.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    /// Remove these headers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

/// A TLS route: SNI matches and destinations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsRoute {
    /// Match conditions (required).
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<TlsMatchAttributes>,
    /// Weighted destinations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteDestination>,
}

/// A TCP route: L4 matches and destinations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpRoute {
    /// Match conditions.
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<L4MatchAttributes>,
    /// Weighted destinations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteDestination>,
}

/// Conditions an HTTP request must meet; all set fields are AND-ed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMatchRequest {
    /// Match name (prefixed to the route name).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// URI match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<StringMatch>,
    /// URI scheme match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<StringMatch>,
    /// HTTP method match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatch>,
    /// Authority (Host) match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authority: Option<StringMatch>,
    /// Header matches by (lower-case) header name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, StringMatch>,
    /// Destination port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Source workload labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub source_labels: BTreeMap<String, String>,
    /// Gateways this match applies to (overrides the top-level list).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Query parameter matches.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub query_params: BTreeMap<String, StringMatch>,
    /// Match the URI case-insensitively.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_uri_case: Option<bool>,
    /// Headers that must NOT match.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub without_headers: BTreeMap<String, StringMatch>,
    /// Source namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
    /// Stat prefix for the generated route.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stat_prefix: String,
}

/// A weighted HTTP destination with optional header operations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteDestination {
    /// The destination (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<Destination>,
    /// Relative weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Header operations for this destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Headers>,
}

/// A weighted L4 destination.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteDestination {
    /// The destination (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<Destination>,
    /// Relative weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

/// L4 match conditions for TCP routes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct L4MatchAttributes {
    /// Destination IPs or CIDRs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destination_subnets: Vec<String>,
    /// Destination port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Source IP or CIDR.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source_subnet: String,
    /// Source workload labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub source_labels: BTreeMap<String, String>,
    /// Gateways this match applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Source namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
}

/// TLS (SNI) match conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsMatchAttributes {
    /// SNI values to match (required).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sni_hosts: Vec<String>,
    /// Destination IPs or CIDRs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destination_subnets: Vec<String>,
    /// Destination port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Source workload labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub source_labels: BTreeMap<String, String>,
    /// Gateways this match applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Source namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
}

/// How the redirect port is derived when no explicit port is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RedirectPortSelection {
    /// Port 80 for http, 443 for https.
    FromProtocolDefault,
    /// The port the request came in on.
    FromRequestPort,
}

/// An HTTP redirect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRedirect {
    /// Replacement path.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// Replacement authority.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub authority: String,
    /// Explicit port (oneof with `derivePort`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Derived port (oneof with `port`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derive_port: Option<RedirectPortSelection>,
    /// Replacement scheme.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub scheme: String,
    /// Status code (default 301).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_code: Option<u32>,
    /// Replacement for the matched prefix.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prefix_rewrite: String,
}

/// A fixed response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpDirectResponse {
    /// HTTP status (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u32>,
    /// Response body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<HttpBody>,
}

/// A response body: text or base64 bytes (oneof).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpBody {
    /// Body as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// Body as base64-encoded bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// URI/authority rewrite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRewrite {
    /// Replacement for the matched URI part.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// Replacement authority.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub authority: String,
    /// Regex-based path rewrite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri_regex_rewrite: Option<RegexRewrite>,
}

/// A regex path rewrite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegexRewrite {
    /// RE2 pattern.
    #[serde(rename = "match", skip_serializing_if = "String::is_empty")]
    pub pattern: String,
    /// Substitution (may use `\1` groups).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub rewrite: String,
}

/// A string matcher: exact, prefix or RE2 regex (oneof).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StringMatch {
    /// Exact value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// Prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// RE2 regex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// Retry policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRetry {
    /// Number of retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i32>,
    /// Timeout per attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<String>,
    /// Comma-separated Envoy retry conditions.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub retry_on: String,
    /// Retry in other localities.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_remote_localities: Option<bool>,
    /// Avoid previously tried hosts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_ignore_previous_hosts: Option<bool>,
    /// Base interval between retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
}

/// What to do with preflight requests that do not match the CORS policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum UnmatchedPreflights {
    /// Default (forward).
    Unspecified,
    /// Forward to the upstream.
    Forward,
    /// Answer without forwarding.
    Ignore,
}

/// CORS policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CorsPolicy {
    /// Deprecated exact origins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_origin: Vec<String>,
    /// Origin matchers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_origins: Vec<StringMatch>,
    /// Allowed methods.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    /// Allowed request headers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    /// Exposed response headers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// Preflight cache duration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age: Option<String>,
    /// Allow credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_credentials: Option<bool>,
    /// Handling of unmatched preflights.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmatched_preflights: Option<UnmatchedPreflights>,
}

/// Fault injection: delay and/or abort.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpFaultInjection {
    /// Delay before forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<FaultDelay>,
    /// Abort with an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort: Option<FaultAbort>,
}

/// Injected delay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultDelay {
    /// Deprecated integer percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<i32>,
    /// Fixed delay (oneof with `exponentialDelay`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_delay: Option<String>,
    /// Exponential delay (not supported by Istio).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exponential_delay: Option<String>,
    /// Fraction of requests delayed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}

/// Injected abort.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultAbort {
    /// HTTP status to return (oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<i32>,
    /// gRPC status name to return (oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<String>,
    /// HTTP/2 error (oneof; not supported by Istio).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http2_error: Option<String>,
    /// Fraction of requests aborted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}

/// gRPC status names a fault abort's `grpcStatus` may use, indexed by their numeric code (`UNAVAILABLE` = 14).
pub const GRPC_STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// One mirror destination with its percentage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMirrorPolicy {
    /// The mirror destination (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<Destination>,
    /// Fraction of traffic mirrored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_camel_case_routes() {
        let vs: VirtualService = serde_json::from_value(serde_json::json!({
            "hosts": ["reviews"],
            "http": [{"match": [{"uri": {"prefix": "/a"}, "ignoreUriCase": true}],
                      "route": [{"destination": {"host": "reviews", "subset": "v1", "port": {"number": 9080}}, "weight": 80}],
                      "redirect": {"derivePort": "FROM_REQUEST_PORT"},
                      "rewrite": {"uriRegexRewrite": {"match": "^/a", "rewrite": "/b"}}}]
        }))
        .unwrap();
        let route = &vs.http[0];
        assert_eq!(route.matches[0].ignore_uri_case, Some(true));
        assert_eq!(route.route[0].weight, Some(80));
        assert_eq!(
            route.redirect.as_ref().unwrap().derive_port,
            Some(RedirectPortSelection::FromRequestPort)
        );
        assert_eq!(
            route
                .rewrite
                .as_ref()
                .unwrap()
                .uri_regex_rewrite
                .as_ref()
                .unwrap()
                .pattern,
            "^/a"
        );
    }

    #[test]
    fn unknown_enum_value_is_an_error() {
        let r: Result<HttpRedirect, _> =
            serde_json::from_value(serde_json::json!({"derivePort": "NOPE"}));
        assert!(r.is_err());
    }
}
