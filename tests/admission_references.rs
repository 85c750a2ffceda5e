//! Reference analysis at admission, over real HTTPS AdmissionReviews to the `admitpilot serve --config-dir` binary
//! (the live config loaded from a folder: a Gateway `default/gw`, a ServiceEntry for `backend.example.com` and a
//! VirtualService): what an object names that the config lacks comes back as warnings with Istio's analyzer codes
//! (`--reference-check=warn`, the default), is silenced per object by `galley.istio.io/analyze-suppress`, and is
//! denied with `--reference-check=deny`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/envoy.rs"]
mod envoy;
#[path = "support/pipeline.rs"]
mod pipeline;

use envoy::{client, free_port, get};
use pipeline::*;
use serde_json::{json, Value};

/// A VirtualService `default/<name>` for `host` on gateway `gateway`, routing to `destination`.
fn virtual_service(name: &str, host: &str, gateway: &str, destination: &str) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"hosts": [host], "gateways": [gateway],
            "http": [{"route": [{"destination": {"host": destination, "port": {"number": 80}}}]}]},
    })
}

fn warnings(review: &Value) -> Vec<String> {
    review["warnings"]
        .as_array()
        .map(|w| w.iter().map(|w| w.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn broken_references_are_warnings_with_istio_codes() {
    let dir = api_config_dir(free_port(), free_port());
    let admitpilot = Admitpilot::start(dir.path()).await;

    let fine = virtual_service("fine", "fine.example.com", "gw", "backend.example.com");
    let review = admitpilot.review(fine).await;
    assert_eq!(
        (review["allowed"].clone(), warnings(&review)),
        (json!(true), vec![])
    );

    let broken = virtual_service("broken", "x.example.com", "nope", "missing.example.com");
    let review = admitpilot.review(broken.clone()).await;
    assert_eq!(review["allowed"], true, "{review}");
    assert_eq!(
        warnings(&review),
        [
            r#"[IST0101] spec.gateways[0]: Referenced gateway not found: "default/nope""#,
            r#"[IST0101] spec.http[0].route[0].destination.host: Referenced host not found: "missing.example.com""#,
        ]
    );

    // The same host as the VirtualService `api` of the folder, on the same gateway.
    let shared = virtual_service("shared", "*", "gw", "backend.example.com");
    let review = admitpilot.review(shared).await;
    let found = warnings(&review);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("[IST0109] spec.hosts[0]: The VirtualServices default/shared, default/api associated with gateway default/gw"), "{found:?}");

    let mut silenced = broken;
    silenced["metadata"]["annotations"] = json!({"galley.istio.io/analyze-suppress": "IST0101"});
    let review = admitpilot.review(silenced).await;
    assert_eq!(warnings(&review), Vec::<String>::new());
}

#[tokio::test]
async fn reference_check_deny_denies_them() {
    let dir = api_config_dir(free_port(), free_port());
    let admitpilot = Admitpilot::start_with_args(dir.path(), &["--reference-check=deny"]).await;
    let broken = virtual_service("broken", "x.example.com", "nope", "backend.example.com");
    let review = admitpilot.review(broken).await;
    assert_eq!(review["allowed"], false, "{review}");
    assert_eq!(
        review["status"]["message"],
        r#"configuration is invalid: [IST0101] spec.gateways[0]: Referenced gateway not found: "default/nope""#
    );
    let metrics = get(&client(), &format!("{}/metrics", admitpilot.admin))
        .await
        .unwrap()
        .1;
    assert!(
        metrics.contains(r#"admitpilot_webhook_denials_total{reason="broken_reference"} 1"#),
        "{metrics}"
    );
}

/// The value of `admitpilot_webhook_effect_check_duration_seconds_count`.
async fn effect_checks(admitpilot: &Admitpilot) -> u64 {
    let metrics = get(&client(), &format!("{}/metrics", admitpilot.admin))
        .await
        .unwrap()
        .1;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("admitpilot_webhook_effect_check_duration_seconds_count "))
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn an_unrelated_config_map_is_never_checked_against_the_config() {
    let dir = api_config_dir(free_port(), free_port());
    let admitpilot = Admitpilot::start(dir.path()).await;
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app-settings", "namespace": "default"}, "data": {"level": "debug"}});
    let review = admitpilot.review(settings).await;
    assert_eq!(
        (review["allowed"].clone(), warnings(&review)),
        (json!(true), vec![])
    );
    assert_eq!(effect_checks(&admitpilot).await, 0);
    let fine = virtual_service("fine", "fine.example.com", "gw", "backend.example.com");
    admitpilot.review(fine).await;
    assert_eq!(effect_checks(&admitpilot).await, 1);
}
