//! The whole pipeline for e2e tests and benches: writes config files into a folder (atomically, as an editor
//! or a ConfigMap mount does), builds the YAML of a minimal gateway setup, and runs `admitpilot serve
//! --config-dir` as a child process (killed on drop, its log printed when the test fails).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::envoy::{client, free_port, CONVERGE};

/// Writes `text` to `dir/name` through a temporary file and a rename, so a watcher never reads half a file.
pub fn write(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// A Gateway `default/gw` selecting `istio: ingressgateway`, with one plain-HTTP server on `port`.
pub fn gateway(port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: default}}\nspec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  - port: {{number: {port}, name: http, protocol: HTTP}}\n    hosts: [\"*\"]\n"
    )
}

/// A ServiceEntry `default/<name>` for `host`:`port` whose STATIC endpoint is 127.0.0.1 (on the same port).
pub fn service_entry(name: &str, host: &str, port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [{host}]\n  location: MESH_EXTERNAL\n  resolution: STATIC\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  endpoints: [{{address: 127.0.0.1}}]\n"
    )
}

/// A VirtualService `default/<name>` bound to `gw`, routing `prefix` to `backend.example.com`:`port`.
pub fn virtual_service(name: &str, prefix: &str, port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [\"*\"]\n  gateways: [gw]\n  http:\n  - match: [{{uri: {{prefix: {prefix}}}}}]\n    route: [{{destination: {{host: backend.example.com, port: {{number: {port}}}}}}}]\n"
    )
}

/// A new config folder with the minimal gateway setup: [`gateway`] on `port`, the `backend.example.com`
/// [`service_entry`] on `backend_port` and a [`virtual_service`] routing `/api` to it.
pub fn api_config_dir(port: u16, backend_port: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gateway.yaml", &gateway(port));
    let backend = service_entry("backend", "backend.example.com", backend_port);
    write(dir.path(), "backend.yaml", &backend);
    write(
        dir.path(),
        "api.yaml",
        &virtual_service("api", "/api", backend_port),
    );
    dir
}

/// [`api_config_dir`] on a free port, plus a VirtualService routing every other path (`/`) to the same backend;
/// returns the gateway port and the folder.
pub fn catch_all_config_dir(backend_port: u16) -> (u16, tempfile::TempDir) {
    let port = free_port();
    let dir = api_config_dir(port, backend_port);
    write(
        dir.path(),
        "root.yaml",
        &virtual_service("root", "/", backend_port),
    );
    (port, dir)
}

/// The `higress-config` ConfigMap (namespace `higress-system`) whose `higress` key holds `higress_yaml`.
pub fn higress_config(higress_yaml: &str) -> String {
    let indented: String = higress_yaml
        .lines()
        .map(|line| format!("    {line}\n"))
        .collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: higress-config, namespace: higress-system}}\ndata:\n  higress: |\n{indented}"
    )
}

/// The folder source (in process) following `dir`.
pub fn folder_sources(dir: &Path) -> admitpilot::source::Sources {
    admitpilot::source::start(
        admitpilot::source::SourceConfig {
            config_dir: Some(dir.to_path_buf()),
            ..Default::default()
        },
        admitpilot::source::SourceMetrics::default(),
    )
    .unwrap()
}

