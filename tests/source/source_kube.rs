//! Kubernetes source end to end against `support::apiserver`, a small, faithful double of the API server over HTTP
//! (real JSON list and watch streams with resourceVersions, BOOKMARK events, 410 Gone on expired watches, plain
//! 404 for resources that are not installed, Event creation recorded). A real `kube::Client` is pointed at it
//! through a `kube::Config` whose cluster URL is the double. Every wait polls with a deadline. The double is for faults
//! a real API server cannot be made to show on demand (held or dropped events, expired watches, missing kinds);
//! `tests/kube/` run against a real kube-apiserver.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use admitpilot::model::{Kind, ObjectKey, Snapshot};
use admitpilot::source::kubernetes::{default_kinds, Backoff, KubeConfig};
use admitpilot::source::metrics::RejectLabels;
use admitpilot::source::{self, SourceConfig, SourceMetrics, Sources, StateLocation, StoreConfig};
use serde_json::{json, Value};
use support::apiserver::ApiServer;
use support::{eventually, wait_for};

const ISTIO: &str = "networking.istio.io";

fn install_all(api: &ApiServer, except: &[Kind]) {
    let kinds = default_kinds().into_iter().chain([
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Secret,
        Kind::HigressConfig,
    ]);
    for kind in kinds.filter(|k| !except.contains(k)) {
        let info = kind.info();
        api.install(info.group, info.plural, info.kind, info.versions);
    }
}

fn vs(ns: &str, name: &str, label: &str) -> Value {
    json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": ns, "labels": {"v": label}},
        "spec": {"hosts": ["example.com"],
            "http": [{"route": [{"destination": {"host": "web.a.svc.cluster.local"}}]}]}})
}

fn start(api: &ApiServer, namespaces: &[&str]) -> (Sources, SourceMetrics) {
    let backoff = Backoff {
        min: Duration::from_millis(20),
        max: Duration::from_millis(200),
    };
    start_with_backoff(api, namespaces, backoff)
}

fn start_with_backoff(
    api: &ApiServer,
    namespaces: &[&str],
    backoff: Backoff,
) -> (Sources, SourceMetrics) {
    start_with(api, namespaces, backoff, None)
}

fn start_with(
    api: &ApiServer,
    namespaces: &[&str],
    backoff: Backoff,
    state: Option<StateLocation>,
) -> (Sources, SourceMetrics) {
    let mut kube = KubeConfig::new(api.client());
    kube.namespaces = namespaces.iter().map(|n| n.to_string()).collect();
    kube.backoff = backoff;
    let config = SourceConfig {
        kube: Some(kube),
        store: StoreConfig {
            debounce: Duration::from_millis(5),
            debounce_max: Duration::from_millis(50),
        },
        state,
        ..SourceConfig::default()
    };
    let metrics = SourceMetrics::default();
    (source::start(config, metrics.clone()).unwrap(), metrics)
}

/// The `higress-system/higress-config` ConfigMap with `higress` as its `higress` key.
fn higress_config_map(higress: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "higress-config", "namespace": "higress-system"},
        "data": {"higress": higress}})
}

/// gzip's `minContentLength` in the snapshot's higress-config.
fn gzip_min(snapshot: &Snapshot) -> Option<i32> {
    snapshot
        .higress_config()
        .and_then(|c| c.gzip.as_ref())
        .map(|g| g.min_content_length)
}

fn key(kind: Kind, ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(kind, ns, name)
}

fn label(snapshot: &Snapshot, key: &ObjectKey) -> Option<String> {
    snapshot
        .get(key)
        .and_then(|o| o.metadata.labels.get("v").cloned())
}

async fn synced(sources: &Sources) {
    let mut synced = sources.synced.clone();
    tokio::time::timeout(support::DEADLINE, synced.wait_for(|s| *s))
        .await
        .expect("sources never synced")
        .unwrap();
}

