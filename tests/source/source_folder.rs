//! Folder source end to end: real files in a temp dir, watched with notify, through the store to published
//! snapshots. Every wait polls with a deadline; nothing sleeps a fixed time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use admitpilot::model::{Kind, ObjectKey, Snapshot};
use admitpilot::source::metrics::{RejectLabels, SourceLabels};
use admitpilot::source::{self, SourceConfig, SourceMetrics, Sources, StateLocation, StoreConfig};
use support::logs::CapturedLogs;
use support::wait_for;

fn vs(name: &str, namespace: Option<&str>, label: &str) -> String {
    let ns = namespace.map_or(String::new(), |ns| format!("\n  namespace: {ns}"));
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}{ns}\n  labels:\n    v: \"{label}\"\nspec:\n  hosts: [example.com]\n  http:\n  - route:\n    - destination: {{host: web.apps.svc.cluster.local}}\n"
    )
}

fn start(dir: &Path, debounce: Duration) -> (Sources, SourceMetrics) {
    start_with_state(dir, debounce, None)
}

fn start_with_state(
    dir: &Path,
    debounce: Duration,
    state: Option<StateLocation>,
) -> (Sources, SourceMetrics) {
    let metrics = SourceMetrics::default();
    let mut config = SourceConfig {
        config_dir: Some(dir.to_path_buf()),
        store: StoreConfig {
            debounce,
            debounce_max: debounce * 10,
        },
        state,
        ..SourceConfig::default()
    };
    config.admit.default_namespace = "apps".into();
    (source::start(config, metrics.clone()).unwrap(), metrics)
}

fn key(kind: Kind, ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(kind, ns, name)
}

fn label(snapshot: &Snapshot, key: &ObjectKey) -> Option<String> {
    snapshot
        .get(key)
        .and_then(|o| o.metadata.labels.get("v").cloned())
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn initial_load_reads_nested_yaml_json_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("a.yaml"),
        &format!(
            "{}---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: edge}}\nspec: {{servers: [{{port: {{number: 80, name: http, protocol: HTTP}}, hosts: [\"*\"]}}]}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: ignored}}\n",
            vs("vs1", None, "1")
        ),
    );
    write(
        &root.join("sub/deeper/b.json"),
        r#"{"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "dr", "namespace": "edge"}, "spec": {"host": "x"}}"#,
    );
    write(
        &root.join("c.yml"),
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: svc, namespace: edge}\n  spec: {ports: [{port: 80}]}\n- apiVersion: discovery.k8s.io/v1\n  kind: EndpointSlice\n  metadata: {name: svc-abc, namespace: edge}\n  addressType: IPv4\n  endpoints: [{addresses: [10.0.0.1]}]\n",
    );
    write(&root.join(".hidden/x.yaml"), &vs("hidden", None, "1"));
    write(&root.join("notes.txt"), &vs("txt", None, "1"));

    let (sources, _metrics) = start(root, Duration::from_millis(5));
    let mut rx = sources.snapshots.clone();
    let snapshot = wait_for(&mut rx, |s| s.version >= 1).await;
    let keys: Vec<String> = snapshot.objects.keys().map(ToString::to_string).collect();
    assert_eq!(
        keys,
        [
            "VirtualService apps/vs1",
            "DestinationRule edge/dr",
            "Gateway edge/gw",
            "Service edge/svc",
            "EndpointSlice edge/svc-abc",
        ]
    );
    assert_eq!(snapshot.version, 1);
    let mut synced = sources.synced.clone();
    assert!(*synced.wait_for(|s| *s).await.unwrap());
}

#[tokio::test]
async fn follows_writes_changes_renames_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (sources, _metrics) = start(root, Duration::from_millis(5));
    let mut rx = sources.snapshots.clone();
    wait_for(&mut rx, |s| s.version >= 1 && s.objects.is_empty()).await;
    let k = key(Kind::VirtualService, "apps", "web");

    write(&root.join("web.yaml"), &vs("web", None, "1"));
    wait_for(&mut rx, |s| label(s, &k).as_deref() == Some("1")).await;

    write(&root.join("web.yaml"), &vs("web", None, "2"));
    wait_for(&mut rx, |s| label(s, &k).as_deref() == Some("2")).await;

    // Rename within the folder: the object stays; a later change under the new name is followed.
    std::fs::rename(root.join("web.yaml"), root.join("renamed.yml")).unwrap();
    write(&root.join("renamed.yml"), &vs("web", None, "3"));
    wait_for(&mut rx, |s| label(s, &k).as_deref() == Some("3")).await;

    // Rename to a name that is not a config file: the object goes.
    std::fs::rename(root.join("renamed.yml"), root.join("renamed.bak")).unwrap();
    wait_for(&mut rx, |s| s.get(&k).is_none()).await;

    // A whole directory moved in, then deleted.
    let outside = tempfile::tempdir().unwrap();
    write(
        &outside.path().join("pack/one.yaml"),
        &vs("one", Some("x"), "1"),
    );
    std::fs::rename(outside.path().join("pack"), root.join("pack")).unwrap();
    let one = key(Kind::VirtualService, "x", "one");
    wait_for(&mut rx, |s| s.get(&one).is_some()).await;
    std::fs::remove_dir_all(root.join("pack")).unwrap();
    let last = wait_for(&mut rx, |s| s.get(&one).is_none()).await;
    assert!(last.objects.is_empty());
}

