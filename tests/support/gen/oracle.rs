//! Real Envoy as the judge: takes config snapshots and yields Envoy's verdict on each. One real Envoy 1.40 (SotW
//! ADS, Envoy's default `initial_fetch_timeout`) follows admitpilot's own xDS server, translating with the caching
//! [`admitpilot::translate::Translator`] `serve` uses (`TranslateFn::caching`), unguarded so that whatever the
//! translation yields reaches Envoy. A load is settled when the server has sent the snapshot's config and Envoy has
//! acknowledged or rejected every response, and nothing is warming; a few requests then go through the HTTP, HTTPS
//! and TCP servers. The verdict is a crash (the process exited), a rejection (an `*update_rejected` counter rose,
//! with Envoy's NACK message), a deprecated field Envoy warned about, a load that never settles, or loaded. After
//! anything but loaded, Envoy is restarted so the next verdict starts clean.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use admitpilot::model::{ConfigObject, Snapshot};
use admitpilot::translate::Options;
use admitpilot::xds::{TranslateFn, XdsMetrics, XdsServer};
use prometheus_client::registry::Registry;
use tokio::sync::{oneshot, watch};

use super::base::marker;
use crate::envoy::{bootstrap, unpooled_client, AdsApi, EnvoyProcess};

/// How long one load may take to settle (more than Envoy's 15 s `initial_fetch_timeout`).
const SETTLE: Duration = Duration::from_secs(40);
const NODE_ID: &str = "router~127.0.0.1~gen.edge~edge.svc.cluster.local";

/// Envoy's verdict on one snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Loaded,
    Crashed(String),
    Rejected(String),
    Deprecated(String),
    Stuck(String),
}

/// A real Envoy following admitpilot's xDS server.
pub struct Oracle {
    binary: PathBuf,
    bootstrap: String,
    envoy: EnvoyProcess,
    server: XdsServer,
    snapshots: watch::Sender<Arc<Snapshot>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    base: Snapshot,
    /// `(HTTP, HTTPS, TCP)` ports requests are sent to after a load.
    ports: (u16, u16, u16),
    version: u64,
    next_base_id: u32,
    /// Envoy loads so far.
    pub loads: usize,
    /// Envoy starts so far (the first and one per restart).
    pub starts: usize,
}