#[tokio::test]
async fn lists_then_follows_watch_events() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    api.apply(ISTIO, "virtualservices", vs("a", "web", "1"));
    api.apply(
        "",
        "services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "a"},
            "spec": {"ports": [{"port": 80}]}}),
    );
    api.apply(
        "",
        "secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cert", "namespace": "a"},
            "type": "kubernetes.io/tls", "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}}),
    );
    api.apply(
        "",
        "secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "opaque", "namespace": "a"},
            "type": "Opaque", "data": {"x": "eA=="}}),
    );
    api.apply(
        "",
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "higress-config", "namespace": "higress-system"}, "data": {"higress": ""}}),
    );
    api.apply(
        "",
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "other", "namespace": "higress-system"}, "data": {}}),
    );
    let (sources, _metrics) = start(&api, &[]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    let snapshot = wait_for(&mut rx, |s| s.version >= 1).await;
    let keys: Vec<String> = snapshot.objects.keys().map(ToString::to_string).collect();
    assert_eq!(
        keys,
        [
            "VirtualService a/web",
            "ConfigMap higress-system/higress-config",
            "Service a/web",
            "Secret a/cert",
        ]
    );
    let requests = api.requests();
    assert!(
        requests.iter().any(|r| r.contains("/configmaps?")
            && r.contains("fieldSelector=metadata.name%3Dhigress-config")),
        "{requests:?}"
    );

    let web = key(Kind::VirtualService, "a", "web");
    api.apply(ISTIO, "virtualservices", vs("a", "web", "2"));
    wait_for(&mut rx, |s| label(s, &web).as_deref() == Some("2")).await;
    api.apply(
        ISTIO,
        "gateways",
        json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "b"},
            "spec": {"servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}}),
    );
    api.delete(ISTIO, "virtualservices", "a", "web");
    let snapshot = wait_for(&mut rx, |s| {
        s.get(&web).is_none() && s.get(&key(Kind::Gateway, "b", "gw")).is_some()
    })
    .await;
    // Managed fields are dropped before objects are stored.
    let secret = snapshot.get(&key(Kind::Secret, "a", "cert")).unwrap();
    assert!(secret.metadata.uid.is_some());
    // The watches asked for bookmarks (the double then sends one every 50 ms, which the watcher consumes).
    assert!(requests
        .iter()
        .any(|r| r.contains("allowWatchBookmarks=true")));
}

#[tokio::test]
async fn watch_namespaces_limit_the_scope() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    api.apply(ISTIO, "virtualservices", vs("a", "in", "1"));
    api.apply(ISTIO, "virtualservices", vs("c", "out", "1"));
    let (sources, _metrics) = start(&api, &["a", "b"]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    let snapshot = wait_for(&mut rx, |s| s.version >= 1).await;
    let keys: Vec<String> = snapshot.objects.keys().map(ToString::to_string).collect();
    assert_eq!(keys, ["VirtualService a/in"]);
    assert!(api
        .requests()
        .iter()
        .all(|r| !r.contains("/virtualservices")
            || r.contains("/namespaces/a/")
            || r.contains("/namespaces/b/")));
}

