//! RequestAuthentication rules: takes a decoded istio RequestAuthentication spec and its metadata, records findings
//! with field paths. Follows Istio's webhook (`ValidateRequestAuthentication`, `validateJwtRule`) and the CRD's
//! OpenAPI/CEL rules: attachment, issuer or JWKS URI, http(s) JWKS URI, an inline JWKS Envoy can load (private keys warn),
//! token locations, claim-to-header names and the fetch timeout.

use serde_json::Value;

use admitpilot_model::istio::request_authentication::JwtRule;
use admitpilot_model::{istio::RequestAuthentication, Findings, ObjectMeta};

use super::common::{validate_duration, validate_policy_attachment, validate_strict_header_name};

/// Most JWT rules the CRD accepts.
const MAX_JWT_RULES: usize = 4096;
/// Longest JWKS URI the CRD accepts.
const MAX_JWKS_URI_LEN: usize = 2048;
/// Most space-delimited claims the CRD accepts.
const MAX_SPACE_DELIMITED_CLAIMS: usize = 64;

/// Validates one RequestAuthentication.
pub fn validate(spec: &RequestAuthentication, _meta: &ObjectMeta, out: &mut Findings) {
    validate_policy_attachment(
        spec.selector.as_ref(),
        spec.target_ref.as_ref(),
        &spec.target_refs,
        out,
    );
    if spec.jwt_rules.len() > MAX_JWT_RULES {
        out.error(
            "spec.jwtRules",
            format!("at most {MAX_JWT_RULES} jwtRules are allowed"),
        );
    }
    for (i, rule) in spec.jwt_rules.iter().enumerate() {
        validate_jwt_rule(rule, &format!("spec.jwtRules[{i}]"), out);
    }
}

/// Validates one JWT rule. The audience, issuer, token-location and claim-to-header name rules mirror Istio's
/// `validateJwtRule`, with its texts; an explicitly empty issuer is the CRD's `minLength: 1`.
fn validate_jwt_rule(rule: &JwtRule, path: &str, out: &mut Findings) {
    for (k, audience) in rule.audiences.iter().enumerate() {
        if audience.is_empty() {
            out.error(
                format!("{path}.audiences[{k}]"),
                "audience must be non-empty string",
            );
        }
    }
    let issuer = rule.issuer.as_deref().unwrap_or_default();
    let jwks_uri = rule.jwks_uri.as_deref().unwrap_or_default();
    if rule.issuer.is_some() && issuer.is_empty() {
        out.error(
            format!("{path}.issuer"),
            "issuer must not be empty when set",
        );
    } else if issuer.is_empty() && jwks_uri.is_empty() {
        out.error(path, "issuer or jwksUri must be non-empty string");
    }
    if let Some(uri) = &rule.jwks_uri {
        if let Err(e) = check_jwks_uri(uri) {
            out.error(format!("{path}.jwksUri"), e);
        }
    }
    if let Some(jwks) = &rule.jwks {
        if rule.jwks_uri.is_some() {
            out.error(path, "only one of jwks and jwksUri may be set");
        }
        if !jwks.is_empty() {
            check_jwks(jwks, &format!("{path}.jwks"), out);
        }
    }
    for (k, header) in rule.from_headers.iter().enumerate() {
        if header.name.as_deref().unwrap_or_default().is_empty() {
            out.error(
                format!("{path}.fromHeaders[{k}].name"),
                "location header name must be non-empty string",
            );
        }
    }
    for (field, values, text) in [
        (
            "fromParams",
            &rule.from_params,
            "location query must be non-empty string",
        ),
        (
            "fromCookies",
            &rule.from_cookies,
            "cookie name must be non-empty string",
        ),
        // The CRD's `minLength: 1`; Istio's webhook has no text for it.
        (
            "spaceDelimitedClaims",
            &rule.space_delimited_claims,
            "claim name must not be empty",
        ),
    ] {
        for (k, value) in values.iter().enumerate() {
            if value.is_empty() {
                out.error(format!("{path}.{field}[{k}]"), text);
            }
        }
    }
    if rule.space_delimited_claims.len() > MAX_SPACE_DELIMITED_CLAIMS {
        out.error(
            format!("{path}.spaceDelimitedClaims"),
            format!("at most {MAX_SPACE_DELIMITED_CLAIMS} claims are allowed"),
        );
    }
    for (k, pair) in rule.output_claim_to_headers.iter().enumerate() {
        let item = format!("{path}.outputClaimToHeaders[{k}]");
        const EMPTY: &str = "outputClaimToHeaders header and claim value must be non-empty string";
        if pair.claim.as_deref().unwrap_or_default().is_empty() {
            out.error(format!("{item}.claim"), EMPTY);
        }
        match pair.header.as_deref() {
            None | Some("") => out.error(format!("{item}.header"), EMPTY),
            Some(header) => validate_strict_header_name(header, &format!("{item}.header"), out),
        }
    }
    if let Some(timeout) = &rule.timeout {
        validate_duration(timeout, &format!("{path}.timeout"), out);
    }
}

