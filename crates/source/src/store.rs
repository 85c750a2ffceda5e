//! The store: takes [`SourceEvent`]s from every source (each tagged with its [`Scope`]), keeps one map of all valid
//! objects, and publishes debounced, strictly versioned [`Snapshot`]s on a `watch` channel.
//!
//! Rules:
//! * An event that changes nothing (same object again, delete of an unknown key) publishes nothing.
//! * A change is published once no further change arrived for `debounce`, and at the latest `debounce_max` after
//!   the first unpublished change. Consumers always see the latest whole state; bursts are coalesced.
//! * Nothing is published until every registered scope has sent its first [`SourceEvent::Resync`]; the first
//!   snapshot (version 1) is then published even when it is empty, and the `synced` flag turns true.
//! * When two scopes hold the same key, the later write wins; a scope's delete or resync only removes keys that
//!   scope owns.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Scope, SourceEvent, SourceMetrics, DEFAULT_DEBOUNCE, DEFAULT_DEBOUNCE_MAX};
use admitpilot_model::snapshot::ObjectMap;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot};
use admitpilot_validate::enforcement::unenforced;

/// Debounce settings (`--debounce`, `--debounce-max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// Quiet period that ends a burst.
    pub debounce: Duration,
    /// Longest a change waits before it is published even while changes keep coming.
    pub debounce_max: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            debounce: DEFAULT_DEBOUNCE,
            debounce_max: DEFAULT_DEBOUNCE_MAX,
        }
    }
}

enum Input {
    Register(Scope),
    Event(Scope, SourceEvent),
}

/// Handle to the running store: hands out senders and receivers. The store task ends once every sender is gone.
#[derive(Debug)]
pub struct Store {
    tx: mpsc::UnboundedSender<Input>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    synced: watch::Receiver<bool>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Register(scope) => write!(f, "Register({scope})"),
            Input::Event(scope, _) => write!(f, "Event({scope})"),
        }
    }
}

/// Sends one scope's events to the store.
#[derive(Debug, Clone)]
pub struct ScopedSender {
    scope: Scope,
    tx: mpsc::UnboundedSender<Input>,
}

/// The store task has ended (only when the runtime shuts down).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the config store has stopped")]
pub struct Closed;

impl ScopedSender {
    /// Sends one event.
    pub fn send(&self, event: SourceEvent) -> Result<(), Closed> {
        self.tx
            .send(Input::Event(self.scope.clone(), event))
            .map_err(|_| Closed)
    }

    /// Returns the scope this sender speaks for.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
}

impl Store {
    /// Starts the store task. Must be called inside a Tokio runtime.
    pub fn spawn(config: StoreConfig, metrics: SourceMetrics) -> Store {
        let (tx, rx) = mpsc::unbounded_channel();
        let (snapshot_tx, snapshots) = watch::channel(Arc::new(Snapshot::default()));
        let (synced_tx, synced) = watch::channel(false);
        let state = State::new();
        tokio::spawn(run(config, metrics, state, rx, snapshot_tx, synced_tx));
        Store {
            tx,
            snapshots,
            synced,
        }
    }

    /// Registers `scope` (the store waits for its first resync before publishing) and returns its sender.
    pub fn sender(&self, scope: Scope) -> ScopedSender {
        // The store task lives as long as any sender, including ours, so this cannot fail while `self` exists.
        let _ = self.tx.send(Input::Register(scope.clone()));
        ScopedSender {
            scope,
            tx: self.tx.clone(),
        }
    }

    /// Subscribes to published snapshots.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }

    /// Subscribes to the "all sources synced and first snapshot published" flag.
    pub fn synced(&self) -> watch::Receiver<bool> {
        self.synced.clone()
    }
}

struct State {
    /// Every object in force. A persistent map: each published snapshot is an O(1) clone of it, and a change
    /// after a publish copies only the nodes on that key's path (O(log n)), so a publish costs O(change).
    current: ObjectMap,
    /// The scope that owns each key in `current`.
    owners: HashMap<ObjectKey, Scope>,
    counts: BTreeMap<Kind, i64>,
    /// Objects in `current` that gateways do not (wholly) enforce, by kind.
    unenforced: BTreeMap<Kind, i64>,
    /// Kinds whose count changed since the last publish (their gauges are updated then).
    counts_changed: BTreeSet<Kind>,
    /// Registered scopes that have not sent their first resync yet.
    pending: HashSet<Scope>,
    version: u64,
}

