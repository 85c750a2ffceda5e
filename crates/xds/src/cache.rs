//! Per-group configuration cache: takes the snapshot watch channel and a [`TranslateFn`], yields one `watch`
//! channel of [`GroupConfig`] per proxy group. Each group keeps its own translator, so a snapshot is translated
//! once per group reusing that group's earlier work; groups whose content did not change are not woken; slow
//! readers only ever see the latest value (watch coalescing).
//!
//! Guard: before a group's translation is encoded, every resource that changed is checked the way Envoy checks it
//! on load ([`check_changed`], the same check the webhook denies with). When something would be rejected, the
//! objects changed since the last push are checked one by one with the webhook's check
//! ([`EffectChecker::culprits`]); each object that breaks the gateway alone is left out, keeping its last good
//! version (logged, counted in `admitpilot_xds_excluded_objects_total`), and the rest is served. A resource still
//! rejected after that (a conflict no single object causes) keeps the version last sent, and is logged and counted
//! (`admitpilot_xds_held_back_resources_total`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::watch;

use super::mcp::McpFeed;
use super::metrics::XdsMetrics;
use super::resources::{Family, GroupConfig};
use admitpilot_model::{ObjectKey, Snapshot};
use admitpilot_translate::dangling::{LeftOut, LEFT_OUT_MESSAGE};
use admitpilot_translate::effect::{check_changed, restore_rejected, EffectChecker, Rejection};
use admitpilot_translate::{GatewayResources, Options, Proxy, Translator};

/// Translates snapshots for one proxy group, keeping what it reuses between calls.
pub trait GroupTranslator: Send {
    /// Translates `snapshot` for `proxy` (a proxy of the group) and returns the resources.
    fn translate(&mut self, snapshot: &Snapshot, proxy: &Proxy) -> &GatewayResources;

    /// The resources of the last [`GroupTranslator::translate`].
    fn output(&self) -> &GatewayResources;
}

impl GroupTranslator for Translator {
    fn translate(&mut self, snapshot: &Snapshot, proxy: &Proxy) -> &GatewayResources {
        Translator::translate(self, snapshot, proxy)
    }

    fn output(&self) -> &GatewayResources {
        Translator::output(self)
    }
}

type StatelessFn = Arc<dyn Fn(&Snapshot, &Proxy) -> GatewayResources + Send + Sync>;

/// A function called for every translation, keeping only its last output.
struct Stateless {
    translate: StatelessFn,
    last: GatewayResources,
}

impl GroupTranslator for Stateless {
    fn translate(&mut self, snapshot: &Snapshot, proxy: &Proxy) -> &GatewayResources {
        self.last = (self.translate)(snapshot, proxy);
        &self.last
    }

    fn output(&self) -> &GatewayResources {
        &self.last
    }
}

/// How the server translates: makes the translator of each proxy group.
#[derive(Clone)]
pub struct TranslateFn {
    new_group: Arc<dyn Fn() -> Box<dyn GroupTranslator> + Send + Sync>,
    /// Hold back resources Envoy would reject (on unless [`TranslateFn::unguarded`]).
    guard: bool,
    /// The translation options, when every group translates with [`Translator`].
    options: Option<Options>,
}

impl std::fmt::Debug for TranslateFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranslateFn").finish_non_exhaustive()
    }
}

impl TranslateFn {
    /// A caching [`Translator`] per proxy group, with these options (what `serve` uses).
    pub fn caching(options: Options) -> Self {
        let shared = options.clone();
        TranslateFn {
            new_group: Arc::new(move || Box::new(Translator::new(shared.clone()))),
            guard: true,
            options: Some(options),
        }
    }

    /// The options of [`TranslateFn::caching`] (`None` for a [`TranslateFn::stateless`] function).
    pub fn options(&self) -> Option<&Options> {
        self.options.as_ref()
    }

    /// Sends every translation as it is, even what Envoy will reject (tests of NACK handling).
    pub fn unguarded(mut self) -> Self {
        self.guard = false;
        self
    }