/// Ingresses (built in, namespaced) are watched in the watched namespaces only; IngressClasses (cluster-scoped) by
/// one cluster-wide watcher, whatever the namespaces.
#[tokio::test]
async fn ingresses_are_watched_per_namespace_and_ingress_classes_cluster_wide() {
    const NETWORKING: &str = "networking.k8s.io";
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    let ingress = |ns: &str, name: &str| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"ingressClassName": "higress", "rules": [{"host": "example.com", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
    };
    api.apply(NETWORKING, "ingresses", ingress("a", "in"));
    api.apply(NETWORKING, "ingresses", ingress("c", "out"));
    api.apply(
        NETWORKING,
        "ingressclasses",
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "higress"}, "spec": {"controller": "higress.io/higress-controller"}}),
    );
    let (sources, _metrics) = start(&api, &["a", "b"]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    let snapshot = wait_for(&mut rx, |s| s.version >= 1).await;
    let keys: Vec<String> = snapshot.objects.keys().map(ToString::to_string).collect();
    assert_eq!(keys, ["Ingress a/in", "IngressClass /higress"]);
    let requests = api.requests();
    let lists = |plural: &str| {
        requests
            .iter()
            .filter(|r| r.contains(&format!("/{plural}?")) && !r.contains("watch=true"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        lists("ingresses")
            .iter()
            .all(|r| r.contains("/namespaces/a/") || r.contains("/namespaces/b/")),
        "{requests:?}"
    );
    let classes = lists("ingressclasses");
    assert!(
        !classes.is_empty() && classes.iter().all(|r| !r.contains("/namespaces/")),
        "{requests:?}"
    );
}

#[tokio::test]
async fn relists_after_410_gone_without_losing_state() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    api.apply(ISTIO, "virtualservices", vs("a", "old", "1"));
    api.apply(
        "",
        "services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "a"}, "spec": {}}),
    );
    let (sources, _metrics) = start(&api, &[]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    wait_for(&mut rx, |s| s.objects.len() == 2).await;
    let lists_before = api.lists_of("virtualservices");

    // These changes never reach the open watches; only a relist can find them.
    api.hold_events(true);
    api.delete(ISTIO, "virtualservices", "a", "old");
    api.apply(ISTIO, "virtualservices", vs("a", "new", "1"));
    api.hold_events(false);
    api.expire_watches();

    let old = key(Kind::VirtualService, "a", "old");
    let new = key(Kind::VirtualService, "a", "new");
    let svc = key(Kind::Service, "a", "svc");
    let snapshot = wait_for(&mut rx, |s| {
        // Every snapshot on the way keeps the untouched Service.
        assert!(
            s.get(&svc).is_some(),
            "the Service vanished during the relist"
        );
        s.get(&new).is_some() && s.get(&old).is_none()
    })
    .await;
    assert_eq!(snapshot.objects.len(), 2);
    eventually(|| api.lists_of("virtualservices") > lists_before).await;
}

/// An API-server outage longer than the maximum retry delay, against the API-server double (no kube-apiserver
/// installs here): while it is down every retry fails and the delay grows to its maximum; the restarted server has
/// a new watch cache, so the first watch gets 410 `Expired`. The watcher must relist at once rather than wait the
/// grown delay: a change made right after the restart arrives long before that delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relists_at_once_after_an_outage_longer_than_the_maximum_backoff() {
    const MAX_DELAY: Duration = Duration::from_secs(2);
    const OUTAGE: Duration = Duration::from_secs(4);
    let mut api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    let backoff = Backoff {
        min: Duration::from_millis(20),
        max: MAX_DELAY,
    };
    let (sources, _metrics) = start_with_backoff(&api, &[], backoff);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;

    api.stop().await;
    // The outage itself: long enough for 20 ms doubling to reach the 2 s maximum (20 + 40 + … + 1,280 ms).
    tokio::time::sleep(OUTAGE).await;
    let requests_before = api.requests().len();
    api.restart().await;
    // The watcher's first try after the restart (its watch, answered with 410) comes within its current delay.
    eventually(|| {
        api.requests()[requests_before..]
            .iter()
            .any(|r| r.contains("virtualservices"))
    })
    .await;
    api.apply(ISTIO, "virtualservices", vs("a", "after-outage", "1"));
    let arrived = tokio::time::timeout(
        MAX_DELAY / 2,
        wait_for(&mut rx, |s| {
            s.get(&key(Kind::VirtualService, "a", "after-outage"))
                .is_some()
        }),
    )
    .await;
    assert!(
        arrived.is_ok(),
        "the change waited for the grown retry delay; requests after the restart: {:?}",
        &api.requests()[requests_before..]
    );
}

#[tokio::test]
async fn resumes_a_dropped_watch_from_its_resource_version() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    let (sources, _metrics) = start(&api, &[]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    let lists_before = api.lists_of("virtualservices");
    api.drop_watches();
    api.apply(ISTIO, "virtualservices", vs("a", "after-drop", "1"));
    wait_for(&mut rx, |s| {
        s.get(&key(Kind::VirtualService, "a", "after-drop"))
            .is_some()
    })
    .await;
    // The watch resumed; no relist was needed.
    assert_eq!(api.lists_of("virtualservices"), lists_before);
}

#[tokio::test]
async fn missing_crds_are_retried_while_the_rest_works() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    // An older Istio: VirtualService only at v1beta1; EnvoyFilter not installed at all.
    install_all(&api, &[Kind::VirtualService, Kind::EnvoyFilter]);
    api.install(ISTIO, "virtualservices", "VirtualService", &["v1beta1"]);
    api.apply(ISTIO, "virtualservices", vs("a", "web", "1"));
    let (sources, _metrics) = start(&api, &[]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    wait_for(&mut rx, |s| {
        s.get(&key(Kind::VirtualService, "a", "web"))
            .is_some_and(|o| o.api_version == "networking.istio.io/v1beta1")
    })
    .await;
    assert!(api.requests().iter().any(|r| r
        .starts_with("GET /apis/networking.istio.io/v1/envoyfilters")
        || r.starts_with("GET /apis/networking.istio.io/v1alpha3/envoyfilters")));

    // The CRD appears later: the retry picks it up.
    api.install(ISTIO, "envoyfilters", "EnvoyFilter", &["v1alpha3"]);
    api.apply(
        ISTIO,
        "envoyfilters",
        json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
            "metadata": {"name": "ef", "namespace": "a"}, "spec": {}}),
    );
    wait_for(&mut rx, |s| {
        s.get(&key(Kind::EnvoyFilter, "a", "ef")).is_some()
    })
    .await;
}

