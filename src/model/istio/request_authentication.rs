//! Istio `RequestAuthentication` spec (security.istio.io v1/v1beta1): takes the `spec` JSON, yields JWT rules.

use serde::{Deserialize, Serialize};

use super::proxy_config::TypeWorkloadSelector;
use super::types::PolicyTargetReference;

/// The `spec` of a RequestAuthentication: how to validate JWTs on requests to the selected workloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestAuthentication {
    /// Workloads the policy applies to.
    pub selector: Option<TypeWorkloadSelector>,
    /// Single resource the policy attaches to.
    pub target_ref: Option<PolicyTargetReference>,
    /// Resources the policy attaches to.
    pub target_refs: Vec<PolicyTargetReference>,
    /// JWT validation rules.
    pub jwt_rules: Vec<JwtRule>,
}

/// How to validate tokens from one issuer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JwtRule {
    /// Expected `iss` claim.
    pub issuer: Option<String>,
    /// Accepted audiences; empty means the service name.
    pub audiences: Vec<String>,
    /// URL of the JWKS (http or https); exclusive with `jwks`.
    #[serde(alias = "jwks_uri")]
    pub jwks_uri: Option<String>,
    /// Inline JWKS document (JSON); exclusive with `jwksUri`.
    pub jwks: Option<String>,
    /// Headers to read the token from.
    pub from_headers: Vec<JwtHeader>,
    /// Query parameters to read the token from.
    pub from_params: Vec<String>,
    /// Cookies to read the token from.
    pub from_cookies: Vec<String>,
    /// Header that receives the base64 payload of a valid token.
    pub output_payload_to_header: Option<String>,
    /// Keep the original token in the forwarded request.
    pub forward_original_token: Option<bool>,
    /// Claims to copy into request headers.
    pub output_claim_to_headers: Vec<ClaimToHeader>,
    /// Timeout for fetching the JWKS (duration string).
    pub timeout: Option<String>,
    /// Extra claims whose values are space-delimited lists.
    pub space_delimited_claims: Vec<String>,
    /// Whether a token must be present (default OPTIONAL: requests without a token pass authentication).
    pub presence: Option<JwtPresence>,
}

/// Whether requests must carry a token for a rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JwtPresence {
    /// A missing token is accepted (authorization policies may still require one).
    #[default]
    Optional,
    /// A missing token is rejected.
    Required,
}

/// A header that carries a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JwtHeader {
    /// Header name; required.
    pub name: Option<String>,
    /// Prefix to strip from the header value (e.g. `Bearer `).
    pub prefix: String,
}

/// Copies one claim into one header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimToHeader {
    /// Header to set; required.
    pub header: Option<String>,
    /// Claim to copy; required.
    pub claim: Option<String>,
}
