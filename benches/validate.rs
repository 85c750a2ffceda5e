//! Validation benchmarks: the time to decode and validate one typical VirtualService from JSON bytes, and the
//! throughput of decoding and validating every document of the Istio corpus (`../shared/corpus/istio`, read once
//! at start; skipped with a message when absent), and the webhook's review path for one AdmissionReview. Run with
//! `cargo bench --bench validate`.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use admitpilot::admission::review::review;
use admitpilot::model::decode::{decode, DecodeOptions, Decoded};
use admitpilot::validate::{validate_document, validate_object};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::Value;

/// A VirtualService of the kind users write: two hosts, a gateway, prefix and header matches, weighted
/// destinations, retries, a timeout, header operations and a catch-all route.
const TYPICAL_VIRTUAL_SERVICE: &str = r#"{
  "apiVersion": "networking.istio.io/v1",
  "kind": "VirtualService",
  "metadata": {"name": "reviews", "namespace": "bookinfo", "labels": {"app": "reviews"}},
  "spec": {
    "hosts": ["reviews.bookinfo.svc.cluster.local", "reviews.example.com"],
    "gateways": ["istio-system/public-gateway", "mesh"],
    "http": [
      {
        "name": "v2-testers",
        "match": [
          {"uri": {"prefix": "/api/v1/reviews"}, "headers": {"end-user": {"exact": "jason"}}},
          {"uri": {"prefix": "/api/v2/reviews"}, "queryParams": {"beta": {"exact": "true"}}}
        ],
        "route": [
          {"destination": {"host": "reviews.bookinfo.svc.cluster.local", "subset": "v2", "port": {"number": 9080}}, "weight": 90},
          {"destination": {"host": "reviews.bookinfo.svc.cluster.local", "subset": "v3", "port": {"number": 9080}}, "weight": 10}
        ],
        "timeout": "5s",
        "retries": {"attempts": 3, "perTryTimeout": "2s", "retryOn": "5xx,reset,connect-failure"},
        "headers": {"request": {"set": {"x-route": "v2"}}, "response": {"remove": ["x-internal"]}}
      },
      {
        "name": "default",
        "route": [{"destination": {"host": "reviews.bookinfo.svc.cluster.local", "subset": "v1"}}]
      }
    ]
  }
}"#;

fn corpus_documents() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/istio");
    let mut files: Vec<PathBuf> = Vec::new();
    for verdict in ["valid", "invalid"] {
        let Ok(kinds) = std::fs::read_dir(root.join(verdict)) else {
            continue;
        };
        for kind in kinds.flatten() {
            if let Ok(entries) = std::fs::read_dir(kind.path()) {
                files.extend(entries.flatten().map(|e| e.path()));
            }
        }
    }
    files.sort();
    files
        .iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(path).ok()?;
            let doc: Value = serde_yaml_ng::from_str(&text).ok()?;
            serde_json::to_vec(&doc).ok()
        })
        .collect()
}

fn bench_typical(c: &mut Criterion) {
    let options = DecodeOptions::default();
    let bytes = TYPICAL_VIRTUAL_SERVICE.as_bytes();
    c.bench_function("virtual_service_from_json_bytes", |b| {
        b.iter(|| {
            let doc: Value = serde_json::from_slice(black_box(bytes)).unwrap_or(Value::Null);
            black_box(validate_document(&doc, &options))
        })
    });
}

/// The webhook's whole review path without HTTP: the AdmissionReview of `scripts/bench-webhook` (a VirtualService
/// UPDATE with a regex match, CORS and `oldObject`) from JSON bytes to the serialized response.
fn bench_review(c: &mut Criterion) {
    let options = DecodeOptions::default();
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/data/virtualservice-review.json"
    ))
    .unwrap_or_default();
    c.bench_function("webhook_review", |b| {
        b.iter(|| black_box(review(black_box(&body), &options, None).map(|r| r.body.len())))
    });
}

/// The same document split into its stages, to see where the time goes.
fn bench_stages(c: &mut Criterion) {
    let options = DecodeOptions::default();
    let bytes = TYPICAL_VIRTUAL_SERVICE.as_bytes();
    let doc: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let Decoded::Object { object, .. } = decode(&doc, &options) else {
        eprintln!("skipping stage benchmarks: the typical VirtualService did not decode");
        return;
    };
    let mut group = c.benchmark_group("virtual_service_stages");
    group.bench_function("parse_json", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(bytes)).is_ok()))
    });
    group.bench_function("decode", |b| {
        b.iter(|| black_box(decode(black_box(&doc), &options)))
    });
    group.bench_function("rules", |b| {
        b.iter(|| black_box(validate_object(black_box(&object))))
    });
    group.finish();
}

fn bench_corpus(c: &mut Criterion) {
    let docs = corpus_documents();
    if docs.is_empty() {
        eprintln!("skipping corpus throughput: no Istio corpus at ../shared/corpus/istio");
        return;
    }
    let options = DecodeOptions::default();
    let mut group = c.benchmark_group("istio_corpus");
    group.throughput(Throughput::Elements(docs.len() as u64));
    group.bench_function(
        format!("all_{}_documents_from_json_bytes", docs.len()),
        |b| {
            b.iter(|| {
                for bytes in &docs {
                    let doc: Value =
                        serde_json::from_slice(black_box(bytes)).unwrap_or(Value::Null);
                    black_box(validate_document(&doc, &options));
                }
            })
        },
    );
    group.finish();
}

criterion_group!(
    benches,
    bench_typical,
    bench_review,
    bench_stages,
    bench_corpus
);
criterion_main!(benches);
