//! Webhook behaviour through the real axum router, in process (no TLS): API versions, operations, dry run,
//! kinds admitpilot does not handle, other ConfigMaps, HTTP errors, denial and warning formats, metrics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use admitpilot::admission::metrics::WebhookMetrics;
use admitpilot::admission::review::DENIAL_PREFIX;
use admitpilot::admission::server::ServerLimits;
use admitpilot::admission::{self, Webhook};
use admitpilot::model::decode::DecodeOptions;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use tower::ServiceExt;

struct Harness {
    router: Router,
    registry: Registry,
}

impl Harness {
    fn new() -> Self {
        Harness::with_limits(ServerLimits::default())
    }

    fn with_limits(limits: ServerLimits) -> Self {
        let mut registry = Registry::with_prefix("admitpilot");
        let metrics = WebhookMetrics::register(&mut registry);
        let webhook = Webhook::new(DecodeOptions::default(), limits.max_body_bytes, metrics);
        Harness {
            router: admission::router(webhook, &limits, false),
            registry,
        }
    }

    async fn send(&self, request: Request<Body>) -> (StatusCode, Vec<u8>) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, body.to_vec())
    }

    async fn post_raw(
        &self,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (StatusCode, Vec<u8>) {
        let mut request = Request::post(path);
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// Posts a review to `path` and returns the parsed AdmissionReview response.
    async fn review_at(&self, path: &str, review: &Value) -> Value {
        let (status, body) = self
            .post_raw(
                path,
                Some("application/json"),
                serde_json::to_vec(review).unwrap(),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    async fn review(&self, review: &Value) -> Value {
        self.review_at("/validate", review).await
    }

    fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }
}

fn admission_review(
    api_version: &str,
    operation: &str,
    gvk: (&str, &str, &str),
    object: Option<Value>,
) -> Value {
    let mut request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": gvk.0, "version": gvk.1, "kind": gvk.2},
        "resource": {"group": gvk.0, "version": gvk.1, "resource": "things"},
        "operation": operation,
        "namespace": "default",
        "name": "reviews",
        "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        "dryRun": false,
    });
    if let Some(object) = object {
        request["object"] = object;
    }
    json!({"apiVersion": api_version, "kind": "AdmissionReview", "request": request})
}

const VS: (&str, &str, &str) = ("networking.istio.io", "v1", "VirtualService");
const V1: &str = "admission.k8s.io/v1";
const V1BETA1: &str = "admission.k8s.io/v1beta1";

/// A VirtualService; `spec.bogusField` is not an Istio field, so it draws a warning.
fn virtual_service(extra_spec: Value) -> Value {
    let mut spec = json!({
        "hosts": ["reviews.default.svc.cluster.local"],
        "http": [{"route": [{"destination": {"host": "reviews", "subset": "v1"}}]}],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": "reviews", "namespace": "default"},
        "spec": spec,
    })
}

/// A VirtualService that does not decode: two unknown top-level fields (rejected like Istio's checkFields).
fn undecodable_virtual_service() -> Value {
    let mut object = virtual_service(json!({}));
    object["extraTop"] = json!(1);
    object["metadata"]["labels"] = json!("not-a-map");
    object
}

fn response(review: &Value) -> &Value {
    &review["response"]
}

#[tokio::test]
async fn answers_v1_and_v1beta1_in_kind_and_echoes_uid() {
    let harness = Harness::new();
    for version in [V1, V1BETA1] {
        let out = harness
            .review(&admission_review(
                version,
                "CREATE",
                VS,
                Some(virtual_service(json!({}))),
            ))
            .await;
        assert_eq!(out["apiVersion"], version);
        assert_eq!(out["kind"], "AdmissionReview");
        assert_eq!(
            response(&out)["uid"],
            "705ab4f5-6393-11e8-b7cc-42010a800002"
        );
        assert_eq!(response(&out)["allowed"], true, "{out}");
    }
}

