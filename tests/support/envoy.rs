//! Real-Envoy helpers for e2e tests: finds the binary (`ADMITPILOT_ENVOY`, else `.venv/bin/envoy`) and the test
//! Python, renders an
//! ADS bootstrap, runs Envoy under a kill-on-drop guard (log level `ADMITPILOT_ENVOY_LOG_LEVEL`, default `info`;
//! the log is printed when a test fails), reads its admin API, and runs tiny HTTP backends.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// How long e2e tests wait for Envoy to converge.
pub const CONVERGE: Duration = Duration::from_secs(30);

/// The Envoy binary, or `None` after printing a skip message (the caller returns).
pub fn envoy_binary() -> Option<PathBuf> {
    let path = std::env::var_os("ADMITPILOT_ENVOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(crate::REPO_ROOT).join(".venv/bin/envoy"));
    if !path.exists() {
        eprintln!("skipping: Envoy not found (set ADMITPILOT_ENVOY or install .venv/bin/envoy)");
        return None;
    }
    Some(path)
}

/// The test Python (`ADMITPILOT_PYTHON`, else `.venv/bin/python`) when it can import `modules` (comma-separated,
/// as an `import` statement lists them), or `None` after printing a skip message (the caller returns).
pub fn python_with(modules: &str) -> Option<PathBuf> {
    let path = std::env::var_os("ADMITPILOT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(crate::REPO_ROOT).join(".venv/bin/python"));
    let usable = path.exists()
        && Command::new(&path)
            .args(["-c", &format!("import {modules}")])
            .status()
            .is_ok_and(|status| status.success());
    if !usable {
        eprintln!("skipping: python with {modules} not found (set ADMITPILOT_PYTHON or run scripts/setup-tools)");
        return None;
    }
    Some(path)
}

/// `GRPC` (SotW) or `DELTA_GRPC`.
#[derive(Debug, Clone, Copy)]
pub enum AdsApi {
    Sotw,
    Delta,
}

impl AdsApi {
    fn bootstrap_name(self) -> &'static str {
        match self {
            AdsApi::Sotw => "GRPC",
            AdsApi::Delta => "DELTA_GRPC",
        }
    }
}

/// An Envoy bootstrap fetching everything over ADS from 127.0.0.1:`xds_port`, with Envoy's default
/// `initial_fetch_timeout` (15 s), as gateways run: a shorter one would hide a resource left warming.
pub fn bootstrap(api: AdsApi, xds_port: u16, node_id: &str) -> String {
    format!(
        r#"node:
  id: "{node_id}"
  cluster: higress-gateway
  metadata: {{ NAMESPACE: default, LABELS: {{ app: e2e }} }}
admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
dynamic_resources:
  ads_config:
    api_type: {api}
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services:
    - envoy_grpc: {{ cluster_name: xds_cluster }}
  lds_config: {{ ads: {{}}, resource_api_version: V3 }}
  cds_config: {{ ads: {{}}, resource_api_version: V3 }}
static_resources:
  clusters:
  - name: xds_cluster
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
    load_assignment:
      cluster_name: xds_cluster
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {xds_port} }} }} }}
"#,
        api = api.bootstrap_name()
    )
}

/// A running Envoy, killed on drop (its log is printed if the test is failing).
pub struct EnvoyProcess {
    child: Child,
    dir: tempfile::TempDir,
    pub admin: String,
    http: reqwest::Client,
}

impl EnvoyProcess {
    /// Starts Envoy with `bootstrap_yaml`; `base_id` must be unique among concurrently running Envoys.
    pub async fn start(binary: &Path, bootstrap_yaml: &str, base_id: u32) -> EnvoyProcess {
        Self::start_with_args(binary, bootstrap_yaml, base_id, &[]).await
    }