#[tokio::test]
async fn invalid_objects_are_excluded_and_reported_with_an_event() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    api.apply(ISTIO, "virtualservices", vs("a", "web", "good"));
    let (sources, metrics) = start(&api, &[]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    let web = key(Kind::VirtualService, "a", "web");
    wait_for(&mut rx, |s| label(s, &web).as_deref() == Some("good")).await;

    // An update that does not validate: the last good version stays.
    let mut bad = vs("a", "web", "bad");
    bad["spec"] = json!("not-an-object");
    api.apply(ISTIO, "virtualservices", bad);
    // A new object that never was valid: never served.
    api.apply(
        ISTIO,
        "gateways",
        json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "a"}, "spec": 7}),
    );
    // A later valid change shows that the bad ones were processed before it.
    api.apply(ISTIO, "virtualservices", vs("a", "marker", "1"));
    let snapshot = wait_for(&mut rx, |s| {
        s.get(&key(Kind::VirtualService, "a", "marker")).is_some()
    })
    .await;
    assert_eq!(label(&snapshot, &web).as_deref(), Some("good"));
    assert!(snapshot.get(&key(Kind::Gateway, "a", "gw")).is_none());

    eventually(|| api.events().len() >= 2).await;
    let events = api.events();
    let web_event = events
        .iter()
        .find(|e| e["regarding"]["name"] == "web")
        .expect("no Event for the VirtualService");
    assert_eq!(web_event["type"], "Warning");
    assert_eq!(web_event["reason"], "InvalidConfig");
    assert_eq!(web_event["reportingController"], "admitpilot");
    assert_eq!(web_event["regarding"]["kind"], "VirtualService");
    assert_eq!(web_event["regarding"]["uid"], "uid-1");
    assert_eq!(web_event["metadata"]["namespace"], "a");
    let note = web_event["note"].as_str().unwrap();
    assert!(
        note.starts_with("admitpilot keeps serving the last good version of this object; this version is invalid: ")
            && note.contains("spec"),
        "{note}"
    );
    let gateway_event = events
        .iter()
        .find(|e| e["regarding"]["name"] == "gw")
        .expect("no Event for the Gateway");
    assert!(gateway_event["note"]
        .as_str()
        .unwrap()
        .starts_with("admitpilot does not serve this object (it has no valid version yet): "));
    assert!(api
        .requests()
        .iter()
        .any(|r| r.starts_with("POST /apis/events.k8s.io/v1/namespaces/a/events")));
    let rejected = metrics
        .rejected
        .get_or_create(&RejectLabels {
            kind: "VirtualService".into(),
            reason: "undecodable".into(),
        })
        .get();
    assert_eq!(rejected, 1);
}

#[tokio::test]
async fn higress_config_items_are_merged_with_their_last_good_values() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    api.apply(
        "",
        "configmaps",
        higress_config_map("gzip:\n  minContentLength: 2048\n"),
    );
    let (sources, metrics) = start(&api, &[]);
    let mut rx = sources.snapshots.clone();
    synced(&sources).await;
    wait_for(&mut rx, |s| gzip_min(s) == Some(2048)).await;

    // gzip turns invalid, a global option changes: the global option applies, gzip keeps its last good value.
    api.apply(
        "",
        "configmaps",
        higress_config_map(
            "gzip:\n  minContentLength: 4096\n  memoryLevel: 0\naddXRealIpHeader: true\n",
        ),
    );
    let snapshot = wait_for(&mut rx, |s| {
        s.higress_config().is_some_and(|c| c.add_x_real_ip_header)
    })
    .await;
    assert_eq!(gzip_min(&snapshot), Some(2048));
    eventually(|| !api.events().is_empty()).await;
    let event = &api.events()[0];
    assert_eq!(event["regarding"]["name"], "higress-config");
    let note = event["note"].as_str().unwrap();
    assert!(
        note.starts_with("admitpilot serves this config without its invalid items")
            && note.contains("data.higress.gzip.memoryLevel"),
        "{note}"
    );
    assert_eq!(
        metrics
            .rejected
            .get_or_create(&RejectLabels {
                kind: "ConfigMap".into(),
                reason: "invalid".into(),
            })
            .get(),
        1
    );
}