/// Serves `snapshots` translated by `translate` on `listener` (an in-process xDS server); send on the returned
/// sender to stop it, then await the task.
pub async fn start_xds(
    listener: tokio::net::TcpListener,
    snapshots: tokio::sync::watch::Receiver<std::sync::Arc<admitpilot::model::Snapshot>>,
    translate: admitpilot::xds::TranslateFn,
) -> (
    admitpilot::xds::XdsServer,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let server = admitpilot::xds::XdsServer::new(
        snapshots,
        translate,
        admitpilot::xds::XdsMetrics::default(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server.clone();
    let task = tokio::spawn(async move {
        serving
            .serve(listener, None, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (server, stop, task)
}

/// `admitpilot serve --config-dir` running as a child process, with its xDS server on 127.0.0.1:`xds_port`.
pub struct Admitpilot {
    child: Child,
    dir: tempfile::TempDir,
    /// Port of the xDS (ADS) server.
    pub xds_port: u16,
    /// Base URL of the admin server.
    pub admin: String,
    /// Port of the admission webhook (HTTPS, self-signed).
    pub webhook_port: u16,
}

/// The MCP chain of the e2e test and bench: a backend, admitpilot A serving [`api_config_dir`] on a free gateway
/// port, and admitpilot B subscribed to A over MCP (`--mcp-source`), ready.
pub struct McpChain {
    pub backend: super::envoy::Backend,
    /// The gateway's listener port (in A's Gateway).
    pub port: u16,
    /// A's config folder.
    pub dir: tempfile::TempDir,
    /// A: `serve --config-dir`.
    pub source: Admitpilot,
    /// B: `serve --mcp-source xds://A`, where gateways connect.
    pub edge: Admitpilot,
}

impl McpChain {
    pub async fn start() -> McpChain {
        let backend = super::envoy::Backend::start("backend").await;
        let port = free_port();
        let dir = api_config_dir(port, backend.port);
        let source = Admitpilot::start(dir.path()).await;
        let edge =
            Admitpilot::start_mcp_subscriber(&format!("xds://127.0.0.1:{}", source.xds_port)).await;
        McpChain {
            backend,
            port,
            dir,
            source,
            edge,
        }
    }

    /// A bootstrap for Envoy node `node_id` (labels `istio: ingressgateway`) connecting to B with `api`.
    pub fn bootstrap(&self, api: super::envoy::AdsApi, node_id: &str) -> String {
        super::envoy::bootstrap(api, self.edge.xds_port, node_id)
            .replace("app: e2e", "istio: ingressgateway")
    }
}

/// The webhook's own certificate (instead of a self-signed one) and port, e.g. for an API server to call it.
pub struct WebhookTls {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// PEM certificate chain (`--tls-cert`).
    pub cert: std::path::PathBuf,
    /// PEM private key (`--tls-key`).
    pub key: std::path::PathBuf,
    /// PEM CA that signed `cert` (used by [`Admitpilot::review`]).
    pub ca: std::path::PathBuf,
}

/// The `--config-dir` flag naming `dir`.
fn config_dir_flag(dir: &Path) -> [String; 1] {
    [format!("--config-dir={}", dir.display())]
}

impl Admitpilot {
    /// Starts the `admitpilot` binary of this package on `config_dir` and waits until `/readyz` answers 200.
    pub async fn start(config_dir: &Path) -> Admitpilot {
        Self::start_on(config_dir, free_port(), None).await
    }

    /// Like [`Admitpilot::start`], with the xDS server on `xds_port` (to restart where gateways connect) and, when
    /// given, last good versions persisted in `state_dir` (`--state-dir`).
    pub async fn start_on(
        config_dir: &Path,
        xds_port: u16,
        state_dir: Option<&Path>,
    ) -> Admitpilot {
        let state = state_dir.map(|state| format!("--state-dir={}", state.display()));
        Self::launch(
            &config_dir_flag(config_dir),
            xds_port,
            None,
            state.as_slice(),
        )
        .await
    }

    /// Starts the binary with the MCP server `source` (`xds://HOST:PORT`) as its only config source
    /// (`--mcp-source`).
    pub async fn start_mcp_subscriber(source: &str) -> Admitpilot {
        Self::start_mcp_subscriber_with(source, &[]).await
    }

    /// Like [`Admitpilot::start_mcp_subscriber`], with more flags `args` (e.g. `--mcp-source-ca`).
    pub async fn start_mcp_subscriber_with(source: &str, args: &[String]) -> Admitpilot {
        let flag = [format!("--mcp-source={source}")];
        Self::launch(&flag, free_port(), None, args).await
    }

    /// Like [`Admitpilot::start`], with more `serve` flags.
    pub async fn start_with_args(config_dir: &Path, args: &[&str]) -> Admitpilot {
        let args: Vec<String> = args.iter().map(ToString::to_string).collect();
        Self::launch(&config_dir_flag(config_dir), free_port(), None, &args).await
    }

    /// Starts the binary watching the API server of `kubeconfig` (`--kubeconfig`), its webhook with `webhook`'s
    /// certificate and port when given, with more flags `args`.
    pub async fn start_kube(
        kubeconfig: &Path,
        webhook: Option<&WebhookTls>,
        args: &[String],
    ) -> Admitpilot {
        let flag = [format!("--kubeconfig={}", kubeconfig.display())];
        Self::launch(&flag, free_port(), webhook, args).await
    }

    /// [`Admitpilot::start_kube`] without a webhook certificate, its xDS server on `xds_port` (which its flags may
    /// then name, e.g. as provisioned gateways' xDS address).
    pub async fn start_kube_at(kubeconfig: &Path, xds_port: u16, args: &[String]) -> Admitpilot {
        let flag = [format!("--kubeconfig={}", kubeconfig.display())];
        Self::launch(&flag, xds_port, None, args).await
    }

    /// Runs `admitpilot serve` with the config source flags `sources`, the xDS server on `xds_port`, the webhook's
    /// certificate and port (self-signed on a free port when `None`) and more flags `args`, and waits until
    /// `/readyz` answers 200.
    async fn launch(
        sources: &[String],
        xds_port: u16,
        webhook: Option<&WebhookTls>,
        args: &[String],
    ) -> Admitpilot {
        let dir = tempfile::tempdir().unwrap();
        let admin_port = free_port();
        let webhook_port = webhook.map_or_else(free_port, |w| w.port);
        let ca = dir.path().join("ca.crt");
        let tls_flags: Vec<std::ffi::OsString> = match webhook {
            Some(w) => {
                std::fs::copy(&w.ca, &ca).unwrap();
                vec![
                    "--tls-cert".into(),
                    w.cert.clone().into(),
                    "--tls-key".into(),
                    w.key.clone().into(),
                ]
            }
            None => vec!["--self-signed-ca-out".into(), ca.into()],
        };
        let log = std::fs::File::create(dir.path().join("admitpilot.log")).unwrap();
        let child = Command::new(crate::admitpilot_bin())
            .arg("serve")
            .args(sources)
            .args(["--xds-addr", &format!("127.0.0.1:{xds_port}")])
            .args(["--admin-addr", &format!("127.0.0.1:{admin_port}")])
            .args(["--webhook-addr", &format!("127.0.0.1:{webhook_port}")])
            .args(tls_flags)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start admitpilot");
        let mut running = Admitpilot {
            child,
            dir,
            xds_port,
            admin: format!("http://127.0.0.1:{admin_port}"),
            webhook_port,
        };
        let http = client();
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            if let Ok(response) = http.get(format!("{}/readyz", running.admin)).send().await {
                if response.status() == 200 {
                    return running;
                }
            }
            if let Ok(Some(status)) = running.child.try_wait() {
                panic!("admitpilot exited early ({status}):\n{}", running.log());
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "admitpilot never became ready:\n{}",
                running.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends a CREATE AdmissionReview of `object` (a Kubernetes object as JSON) to the webhook; returns the
    /// review's `response`.
    pub async fn review(&self, object: serde_json::Value) -> serde_json::Value {
        let ca = std::fs::read(self.dir.path().join("ca.crt")).unwrap();
        let https = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "e2e",
                "kind": {"group": group, "version": version, "kind": object["kind"]},
                "operation": "CREATE",
                "namespace": object["metadata"]["namespace"],
                "name": object["metadata"]["name"],
                "object": object,
            },
        });
        let url = format!("https://127.0.0.1:{}/validate", self.webhook_port);
        let response = https.post(url).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let mut review: serde_json::Value = response.json().await.unwrap();
        review["response"].take()
    }

    /// Polls the admin server's `path` until its text satisfies `ready`; fails with the log after the deadline.
    pub async fn wait_for_admin(&self, path: &str, what: &str, ready: impl Fn(&str) -> bool) {
        let http = client();
        let url = format!("{}{path}", self.admin);
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            if let Ok(response) = http.get(&url).send().await {
                if response.status() == 200 && response.text().await.is_ok_and(|t| ready(&t)) {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: not seen in {path}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The process id (benchmarks read its memory from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the process as Kubernetes does (SIGTERM) and waits for it to exit.
    pub fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }

    /// What the process logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("admitpilot.log")).unwrap_or_default()
    }
}

impl Drop for Admitpilot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- admitpilot log ----\n{}", self.log());
        }
    }
}
