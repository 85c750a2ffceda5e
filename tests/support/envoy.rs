//! Real-Envoy helpers for e2e tests: finds the binary (`ADMITPILOT_ENVOY`, else `.venv/bin/envoy`), renders an
//! ADS bootstrap, runs Envoy under a kill-on-drop guard, reads its admin API, and runs tiny HTTP backends.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long e2e tests wait for Envoy to converge.
pub const CONVERGE: Duration = Duration::from_secs(30);

/// The Envoy binary, or `None` (the caller prints a skip message).
pub fn envoy_binary() -> Option<PathBuf> {
    let path = std::env::var_os("ADMITPILOT_ENVOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/envoy"));
    path.exists().then_some(path)
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

/// An Envoy bootstrap fetching everything over ADS from 127.0.0.1:`xds_port`.
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
  lds_config: {{ ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 1s }}
  cds_config: {{ ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 1s }}
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
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bootstrap.yaml");
        std::fs::write(&config, bootstrap_yaml).unwrap();
        let admin_path = dir.path().join("admin-address");
        let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
        let child = Command::new(binary)
            .arg("-c")
            .arg(&config)
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "1",
                "--log-level",
                "info",
            ])
            .arg("--base-id")
            .arg(base_id.to_string())
            .arg("--admin-address-path")
            .arg(&admin_path)
            .stdout(Stdio::null())
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

    /// Sum of every `*update_rejected` counter.
    pub async fn rejected_updates(&self) -> u64 {
        self.stats("update_rejected")
            .await
            .into_iter()
            .map(|(_, v)| v)
            .sum()
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

/// A backend answering every request with `body`; stops when dropped.
pub struct Backend {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Backend {
    pub async fn start(body: &'static str) -> Backend {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().fallback(move || async move { body });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Backend { port, task }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let SocketAddr::V4(addr) = listener.local_addr().unwrap() else {
        unreachable!()
    };
    addr.port()
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
