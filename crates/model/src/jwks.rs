//! Inline JWKS as Envoy loads it (pure): takes a RequestAuthentication's `jwks` text, yields the form admitpilot
//! hands Envoy ([`envoy_form`]) and why Envoy would refuse to load it ([`envoy_load_error`]).
//!
//! Envoy's JWT filter reads an inline JWKS with jwt_verify_lib's `Jwks::createFrom(…, JWKS)` when the listener is
//! built and rejects the whole listener update if that fails (`Provider '…' in jwt_authn config has invalid local
//! jwks: …`). Istio's webhook only checks that the text parses as a key set (`jwk.Parse`), so a key set Istio
//! admits can still take the gateway's listeners down; admitpilot refuses it instead.

use std::borrow::Cow;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use serde_json::{Map, Value};

/// URL-safe base64, padded or not (absl's `WebSafeBase64Unescape`).
const WEB_SAFE: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The JWKS text admitpilot gives Envoy: a single key (an object with `kty` and no `keys`, which Istio's `jwk.Parse`
/// accepts and jwt_verify_lib does not) becomes the set `{"keys": [key]}`; anything else is passed as written.
pub fn envoy_form(jwks: &str) -> Cow<'_, str> {
    match serde_json::from_str::<Value>(jwks) {
        Ok(Value::Object(key)) if key.contains_key("kty") && !key.contains_key("keys") => {
            Cow::Owned(serde_json::json!({ "keys": [key] }).to_string())
        }
        _ => Cow::Borrowed(jwks),
    }
}

/// Why Envoy would refuse `jwks` (in [`envoy_form`]), or `None` when it loads it. Mirrors jwt_verify_lib's
/// `Jwks::createFromJwksCore`: the text is a JSON object; without `keys`, every field must be an X.509 certificate
/// in PEM; `keys` is a list, whose objects must each be a key `extractJwk` reads (an error in any one fails the set)
/// and at least one of which must be there.
pub fn envoy_load_error(jwks: &str) -> Option<String> {
    let form = envoy_form(jwks);
    let Ok(Value::Object(set)) = serde_json::from_str::<Value>(&form) else {
        return Some("it is not a JSON object".into());
    };
    let Some(keys) = set.get("keys") else {
        let x509 = !set.is_empty()
            && set.iter().all(|(kid, cert)| {
                !kid.is_empty() && cert.as_str().is_some_and(is_certificate_pem)
            });
        return (!x509).then(|| "it has no \"keys\"".into());
    };
    let Value::Array(keys) = keys else {
        return Some("\"keys\" is not a list".into());
    };
    let mut any = false;
    for (i, key) in keys.iter().enumerate() {
        // jwt_verify_lib skips list items that are not objects.
        let Value::Object(key) = key else { continue };
        if let Err(why) = key_error(key) {
            return Some(format!("key at index {i}: {why}"));
        }
        any = true;
    }
    (!any).then(|| "it has no usable key".into())
}

/// A certificate as jwt_verify_lib takes one (`shouldCheckX509`): PEM with exactly its header and footer lines.
/// Envoy parses the certificate when it loads the set; here its body must be base64 of a DER `SEQUENCE` (the
/// certificate's own structure is not checked).
fn is_certificate_pem(pem: &str) -> bool {
    let Some(body) = pem
        .strip_prefix("-----BEGIN CERTIFICATE-----\n")
        .and_then(|rest| rest.strip_suffix("\n-----END CERTIFICATE-----\n"))
    else {
        return false;
    };
    let body: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .is_ok_and(|der| der.first() == Some(&0x30))
}

/// A string field: `Ok(None)` when absent, an error when of another type (jwt_verify_lib's `StructUtils::GetString`).
fn string<'k>(key: &'k Map<String, Value>, name: &str) -> Result<Option<&'k str>, String> {
    match key.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("\"{name}\" is not a string")),
    }
}

fn required<'k>(key: &'k Map<String, Value>, name: &str) -> Result<&'k str, String> {
    string(key, name)?.ok_or_else(|| format!("\"{name}\" is missing"))
}

