//! Nothing accepted is silently ignored: an object of a kind admitpilot validates but does not enforce on gateways
//! (here an AuthorizationPolicy selecting the gateway) is admitted with a warning saying so, over a real HTTPS
//! AdmissionReview to the `admitpilot serve --config-dir` binary; once in the config folder it is logged, counted in
//! `admitpilot_unenforced_objects{kind}` and marked `notEnforced` in `/debug/configz`. An object admitpilot
//! enforces gets no such warning.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/envoy.rs"]
mod envoy;
#[path = "support/pipeline.rs"]
mod pipeline;

use envoy::free_port;
use pipeline::*;
use serde_json::{json, Value};

const NOT_ENFORCED: &str = "is not enforced on gateways by admitpilot";

/// Istio's "deny /admin at the ingress" example, for the gateway of [`api_config_dir`].
fn deny_admin() -> Value {
    json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": {"name": "deny-admin", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"istio": "ingressgateway"}}, "action": "DENY",
            "rules": [{"to": [{"operation": {"paths": ["/admin*"]}}]}]},
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

    let review = admitpilot.review(deny_admin()).await;
    assert_eq!(review["allowed"], true, "{review}");
    let said = warnings(&review);
    assert!(
        said.iter().any(|w| w
            == &format!(
                "spec: AuthorizationPolicy {NOT_ENFORCED}: no RBAC or ext_authz filter is generated, so gateways \
                 neither allow nor deny requests by it"
            )),
        "{said:?}"
    );
    let enforced: Value =
        serde_yaml_ng::from_str(&virtual_service("later", "/later", free_port())).unwrap();
    let review = admitpilot.review(enforced).await;
    assert!(
        !warnings(&review).iter().any(|w| w.contains(NOT_ENFORCED)),
        "{review}"
    );

    write(
        dir.path(),
        "deny-admin.yaml",
        &serde_yaml_ng::to_string(&deny_admin()).unwrap(),
    );
    let line = r#"admitpilot_unenforced_objects{kind="AuthorizationPolicy"} 1"#;
    admitpilot
        .wait_for_admin("/metrics", line, |text| text.lines().any(|l| l == line))
        .await;
    admitpilot
        .wait_for_admin("/debug/configz", "notEnforced", |text| {
            let configz: Value = serde_json::from_str(text).unwrap();
            configz["objects"].as_array().unwrap().iter().any(|o| {
                o["kind"] == "AuthorizationPolicy"
                    && o["notEnforced"]
                        .as_str()
                        .is_some_and(|w| w.contains(NOT_ENFORCED))
            }) && configz["objects"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["kind"] == "VirtualService")
                .all(|o| o.get("notEnforced").is_none())
        })
        .await;
    assert!(admitpilot.log().contains(NOT_ENFORCED));
}
