//! Types several Gateway API kinds share (pure): parent and backend references, header and query matches, header
//! modifiers, mirrors and label selectors, as the `gateway.networking.k8s.io` CRDs define them. Takes the JSON the
//! CRD schema has defaulted ([`super::schema`]), yields typed values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `ParentReference`: the Gateway (or ListenerSet) a route attaches to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ParentReference {
    /// API group of the parent (defaulted to `gateway.networking.k8s.io`).
    pub group: Option<String>,
    /// Kind of the parent (defaulted to `Gateway`).
    pub kind: Option<String>,
    /// Namespace of the parent; the route's namespace when unset.
    pub namespace: Option<String>,
    /// Name of the parent.
    pub name: String,
    /// The listener's name, when the route attaches to one listener.
    pub section_name: Option<String>,
    /// The listener's port, when the route attaches to listeners of one port.
    pub port: Option<u32>,
}

impl ParentReference {
    /// The parent's group as the API defaults it.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or(super::GROUP)
    }

    /// The parent's kind as the API defaults it.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Gateway")
    }

    /// The parent's namespace: the reference's, or else `route_namespace`.
    pub fn namespace_or<'a>(&'a self, route_namespace: &'a str) -> &'a str {
        self.namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .unwrap_or(route_namespace)
    }
}

/// `BackendObjectReference`, with the weight and filters route rules add (`HTTPBackendRef`, `GRPCBackendRef`,
/// `BackendRef`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackendRef {
    /// API group; empty for the core group (a Service).
    pub group: Option<String>,
    /// Kind (defaulted to `Service`).
    pub kind: Option<String>,
    /// Name of the backend.
    pub name: String,
    /// Namespace of the backend; the route's when unset.
    pub namespace: Option<String>,
    /// Port of the backend; required for Services.
    pub port: Option<u32>,
    /// Share of the requests (defaulted to 1; 0 sends none).
    pub weight: Option<u32>,
    /// Filters applied to requests sent to this backend (HTTP and gRPC routes).
    pub filters: Vec<HttpRouteFilter>,
}

impl BackendRef {
    /// The backend's group as the API defaults it (core).
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or("")
    }

    /// The backend's kind as the API defaults it.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Service")
    }

    /// Whether the reference names a core Service.
    pub fn is_service(&self) -> bool {
        self.group().is_empty() && self.kind() == "Service"
    }

    /// The backend's weight as the API defaults it.
    pub fn weight(&self) -> u32 {
        self.weight.unwrap_or(1)
    }

    /// The backend's namespace: the reference's, or else `route_namespace`.
    pub fn namespace_or<'a>(&'a self, route_namespace: &'a str) -> &'a str {
        self.namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .unwrap_or(route_namespace)
    }
}

/// `SecretObjectReference` (listener certificates, CA certificates).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectReference {
    /// API group; empty for the core group.
    pub group: Option<String>,
    /// Kind (defaulted to `Secret` for certificate references).
    pub kind: Option<String>,
    /// Name.
    pub name: String,
    /// Namespace; the referring object's when unset.
    pub namespace: Option<String>,
}

impl ObjectReference {
    /// Whether it names a core Secret (group empty, kind `Secret` by default).
    pub fn is_core_secret(&self) -> bool {
        self.group.as_deref().unwrap_or("").is_empty()
            && self.kind.as_deref().unwrap_or("Secret") == "Secret"
    }

    /// Its namespace, or `referrer_namespace` (the referring object's) when unset or empty.
    pub fn namespace_or<'a>(&'a self, referrer_namespace: &'a str) -> &'a str {
        self.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(referrer_namespace)
    }
}

/// `LocalObjectReference` / `LocalPolicyTargetReferenceWithSectionName`: a same-namespace object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalReference {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Section (a Service port name), for policy targets.
    pub section_name: Option<String>,
}

/// How a header, query parameter or gRPC method is matched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchType {
    /// Equal to the value (header names compare case-insensitively).
    #[default]
    Exact,
    /// Matched by an RE2 regular expression.
    RegularExpression,
}

/// `HTTPHeaderMatch` / `GRPCHeaderMatch` / `HTTPQueryParamMatch`: one named value to match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ValueMatch {
    /// How to match (defaulted to `Exact`).
    #[serde(rename = "type")]
    pub match_type: MatchType,
    /// Header or parameter name.
    pub name: String,
    /// The value or pattern.
    pub value: String,
}

/// `HTTPHeader`: a header name and value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Header {
    /// Header name (case-insensitive).
    pub name: String,
    /// Header value.
    pub value: String,
}

/// `HTTPHeaderFilter`: headers to set, add and remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderModifier {
    /// Headers replaced (or added when absent).
    pub set: Vec<Header>,
    /// Headers appended to.
    pub add: Vec<Header>,
    /// Header names removed.
    pub remove: Vec<String>,
}

