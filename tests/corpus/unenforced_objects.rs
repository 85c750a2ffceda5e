//! Nothing accepted is silently ignored: an object of a kind admitpilot validates but does not enforce on gateways
//! (here a RequestAuthentication with neither `jwks` nor `jwksUri`, and an AuthorizationPolicy attached by `targetRefs` to a Service) is admitted with a
//! warning saying so, over a real HTTPS AdmissionReview to the `admitpilot serve --config-dir` binary; once in the
//! config folder it is logged, counted in `admitpilot_unenforced_objects{kind}` and marked `notEnforced` in
//! `/debug/configz`. An object admitpilot enforces (a VirtualService, a DENY AuthorizationPolicy) gets no such
//! warning.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use envoy::free_port;
use pipeline::*;
use serde_json::{json, Value};

const NOT_ENFORCED: &str = "is not enforced on gateways by admitpilot";

/// A RequestAuthentication for one issuer with no key source (Istio would discover one from the issuer's OpenID
/// configuration), at the gateway of [`api_config_dir`].
fn require_jwt() -> Value {
    json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "RequestAuthentication",
        "metadata": {"name": "jwt", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"istio": "ingressgateway"}},
            "jwtRules": [{"issuer": "https://issuer.example.com"}]},
    })
}

/// An AuthorizationPolicy with `action`, selecting the gateway.
fn policy(action: &str) -> Value {
    let spec = json!({"selector": {"matchLabels": {"istio": "ingressgateway"}}, "action": action,
        "rules": [{"to": [{"operation": {"paths": ["/admin*"]}}]}]});
    json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": {"name": action.to_lowercase(), "namespace": "default"},
        "spec": spec,
    })
}

fn warnings(review: &Value) -> Vec<String> {
    review["warnings"]
        .as_array()
        .map(|w| w.iter().map(|w| w.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_unenforced_object_is_admitted_with_a_warning_counted_and_marked() {
    let dir = api_config_dir(free_port(), free_port());
    let admitpilot = Admitpilot::start(dir.path()).await;

    let review = admitpilot.review(require_jwt()).await;
    assert_eq!(review["allowed"], true, "{review}");
    let said = warnings(&review);
    assert!(
        said.iter()
            .any(|w| w.starts_with("spec.jwtRules.jwksUri: ") && w.contains(NOT_ENFORCED)),
        "{said:?}"
    );
    let mut attached = policy("DENY");
    attached["spec"]["selector"].take();
    attached["spec"]["targetRefs"] = json!([{"kind": "Service", "name": "reviews"}]);
    let review = admitpilot.review(attached).await;
    let said = warnings(&review);
    assert!(
        said.iter()
            .any(|w| w.starts_with("spec.targetRefs: ") && w.contains(NOT_ENFORCED)),
        "{said:?}"
    );
    let enforced: Value =
        serde_yaml_ng::from_str(&virtual_service("later", "/later", free_port())).unwrap();
    for object in [enforced, policy("DENY")] {
        let review = admitpilot.review(object).await;
        assert!(
            !warnings(&review).iter().any(|w| w.contains(NOT_ENFORCED)),
            "{review}"
        );
    }

    write(
        dir.path(),
        "jwt.yaml",
        &serde_yaml_ng::to_string(&require_jwt()).unwrap(),
    );
    write(
        dir.path(),
        "deny.yaml",
        &serde_yaml_ng::to_string(&policy("DENY")).unwrap(),
    );
    let line = r#"admitpilot_unenforced_objects{kind="RequestAuthentication"} 1"#;
    admitpilot
        .wait_for_admin("/metrics", line, |text| text.lines().any(|l| l == line))
        .await;
    admitpilot
        .wait_for_admin("/debug/configz", "notEnforced", |text| {
            let configz: Value = serde_json::from_str(text).unwrap();
            let objects = configz["objects"].as_array().unwrap();
            objects.iter().any(|o| {
                o["kind"] == "RequestAuthentication"
                    && o["notEnforced"]
                        .as_str()
                        .is_some_and(|w| w.contains(NOT_ENFORCED))
            }) && objects.iter().any(|o| o["kind"] == "AuthorizationPolicy")
                && objects
                    .iter()
                    .filter(|o| o["kind"] != "RequestAuthentication")
                    .all(|o| o.get("notEnforced").is_none())
        })
        .await;
    assert!(admitpilot.log().contains(NOT_ENFORCED));
}