impl State {
    fn new() -> Self {
        State {
            current: ObjectMap::new(),
            owners: HashMap::new(),
            counts: BTreeMap::new(),
            unenforced: BTreeMap::new(),
            counts_changed: BTreeSet::new(),
            pending: HashSet::new(),
            version: 0,
        }
    }

    /// Applies one input; returns whether the visible state changed.
    fn handle(&mut self, input: Input) -> bool {
        match input {
            Input::Register(scope) => {
                self.pending.insert(scope);
                false
            }
            Input::Event(scope, SourceEvent::Apply(object)) => self.insert(scope, object),
            Input::Event(scope, SourceEvent::Delete(key)) => self.remove(&scope, &key),
            Input::Event(scope, SourceEvent::Resync(objects)) => {
                let first_sync = self.pending.remove(&scope);
                let keep: HashSet<ObjectKey> = objects.iter().map(|o| o.key()).collect();
                let stale: Vec<ObjectKey> = self
                    .owners
                    .iter()
                    .filter(|(key, owner)| **owner == scope && !keep.contains(*key))
                    .map(|(key, _)| key.clone())
                    .collect();
                let mut changed = first_sync && self.pending.is_empty();
                for key in stale {
                    changed |= self.remove(&scope, &key);
                }
                for object in objects {
                    changed |= self.insert(scope.clone(), object);
                }
                changed
            }
        }
    }

    fn insert(&mut self, scope: Scope, object: Arc<ConfigObject>) -> bool {
        let key = object.key();
        if let Some(owner) = self.owners.get_mut(&key) {
            if *owner != scope {
                tracing::warn!(object = %key, from = %owner, to = %scope,
                    "object defined by two sources; the later one wins");
                *owner = scope.clone();
            }
        }
        let held = self.current.get(&key);
        if held.is_some_and(|held| Arc::ptr_eq(held, &object) || **held == *object) {
            // Unchanged: leave the map (and the nodes it shares with the published snapshot) alone.
            return false;
        }
        let added = held.is_none();
        let was_unenforced = held.is_some_and(|held| unenforced(held).is_some());
        let part = unenforced(&object);
        if let Some(part) = &part {
            tracing::warn!(object = %key, field = part.field, "{}", part.why);
        }
        self.count_unenforced(
            key.kind,
            i64::from(part.is_some()) - i64::from(was_unenforced),
        );
        if added {
            self.count(key.kind, 1);
            self.owners.insert(key.clone(), scope);
        }
        self.current.insert(key, object);
        true
    }

    fn remove(&mut self, scope: &Scope, key: &ObjectKey) -> bool {
        if self.owners.get(key) != Some(scope) {
            return false;
        }
        self.owners.remove(key);
        if let Some(removed) = self.current.remove(key) {
            if unenforced(&removed).is_some() {
                self.count_unenforced(key.kind, -1);
            }
        }
        self.count(key.kind, -1);
        true
    }

    fn count(&mut self, kind: Kind, delta: i64) {
        *self.counts.entry(kind).or_default() += delta;
        self.counts_changed.insert(kind);
    }

    fn count_unenforced(&mut self, kind: Kind, delta: i64) {
        if delta != 0 {
            *self.unenforced.entry(kind).or_default() += delta;
            self.counts_changed.insert(kind);
        }
    }

    fn snapshot(&mut self) -> Snapshot {
        self.version += 1;
        Snapshot {
            version: self.version,
            objects: self.current.clone(),
        }
    }
}