    /// [`EnvoyProcess::start`] with more command-line arguments (`--drain-time-s 1`, …); a `--log-level` among
    /// them replaces the default one.
    pub async fn start_with_args(
        binary: &Path,
        bootstrap_yaml: &str,
        base_id: u32,
        extra_args: &[&str],
    ) -> EnvoyProcess {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bootstrap.yaml");
        std::fs::write(&config, bootstrap_yaml).unwrap();
        let log_level = if extra_args.contains(&"--log-level") {
            Vec::new()
        } else {
            vec![
                "--log-level".to_string(),
                std::env::var("ADMITPILOT_ENVOY_LOG_LEVEL").unwrap_or_else(|_| "info".into()),
            ]
        };
        let mut command = Command::new(binary);
        command
            .arg("-c")
            .arg(&config)
            .args(log_level)
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "1",
                // Access logs reach the file within 100 ms instead of Envoy's default 10 s.
                "--file-flush-interval-msec",
                "100",
            ])
            .arg("--base-id")
            .arg(base_id.to_string())
            .args(extra_args);
        Self::spawn(command, dir).await
    }

    /// Starts Envoy with exactly the arguments `args` (a container's), with only `--admin-address-path` added to
    /// learn its admin address.
    pub async fn start_argv(binary: &Path, args: &[String]) -> EnvoyProcess {
        let mut command = Command::new(binary);
        command.args(args);
        Self::spawn(command, tempfile::tempdir().unwrap()).await
    }

    /// Runs `command` with its logs in `dir` and waits until its admin address is known.
    async fn spawn(mut command: Command, dir: tempfile::TempDir) -> EnvoyProcess {
        let admin_path = dir.path().join("admin-address");
        let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
        let stdout = std::fs::File::create(dir.path().join("stdout.log")).unwrap();
        let child = command
            .arg("--admin-address-path")
            .arg(&admin_path)
            .stdout(stdout)
            .stderr(log)
            .spawn()
            .expect("start envoy");
        let mut envoy = EnvoyProcess {
            child,
            dir,
            admin: String::new(),
            http: client(),
        };
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            if let Ok(text) = std::fs::read_to_string(&admin_path) {
                if !text.trim().is_empty() {
                    envoy.admin = format!("http://{}", text.trim());
                    break;
                }
            }
            if let Ok(Some(status)) = envoy.child.try_wait() {
                panic!("envoy exited early ({status}):\n{}", envoy.log());
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "envoy admin address never appeared:\n{}",
                envoy.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        envoy
    }

    /// Stops Envoy (killed, and waited for) before the value is dropped, e.g. to start another on its ports.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// How Envoy exited, once it has (a crash, an abort); `None` while it runs.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// What Envoy wrote to standard output (access logs to `/dev/stdout`).
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stdout.log")).unwrap_or_default()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }

    /// All counters/gauges whose name contains `filter`.
    pub async fn stats(&self, filter: &str) -> Vec<(String, u64)> {
        let Ok(response) = self
            .http
            .get(format!("{}/stats?filter={filter}", self.admin))
            .send()
            .await
        else {
            return Vec::new();
        };
        let text = response.text().await.unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (name, value) = line.split_once(": ")?;
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect()
    }

    /// One stat's value (0 when absent).
    pub async fn stat(&self, name: &str) -> u64 {
        self.stats(name)
            .await
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or(0)
    }

    /// The warnings Envoy logged for deprecated fields in the config it was given ("Deprecated field: type …
    /// Using deprecated option '…'"), one per use.
    pub fn deprecated_fields(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| line.contains("Deprecated field"))
            .map(str::to_string)
            .collect()
    }

    /// Asserts that Envoy rejected no update (every `*update_rejected` counter, CDS's and LDS's among them, is 0)
    /// and logged no deprecated field; `step` names the moment in the failure message.
    pub async fn assert_nothing_rejected(&self, step: &str) {
        let stats = self.stats("update_rejected").await;
        assert!(
            stats
                .iter()
                .any(|(n, _)| n == "cluster_manager.cds.update_rejected")
                && stats
                    .iter()
                    .any(|(n, _)| n == "listener_manager.lds.update_rejected"),
            "{step}: CDS/LDS stats missing: {stats:?}"
        );
        let rejected: Vec<_> = stats.iter().filter(|(_, v)| *v != 0).collect();
        assert!(
            rejected.is_empty(),
            "{step}: Envoy rejected updates {rejected:?}\n{}",
            self.log()
        );
        assert_eq!(self.deprecated_fields(), Vec::<String>::new(), "{step}");
    }

    /// `/config_dump` as text.
    pub async fn config_dump(&self) -> String {
        self.http
            .get(format!("{}/config_dump", self.admin))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// `/config_dump` parsed.
    pub async fn config_dump_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.config_dump().await).unwrap()
    }

    /// Polls `/config_dump` until `check` holds and returns that dump (panics after [`CONVERGE`]).
    pub async fn wait_for_config(
        &self,
        what: &str,
        check: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let dump = self.config_dump_json().await;
            if check(&dump) {
                return dump;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Envoy's config never showed {what}; update stats: {:?}",
                self.stats("update_").await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Dynamic resources of one kind in a parsed `/config_dump`.
#[derive(Debug, Clone, Copy)]
pub enum Dumped {
    /// Active listeners.
    Listener,
    /// Active clusters.
    Cluster,
    /// Route configurations.
    RouteConfig,
}

/// The dynamic resources of `kind` in `dump`.
pub fn dumped(dump: &serde_json::Value, kind: Dumped) -> Vec<&serde_json::Value> {
    let (list, pointer) = match kind {
        Dumped::Listener => ("dynamic_listeners", "/active_state/listener"),
        Dumped::Cluster => ("dynamic_active_clusters", "/cluster"),
        Dumped::RouteConfig => ("dynamic_route_configs", "/route_config"),
    };
    dump["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|config| config[list].as_array())
        .flatten()
        .filter_map(|entry| entry.pointer(pointer))
        .collect()
}

/// The typed config of the HTTP connection manager of every dumped listener.
pub fn dumped_hcms(dump: &serde_json::Value) -> Vec<&serde_json::Value> {
    dumped(dump, Dumped::Listener)
        .into_iter()
        .flat_map(|listener| listener["filter_chains"].as_array().into_iter().flatten())
        .flat_map(|chain| chain["filters"].as_array().into_iter().flatten())
        .filter(|filter| filter["name"] == "envoy.filters.network.http_connection_manager")
        .map(|filter| &filter["typed_config"])
        .collect()
}

impl Drop for EnvoyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- envoy log ----\n{}", self.log());
        }
    }
}