/// A JWKS URI: at most 2048 characters, no control characters or spaces, scheme http or https, numeric port.
fn check_jwks_uri(uri: &str) -> Result<(), String> {
    if uri.is_empty() {
        return Err("jwksUri must not be empty when set".into());
    }
    if uri.len() > MAX_JWKS_URI_LEN {
        return Err(format!(
            "jwksUri is longer than {MAX_JWKS_URI_LEN} characters"
        ));
    }
    if uri.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!(
            "jwksUri {uri:?} contains a space or control character"
        ));
    }
    // Istio's `security.ParseJwksURI` text for a scheme other than http(s) (Go's url.Parse lowercases it; no
    // `:` leaves it empty).
    let (scheme, rest) = uri.split_once(':').unwrap_or(("", uri));
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "URI scheme {} is not supported",
            super::common::go_quote(&scheme.to_ascii_lowercase())
        ));
    }
    if let Some(authority) = rest.strip_prefix("//") {
        let authority = authority.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let port = if let Some(v6) = host_port.strip_prefix('[') {
            let Some((_, after)) = v6.split_once(']') else {
                return Err(format!("jwksUri {uri:?} has an unclosed IPv6 address"));
            };
            after.strip_prefix(':')
        } else {
            host_port.split_once(':').map(|(_, p)| p)
        };
        if let Some(port) = port {
            if !port.bytes().all(|c| c.is_ascii_digit()) {
                return Err(format!("jwksUri {uri:?} has an invalid port {port:?}"));
            }
        }
    }
    Ok(())
}

