//! `HTTPRoute` spec (gateway.networking.k8s.io v1, v1beta1): takes the defaulted `spec` JSON, yields parent
//! references, hostnames and rules with their matches, filters, backends, timeouts and retry.

use serde::{Deserialize, Serialize};

use super::common::{BackendRef, HttpRouteFilter, ParentReference, ValueMatch};

/// The `spec` of an HTTPRoute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRoute {
    /// Gateways (or listeners) the route attaches to.
    pub parent_refs: Vec<ParentReference>,
    /// Host names the route serves; empty means the listener's.
    pub hostnames: Vec<String>,
    /// Rules, each matches → filters → backends.
    pub rules: Vec<HttpRouteRule>,
}

/// `HTTPRouteRule`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteRule {
    /// Optional rule name (section name for policies).
    pub name: Option<String>,
    /// Request matches, ORed (defaulted to a `/` prefix match).
    pub matches: Vec<HttpRouteMatch>,
    /// Filters applied to matched requests.
    pub filters: Vec<HttpRouteFilter>,
    /// Backends the requests go to, by weight.
    pub backend_refs: Vec<BackendRef>,
    /// Request and backend request timeouts.
    pub timeouts: Option<HttpRouteTimeouts>,
    /// Retry policy.
    pub retry: Option<HttpRouteRetry>,
    /// Session persistence (not translated).
    pub session_persistence: Option<serde_json::Value>,
}

/// `HTTPRouteMatch`: all given conditions must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteMatch {
    /// Path match (defaulted to a `/` prefix).
    pub path: Option<HttpPathMatch>,
    /// Header matches.
    pub headers: Vec<ValueMatch>,
    /// Query parameter matches.
    pub query_params: Vec<ValueMatch>,
    /// HTTP method.
    pub method: Option<String>,
}

/// How a path is matched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PathMatchType {
    /// The whole path.
    Exact,
    /// Path elements prefix (`/a` matches `/a` and `/a/b`, not `/ab`).
    #[default]
    PathPrefix,
    /// An RE2 regular expression over the whole path.
    RegularExpression,
}

/// `HTTPPathMatch`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpPathMatch {
    /// How to match.
    #[serde(rename = "type")]
    pub match_type: PathMatchType,
    /// The path or pattern (defaulted to `/`).
    pub value: Option<String>,
}

impl HttpPathMatch {
    /// The value as the API defaults it.
    pub fn value(&self) -> &str {
        self.value.as_deref().unwrap_or("/")
    }
}

/// `HTTPRouteTimeouts` (Gateway API durations: `1h`, `30s`, `500ms`; `0s` disables).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteTimeouts {
    /// Time for the whole request, retries included.
    pub request: Option<String>,
    /// Time for one request to a backend.
    pub backend_request: Option<String>,
}

/// `HTTPRouteRetry`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteRetry {
    /// Response codes retried.
    pub codes: Vec<u32>,
    /// Retries allowed.
    pub attempts: Option<u32>,
    /// Base interval between retries.
    pub backoff: Option<String>,
}