async fn run(
    config: StoreConfig,
    metrics: SourceMetrics,
    mut state: State,
    mut rx: mpsc::UnboundedReceiver<Input>,
    snapshot_tx: watch::Sender<Arc<Snapshot>>,
    synced_tx: watch::Sender<bool>,
) {
    // (first unpublished change, latest change)
    let mut dirty: Option<(Instant, Instant)> = None;
    loop {
        let ready = state.pending.is_empty();
        let deadline =
            dirty.map(|(first, last)| (last + config.debounce).min(first + config.debounce_max));
        tokio::select! {
            input = rx.recv() => match input {
                Some(input) => {
                    if state.handle(input) {
                        let now = Instant::now();
                        dirty = Some(dirty.map_or((now, now), |(first, _)| (first, now)));
                    }
                }
                None => break,
            },
            () = sleep_until(deadline), if ready && deadline.is_some() => {
                if let Some((first, _)) = dirty.take() {
                    publish(&mut state, &metrics, &snapshot_tx, first);
                    synced_tx.send_if_modified(|synced| !std::mem::replace(synced, true));
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        tokio::time::sleep_until(deadline).await;
    }
}

fn publish(
    state: &mut State,
    metrics: &SourceMetrics,
    snapshot_tx: &watch::Sender<Arc<Snapshot>>,
    first_change: Instant,
) {
    let snapshot = state.snapshot();
    let version = snapshot.version;
    let size = snapshot.objects.len();
    // The previous snapshot is dropped here unless a consumer still holds it; only the nodes it does not share
    // with the new one are freed.
    snapshot_tx.send_replace(Arc::new(snapshot));
    let latency = first_change.elapsed();
    metrics.publishes.inc();
    metrics.publish_latency.observe(latency.as_secs_f64());
    metrics
        .snapshot_version
        .set(i64::try_from(version).unwrap_or(i64::MAX));
    for kind in std::mem::take(&mut state.counts_changed) {
        let count = state.counts.get(&kind).copied().unwrap_or_default();
        let labels = super::metrics::KindLabels {
            kind: kind.to_string(),
        };
        metrics.objects.get_or_create(&labels).set(count);
        if let Some(&unenforced) = state.unenforced.get(&kind) {
            metrics.unenforced.get_or_create(&labels).set(unenforced);
        }
    }
    tracing::debug!(
        version,
        objects = size,
        latency_ms = latency.as_secs_f64() * 1e3,
        "published snapshot"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::{ObjectMeta, Spec};

    fn vs(ns: &str, name: &str, generation: i64) -> Arc<ConfigObject> {
        Arc::new(ConfigObject {
            api_version: "networking.istio.io/v1".into(),
            metadata: ObjectMeta {
                name: name.into(),
                namespace: ns.into(),
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            spec: Spec::VirtualService(Default::default()),
        })
    }

    async fn next(rx: &mut watch::Receiver<Arc<Snapshot>>) -> Arc<Snapshot> {
        tokio::time::timeout(Duration::from_secs(5), rx.changed())
            .await
            .unwrap()
            .unwrap();
        rx.borrow_and_update().clone()
    }

    fn config() -> StoreConfig {
        StoreConfig {
            debounce: Duration::from_millis(5),
            debounce_max: Duration::from_millis(50),
        }
    }

    #[tokio::test]
    async fn waits_for_every_scope_before_the_first_publish() {
        let store = Store::spawn(config(), SourceMetrics::default());
        let a = store.sender(Scope::new("a"));
        let b = store.sender(Scope::new("b"));
        let mut rx = store.subscribe();
        a.send(SourceEvent::Resync(vec![vs("ns", "one", 1)]))
            .unwrap();
        a.send(SourceEvent::Apply(vs("ns", "two", 1))).unwrap();
        // Nothing may be published while b is still syncing; b's resync then publishes everything at once.
        assert!(!*store.synced().borrow());
        b.send(SourceEvent::Resync(vec![])).unwrap();
        let snapshot = next(&mut rx).await;
        assert_eq!(snapshot.version, 1);
        assert_eq!(snapshot.objects.len(), 2);
        let mut synced = store.synced();
        tokio::time::timeout(Duration::from_secs(5), synced.wait_for(|s| *s))
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn empty_initial_sync_still_publishes_version_one() {
        let store = Store::spawn(config(), SourceMetrics::default());
        let a = store.sender(Scope::new("a"));
        let mut rx = store.subscribe();
        a.send(SourceEvent::Resync(vec![])).unwrap();
        let snapshot = next(&mut rx).await;
        assert_eq!((snapshot.version, snapshot.objects.len()), (1, 0));
    }

    #[tokio::test]
    async fn coalesces_a_burst_into_one_version() {
        let store = Store::spawn(
            StoreConfig {
                debounce: Duration::from_millis(50),
                debounce_max: Duration::from_secs(5),
            },
            SourceMetrics::default(),
        );
        let a = store.sender(Scope::new("a"));
        let mut rx = store.subscribe();
        a.send(SourceEvent::Resync(vec![])).unwrap();
        for i in 0..100 {
            a.send(SourceEvent::Apply(vs("ns", &format!("vs{i}"), 1)))
                .unwrap();
        }
        let snapshot = next(&mut rx).await;
        assert_eq!(snapshot.version, 1);
        assert_eq!(snapshot.objects.len(), 100);
    }

    #[tokio::test]
    async fn no_op_events_publish_nothing_and_versions_grow() {
        let store = Store::spawn(config(), SourceMetrics::default());
        let a = store.sender(Scope::new("a"));
        let mut rx = store.subscribe();
        a.send(SourceEvent::Resync(vec![vs("ns", "one", 1)]))
            .unwrap();
        assert_eq!(next(&mut rx).await.version, 1);
        // Same object again, a relist with the same content and an unknown delete: no new version.
        a.send(SourceEvent::Apply(vs("ns", "one", 1))).unwrap();
        a.send(SourceEvent::Resync(vec![vs("ns", "one", 1)]))
            .unwrap();
        a.send(SourceEvent::Delete(ObjectKey::new(
            Kind::VirtualService,
            "ns",
            "nope",
        )))
        .unwrap();
        a.send(SourceEvent::Apply(vs("ns", "one", 2))).unwrap();
        let snapshot = next(&mut rx).await;
        assert_eq!(snapshot.version, 2);
        let key = ObjectKey::new(Kind::VirtualService, "ns", "one");
        assert_eq!(snapshot.get(&key).unwrap().metadata.generation, Some(2));
    }

    #[tokio::test]
    async fn resync_removes_only_the_scopes_own_objects() {
        let store = Store::spawn(config(), SourceMetrics::default());
        let a = store.sender(Scope::new("a"));
        let b = store.sender(Scope::new("b"));
        let mut rx = store.subscribe();
        a.send(SourceEvent::Resync(vec![
            vs("ns", "a1", 1),
            vs("ns", "a2", 1),
        ]))
        .unwrap();
        b.send(SourceEvent::Resync(vec![vs("ns", "b1", 1)]))
            .unwrap();
        assert_eq!(next(&mut rx).await.objects.len(), 3);
        a.send(SourceEvent::Resync(vec![vs("ns", "a2", 1)]))
            .unwrap();
        b.send(SourceEvent::Delete(ObjectKey::new(
            Kind::VirtualService,
            "ns",
            "a2",
        )))
        .unwrap();
        let snapshot = next(&mut rx).await;
        let names: Vec<&str> = snapshot.objects.keys().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["a2", "b1"]);
    }

    #[tokio::test]
    async fn max_delay_bounds_a_steady_stream() {
        let store = Store::spawn(
            StoreConfig {
                debounce: Duration::from_millis(40),
                debounce_max: Duration::from_millis(100),
            },
            SourceMetrics::default(),
        );
        let a = store.sender(Scope::new("a"));
        let mut rx = store.subscribe();
        a.send(SourceEvent::Resync(vec![])).unwrap();
        assert_eq!(next(&mut rx).await.version, 1);
        // Changes every 10 ms never leave a 40 ms gap, yet a snapshot must appear within about 100 ms.
        let start = Instant::now();
        let mut i = 0;
        let published = loop {
            a.send(SourceEvent::Apply(vs("ns", &format!("x{i}"), 1)))
                .unwrap();
            i += 1;
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_millis(10), rx.changed()).await
            {
                break rx.borrow_and_update().clone();
            }
            assert!(start.elapsed() < Duration::from_secs(5), "never published");
        };
        assert_eq!(published.version, 2);
    }
}