/// `HTTPRequestMirrorFilter`: where copies of requests go.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestMirror {
    /// The backend receiving the copies.
    pub backend_ref: BackendRef,
    /// Percentage of requests mirrored (0–100).
    pub percent: Option<u32>,
    /// Fraction of requests mirrored.
    pub fraction: Option<Fraction>,
}

/// A fraction `numerator / denominator` (denominator defaulted to 100).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Fraction {
    /// Numerator (signed: the schema's minimum is checked, not assumed, so the CEL rule sees what was sent).
    pub numerator: i32,
    /// Denominator.
    pub denominator: Option<i32>,
}

/// `HTTPPathModifier`: how a redirect or rewrite changes the path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PathModifier {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type")]
    pub modifier_type: String,
    /// The new path, for `ReplaceFullPath`.
    pub replace_full_path: Option<String>,
    /// What replaces the matched prefix, for `ReplacePrefixMatch`.
    pub replace_prefix_match: Option<String>,
}

/// `HTTPRequestRedirectFilter`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestRedirect {
    /// `http` or `https`.
    pub scheme: Option<String>,
    /// The new host.
    pub hostname: Option<String>,
    /// The new path.
    pub path: Option<PathModifier>,
    /// The new port.
    pub port: Option<u32>,
    /// 301, 302 (default), 303, 307 or 308.
    pub status_code: Option<u32>,
}

/// `HTTPURLRewriteFilter`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UrlRewrite {
    /// The new Host header.
    pub hostname: Option<String>,
    /// The new path.
    pub path: Option<PathModifier>,
}

/// `HTTPCORSFilter`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Cors {
    /// Origins allowed (`*`, exact, or with a `*` label wildcard).
    pub allow_origins: Vec<String>,
    /// Whether credentials are allowed.
    pub allow_credentials: Option<bool>,
    /// Methods allowed.
    pub allow_methods: Vec<String>,
    /// Request headers allowed.
    pub allow_headers: Vec<String>,
    /// Response headers exposed.
    pub expose_headers: Vec<String>,
    /// Seconds a preflight answer may be cached (defaulted to 5).
    pub max_age: Option<u32>,
}

/// `HTTPRouteFilter` / `GRPCRouteFilter`: one filter of a rule or backend.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteFilter {
    /// Which filter (`RequestHeaderModifier`, `URLRewrite`…).
    #[serde(rename = "type")]
    pub filter_type: String,
    /// Request headers to change.
    pub request_header_modifier: Option<HeaderModifier>,
    /// Response headers to change.
    pub response_header_modifier: Option<HeaderModifier>,
    /// Copies of requests to send elsewhere.
    pub request_mirror: Option<RequestMirror>,
    /// A redirect answered by the gateway.
    pub request_redirect: Option<RequestRedirect>,
    /// A rewrite of host or path.
    #[serde(rename = "urlRewrite")]
    pub url_rewrite: Option<UrlRewrite>,
    /// CORS.
    pub cors: Option<Cors>,
    /// An implementation-specific filter.
    pub extension_ref: Option<LocalReference>,
    /// External authorization (experimental).
    pub external_auth: Option<serde_json::Value>,
}

/// A Kubernetes label selector (`matchLabels` and `matchExpressions`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelector {
    /// Labels that must be equal.
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One set-based requirement of a [`LabelSelector`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelectorRequirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector (Kubernetes' `LabelSelectorAsSelector` semantics).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|req| {
                let value = labels.get(&req.key);
                match req.operator.as_str() {
                    "In" => value.is_some_and(|v| req.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !req.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors_match_labels_and_expressions() {
        let labels: BTreeMap<String, String> = [("env".to_string(), "prod".to_string())].into();
        let mut selector = LabelSelector::default();
        assert!(selector.matches(&labels));
        selector.match_labels.insert("env".into(), "prod".into());
        assert!(selector.matches(&labels));
        selector.match_expressions.push(LabelSelectorRequirement {
            key: "team".into(),
            operator: "DoesNotExist".into(),
            values: vec![],
        });
        assert!(selector.matches(&labels));
        selector.match_expressions[0].operator = "Exists".into();
        assert!(!selector.matches(&labels));
    }

    #[test]
    fn references_default_as_the_api_does() {
        let parent = ParentReference {
            name: "gw".into(),
            ..ParentReference::default()
        };
        assert_eq!(
            (parent.group(), parent.kind(), parent.namespace_or("ns")),
            ("gateway.networking.k8s.io", "Gateway", "ns")
        );
        let backend = BackendRef::default();
        assert!(backend.is_service());
        assert_eq!(backend.weight(), 1);
    }
}