/// The persisted state in the double, as text (empty while there is none).
fn persisted(api: &ApiServer) -> String {
    api.object("", "configmaps", "admitpilot", "last-good")
        .and_then(|map| map["data"]["last-good.json"].as_str().map(String::from))
        .unwrap_or_default()
}

/// Last good versions outlive the process: what a replica serves in place of an invalid object (a whole
/// VirtualService, a higress-config item) is persisted in the ConfigMap `admitpilot/last-good`; a replica started
/// afterwards serves it in its very first snapshot. A fixed object leaves the state, and an object deleted and
/// created again (new uid) does not inherit the old one's version.
#[tokio::test]
async fn last_good_versions_survive_a_restart_through_a_configmap() {
    let api = ApiServer::start(Duration::from_millis(50)).await;
    install_all(&api, &[]);
    api.apply(ISTIO, "virtualservices", vs("a", "web", "good"));
    api.apply(
        "",
        "configmaps",
        higress_config_map("gzip:\n  minContentLength: 2048\n"),
    );
    let state = || Some("admitpilot/last-good".parse::<StateLocation>().unwrap());
    let backoff = Backoff {
        min: Duration::from_millis(20),
        max: Duration::from_millis(200),
    };
    let web = key(Kind::VirtualService, "a", "web");
    let (first, metrics) = start_with(&api, &[], backoff, state());
    synced(&first).await;
    let mut bad = vs("a", "web", "bad");
    bad["spec"]["http"] = json!(12);
    api.apply(ISTIO, "virtualservices", bad.clone());
    api.apply(
        "",
        "configmaps",
        higress_config_map(
            "gzip:\n  minContentLength: 4096\n  memoryLevel: 0\naddXRealIpHeader: true\n",
        ),
    );
    eventually(|| {
        let text = persisted(&api);
        text.contains(r#""name":"web""#) && text.contains(r#""name":"higress-config""#)
    })
    .await;
    assert_eq!(metrics.last_good_held.get(), 2);
    drop(first);

    // Another start: its first snapshot already serves the persisted versions.
    let (second, _) = start_with(&api, &[], backoff, state());
    synced(&second).await;
    let snapshot = second.snapshots.borrow().clone();
    assert_eq!(snapshot.version, 1);
    assert_eq!(label(&snapshot, &web).as_deref(), Some("good"));
    assert_eq!(gzip_min(&snapshot), Some(2048));
    assert!(snapshot
        .higress_config()
        .is_some_and(|c| c.add_x_real_ip_header));

    // Fixing the higress-config item takes it out of the state; the VirtualService stays held.
    api.apply(
        "",
        "configmaps",
        higress_config_map("gzip:\n  minContentLength: 4096\n"),
    );
    eventually(|| !persisted(&api).contains("higress-config")).await;
    assert!(persisted(&api).contains(r#""name":"web""#));

    // Deleted and created again, invalid: a new object (new uid) gets nothing of the old one's version.
    api.delete(ISTIO, "virtualservices", "a", "web");
    api.apply(ISTIO, "virtualservices", bad);
    api.apply(ISTIO, "virtualservices", vs("a", "marker", "1"));
    let mut rx = second.snapshots.clone();
    let snapshot = wait_for(&mut rx, |s| {
        s.get(&key(Kind::VirtualService, "a", "marker")).is_some()
    })
    .await;
    assert!(snapshot.get(&web).is_none());
    eventually(|| !persisted(&api).contains(r#""name":"web""#)).await;
    drop(second);

    // A replica started now finds nothing to fall back on for the new object.
    let (third, _) = start_with(&api, &[], backoff, state());
    synced(&third).await;
    assert!(third.snapshots.borrow().get(&web).is_none());
}