impl Oracle {
    /// Starts the xDS server on `base` and an Envoy (`binary`) following it with `node_metadata`; requests go to
    /// the `(HTTP, HTTPS, TCP)` server `ports`.
    pub async fn start(
        binary: &Path,
        base: Snapshot,
        node_metadata: &str,
        ports: (u16, u16, u16),
    ) -> Oracle {
        let (snapshots, receiver) = watch::channel(Arc::new(Snapshot {
            version: 1,
            ..base.clone()
        }));
        let mut registry = Registry::with_prefix("admitpilot");
        let metrics = XdsMetrics::register(&mut registry);
        let translate = TranslateFn::caching(Options::default()).unguarded();
        let server = XdsServer::new(receiver, translate, metrics);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let xds_port = listener.local_addr().unwrap().port();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = server.clone();
        let task = tokio::spawn(async move {
            serving
                .serve(listener, None, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        let bootstrap = bootstrap(AdsApi::Sotw, xds_port, NODE_ID).replace(
            "{ NAMESPACE: default, LABELS: { app: e2e } }",
            node_metadata,
        );
        let next_base_id = 53_000 + std::process::id() % 1000 * 10;
        let envoy = start_envoy(binary, &bootstrap, next_base_id).await;
        Oracle {
            binary: binary.to_path_buf(),
            bootstrap,
            envoy,
            server,
            snapshots,
            stop: Some(stop),
            task: Some(task),
            base,
            ports,
            version: 1,
            next_base_id: next_base_id + 1,
            loads: 0,
            starts: 1,
        }
    }

    /// Loads the base config plus `objects` and returns Envoy's verdict.
    pub async fn load(&mut self, objects: &[Arc<ConfigObject>]) -> Verdict {
        self.version += 1;
        self.loads += 1;
        let mut snapshot = self.base.clone();
        snapshot.version = self.version;
        for object in objects.iter().cloned().chain([marker(self.version)]) {
            snapshot.objects.insert(object.key(), object);
        }
        self.snapshots.send_replace(Arc::new(snapshot));
        let verdict = self.settle().await;
        if verdict != Verdict::Loaded {
            self.restart().await;
        }
        verdict
    }

    async fn settle(&mut self) -> Verdict {
        let deadline = tokio::time::Instant::now() + SETTLE;
        let mut settled_polls = 0;
        loop {
            if let Some(crash) = self.crashed() {
                return crash;
            }
            let stats = self.envoy.stats("update_rejected%7Cwarming").await;
            let sum = |suffix: &str| -> u64 {
                stats
                    .iter()
                    .filter(|(name, _)| name.ends_with(suffix))
                    .map(|(_, v)| v)
                    .sum()
            };
            let synced = self.synced();
            if sum("update_rejected") > 0 {
                // Let the NACK reach the server's status before reading its message.
                let nack_deadline = tokio::time::Instant::now() + Duration::from_secs(2);
                while !self.nacked() && tokio::time::Instant::now() < nack_deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                return Verdict::Rejected(self.nack_messages(&stats));
            }
            let idle = !stats.is_empty()
                && sum("total_listeners_warming") == 0
                && sum("warming_clusters") == 0;
            settled_polls = if synced && idle { settled_polls + 1 } else { 0 };
            if settled_polls >= 2 {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Verdict::Stuck(format!(
                    "version {} not settled within {SETTLE:?}: synced {synced}, stats {stats:?}, streams {}",
                    self.version,
                    self.sync_summary()
                ));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.exercise().await;
        if let Some(crash) = self.crashed() {
            return crash;
        }
        let deprecated = self.envoy.deprecated_fields();
        if !deprecated.is_empty() {
            return Verdict::Deprecated(deprecated.join("\n"));
        }
        Verdict::Loaded
    }

    /// A few requests through the servers (answers do not matter, only that Envoy survives them).
    async fn exercise(&self) {
        let (http, https, tcp) = self.ports;
        let client = unpooled_client();
        let requests = [
            client.get(format!("http://127.0.0.1:{http}/admin/x/y")),
            client
                .post(format!("http://127.0.0.1:{http}/api/v1?q=1"))
                .header("x-tenant", "acme")
                .header("authorization", "Bearer not.a.jwt"),
            client.get(format!("http://127.0.0.1:{tcp}/")),
        ];
        for request in requests {
            let _ = request.timeout(Duration::from_secs(2)).send().await;
        }
        let insecure = reqwest::Client::builder()
            .no_proxy()
            .danger_accept_invalid_certs(true)
            .resolve(
                "api.example.com",
                std::net::SocketAddr::from(([127, 0, 0, 1], https)),
            )
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let _ = insecure
            .get(format!("https://api.example.com:{https}/admin/x"))
            .send()
            .await;
    }

    fn crashed(&mut self) -> Option<Verdict> {
        let status = self.envoy.exit_status()?;
        let log = self.envoy.log() + &self.envoy.stdout();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Some(Verdict::Crashed(format!(
            "envoy exited ({status}):\n{}",
            tail.join("\n")
        )))
    }

    /// Whether the server sent this load's config and Envoy answered every response.
    fn synced(&self) -> bool {
        let list = self.server.status().list();
        // The newest stream: a restarted Envoy's old one may still be listed for a moment.
        let Some(connection) = list.iter().rev().find(|c| c.subscriber == "envoy") else {
            return false;
        };
        connection.snapshot_version == self.version
            && connection.types.values().all(|t| {
                t.sent_version.is_none()
                    || t.acked_version == t.sent_version
                    || t.last_nack
                        .as_ref()
                        .is_some_and(|nack| Some(nack.version) == t.sent_version)
            })
    }

    /// Each Envoy stream's snapshot version and, per type, what was sent and acknowledged.
    fn sync_summary(&self) -> String {
        let streams: Vec<String> = self
            .server
            .status()
            .list()
            .iter()
            .filter(|c| c.subscriber == "envoy")
            .map(|c| {
                let types: Vec<String> = c
                    .types
                    .iter()
                    .map(|(kind, t)| {
                        let shown = |v: &Option<admitpilot::xds::status::Version>| {
                            v.map_or("-".to_string(), |v| v.to_string())
                        };
                        format!(
                            "{kind} sent {} acked {}",
                            shown(&t.sent_version),
                            shown(&t.acked_version)
                        )
                    })
                    .collect();
                format!(
                    "[{} at {}: {}]",
                    c.connection,
                    c.snapshot_version,
                    types.join(", ")
                )
            })
            .collect();
        streams.join(" ")
    }

    fn nacked(&self) -> bool {
        self.server
            .status()
            .list()
            .iter()
            .any(|c| c.types.values().any(|t| t.last_nack.is_some()))
    }

    fn nack_messages(&self, stats: &[(String, u64)]) -> String {
        let mut messages: Vec<String> = stats
            .iter()
            .filter(|(name, v)| name.ends_with("update_rejected") && *v > 0)
            .map(|(name, v)| format!("{name}: {v}"))
            .collect();
        for connection in self.server.status().list() {
            for (kind, status) in &connection.types {
                if let Some(nack) = &status.last_nack {
                    messages.push(format!("{kind} NACK: {}", nack.message));
                }
            }
        }
        let log = self.envoy.log();
        messages.extend(
            log.lines()
                .filter(|line| line.contains("rejected") || line.contains("error"))
                .take(5)
                .map(str::to_string),
        );
        messages.join("\n")
    }

    async fn restart(&mut self) {
        let base_id = self.next_base_id;
        self.next_base_id += 1;
        self.starts += 1;
        // The new process starts on the base config, not on the one it just failed (which would show up as a
        // rejection or crash of whatever is loaded next).
        self.version += 1;
        let mut base = self.base.clone();
        base.version = self.version;
        self.snapshots.send_replace(Arc::new(base));
        // The old process is stopped before the new one starts on the same ports.
        self.envoy.stop();
        self.envoy = start_envoy(&self.binary, &self.bootstrap, base_id).await;
    }

    /// Stops Envoy and the server.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

async fn start_envoy(binary: &Path, bootstrap: &str, base_id: u32) -> EnvoyProcess {
    // Listeners replaced by each load drain for one second instead of ten minutes; warnings (deprecated fields)
    // and worse are logged.
    EnvoyProcess::start_with_args(
        binary,
        bootstrap,
        base_id,
        &["--drain-time-s", "1", "--log-level", "warning"],
    )
    .await
}