    /// Calls `translate` for every translation, reusing nothing (fixed or hand-built configurations).
    pub fn stateless(
        translate: impl Fn(&Snapshot, &Proxy) -> GatewayResources + Send + Sync + 'static,
    ) -> Self {
        let translate: StatelessFn = Arc::new(translate);
        TranslateFn {
            new_group: Arc::new(move || {
                Box::new(Stateless {
                    translate: Arc::clone(&translate),
                    last: GatewayResources::default(),
                })
            }),
            guard: true,
            options: None,
        }
    }
}

/// One proxy group: its translator and the channel its streams watch.
struct Group {
    translator: Box<dyn GroupTranslator>,
    sender: watch::Sender<Arc<GroupConfig>>,
    /// What the last translation left out (reported when it changes).
    left_out: Vec<LeftOut>,
    /// Whether resources Envoy would reject are held back.
    guard: bool,
    /// What was last sent, when guarded (the baseline of the guard's check).
    last: GatewayResources,
    /// What the guard held back last time (reported when it changes).
    held_back: Vec<Rejection>,
    /// Finds the objects behind rejections, when guarded and translating with [`Translator`].
    checker: Option<EffectChecker>,
    /// The snapshot last served (without the objects the guard left out).
    served: Option<Snapshot>,
    /// The objects the guard left out last time (reported when it changes).
    excluded: Vec<(ObjectKey, String)>,
}

/// At most this many objects changed since the last push are checked one by one to find those Envoy would reject;
/// with more (a first load, a mass apply), only the rejected resources are held back.
const MAX_CULPRIT_CHECKS: usize = 64;

/// Latest encoded configuration of every proxy group that has at least one connected stream.
pub struct ConfigCache {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    translate: TranslateFn,
    groups: Mutex<HashMap<Proxy, Group>>,
    /// What MCP subscribers follow, while any does.
    mcp: Mutex<Option<McpFeed>>,
    /// Set by [`ConfigCache::close`]: no group is kept or created any more.
    closed: AtomicBool,
    metrics: XdsMetrics,
}