#[tokio::test]
async fn every_path_variant_behaves_the_same() {
    let harness = Harness::new();
    let review = admission_review(V1, "UPDATE", VS, Some(undecodable_virtual_service()));
    let expected = harness.review(&review).await;
    assert_eq!(response(&expected)["allowed"], false);
    for path in [
        "/validate/",
        "/validate/anything",
        "/admitpilot",
        "/admitpilot/",
        "/admitpilot/x/y",
    ] {
        assert_eq!(harness.review_at(path, &review).await, expected, "{path}");
    }
    let (status, _) = harness
        .post_raw(
            "/elsewhere",
            Some("application/json"),
            serde_json::to_vec(&review).unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = harness
        .send(Request::get("/validate").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn denial_lists_every_error_with_its_field_path() {
    let harness = Harness::new();
    let out = harness
        .review(&admission_review(
            V1,
            "CREATE",
            VS,
            Some(undecodable_virtual_service()),
        ))
        .await;
    let response = response(&out);
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with(DENIAL_PREFIX), "{message}");
    assert!(
        message.contains("extraTop: unknown field \"extraTop\""),
        "{message}"
    );
    assert!(message.contains("metadata.labels: "), "{message}");
    assert!(harness.metrics().contains(
        "admitpilot_webhook_requests_total{group=\"networking.istio.io\",kind=\"VirtualService\",operation=\"CREATE\",verdict=\"denied\"} 1"
    ));
    assert!(harness
        .metrics()
        .contains("admitpilot_webhook_denials_total{reason=\"decode_error\"} 1"));
}

#[tokio::test]
async fn unknown_spec_fields_come_back_as_warnings() {
    let harness = Harness::new();
    let object = virtual_service(json!({"bogusField": {"x": 1}}));
    let out = harness
        .review(&admission_review(V1BETA1, "CREATE", VS, Some(object)))
        .await;
    assert_eq!(response(&out)["allowed"], true);
    let warnings: Vec<&str> = response(&out)["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings.contains(&"spec.bogusField: unknown field (ignored)"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn delete_and_connect_are_allowed_without_looking() {
    let harness = Harness::new();
    for operation in ["DELETE", "CONNECT"] {
        // DELETE carries oldObject, not object; even garbage must not matter.
        let mut review = admission_review(V1, operation, VS, None);
        review["request"]["oldObject"] = undecodable_virtual_service();
        let out = harness.review(&review).await;
        assert_eq!(response(&out)["allowed"], true, "{operation}");
        assert!(response(&out).get("status").is_none());
    }
    assert!(harness
        .metrics()
        .contains("operation=\"DELETE\",verdict=\"skipped\"} 1"));
}

#[tokio::test]
async fn create_without_an_object_is_denied() {
    let harness = Harness::new();
    let out = harness
        .review(&admission_review(V1, "CREATE", VS, None))
        .await;
    assert_eq!(response(&out)["allowed"], false);
    let message = response(&out)["status"]["message"].as_str().unwrap();
    assert!(message.starts_with(DENIAL_PREFIX), "{message}");
}

#[tokio::test]
async fn dry_run_does_not_change_the_verdict_and_is_counted_apart() {
    let harness = Harness::new();
    let mut denied = admission_review(V1, "CREATE", VS, Some(undecodable_virtual_service()));
    let wet = harness.review(&denied).await;
    denied["request"]["dryRun"] = json!(true);
    let dry = harness.review(&denied).await;
    assert_eq!(response(&dry), response(&wet));
    let mut allowed = admission_review(V1, "CREATE", VS, Some(virtual_service(json!({}))));
    allowed["request"]["dryRun"] = json!(true);
    assert_eq!(response(&harness.review(&allowed).await)["allowed"], true);

    let metrics = harness.metrics();
    assert!(
        metrics.contains("admitpilot_webhook_denials_total{reason=\"decode_error\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("verdict=\"denied\"} 1"), "{metrics}");
    assert!(metrics.contains("verdict=\"allowed\"} 1"), "{metrics}");
    assert!(
        metrics.contains("admitpilot_webhook_dry_run_denials_total{reason=\"decode_error\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn kinds_admitpilot_does_not_handle_are_allowed_with_a_warning() {
    let harness = Harness::new();
    let gvk = ("networking.istio.io", "v1", "FutureThing");
    let object = json!({
        "apiVersion": "networking.istio.io/v1",
        "kind": "FutureThing",
        "metadata": {"name": "x"},
        "spec": {"anything": [1, 2]},
    });
    let out = harness
        .review(&admission_review(V1, "CREATE", gvk, Some(object)))
        .await;
    assert_eq!(response(&out)["allowed"], true);
    let warning = response(&out)["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("networking.istio.io/v1/FutureThing"),
        "{warning}"
    );
    assert!(harness.metrics().contains(
        "group=\"unknown\",kind=\"unknown\",operation=\"CREATE\",verdict=\"skipped\"} 1"
    ));
}

#[tokio::test]
async fn other_configmaps_are_allowed_untouched() {
    let harness = Harness::new();
    let gvk = ("", "v1", "ConfigMap");
    // Same name in another namespace, and another name in higress-system: neither is higress-config.
    for (namespace, name) in [("default", "higress-config"), ("higress-system", "coredns")] {
        let object = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"higress": "::: not yaml :::"},
        });
        let mut review = admission_review(V1, "UPDATE", gvk, Some(object));
        review["request"]["namespace"] = json!(namespace);
        let out = harness.review(&review).await;
        assert_eq!(response(&out)["allowed"], true, "{namespace}/{name}");
        assert!(response(&out).get("warnings").is_none(), "{out}");
    }
}

#[tokio::test]
async fn the_higress_config_configmap_is_validated() {
    let harness = Harness::new();
    let gvk = ("", "v1", "ConfigMap");
    // metadata.namespace left out, as the API server may send it on CREATE: taken from the request.
    let object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "higress-config", "labels": 7},
        "data": {},
    });
    let mut review = admission_review(V1, "CREATE", gvk, Some(object));
    review["request"]["namespace"] = json!("higress-system");
    let out = harness.review(&review).await;
    assert_eq!(response(&out)["allowed"], false, "{out}");
    assert!(harness
        .metrics()
        .contains("group=\"core\",kind=\"ConfigMap\""));
}

