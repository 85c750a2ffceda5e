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

/// A server Envoy fetches a JWKS from, as named by a rule's `jwksUri`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JwksUpstream {
    /// Host name or IP address (without brackets).
    pub host: String,
    /// Port (the scheme's default when the URI gives none).
    pub port: u32,
    /// Whether the scheme is `https`.
    pub tls: bool,
}

/// The server of a `jwksUri`, or `None` when the URI is not `http(s)://host[:port]/…` with a port in 1–65535 (an
/// empty port is the scheme's, as Go's URL parser has it).
pub fn jwks_upstream(uri: &str) -> Option<JwksUpstream> {
    let (scheme, rest) = uri.split_once("://")?;
    let (tls, default_port) = if scheme.eq_ignore_ascii_case("https") {
        (true, 443)
    } else if scheme.eq_ignore_ascii_case("http") {
        (false, 80)
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    let port = match port.filter(|p| !p.is_empty()) {
        Some(port) if port.bytes().all(|b| b.is_ascii_digit()) => {
            port.parse::<u16>().ok().filter(|p| *p > 0)?.into()
        }
        Some(_) => return None,
        None => default_port,
    };
    (!host.is_empty()).then(|| JwksUpstream {
        host: host.to_ascii_lowercase(),
        port,
        tls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwks_uri_servers() {
        let up = |uri: &str| jwks_upstream(uri).map(|u| (u.host, u.port, u.tls));
        assert_eq!(
            up("https://Keys.Example.com/jwks"),
            Some(("keys.example.com".into(), 443, true))
        );
        assert_eq!(
            up("http://127.0.0.1:8080/k?x=1"),
            Some(("127.0.0.1".into(), 8080, false))
        );
        assert_eq!(up("https://[::1]:9443/k"), Some(("::1".into(), 9443, true)));
        assert_eq!(
            up("https://user@host:/k"),
            Some(("host".into(), 443, true)),
            "empty port"
        );
        assert_eq!(up("https://host:+443/k"), None);
        assert_eq!(up("https://host:0/k"), None);
        assert_eq!(up("https://host:70000/k"), None);
        assert_eq!(up("ftp://host/k"), None);
        assert_eq!(up("https:///k"), None);
    }
}
