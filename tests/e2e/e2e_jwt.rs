//! RequestAuthentication enforced on a gateway, end to end: the real `admitpilot serve --config-dir` binary, a real
//! Envoy 1.40 (SotW, default `initial_fetch_timeout`) and a backend on 127.0.0.1. The keys (ES256) and tokens are
//! made in the test; nothing leaves 127.0.0.1. With a RequestAuthentication (inline `jwks`) and an AuthorizationPolicy
//! requiring a request principal on `/secure`: a valid token gets 200 (and its claim is copied to a header), a
//! token with a bad signature 401 anywhere, no token 403 on `/secure` and 200 elsewhere, another subject 403. The
//! same with the keys at a `jwksUri` served on 127.0.0.1, which Envoy fetches through the cluster admitpilot adds for
//! it. Every `*update_rejected` stat stays 0.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::jwt;
use support::pipeline;

use envoy::*;
use jwt::{jwks, key};
use pipeline::*;
use ring::signature::EcdsaKeyPair;
use serde_json::{json, Value};

const NODE_ID: &str = "router~127.0.0.1~gw-jwt.default~default.svc.cluster.local";
const ISSUER: &str = "https://issuer.test";

/// A token from [`ISSUER`] for `subject` signed by `key`.
fn token(key: &EcdsaKeyPair, subject: &str) -> String {
    jwt::token(key, ISSUER, subject)
}

fn yaml(object: &Value) -> String {
    serde_yaml_ng::to_string(object).unwrap()
}

async fn status(http: &reqwest::Client, url: &str, token: Option<&str>) -> u16 {
    let mut request = http.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().status().as_u16()
}

/// A gateway whose RequestAuthentication has `rule` (issuer added) and whose AuthorizationPolicy requires the
/// request principal `alice` on `/secure`; `test` is run against its base URL, then no update may have been rejected.
async fn with_gateway<F, Fut>(rule: Value, envoy_id: u32, test: F)
where
    F: FnOnce(String, Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let (port, dir) = catch_all_config_dir(backend.port);
    let selector = json!({"matchLabels": {"istio": "ingressgateway"}});
    let mut rule = rule;
    rule["issuer"] = json!(ISSUER);
    write(
        dir.path(),
        "jwt.yaml",
        &yaml(&json!({
            "apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
            "metadata": {"name": "jwt", "namespace": "default"},
            "spec": {"selector": selector, "jwtRules": [rule]},
        })),
    );
    write(
        dir.path(),
        "require.yaml",
        &yaml(&json!({
            "apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": {"name": "require", "namespace": "default"},
            "spec": {"selector": selector, "action": "ALLOW", "rules": [
                {"from": [{"source": {"requestPrincipals": [format!("{ISSUER}/alice")]}}],
                 "to": [{"operation": {"paths": ["/secure*"]}}]},
                // Istio splits `<iss>/<sub>` at its last `/`: the issuer exact and a subject prefix, or the end of
                // the issuer and the whole subject.
                {"from": [{"source": {"requestPrincipals": ["https://issuer.test/b*"]}}],
                 "to": [{"operation": {"paths": ["/issuer*"]}}]},
                {"from": [{"source": {"requestPrincipals": ["*.test/carol"]}}],
                 "to": [{"operation": {"paths": ["/carol*"]}}]},
                {"to": [{"operation": {"notPaths": ["/secure*", "/issuer*", "/carol*"]}}]}]},
        })),
    );
    let admitpilot = Admitpilot::start(dir.path()).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &bootstrap, envoy_id).await;
    test(format!("http://127.0.0.1:{port}"), backend).await;
    envoy
        .assert_nothing_rejected("request authentication")
        .await;
    drop(admitpilot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_authentication_is_enforced_on_the_gateway() {
    let signer = key();
    let rule = json!({"jwks": jwks(&signer), "outputClaimToHeaders": [{"header": "x-user", "claim": "sub"}]});
    with_gateway(rule, 53_100, |base, backend| async move {
        let http = client();
        let secure = format!("{base}/secure/x");
        wait_for_response(&http, &secure, 403, "RBAC: access denied").await;

        let alice = token(&signer, "alice");
        assert_eq!(status(&http, &secure, Some(&alice)).await, 200);
        assert_eq!(
            backend.last_request().unwrap()["x-user"],
            "alice",
            "the claim is copied to the header"
        );
        assert_eq!(status(&http, &format!("{base}/api/x"), None).await, 200);
        let forged = token(&key(), "alice");
        assert_eq!(status(&http, &secure, Some(&forged)).await, 401);
        assert_eq!(
            status(&http, &format!("{base}/api/x"), Some(&forged)).await,
            401
        );
        assert_eq!(
            status(&http, &secure, Some(&token(&signer, "bob"))).await,
            403
        );
        let issuer_path = format!("{base}/issuer/x");
        assert_eq!(
            status(&http, &issuer_path, Some(&token(&signer, "bob"))).await,
            200,
            "a subject prefix of the issuer"
        );
        assert_eq!(status(&http, &issuer_path, Some(&alice)).await, 403);
        assert_eq!(status(&http, &issuer_path, None).await, 403);
        let carol_path = format!("{base}/carol/x");
        assert_eq!(
            status(&http, &carol_path, Some(&token(&signer, "carol"))).await,
            200,
            "a principal suffix"
        );
        assert_eq!(status(&http, &carol_path, Some(&alice)).await, 403);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_at_a_jwks_uri_are_fetched_by_the_gateway() {
    let signer = key();
    let keys = Backend::start(Box::leak(jwks(&signer).into_boxed_str())).await;
    let rule = json!({"jwksUri": format!("http://127.0.0.1:{}/jwks.json", keys.port)});
    with_gateway(rule, 53_110, |base, backend| async move {
        let _serving = backend;
        let http = client();
        let secure = format!("{base}/secure/x");
        wait_for_response(&http, &secure, 403, "RBAC: access denied").await;
        assert!(keys.last_request().is_none(), "fetched only when needed");

        assert_eq!(
            status(&http, &secure, Some(&token(&signer, "alice"))).await,
            200
        );
        assert!(keys.last_request().is_some(), "Envoy fetched the JWKS");
        let forged = token(&key(), "alice");
        assert_eq!(status(&http, &secure, Some(&forged)).await, 401);
        assert_eq!(
            status(&http, &secure, Some(&token(&signer, "bob"))).await,
            403
        );
    })
    .await;
}
