//! Source benchmarks (a plain bench binary, `harness = false`): prints latency percentiles and memory figures.
//!
//! 1. `file write → snapshot`: a folder source with the default debounce (20 ms / 250 ms); one file is rewritten,
//!    the clock stops when a snapshot holding the new content is published. Sequential, N samples.
//! 2. `watch event → snapshot (10k objects)`: the Kubernetes source against the API server double
//!    (`tests/support/apiserver.rs`) holding 10,000 VirtualServices; one object is changed, the clock stops when
//!    the snapshot holding it is published. Run with debounce 0 (pure processing) and with the default debounce.
//! 3. `store only`: the same with events sent straight into the store (no HTTP, no validation).
//! 4. `memory per 1,000 VirtualServices`: resident-set growth while 20,000 decoded VirtualServices are held in
//!    a published snapshot, divided by 20.
//!
//! Run: `cargo bench --bench source_latency` (see BENCHMARKS.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The bench uses only part of the double's controls.
#[allow(dead_code)]
use support::apiserver;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admitpilot::model::{Kind, ObjectKey, Snapshot};
use admitpilot::source::admit::{admit, Verdict};
use admitpilot::source::kubernetes::{Backoff, KubeConfig};
use admitpilot::source::{
    self, Scope, SourceConfig, SourceEvent, SourceMetrics, Store, StoreConfig,
};
use serde_json::{json, Value};
use tokio::sync::watch;

const ISTIO: &str = "networking.istio.io";

fn vs_doc(ns: &str, name: &str, label: &str) -> Value {
    json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web", "v": label},
            "annotations": {"owner": "team-a"}},
        "spec": {"hosts": [format!("{name}.example.com")], "gateways": ["edge/gw"],
            "http": [{"name": "primary", "match": [{"uri": {"prefix": "/api"}}],
                "route": [{"destination": {"host": format!("{name}.{ns}.svc.cluster.local"), "port": {"number": 8080}},
                    "weight": 90},
                    {"destination": {"host": format!("{name}-canary.{ns}.svc.cluster.local"), "port": {"number": 8080}},
                    "weight": 10}],
                "timeout": "5s", "retries": {"attempts": 3, "perTryTimeout": "2s"}}]}})
}

fn vs_yaml(name: &str, label: &str) -> String {
    serde_yaml_ng::to_string(&vs_doc("apps", name, label)).unwrap()
}

fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    format!(
        "n={} p50={:.2}ms p90={:.2}ms p99={:.2}ms max={:.2}ms",
        samples.len(),
        at(0.50).as_secs_f64() * 1e3,
        at(0.90).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    )
}

async fn wait(rx: &mut watch::Receiver<Arc<Snapshot>>, check: impl Fn(&Snapshot) -> bool) {
    tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|s| check(s)))
        .await
        .expect("timed out")
        .expect("closed");
}

fn label_is(snapshot: &Snapshot, key: &ObjectKey, value: &str) -> bool {
    snapshot
        .get(key)
        .is_some_and(|o| o.metadata.labels.get("v").map(String::as_str) == Some(value))
}

async fn file_write_to_snapshot(samples: usize) {
    let dir = tempfile::tempdir().unwrap();
    // A realistic folder: 500 other objects in 50 files.
    for f in 0..50 {
        let text: Vec<String> = (0..10)
            .map(|i| vs_yaml(&format!("bg-{f}-{i}"), "1"))
            .collect();
        std::fs::write(dir.path().join(format!("bg-{f}.yaml")), text.join("---\n")).unwrap();
    }
    let path = dir.path().join("web.yaml");
    std::fs::write(&path, vs_yaml("web", "0")).unwrap();
    let config = SourceConfig {
        config_dir: Some(dir.path().to_path_buf()),
        ..SourceConfig::default()
    };
    let sources = source::start(config, SourceMetrics::default()).unwrap();
    let mut rx = sources.snapshots.clone();
    let key = ObjectKey::new(Kind::VirtualService, "apps", "web");
    wait(&mut rx, |s| label_is(s, &key, "0")).await;
    let mut out = Vec::new();
    for i in 1..=samples {
        let label = i.to_string();
        let text = vs_yaml("web", &label);
        let start = Instant::now();
        write_file(&path, &text);
        wait(&mut rx, |s| label_is(s, &key, &label)).await;
        out.push(start.elapsed());
    }
    println!(
        "file write -> snapshot (debounce 20ms/250ms, 501 objects): {}",
        percentiles(out)
    );
}

