//! Reference analysis at admission, over real HTTPS AdmissionReviews to the `admitpilot serve --config-dir` binary
//! (the live config loaded from a folder: a Gateway `default/gw`, a ServiceEntry for `backend.example.com` and a
//! VirtualService): what an object names that the config lacks comes back as warnings with Istio's analyzer codes
//! (`--reference-check=warn`, the default), is silenced per object by `galley.istio.io/analyze-suppress`, and is
//! denied with `--reference-check=deny`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

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
            r#"[IST0101] spec.gateways[0]: Referenced gateway not found: "nope""#,
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
        r#"configuration is invalid: [IST0101] spec.gateways[0]: Referenced gateway not found: "nope""#
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

/// The other codes over HTTPS: IST0132 (host no server of the Gateway accepts), IST0101 for a subset no
/// DestinationRule defines, a `credentialName` with no Secret, and a higress-config tracer service that does not
/// exist.
#[tokio::test]
async fn hosts_subsets_secrets_and_tracers_are_checked_too() {
    let dir = api_config_dir(free_port(), free_port());
    let admitpilot = Admitpilot::start(dir.path()).await;
    let narrow = json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": {"name": "narrow", "namespace": "default"},
        "spec": {"selector": {"istio": "ingressgateway"}, "servers": [{
            "port": {"number": 443, "name": "https", "protocol": "HTTPS"}, "hosts": ["*.example.org"],
            "tls": {"mode": "SIMPLE", "credentialName": "missing-cert"}}]}});
    let review = admitpilot.review(narrow.clone()).await;
    assert_eq!(
        warnings(&review),
        [
            r#"[IST0101] spec.servers[0].tls.credentialName: Referenced credentialName not found: "missing-cert""#
        ]
    );
    write(
        dir.path(),
        "narrow.yaml",
        &serde_yaml_ng::to_string(&narrow).unwrap(),
    );
    admitpilot
        .wait_for_admin("/debug/configz", "the narrow Gateway", |text| {
            text.contains("narrow")
        })
        .await;

    let mut stray = virtual_service("stray", "x.example.com", "narrow", "backend.example.com");
    stray["spec"]["http"][0]["route"][0]["destination"]["subset"] = json!("v9");
    assert_eq!(
        warnings(&admitpilot.review(stray).await),
        [
            r#"[IST0101] spec.http[0].route[0].destination.subset: Referenced host+subset in destinationrule not found: "backend.example.com+v9""#,
            "[IST0132] spec.hosts: one or more host [x.example.com] defined in VirtualService default/stray not found in Gateway default/narrow.",
        ]
    );

    let higress = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "higress-config", "namespace": "higress-system"},
        "data": {"higress": "tracing:\n  enable: true\n  zipkin:\n    service: zipkin.istio-system.svc.cluster.local\n    port: \"9411\"\n"}});
    // The reference finding, and the effect check's warning of what the gateway will not get.
    let found = warnings(&admitpilot.review(higress).await);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("gateway default {istio=ingressgateway}: tracing (envoy.tracers.zipkin) of listener")
            && found[0].ends_with("names clusters that do not exist (outbound|9411||zipkin.istio-system.svc.cluster.local): left out until the clusters exist"),
        "{found:?}"
    );
    assert_eq!(
        found[1],
        r#"[IST0101] data.higress.tracing.zipkin.service: Referenced tracing service not found: "zipkin.istio-system.svc.cluster.local""#
    );
}