/// An inline JWKS: a JSON key set (`{"keys": [...]}`) or a single key, each key an object with `kty`, that Envoy can
/// load ([`admitpilot_model::jwks::envoy_load_error`]). Keys that carry private material (`d`, or symmetric `oct` keys) get a
/// warning: only public keys are needed.
fn check_jwks(jwks: &str, path: &str, out: &mut Findings) {
    let parsed: Value = match serde_json::from_str(jwks) {
        Ok(v) => v,
        Err(e) => {
            out.error(path, format!("jwks is not valid JSON: {e}"));
            return;
        }
    };
    let keys: Vec<&Value> = match parsed.get("keys") {
        Some(Value::Array(keys)) => keys.iter().collect(),
        Some(_) => {
            out.error(path, "jwks \"keys\" must be a list of keys");
            return;
        }
        None => vec![&parsed],
    };
    let mut key_errors = false;
    for (i, key) in keys.into_iter().enumerate() {
        let Some(kty) = key.get("kty").and_then(Value::as_str) else {
            out.error(path, format!("jwks key at index {i} has no \"kty\""));
            key_errors = true;
            continue;
        };
        if !matches!(kty, "RSA" | "EC" | "OKP" | "oct") {
            key_errors = true;
            out.error(
                path,
                format!("jwks key at index {i} has unsupported kty {kty:?}"),
            );
        } else if kty == "oct" || key.get("d").is_some() {
            out.warning(
                path,
                format!("jwks key at index {i} contains private key material; only public keys are needed"),
            );
        }
    }
    if !key_errors {
        if let Some(why) = admitpilot_model::jwks::envoy_load_error(jwks) {
            out.error(path, format!("Envoy cannot load this jwks: {why}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn jwks_checks_never_panic(s in r#"([a-z0-9:/@%\[\]{}"]|é){0,40}"#) {
            let _ = check_jwks_uri(&s);
            check_jwks(&s, "p", &mut Findings::default());
        }
    }
    use serde_json::json;

    fn findings(spec: serde_json::Value) -> Vec<(String, bool)> {
        crate::testing::findings_of(
            "security.istio.io/v1",
            "RequestAuthentication",
            json!({"name": "r"}),
            spec,
        )
    }

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::testing::error_fields(findings(spec))
    }

    #[test]
    fn accepts_typical_rules() {
        let spec = json!({"selector": {"matchLabels": {"app": "a"}}, "jwtRules": [{
            "issuer": "https://issuer", "jwksUri": "https://issuer:8443/jwks", "audiences": ["a"],
            "fromHeaders": [{"name": "x-jwt", "prefix": "Bearer "}], "fromParams": ["t"], "fromCookies": ["c"],
            "outputClaimToHeaders": [{"claim": "sub", "header": "x-sub"}], "timeout": "5s",
            "presence": "REQUIRED"}, {"jwks_uri": "http://x/jwks"}]});
        assert!(findings(spec).is_empty());
        let jwks = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"abc"}]}"#;
        assert!(findings(json!({"jwtRules": [{"issuer": "i", "jwks": jwks}]})).is_empty());
    }

    #[test]
    fn rejects_bad_rules_at_their_fields() {
        let spec = json!({"jwtRules": [{
            "issuer": "", "audiences": [""], "jwksUri": "ftp://x", "fromHeaders": [{"prefix": "p"}],
            "fromParams": [""], "fromCookies": [""], "spaceDelimitedClaims": [""],
            "outputClaimToHeaders": [{"claim": "", "header": ":authority"}], "timeout": "apple"}]});
        assert_eq!(
            error_paths(spec),
            vec![
                "spec.jwtRules[0].audiences[0]",
                "spec.jwtRules[0].issuer",
                "spec.jwtRules[0].jwksUri",
                "spec.jwtRules[0].fromHeaders[0].name",
                "spec.jwtRules[0].fromParams[0]",
                "spec.jwtRules[0].fromCookies[0]",
                "spec.jwtRules[0].spaceDelimitedClaims[0]",
                "spec.jwtRules[0].outputClaimToHeaders[0].claim",
                "spec.jwtRules[0].outputClaimToHeaders[0].header",
                "spec.jwtRules[0].timeout",
            ]
        );
        assert_eq!(
            error_paths(json!({"jwtRules": [{}]})),
            vec!["spec.jwtRules[0]"]
        );
        assert_eq!(
            error_paths(json!({"jwtRules": [null]})),
            vec!["spec.jwtRules[0]"]
        );
        assert_eq!(
            error_paths(json!({"jwtRules": [{"issuer": "i", "presence": "MANDATORY"}]})),
            vec!["spec.jwtRules[0].presence"]
        );
    }

    #[test]
    fn checks_attachment() {
        assert_eq!(
            error_paths(json!({"selector": {"matchLabels": {"a": "b"}},
                "targetRef": {"group": "", "kind": "Service", "name": "foo"}})),
            vec!["spec"]
        );
        assert_eq!(
            error_paths(json!({"targetRef": {"group": "", "kind": "Service"}})),
            vec!["spec.targetRef"]
        );
    }

    #[test]
    fn inline_jwks_must_parse_and_private_keys_warn() {
        assert_eq!(
            error_paths(json!({"jwtRules": [{"issuer": "i", "jwks": "{not json"}]})),
            vec!["spec.jwtRules[0].jwks"]
        );
        let private = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY","y":"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU","d":"c"}]}"#;
        assert_eq!(
            findings(json!({"jwtRules": [{"issuer": "i", "jwks": private}]})),
            vec![("spec.jwtRules[0].jwks".to_string(), false)]
        );
        assert_eq!(
            error_paths(
                json!({"jwtRules": [{"issuer": "i", "jwks": "{}", "jwksUri": "https://a"}]})
            ),
            vec!["spec.jwtRules[0]", "spec.jwtRules[0].jwks"]
        );
    }

    #[test]
    fn jwks_uri_needs_http_scheme_and_numeric_port() {
        assert!(check_jwks_uri("https://a.b/c").is_ok());
        assert!(check_jwks_uri("HTTP://a.b:80/c").is_ok());
        assert!(check_jwks_uri("https://[::1]:443/c").is_ok());
        assert!(check_jwks_uri("a.b/c").is_err());
        assert!(check_jwks_uri("https://a.b:x/c").is_err());
        assert!(check_jwks_uri("hTPp\\\u{8}lah").is_err());
    }
}