#[tokio::test]
async fn wrong_content_type_is_415() {
    let harness = Harness::new();
    let body = serde_json::to_vec(&admission_review(
        V1,
        "CREATE",
        VS,
        Some(virtual_service(json!({}))),
    ))
    .unwrap();
    for content_type in [None, Some("application/yaml"), Some("text/plain")] {
        let (status, text) = harness
            .post_raw("/validate", content_type, body.clone())
            .await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
        assert!(String::from_utf8_lossy(&text).contains("application/json"));
    }
    assert!(harness
        .metrics()
        .contains("admitpilot_webhook_http_errors_total{status=\"415\"} 3"));
}

#[tokio::test]
async fn empty_and_malformed_bodies_are_400_with_a_message() {
    let harness = Harness::new();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (Vec::new(), "empty"),
        (b"{\"apiVersion\": ".to_vec(), "not a valid AdmissionReview"),
        (b"[1,2,3]".to_vec(), "not a valid AdmissionReview"),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            "no request",
        ),
        (
            br#"{"apiVersion":"v1","kind":"Pod"}"#.to_vec(),
            "unsupported review type",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1}}"#
                .to_vec(),
            "request.uid",
        ),
        (vec![0xff, 0xfe, 0x00], "not a valid AdmissionReview"),
    ];
    for (body, expected) in cases {
        let (status, text) = harness
            .post_raw("/validate", Some("application/json"), body.clone())
            .await;
        let text = String::from_utf8_lossy(&text);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}: {text}");
        assert!(text.contains(expected), "{body:?}: {text}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let limits = ServerLimits {
        max_body_bytes: 1024,
        ..ServerLimits::default()
    };
    let harness = Harness::with_limits(limits);
    let (status, _) = harness
        .post_raw("/validate", Some("application/json"), vec![b' '; 2048])
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // Without Content-Length (streamed), the limit still holds.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..8).map(|_| Ok(vec![b' '; 512])).collect();
    let request = Request::post("/validate")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    let (status, _) = harness.send(request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn the_default_limit_is_six_mebibytes() {
    let harness = Harness::new();
    let (status, _) = harness
        .post_raw(
            "/validate",
            Some("application/json"),
            vec![b' '; 6 * 1024 * 1024 + 1],
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Just under the limit is read (and is then an empty review: 400, not 413).
    let (status, _) = harness
        .post_raw(
            "/validate",
            Some("application/json"),
            vec![b' '; 6 * 1024 * 1024],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