#[tokio::test]
async fn invalid_input_keeps_the_last_good_version() {
    let logs = CapturedLogs::install();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("web.yaml"), &vs("web", None, "good"));
    let (sources, metrics) = start(root, Duration::from_millis(5));
    let mut rx = sources.snapshots.clone();
    let k = key(Kind::VirtualService, "apps", "web");
    wait_for(&mut rx, |s| label(s, &k).as_deref() == Some("good")).await;

    // 1. The file stops parsing: everything it held stays.
    write(&root.join("web.yaml"), "apiVersion: [unclosed\n");
    // 2. It parses again, but document 2 is invalid (spec is not an object) and document 1 is a new object.
    write(
        &root.join("web.yaml"),
        &format!(
            "{}---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: web}}\nspec: not-an-object\n",
            vs("fresh", None, "1")
        ),
    );
    // 3. A never-valid object in another file never appears.
    write(
        &root.join("other.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: broken}\nspec: 12\n",
    );
    let fresh = key(Kind::VirtualService, "apps", "fresh");
    let snapshot = wait_for(&mut rx, |s| s.get(&fresh).is_some()).await;
    assert_eq!(label(&snapshot, &k).as_deref(), Some("good"));
    support::eventually(|| {
        metrics
            .rejected
            .get_or_create(&RejectLabels {
                kind: "Gateway".into(),
                reason: "undecodable".into(),
            })
            .get()
            == 1
    })
    .await;
    assert!(snapshot
        .get(&key(Kind::Gateway, "apps", "broken"))
        .is_none());
    let parse_errors = metrics
        .parse_errors
        .get_or_create(&SourceLabels {
            source: "folder".into(),
        })
        .get();
    // The broken write may be coalesced with the fix into one batch, so it was seen at most once.
    assert!(parse_errors <= 1);
    assert_eq!(
        metrics
            .rejected
            .get_or_create(&RejectLabels {
                kind: "VirtualService".into(),
                reason: "undecodable".into(),
            })
            .get(),
        1
    );
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("invalid object skipped") && l.contains("VirtualService apps/web"))
        .unwrap_or_else(|| panic!("no error line in logs:\n{text}"));
    assert!(line.contains("web.yaml"), "{line}");
    assert!(line.contains("document=2"), "{line}");
    assert!(line.contains("field=spec"), "{line}");
    assert!(line.contains("error=invalid type"), "{line}");
}

#[tokio::test]
async fn unparseable_file_is_reported_and_skipped() {
    let logs = CapturedLogs::install();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("a.yaml"), &vs("a", None, "1"));
    // Document 1 parses, document 2 does not: the whole file is skipped and the broken document is named.
    write(
        &root.join("b.yaml"),
        &format!("{}---\nkind: [unclosed\n", vs("b", None, "1")),
    );
    let (sources, metrics) = start(root, Duration::from_millis(5));
    let mut rx = sources.snapshots.clone();
    let snapshot = wait_for(&mut rx, |s| s.version >= 1).await;
    assert_eq!(snapshot.objects.len(), 1);
    let count = metrics
        .parse_errors
        .get_or_create(&SourceLabels {
            source: "folder".into(),
        })
        .get();
    assert_eq!(count, 1);
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("config file does not parse"))
        .unwrap_or_else(|| panic!("no parse error in logs:\n{text}"));
    assert!(
        line.contains("b.yaml") && line.contains("document=2"),
        "{line}"
    );
}