fn decode(name: &str, value: &str) -> Result<Vec<u8>, String> {
    WEB_SAFE
        .decode(value)
        .map_err(|_| format!("\"{name}\" is not URL-safe base64"))
}

/// One key, as jwt_verify_lib's `extractJwk` reads it (`kty` EC, RSA, oct or OKP; `alg`, when given, matching it).
fn key_error(key: &Map<String, Value>) -> Result<(), String> {
    let kty = required(key, "kty")?;
    // Only a string `alg` counts as given.
    let alg = key.get("alg").and_then(Value::as_str);
    match kty {
        "EC" => ec_key(key, alg),
        "RSA" => {
            if alg.is_some_and(|alg| !alg.starts_with("RS")) {
                return Err("an RSA key's \"alg\" must start with RS".into());
            }
            let n = required(key, "n")?;
            let e = required(key, "e")?;
            decode("n", n)?;
            let e = decode("e", e)?;
            // Only the exponents 3 and 65537 (`createRsaFromJwk`), leading zeros aside.
            let e: Vec<u8> = e.into_iter().skip_while(|b| *b == 0).collect();
            if e != [3] && e != [1, 0, 1] {
                return Err("an RSA key's \"e\" must be 3 or 65537".into());
            }
            Ok(())
        }
        "oct" => {
            if alg.is_some_and(|alg| !matches!(alg, "HS256" | "HS384" | "HS512")) {
                return Err("an oct key's \"alg\" must be HS256, HS384 or HS512".into());
            }
            if decode("k", required(key, "k")?)?.is_empty() {
                return Err("an oct key's \"k\" is empty".into());
            }
            Ok(())
        }
        "OKP" => {
            if alg.is_some_and(|alg| alg != "EdDSA") {
                return Err("an OKP key's \"alg\" must be EdDSA".into());
            }
            if required(key, "crv")? != "Ed25519" {
                return Err("an OKP key's \"crv\" must be Ed25519".into());
            }
            if decode("x", required(key, "x")?)?.len() != 32 {
                return Err("an Ed25519 key's \"x\" must be 32 bytes".into());
            }
            Ok(())
        }
        other => Err(format!("kty {other:?} is not supported")),
    }
}

/// An EC key (`extractJwkFromJwkEC`): the curve from `alg` or `crv` (P-256 when neither is given), then `x` and `y`
/// a point of that curve.
fn ec_key(key: &Map<String, Value>, alg: Option<&str>) -> Result<(), String> {
    if alg.is_some_and(|alg| !alg.starts_with("ES")) {
        return Err("an EC key's \"alg\" must start with ES".into());
    }
    let crv = string(key, "crv")?.unwrap_or_default();
    let curves = [
        ("ES256", "P-256", 32),
        ("ES384", "P-384", 48),
        ("ES512", "P-521", 66),
    ];
    if let Some(alg) = alg.filter(|_| !crv.is_empty()) {
        if !curves.iter().any(|(a, c, _)| *a == alg && *c == crv) {
            return Err(format!("\"alg\" {alg} does not go with \"crv\" {crv}"));
        }
    }
    let crv = if alg.is_none() && crv.is_empty() {
        "P-256"
    } else {
        crv
    };
    let Some(&(_, curve, size)) = curves.iter().find(|(a, c, _)| Some(*a) == alg || *c == crv)
    else {
        return Err("an EC key's \"alg\" or \"crv\" names no supported curve".into());
    };
    let coordinate = |name: &str| -> Result<Vec<u8>, String> {
        let bytes = decode(name, required(key, name)?)?;
        // A big-endian number (`BN_bin2bn`): leading zeros do not count; it must fit the field.
        let bytes: Vec<u8> = bytes.into_iter().skip_while(|b| *b == 0).collect();
        if bytes.len() > size {
            return Err(format!("\"{name}\" is too large for {curve}"));
        }
        let mut padded = vec![0; size - bytes.len()];
        padded.extend(bytes);
        Ok(padded)
    };
    let (x, y) = (coordinate("x")?, coordinate("y")?);
    let algorithm = match curve {
        "P-256" => &ring::agreement::ECDH_P256,
        "P-384" => &ring::agreement::ECDH_P384,
        // ring has no P-521: its size was checked, the point is not.
        _ => return Ok(()),
    };
    let mut point = vec![4];
    point.extend(x);
    point.extend(y);
    if on_curve(algorithm, &point) {
        Ok(())
    } else {
        Err(format!("\"x\" and \"y\" are not a point of {curve}"))
    }
}

