//! JWTs for e2e tests: an ES256 key made in the test, its JWKS and tokens it signs; nothing leaves the process.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::json;

/// A fresh P-256 signing key.
pub fn key() -> EcdsaKeyPair {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap()
}

/// The JWKS of `key` (an uncompressed P-256 point: 0x04, x, y), key id `test`.
pub fn jwks(key: &EcdsaKeyPair) -> String {
    let point = key.public_key().as_ref();
    json!({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "test",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])}]})
    .to_string()
}

/// A token from `issuer` for `subject` signed by `key`, valid for an hour.
pub fn token(key: &EcdsaKeyPair, issuer: &str, subject: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": "test"});
    let claims = json!({"iss": issuer, "sub": subject, "iat": now, "exp": now + 3600});
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}
