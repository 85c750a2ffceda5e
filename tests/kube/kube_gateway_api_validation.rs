//! The real kube-apiserver (`support::kube_server`, with the v1.6.3 Gateway API CRDs of `crds/gateway-api`) judges
//! admitpilot's Gateway API validation: every Gateway API object of the Gateway API goldens
//! (`tests/golden-gateway-api/*/input.yaml`), and mutants generated from each (every string, number, list and object
//! of its `spec` changed in turn: emptied, made invalid for a name, path or host, made too long or one character,
//! pushed out of range or made fractional, a list item repeated or the list grown past any limit, set to null or to
//! a value of the wrong JSON type; and its metadata: labels and annotations null, with a null value, a key or value
//! Kubernetes refuses, a name that is no DNS subdomain), goes to the API server as a server-side dry run
//! (`dryRun=All` creates, as `kubectl create --dry-run=server` sends them, no webhook installed) and through `admitpilot::validate::validate_document`.
//! They must agree on the verdict, and every error the API server gives (its field path and words) must be one of
//! admitpilot's, except for the rules admitpilot documents as not mirrored (README, "Gateway API").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::differential::{metadata_mutants, mutants, server_errors};
use support::kube_server;

use std::collections::BTreeSet;
use std::path::Path;

use admitpilot::model::decode::DecodeOptions;
use futures::StreamExt;
use kube_server::Kube;
use serde_json::{json, Value};

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/gateway-api");
const GROUP: &str = "gateway.networking.k8s.io";

/// The Gateway API objects of the golden inputs, placed in `namespace`.
fn bases(namespace: &str) -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-gateway-api");
    let mut cases: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path().join("input.yaml"))
        .collect();
    cases.sort();
    let mut out = Vec::new();
    for case in cases {
        let text = std::fs::read_to_string(&case).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let mut value: Value = serde::Deserialize::deserialize(doc).unwrap();
            let api_version = value["apiVersion"].as_str().unwrap_or_default();
            if !api_version.starts_with(GROUP) {
                continue;
            }
            let cluster_scoped = value["kind"] == "GatewayClass";
            if let Some(meta) = value["metadata"].as_object_mut() {
                meta.remove("creationTimestamp");
                if !cluster_scoped {
                    meta.insert("namespace".into(), json!(namespace));
                }
            }
            out.push(value);
        }
    }
    out
}

/// A Gateway with `addresses` (the golden inputs have none), as written and as the refused values.
fn address_cases(namespace: &str) -> Vec<(String, Value)> {
    let gateway = |addresses: Value| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "addresses", "namespace": namespace},
            "spec": {"gatewayClassName": "admitpilot", "addresses": addresses,
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})
    };
    [
        json!([{"value": "1.1.1"}]),
        json!([{"value": "256.255.255.255"}]),
        json!([{"value": "2001:db8:3c4d:15:0:d234:3eee:::"}]),
        json!([{"type": "Hostname", "value": "a.example:80"}]),
        json!([{"value": "01.1.1.1"}, {"value": "::ffff:1.2.3.4"}]),
        json!([{"type": "IPAddress"}, {"type": "NamedAddress", "value": "x"}]),
        json!([{"value": "1.2.3.4"}, {"type": "IPAddress", "value": "1.2.3.4"}]),
        json!([{"type": "Hostname", "value": "*.a.example"}, {"type": "Hostname", "value": "*.a.example"}]),
    ]
    .into_iter()
    .map(|addresses| (format!("Gateway addresses {addresses}"), gateway(addresses)))
    .collect()
}

/// admitpilot's errors for `doc`, as `field: message`.
fn our_errors(doc: &Value) -> BTreeSet<String> {
    admitpilot::validate::validate_document(doc, &DecodeOptions::default())
        .findings
        .iter()
        .filter(|f| f.is_error())
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect()
}

/// Rules admitpilot does not mirror (README "Gateway API"): an API server error naming one of these is not
/// expected from admitpilot.
fn not_mirrored(error: &str) -> bool {
    ["spec.infrastructure", "sessionPersistence"]
        .iter()
        .any(|field| error.contains(field))
}

/// What admitpilot denies beyond the CRDs, by design (README "Gateway API"): what Envoy would then refuse, such as
/// a regular expression RE2 or Envoy's validation refuses (an empty one among them).
fn stricter_by_design(error: &str) -> bool {
    error.contains("regex")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_and_admitpilot_agree_on_gateway_api_objects() {
    let Some(kube) = Kube::shared("kube-gwapi-validation").await else {
        return;
    };
    kube.install_crds(Path::new(CRDS)).await;
    let namespace = kube.namespace().to_string();
    let mut compared = 0;
    let (mut rejected, mut accepted) = (0, 0);
    let mut disagreements = Vec::new();
    let mut cases = Vec::new();
    for base in bases(&namespace) {
        let name = format!(
            "{} {}",
            base["kind"].as_str().unwrap_or_default(),
            base["metadata"]["name"].as_str().unwrap_or_default()
        );
        cases.push((format!("{name}, as written"), base.clone()));
        cases.extend(
            mutants(&base)
                .into_iter()
                .chain(metadata_mutants(&base))
                .map(|(how, doc)| (format!("{name}, {how}"), doc)),
        );
    }
    cases.extend(address_cases(&namespace));
    let client = kube.client().await;
    // Several dry runs in flight: each is one round trip to the API server.
    let verdicts: Vec<_> = futures::stream::iter(cases)
        .map(|(case, doc)| {
            let client = client.clone();
            async move { (case, server_errors(&client, &doc).await, our_errors(&doc)) }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for (case, server, ours) in verdicts {
        let Some(server) = server else {
            // Refused before validation (e.g. the document does not decode): not a validation verdict.
            continue;
        };
        compared += 1;
        if server.is_empty() {
            accepted += 1;
        } else {
            rejected += 1;
        }
        let missing: Vec<&String> = server
            .iter()
            .filter(|e| !ours.contains(*e) && !not_mirrored(e))
            .collect();
        let verdicts_differ = server.is_empty() != ours.is_empty()
            && !(ours.is_empty() && server.iter().all(|e| not_mirrored(e)))
            && !(server.is_empty() && ours.iter().all(|e| stricter_by_design(e)));
        if verdicts_differ || !missing.is_empty() {
            disagreements.push(format!(
                "{case}:\n  API server: {server:?}\n  admitpilot: {ours:?}"
            ));
        }
    }
    println!(
        "compared {compared} documents with the API server: {rejected} rejected, {accepted} accepted, {} \
         disagreements",
        disagreements.len()
    );
    assert!(compared >= 5_000, "only {compared} documents compared");
    assert!(
        disagreements.is_empty(),
        "{} of {compared} documents judged differently:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