impl std::fmt::Debug for ConfigCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigCache")
            .field("groups", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl ConfigCache {
    /// Creates the cache; call [`ConfigCache::run`] to follow snapshot changes.
    pub fn new(
        snapshots: watch::Receiver<Arc<Snapshot>>,
        translate: TranslateFn,
        metrics: XdsMetrics,
    ) -> Arc<Self> {
        Arc::new(ConfigCache {
            snapshots,
            translate,
            groups: Mutex::new(HashMap::new()),
            mcp: Mutex::new(None),
            closed: AtomicBool::new(false),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Proxy, Group>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins a proxy group. The group's configuration is brought up to the latest snapshot first (translating
    /// it if the group is new or the dispatcher has not got to it yet), so a new stream never starts stale.
    pub fn subscribe(&self, proxy: &Proxy) -> watch::Receiver<Arc<GroupConfig>> {
        let mut groups = self.lock();
        if self.closed.load(Ordering::Acquire) {
            // A closed channel: the stream ends at once.
            return watch::channel(Arc::new(GroupConfig::empty())).1;
        }
        let snapshot = self.snapshots.borrow().clone();
        if let Some(group) = groups.get_mut(proxy) {
            if group.sender.borrow().snapshot_version != snapshot.version {
                group.refresh(&snapshot, proxy, Instant::now(), &self.metrics);
            }
            return group.sender.subscribe();
        }
        groups.retain(|_, group| group.sender.receiver_count() > 0);
        let (sender, receiver) = watch::channel(Arc::new(GroupConfig::empty()));
        let mut group = Group {
            translator: (self.translate.new_group)(),
            sender,
            left_out: Vec::new(),
            guard: self.translate.guard,
            last: GatewayResources::default(),
            held_back: Vec::new(),
            checker: self
                .translate
                .options
                .clone()
                .filter(|_| self.translate.guard)
                .map(EffectChecker::new),
            served: None,
            excluded: Vec::new(),
        };
        group.refresh(&snapshot, proxy, Instant::now(), &self.metrics);
        groups.insert(proxy.clone(), group);
        receiver
    }

    /// Joins the MCP feed, brought up to the latest snapshot first (see [`super::mcp`]).
    pub fn subscribe_mcp(&self) -> watch::Receiver<Arc<GroupConfig>> {
        let mut feed = self.lock_mcp();
        if self.closed.load(Ordering::Acquire) {
            return watch::channel(Arc::new(GroupConfig::empty_of(Family::Mcp))).1;
        }
        let snapshot = self.snapshots.borrow().clone();
        let feed = feed.get_or_insert_with(McpFeed::new);
        feed.refresh(&snapshot, Instant::now());
        feed.subscribe()
    }

    fn lock_mcp(&self) -> MutexGuard<'_, Option<McpFeed>> {
        self.mcp.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops every group and the MCP feed, closing the channels their streams follow (which ends the streams);
    /// later subscriptions get a closed channel. Used at shutdown.
    pub fn close(&self) {
        let mut groups = self.lock();
        let mut feed = self.lock_mcp();
        self.closed.store(true, Ordering::Release);
        groups.clear();
        *feed = None;
    }

    /// Number of proxy groups with connected streams.
    pub fn group_count(&self) -> usize {
        self.lock()
            .values()
            .filter(|group| group.sender.receiver_count() > 0)
            .count()
    }

    /// The proxy groups with connected streams.
    pub fn connected_groups(&self) -> Vec<Proxy> {
        self.lock()
            .iter()
            .filter(|(_, group)| group.sender.receiver_count() > 0)
            .map(|(proxy, _)| proxy.clone())
            .collect()
    }

    /// The objects the push guard leaves out for each connected group, with what Envoy would reject.
    pub fn held_back(&self) -> Vec<(Proxy, ObjectKey, String)> {
        self.lock()
            .iter()
            .filter(|(_, group)| group.sender.receiver_count() > 0)
            .flat_map(|(proxy, group)| {
                group
                    .excluded
                    .iter()
                    .map(|(key, why)| (proxy.clone(), key.clone(), why.clone()))
            })
            .collect()
    }

    /// Follows snapshot changes until the snapshot sender goes away or `shutdown` fires, re-translating every
    /// live group (off the async workers) and publishing the groups whose content changed.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut snapshots = self.snapshots.clone();
        loop {
            tokio::select! {
                changed = snapshots.changed() => if changed.is_err() { break },
                _ = shutdown.changed() => break,
            }
            let published = Instant::now();
            let snapshot = snapshots.borrow_and_update().clone();
            let cache = self.clone();
            if let Err(error) =
                tokio::task::spawn_blocking(move || cache.refresh(&snapshot, published)).await
            {
                tracing::error!(%error, "xDS translation task failed; keeping the previous configuration");
            }
        }
    }

    /// Re-translates every live group for `snapshot` and refreshes the MCP feed while it is followed; returns how
    /// many groups changed (the MCP feed counts as one).
    pub fn refresh(&self, snapshot: &Snapshot, published: Instant) -> usize {
        let mcp_changed = {
            let mut feed = self.lock_mcp();
            if feed.as_ref().is_some_and(|feed| !feed.is_followed()) {
                *feed = None;
            }
            feed.as_mut()
                .is_some_and(|feed| feed.refresh(snapshot, published))
        };
        let mut groups = self.lock();
        groups.retain(|_, group| group.sender.receiver_count() > 0);
        let mut changed = 0;
        for (proxy, group) in groups.iter_mut() {
            if group.sender.borrow().snapshot_version == snapshot.version {
                continue;
            }
            if group.refresh(snapshot, proxy, published, &self.metrics) {
                changed += 1;
            }
        }
        tracing::debug!(
            version = snapshot.version,
            groups = groups.len(),
            changed,
            mcp_changed,
            "translated snapshot for xDS"
        );
        changed + usize::from(mcp_changed)
    }
}

impl Group {
    /// Re-translates the group; returns whether its content changed (and was published).
    fn refresh(
        &mut self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        published: Instant,
        metrics: &XdsMetrics,
    ) -> bool {
        let previous = self.sender.borrow().clone();
        let config = if self.guard {
            let resources = self.guarded_translation(snapshot, proxy, metrics);
            let config =
                GroupConfig::encode(&resources, snapshot.version, published, Some(&previous));
            self.last = resources;
            config
        } else {
            let translated = self.translator.translate(snapshot, proxy);
            if translated.left_out != self.left_out {
                self.left_out =
                    report_left_out(&self.left_out, &translated.left_out, proxy, metrics);
            }
            GroupConfig::encode(translated, snapshot.version, published, Some(&previous))
        };
        if config.same_content(&previous) && previous.is_loaded() {
            // Nothing to send, but the streams wake to record that what their proxies hold is this version's
            // config (a Gateway is Programmed once its proxies hold the version with its generation).
            self.sender.send_replace(Arc::new(GroupConfig {
                snapshot_version: snapshot.version,
                ..(*previous).clone()
            }));
            return false;
        }
        self.sender.send_replace(Arc::new(config));
        true
    }
}

impl Group {
    /// Translates `snapshot` without what Envoy would reject: the objects that break the gateway alone keep their
    /// last good version, and any resource still rejected keeps the version last sent.
    fn guarded_translation(
        &mut self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        metrics: &XdsMetrics,
    ) -> GatewayResources {
        let mut rejections = check_changed(&self.last, self.translator.translate(snapshot, proxy));
        let mut excluded = Vec::new();
        let mut served = snapshot.clone();
        if let (false, Some(checker), Some(base)) =
            (rejections.is_empty(), &self.checker, &self.served)
        {
            match checker.culprits(base, snapshot, proxy, MAX_CULPRIT_CHECKS) {
                Some(culprits) if !culprits.is_empty() => {
                    for (key, why) in culprits {
                        let kept = match base.get(&key) {
                            Some(old) => {
                                served.objects.insert(key.clone(), Arc::clone(old));
                                true
                            }
                            None => {
                                served.objects.remove(&key);
                                false
                            }
                        };
                        if !self.excluded.iter().any(|(k, _)| *k == key) {
                            report_excluded(&key, &why, kept, proxy, metrics);
                        }
                        let reasons: Vec<String> = why.iter().map(ToString::to_string).collect();
                        excluded.push((key, reasons.join("; ")));
                    }
                    rejections =
                        check_changed(&self.last, self.translator.translate(&served, proxy));
                }
                Some(_) => {}
                None => tracing::warn!(namespace = %proxy.namespace, limit = MAX_CULPRIT_CHECKS,
                    "too many objects changed at once to find the ones Envoy would reject; holding back the \
                     rejected resources instead"),
            }
        }
        for (key, _) in self
            .excluded
            .iter()
            .filter(|(key, _)| !excluded.iter().any(|(k, _)| k == key))
        {
            tracing::info!(namespace = %proxy.namespace, kind = %key.kind, object_namespace = %key.namespace,
                name = %key.name, "object served again: Envoy accepts it now");
        }
        self.excluded = excluded;
        self.served = Some(served);
        let translated = self.translator.output();
        if translated.left_out != self.left_out {
            self.left_out = report_left_out(&self.left_out, &translated.left_out, proxy, metrics);
        }
        let mut resources = translated.clone();
        restore_rejected(&mut resources, &self.last, &rejections);
        if rejections != self.held_back {
            report_held_back(&self.held_back, &rejections, proxy, metrics);
            self.held_back = rejections;
        }
        resources
    }
}

/// Logs and counts an object the guard newly leaves out, saying what the gateway gets instead: the object's last
/// good version (`kept_last_good`), or nothing of it when it has none.
fn report_excluded(
    key: &ObjectKey,
    why: &[Rejection],
    kept_last_good: bool,
    proxy: &Proxy,
    metrics: &XdsMetrics,
) {
    metrics.excluded();
    let reasons: Vec<String> = why.iter().map(ToString::to_string).collect();
    let outcome = if kept_last_good {
        "the gateway keeps its last good version"
    } else {
        "the gateway gets nothing of it (it has no earlier version Envoy accepts)"
    };
    tracing::error!(namespace = %proxy.namespace, labels = ?proxy.labels, kind = %key.kind,
        object_namespace = %key.namespace, name = %key.name, rejected = ?reasons,
        "Envoy would reject what this object makes of the gateway's config; {outcome}");
}

/// Logs and counts each resource the guard newly holds back (and logs the ones sent again).
fn report_held_back(before: &[Rejection], now: &[Rejection], proxy: &Proxy, metrics: &XdsMetrics) {
    for rejection in now.iter().filter(|r| !before.contains(r)) {
        metrics.held_back();
        tracing::error!(namespace = %proxy.namespace, labels = ?proxy.labels, resource = %rejection.resource,
            field = %rejection.path, rule = %rejection.message,
            "Envoy would reject this resource; the gateway keeps the version last sent");
    }
    for rejection in before.iter().filter(|r| !now.contains(r)) {
        tracing::info!(namespace = %proxy.namespace, resource = %rejection.resource,
            "resource sent again: Envoy accepts it now");
    }
}

/// Logs and counts each feature in `now` that was not in `before` (and logs the ones that came back); returns
/// `now` to keep.
fn report_left_out(
    before: &[LeftOut],
    now: &[LeftOut],
    proxy: &Proxy,
    metrics: &XdsMetrics,
) -> Vec<LeftOut> {
    for item in now.iter().filter(|item| !before.contains(item)) {
        metrics.left_out(item.effect);
        tracing::warn!(namespace = %proxy.namespace, labels = ?proxy.labels, resource = %item.resource,
            feature = %item.feature, missing_clusters = ?item.missing, effect = %item.effect,
            blame = ?item.blame, "{LEFT_OUT_MESSAGE}");
    }
    for item in before.iter().filter(|item| !now.contains(item)) {
        tracing::info!(namespace = %proxy.namespace, resource = %item.resource, feature = %item.feature,
            "sent again in full: the clusters it names exist");
    }
    now.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ResourceType;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn proxy(ns: &str) -> Proxy {
        Proxy {
            namespace: ns.into(),
            ..Default::default()
        }
    }

    #[test]
    fn one_translation_per_group_and_unchanged_groups_keep_their_content() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let translate = TranslateFn::stateless(move |snapshot: &Snapshot, proxy: &Proxy| {
            counter.fetch_add(1, Ordering::SeqCst);
            // Namespace "a" sees the snapshot version; "b" always gets the same cluster.
            let name = if proxy.namespace == "a" {
                format!("c{}", snapshot.version)
            } else {
                "fixed".to_string()
            };
            GatewayResources {
                clusters: vec![Cluster {
                    name,
                    ..Default::default()
                }],
                ..Default::default()
            }
        });
        let (tx, rx) = watch::channel(Arc::new(loaded(1)));
        let cache = ConfigCache::new(rx, translate, XdsMetrics::default());
        let mut a1 = cache.subscribe(&proxy("a"));
        let _a2 = cache.subscribe(&proxy("a"));
        let mut b = cache.subscribe(&proxy("b"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(cache.group_count(), 2);
        a1.mark_unchanged();
        b.mark_unchanged();

        let next = Arc::new(loaded(2));
        tx.send_replace(next.clone());
        assert_eq!(cache.refresh(&next, Instant::now()), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert!(a1.has_changed().unwrap());
        // The unchanged group's streams wake only to record the version they now serve: same content.
        assert!(b.has_changed().unwrap());
        let unchanged = b.borrow_and_update().clone();
        assert_eq!(unchanged.snapshot_version, 2);
        assert!(!unchanged
            .of(ResourceType::Cluster)
            .by_name
            .contains_key("c2"));
        let config = a1.borrow_and_update().clone();
        assert!(config.of(ResourceType::Cluster).by_name.contains_key("c2"));

        drop(b);
        assert_eq!(cache.group_count(), 1);
    }

    fn loaded(version: u64) -> Snapshot {
        Snapshot {
            version,
            ..Default::default()
        }
    }

    #[test]
    fn the_first_loaded_snapshot_wakes_every_group_even_when_nothing_changed() {
        let translate = TranslateFn::stateless(|_, _| GatewayResources::default());
        let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
        let cache = ConfigCache::new(rx, translate, XdsMetrics::default());
        let mut group = cache.subscribe(&proxy("a"));
        assert!(!group.borrow_and_update().is_loaded());

        let first = Arc::new(loaded(1));
        tx.send_replace(first.clone());
        assert_eq!(cache.refresh(&first, Instant::now()), 1);
        assert!(group.has_changed().unwrap());
        assert!(group.borrow_and_update().is_loaded());

        let second = Arc::new(loaded(2));
        tx.send_replace(second.clone());
        assert_eq!(cache.refresh(&second, Instant::now()), 0);
        // Nothing changed: the stream only learns that what it serves is version 2's config.
        assert_eq!(group.borrow_and_update().snapshot_version, 2);
    }
}