/// An HTTP client that never uses a proxy.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// An HTTP client that opens a new connection per request: a policy change replaces a listener's filter chain,
/// and a pooled connection stays on the old one until Envoy drains it.
pub fn unpooled_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// A text body long enough (and repetitive enough) for the gzip compressor, served at any path ending `/big`.
pub fn big_body() -> String {
    "admitpilot e2e backend says hello, and keeps saying it so the body compresses well. "
        .repeat(32)
}

/// A backend answering `text/plain` `body` (or [`big_body`] at paths ending `/big`) and recording the headers
/// of every request it receives; stops when dropped.
pub struct Backend {
    pub port: u16,
    requests: std::sync::Arc<std::sync::Mutex<Vec<axum::http::HeaderMap>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Backend {
    pub async fn start(body: &'static str) -> Backend {
        Self::start_on("127.0.0.1", body).await
    }

    /// A backend on every address of the machine, and the machine's own IPv4 address (the one its default route
    /// leaves from): an address an EndpointSlice may name, as a pod's (the API server refuses loopback ones).
    /// `None` when the machine has no such address.
    pub async fn start_for_pods(body: &'static str) -> Option<(Backend, std::net::IpAddr)> {
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        // No packet is sent: connecting a UDP socket only picks the route.
        probe.connect("192.0.2.255:9").ok()?;
        let ip = probe.local_addr().ok()?.ip();
        (!ip.is_loopback()).then_some(())?;
        Some((Self::start_on("0.0.0.0", body).await, ip))
    }

    async fn start_on(address: &str, body: &'static str) -> Backend {
        let listener = tokio::net::TcpListener::bind((address, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests: std::sync::Arc<std::sync::Mutex<Vec<axum::http::HeaderMap>>> =
            std::sync::Arc::default();
        let seen = std::sync::Arc::clone(&requests);
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
                let seen = std::sync::Arc::clone(&seen);
                async move {
                    seen.lock().unwrap().push(headers);
                    if uri.path().ends_with("/big") {
                        big_body()
                    } else {
                        body.to_string()
                    }
                }
            },
        );
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Backend {
            port,
            requests,
            task,
        }
    }

    /// Headers of the most recent request received.
    pub fn last_request(&self) -> Option<axum::http::HeaderMap> {
        self.requests.lock().unwrap().last().cloned()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port that was free a moment ago on 127.0.0.1, for a server started later (an Envoy listener, admitpilot).
///
/// It is taken below Linux's ephemeral range (32768–60999), where the kernel picks the ports of every `:0` bind
/// (Envoy's admin port, backends, clients): a port from that range could be handed to one of those before the
/// server that was meant to get it binds it. Each test process starts at its own offset and never hands out a
/// port twice.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = std::process::id().wrapping_mul(7_919) % COUNT;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < COUNT, "no free port left below the ephemeral range");
        let port = u16::try_from(FIRST + (offset + n * 13) % COUNT).unwrap();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// GETs `url`; `(status, body)`, or `None` when the connection failed.
pub async fn get(client: &reqwest::Client, url: &str) -> Option<(u16, String)> {
    let response = client.get(url).send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.ok()?))
}

/// Polls `url` until it answers `status` with `body` (panics after [`CONVERGE`]).
pub async fn wait_for_response(client: &reqwest::Client, url: &str, status: u16, body: &str) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    let mut last = None;
    loop {
        let got = get(client, url).await;
        if let Some((s, b)) = &got {
            if *s == status && b == body {
                return;
            }
        }
        last = got.or(last);
        if tokio::time::Instant::now() >= deadline {
            panic!("{url} never answered {status} {body:?}; last: {last:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
