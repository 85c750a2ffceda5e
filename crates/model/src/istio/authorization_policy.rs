//! Istio `AuthorizationPolicy` spec (security.istio.io v1/v1beta1): takes the `spec` JSON, yields typed rules.

use serde::{Deserialize, Serialize};

use super::proxy_config::TypeWorkloadSelector;
use super::types::PolicyTargetReference;

/// The `spec` of an AuthorizationPolicy: who may do what on the selected workloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthorizationPolicy {
    /// Workloads the policy applies to; absent means every workload in the namespace.
    pub selector: Option<TypeWorkloadSelector>,
    /// Single resource the policy attaches to (exclusive with `selector` and `targetRefs`).
    pub target_ref: Option<PolicyTargetReference>,
    /// Resources the policy attaches to (exclusive with `selector` and `targetRef`).
    pub target_refs: Vec<PolicyTargetReference>,
    /// Rules to match; an empty list matches nothing for ALLOW and is rejected for DENY/CUSTOM.
    pub rules: Vec<Rule>,
    /// What to do when a rule matches (default ALLOW).
    pub action: Action,
    /// The extension provider, for the CUSTOM action only.
    pub provider: Option<ExtensionProvider>,
}

/// The action of an AuthorizationPolicy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Allow a request only if it matches a rule.
    #[default]
    Allow,
    /// Deny a request if it matches a rule.
    Deny,
    /// Audit a request if it matches a rule.
    Audit,
    /// Delegate the decision to an extension provider.
    Custom,
}

/// Names the extension provider (from mesh config) that decides CUSTOM policies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtensionProvider {
    /// Provider name.
    pub name: String,
}

/// One rule: request sources, operations and extra conditions, all of which must match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Rule {
    /// Sources; any may match. Absent matches every source; present but empty is rejected.
    pub from: Option<Vec<From>>,
    /// Operations; any may match. Absent matches every operation; present but empty is rejected.
    pub to: Option<Vec<To>>,
    /// Extra conditions; all must match.
    pub when: Vec<Condition>,
}

/// One `from` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct From {
    /// The source to match; required.
    pub source: Option<Source>,
}

/// One `to` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct To {
    /// The operation to match; required.
    pub operation: Option<Operation>,
}

/// Attributes of the request's origin; set fields are ANDed, values within a field ORed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Source {
    /// Peer identities (`<trust-domain>/ns/<ns>/sa/<sa>`).
    pub principals: Vec<String>,
    /// Negated peer identities.
    pub not_principals: Vec<String>,
    /// Request (JWT) principals (`<iss>/<sub>`).
    pub request_principals: Vec<String>,
    /// Negated request principals.
    pub not_request_principals: Vec<String>,
    /// Peer namespaces.
    pub namespaces: Vec<String>,
    /// Negated peer namespaces.
    pub not_namespaces: Vec<String>,
    /// Peer service accounts (`sa` or `ns/sa`).
    pub service_accounts: Vec<String>,
    /// Negated peer service accounts.
    pub not_service_accounts: Vec<String>,
    /// Peer IPs or CIDRs.
    pub ip_blocks: Vec<String>,
    /// Negated peer IPs or CIDRs.
    pub not_ip_blocks: Vec<String>,
    /// Original client IPs or CIDRs (X-Forwarded-For / proxy protocol).
    pub remote_ip_blocks: Vec<String>,
    /// Negated original client IPs or CIDRs.
    pub not_remote_ip_blocks: Vec<String>,
    /// Peer trust domains.
    pub trust_domains: Vec<String>,
    /// Negated peer trust domains.
    pub not_trust_domains: Vec<String>,
}

/// Attributes of the request's target; set fields are ANDed, values within a field ORed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Operation {
    /// Hosts (HTTP Host header).
    pub hosts: Vec<String>,
    /// Negated hosts.
    pub not_hosts: Vec<String>,
    /// Destination ports, as decimal strings.
    pub ports: Vec<String>,
    /// Negated destination ports.
    pub not_ports: Vec<String>,
    /// HTTP methods.
    pub methods: Vec<String>,
    /// Negated HTTP methods.
    pub not_methods: Vec<String>,
    /// Paths, with `*` prefix/suffix or `{*}` / `{**}` templates.
    pub paths: Vec<String>,
    /// Negated paths.
    pub not_paths: Vec<String>,
}

/// An extra condition on an attribute (`key`) such as `request.headers[x]` or `source.ip`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    /// The attribute name; required.
    pub key: String,
    /// Values, any of which matches.
    pub values: Vec<String>,
    /// Values, none of which may match.
    pub not_values: Vec<String>,
}
