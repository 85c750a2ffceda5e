//! Property tests of the AdmissionReview decoding path: arbitrary bytes, arbitrary JSON and arbitrary
//! AdmissionReview-shaped JSON (known kinds with random specs and metadata) go into the webhook's handler
//! function; it must never panic and must answer 200 with a well-formed review or 400.
//!
//! CI runs `PROPTEST_CASES` cases per property (default 2000). The long run is done by hand, e.g.
//! `PROPTEST_CASES=1000000 cargo test --release --test admission admission_proptest::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::LazyLock;
use std::time::Instant;

use admitpilot::admission::metrics::WebhookMetrics;
use admitpilot::admission::Webhook;
use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::Kind;
use axum::http::StatusCode;
use prometheus_client::registry::Registry;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// One handler for every case, like the server (metrics accumulate across cases).
static WEBHOOK: LazyLock<Webhook> = LazyLock::new(|| {
    let mut registry = Registry::default();
    Webhook::new(
        DecodeOptions::default(),
        6 << 20,
        WebhookMetrics::register(&mut registry),
    )
});

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-zA-Z0-9_.:/*-]{0,12}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(field_name(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Field names: mostly ones the decoders know, so random values land on real fields.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "apiVersion",
            "kind",
            "metadata",
            "spec",
            "status",
            "name",
            "namespace",
            "labels",
            "annotations",
            "hosts",
            "gateways",
            "http",
            "tcp",
            "tls",
            "match",
            "route",
            "destination",
            "host",
            "subset",
            "port",
            "number",
            "weight",
            "servers",
            "selector",
            "data",
            "higress",
            "uid",
            "object",
            "operation",
            "request",
            "dryRun",
            "group",
            "version",
            "trafficPolicy",
            "subsets",
            "rules",
        ])
        .prop_map(str::to_string),
        "[a-zA-Z]{1,8}",
    ]
}

/// An AdmissionReview whose parts are sometimes right and sometimes random.
fn review_shaped() -> impl Strategy<Value = Value> {
    let kinds: Vec<Kind> = Kind::ALL.to_vec();
    (
        prop::sample::select(vec!["admission.k8s.io/v1", "admission.k8s.io/v1beta1", "v1", ""]),
        prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"]),
        prop::sample::select(kinds),
        json_value(),
        json_value(),
        json_value(),
        any::<bool>(),
        prop::option::of(json_value()),
    )
        .prop_map(|(api_version, operation, kind, spec, metadata, top, dry_run, junk_uid)| {
            let info = kind.info();
            let mut object = json!({
                "apiVersion": kind.api_version(),
                "kind": info.kind,
                "metadata": metadata,
                "spec": spec,
            });
            if info.kind == "ConfigMap" {
                object["data"] = object["spec"].take();
            }
            if let (Some(object), Some(extra)) = (object.as_object_mut(), top.as_object()) {
                object.extend(extra.clone());
            }
            json!({
                "apiVersion": api_version,
                "kind": "AdmissionReview",
                "request": {
                    "uid": junk_uid.unwrap_or_else(|| json!("u")),
                    "kind": {"group": info.group, "version": info.versions[0], "kind": info.kind},
                    "operation": operation,
                    "namespace": "higress-system",
                    "name": "higress-config",
                    "dryRun": dry_run,
                    "object": object,
                },
            })
        })
}

fn check(webhook: &Webhook, body: &[u8]) -> Result<(), TestCaseError> {
    let response = webhook.respond(body, Instant::now());
    let status = response.status();
    prop_assert!(
        status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
        "unexpected status {status}"
    );
    Ok(())
}

fn check_review(webhook: &Webhook, review: &Value) -> Result<(), TestCaseError> {
    let body = serde_json::to_vec(review).unwrap();
    let response = webhook.respond(&body, Instant::now());
    if response.status() == StatusCode::OK {
        let bytes =
            futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                .unwrap();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(&answer["apiVersion"], &review["apiVersion"]);
        prop_assert_eq!(&answer["response"]["uid"], &review["request"]["uid"]);
        prop_assert!(answer["response"]["allowed"].is_boolean());
    } else {
        prop_assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..256)) {
        check(&WEBHOOK, &body)?;
    }

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        check(&WEBHOOK, &serde_json::to_vec(&value).unwrap())?;
    }

    #[test]
    fn review_shaped_json_gets_a_well_formed_answer(review in review_shaped()) {
        check_review(&WEBHOOK, &review)?;
    }
}