/// Whether `point` (uncompressed) is a valid public key of the curve: ring checks the peer key of a key agreement
/// as BoringSSL's `EC_KEY_set_public_key_affine_coordinates` does (coordinates below the field prime, on the curve).
fn on_curve(algorithm: &'static ring::agreement::Algorithm, point: &[u8]) -> bool {
    let random = ring::rand::SystemRandom::new();
    let Ok(mine) = ring::agreement::EphemeralPrivateKey::generate(algorithm, &random) else {
        return false;
    };
    let theirs = ring::agreement::UnparsedPublicKey::new(algorithm, point);
    ring::agreement::agree_ephemeral(mine, &theirs, |_| ()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EC: &str = r#"{"kty": "EC", "crv": "P-256", "x": "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY", "y": "T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}"#;

    #[test]
    fn single_keys_become_sets() {
        assert_eq!(
            envoy_form(r#"{"kty":"oct","k":"YQ"}"#),
            r#"{"keys":[{"k":"YQ","kty":"oct"}]}"#
        );
        assert_eq!(envoy_form(r#"{"keys":[]}"#), r#"{"keys":[]}"#);
        assert_eq!(envoy_load_error(EC), None);
    }

    #[test]
    fn follows_jwt_verify_lib() {
        let set = |key: &str| format!(r#"{{"keys": [{key}]}}"#);
        assert_eq!(envoy_load_error(&set(EC)), None);
        assert_eq!(
            envoy_load_error(&set(r#"{"kty":"RSA","n":"abc","e":"AQAB"}"#)),
            None
        );
        assert_eq!(
            envoy_load_error(&set(r#""skipped", {"kty":"oct","k":"c2VjcmV0"}"#)),
            None
        );
        for (bad, why) in [
            (r#"{"keys": []}"#.to_string(), "no usable key"),
            ("[]".to_string(), "not a JSON object"),
            (r#"{"a": 1}"#.to_string(), "no \"keys\""),
            (r#"{"keys": {}}"#.to_string(), "not a list"),
            (
                set(r#"{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}"#),
                "not a point",
            ),
            (
                set(r#"{"kty":"EC","alg":"ES384","crv":"P-256","x":"AA","y":"AA"}"#),
                "does not go",
            ),
            (
                set(r#"{"kty":"RSA","n":"abc","e":"Aw","alg":"PS256"}"#),
                "must start with RS",
            ),
            (set(r#"{"kty":"RSA","n":"abc","e":"AAE"}"#), "3 or 65537"),
            (set(r#"{"kty":"oct","k":""}"#), "empty"),
            (set(r#"{"kty":"OKP","crv":"X25519","x":"AA"}"#), "Ed25519"),
            (set(r#"{"kty":"PQ"}"#), "not supported"),
            (set(r#"{"kty": 1}"#), "not a string"),
            (
                format!(r#"{{"keys": [{EC}, {{"kty":"RSA","e":"AQAB"}}]}}"#),
                "\"n\" is missing",
            ),
        ] {
            let error = envoy_load_error(&bad).unwrap_or_default();
            assert!(error.contains(why), "{bad}: {error:?}");
        }
        let certified =
            rcgen::generate_simple_self_signed(vec!["a".into()]).expect("a certificate");
        let cert = certified.cert.pem().replace("\r\n", "\n");
        assert_eq!(
            envoy_load_error(&serde_json::json!({"kid": cert}).to_string()),
            None
        );
        let not_der = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(envoy_load_error(&serde_json::json!({"kid": not_der}).to_string()).is_some());
    }
}