fn write_file(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

async fn watch_event_to_snapshot(objects: usize, samples: usize, debounce: Duration) {
    let api = apiserver::ApiServer::start(Duration::from_secs(60)).await;
    for kind in admitpilot::source::kubernetes::default_kinds()
        .into_iter()
        .chain([
            Kind::Service,
            Kind::EndpointSlice,
            Kind::Secret,
            Kind::HigressConfig,
        ])
    {
        let info = kind.info();
        api.install(info.group, info.plural, info.kind, info.versions);
    }
    for i in 0..objects {
        api.apply(
            ISTIO,
            "virtualservices",
            vs_doc(&format!("ns{}", i % 20), &format!("vs{i}"), "0"),
        );
    }
    let mut kube = KubeConfig::new(api.client());
    kube.backoff = Backoff {
        min: Duration::from_millis(20),
        max: Duration::from_millis(200),
    };
    let config = SourceConfig {
        kube: Some(kube),
        store: StoreConfig {
            debounce,
            debounce_max: debounce.max(Duration::from_millis(1)) * 10,
        },
        ..SourceConfig::default()
    };
    let sources = source::start(config, SourceMetrics::default()).unwrap();
    let mut rx = sources.snapshots.clone();
    wait(&mut rx, |s| s.objects.len() == objects).await;
    let key = ObjectKey::new(Kind::VirtualService, "ns0", "vs0");
    let mut out = Vec::new();
    for i in 1..=samples {
        let label = i.to_string();
        let start = Instant::now();
        api.apply(ISTIO, "virtualservices", vs_doc("ns0", "vs0", &label));
        wait(&mut rx, |s| label_is(s, &key, &label)).await;
        out.push(start.elapsed());
    }
    println!(
        "watch event -> snapshot ({objects} objects, debounce {debounce:?}): {}",
        percentiles(out)
    );
}

fn decoded(ns: &str, name: &str, label: &str) -> Arc<admitpilot::model::ConfigObject> {
    let options = SourceConfig::default().admit;
    match admit(vs_doc(ns, name, label), &options, &|_| None) {
        Verdict::Accept { object, .. } => Arc::from(object),
        other => panic!("benchmark object is invalid: {other:?}"),
    }
}

async fn store_only(objects: usize, samples: usize) {
    let store = Store::spawn(
        StoreConfig {
            debounce: Duration::ZERO,
            debounce_max: Duration::from_millis(10),
        },
        SourceMetrics::default(),
    );
    let sender = store.sender(Scope::new("bench"));
    let mut rx = store.subscribe();
    let all = (0..objects)
        .map(|i| decoded(&format!("ns{}", i % 20), &format!("vs{i}"), "0"))
        .collect();
    sender.send(SourceEvent::Resync(all)).unwrap();
    wait(&mut rx, |s| s.objects.len() == objects).await;
    let key = ObjectKey::new(Kind::VirtualService, "ns0", "vs0");
    let mut out = Vec::new();
    for i in 1..=samples {
        let label = i.to_string();
        let object = decoded("ns0", "vs0", &label);
        let start = Instant::now();
        sender.send(SourceEvent::Apply(object)).unwrap();
        wait(&mut rx, |s| label_is(s, &key, &label)).await;
        out.push(start.elapsed());
    }
    println!(
        "store only: event -> snapshot ({objects} objects, debounce 0): {}",
        percentiles(out)
    );
}

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resident-set growth while `count` decoded VirtualServices are held by the store and its published snapshot.
/// Objects go in one `Apply` at a time (no bulk temporaries); the figure still includes allocator slack and the
/// garbage of decoding, so it is an upper bound. Runs first, in a fresh process, for a clean baseline.
async fn memory_per_thousand(count: usize) {
    let store = Store::spawn(StoreConfig::default(), SourceMetrics::default());
    let sender = store.sender(Scope::new("memory"));
    let mut rx = store.subscribe();
    sender.send(SourceEvent::Resync(Vec::new())).unwrap();
    wait(&mut rx, |s| s.version >= 1).await;
    let before = rss_bytes();
    for i in 0..count {
        let object = decoded(&format!("ns{}", i % 20), &format!("vs{i}"), "0");
        sender.send(SourceEvent::Apply(object)).unwrap();
    }
    wait(&mut rx, |s| s.objects.len() == count).await;
    let grown = rss_bytes().saturating_sub(before);
    println!(
        "memory: {count} VirtualServices held in store + snapshot: RSS +{:.1} MiB, {:.0} KiB per 1,000",
        grown as f64 / (1024.0 * 1024.0),
        grown as f64 / (count as f64 / 1000.0) / 1024.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it: measure only then.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("source_latency measures only under `cargo bench --bench source_latency`");
        return;
    }
    // A filter argument picks one measurement.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        if filter.is_empty() || "memory".contains(&filter) {
            memory_per_thousand(20_000).await;
        }
        if filter.is_empty() || "file".contains(&filter) {
            file_write_to_snapshot(300).await;
        }
        if filter.is_empty() || "store".contains(&filter) {
            store_only(10_000, 200).await;
        }
        if filter.is_empty() || "watch".contains(&filter) {
            watch_event_to_snapshot(10_000, 200, Duration::ZERO).await;
            watch_event_to_snapshot(10_000, 100, source::DEFAULT_DEBOUNCE).await;
        }
    });
}