#[tokio::test]
async fn duplicates_resolve_to_the_first_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("b.yaml"), &vs("web", None, "from-b"));
    write(&root.join("a.yaml"), &vs("web", None, "from-a"));
    let (sources, metrics) = start(root, Duration::from_millis(5));
    let mut rx = sources.snapshots.clone();
    let k = key(Kind::VirtualService, "apps", "web");
    let snapshot = wait_for(&mut rx, |s| s.version >= 1).await;
    assert_eq!(label(&snapshot, &k).as_deref(), Some("from-a"));
    assert!(
        metrics
            .rejected
            .get_or_create(&RejectLabels {
                kind: "VirtualService".into(),
                reason: "duplicate".into(),
            })
            .get()
            >= 1
    );
    // Changing the loser changes nothing; removing the winner hands over to the next path.
    write(&root.join("b.yaml"), &vs("web", None, "from-b2"));
    std::fs::remove_file(root.join("a.yaml")).unwrap();
    wait_for(&mut rx, |s| label(s, &k).as_deref() == Some("from-b2")).await;
}

#[tokio::test]
async fn a_burst_of_writes_is_published_as_one_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (sources, metrics) = start(root, Duration::from_millis(300));
    let mut rx = sources.snapshots.clone();
    wait_for(&mut rx, |s| s.version >= 1).await;
    for i in 0..20 {
        write(
            &root.join(format!("vs{i}.yaml")),
            &vs(&format!("vs{i}"), None, "1"),
        );
    }
    let snapshot: Arc<Snapshot> = wait_for(&mut rx, |s| s.objects.len() == 20).await;
    assert_eq!(
        snapshot.version, 2,
        "the burst was split into several versions"
    );
    assert_eq!(metrics.publishes.get(), 2);
}

/// With `--state-dir`, the last good version of an invalid document, and the objects of a file that no longer
/// parses, are persisted; a restart serves them in its first snapshot (instead of dropping them) until the files
/// are fixed, which empties the state again.
#[tokio::test]
async fn last_good_versions_survive_a_restart_through_a_state_folder() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let state = || Some(StateLocation::Dir(state_dir.path().to_path_buf()));
    let state_file = state_dir.path().join("last-good.json");
    let persisted = || std::fs::read_to_string(&state_file).unwrap_or_default();
    write(&root.join("a.yaml"), &vs("web", None, "good"));
    write(&root.join("b.yaml"), &vs("other", None, "good"));
    let web = key(Kind::VirtualService, "apps", "web");
    let other = key(Kind::VirtualService, "apps", "other");

    let (first, metrics) = start_with_state(root, Duration::from_millis(5), state());
    let mut rx = first.snapshots.clone();
    wait_for(&mut rx, |s| {
        label(s, &web).is_some() && label(s, &other).is_some()
    })
    .await;
    write(
        &root.join("a.yaml"),
        &vs("web", None, "bad").replace("hosts: [example.com]", "hosts: 7"),
    );
    write(&root.join("b.yaml"), "kind: [unclosed\n");
    support::eventually(|| {
        let text = persisted();
        text.contains(r#""origin":"a.yaml""#) && text.contains(r#""origin":"b.yaml""#)
    })
    .await;
    assert_eq!(metrics.last_good_held.get(), 2);
    drop(first);

    let (second, _) = start_with_state(root, Duration::from_millis(5), state());
    let mut rx = second.snapshots.clone();
    let snapshot = wait_for(&mut rx, |s| s.version >= 1).await;
    assert_eq!(snapshot.version, 1);
    assert_eq!(label(&snapshot, &web).as_deref(), Some("good"));
    assert_eq!(label(&snapshot, &other).as_deref(), Some("good"));

    write(&root.join("a.yaml"), &vs("web", None, "fixed"));
    write(&root.join("b.yaml"), &vs("other", None, "fixed"));
    wait_for(&mut rx, |s| {
        label(s, &web).as_deref() == Some("fixed") && label(s, &other).as_deref() == Some("fixed")
    })
    .await;
    support::eventually(|| persisted() == r#"{"format":1,"objects":[]}"#).await;
}

/// A state that cannot be written is counted and retried with backoff, without waiting for another change.
#[tokio::test]
async fn a_failed_state_write_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let parent = tempfile::tempdir().unwrap();
    let state_dir = parent.path().join("state");
    std::fs::write(&state_dir, "a file where the folder should be").unwrap();
    write(&dir.path().join("a.yaml"), &vs("web", None, "good"));
    let (sources, metrics) = start_with_state(
        dir.path(),
        Duration::from_millis(5),
        Some(StateLocation::Dir(state_dir.clone())),
    );
    support::eventually(|| metrics.state_write_errors.get() >= 1).await;
    std::fs::remove_file(&state_dir).unwrap();
    support::eventually(|| state_dir.join("last-good.json").exists()).await;
    drop(sources);
}
