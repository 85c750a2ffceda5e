//! `admitpilot serve --kube` watching a real kube-apiserver (`support::kube_server`, a private server: the test stops and
//! restarts it), with a real Envoy 1.40 over ADS and its default `initial_fetch_timeout`:
//! - Istio objects applied with `kubectl` reach Envoy, and requests through Envoy reach the backend they name;
//! - a watch outage: admitpilot's connection to the API server is cut (a TCP relay on 127.0.0.1 between them), the
//!   API server is stopped (Envoy keeps serving the last config) and started again, objects are added and deleted
//!   with kubectl while admitpilot still cannot reach it, then the connection comes back: admitpilot picks up every
//!   change made during the outage;
//! - throughout, Envoy rejects no update and keeps running.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::kube_server;
use support::pipeline;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy::{AdsApi, Backend, EnvoyProcess};
use kube_server::Kube;
use pipeline::Admitpilot;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kube/istio-crds.yaml");
const NODE_ID: &str = "router~127.0.0.1~gw-kube.default~default.svc.cluster.local";
/// Recovery after an outage may wait out the watcher's longest retry delay (30 s) on top of Envoy's convergence.
const RECOVER: Duration = Duration::from_secs(90);

/// A TCP relay from a port on 127.0.0.1 to `target`, which can be cut (open connections reset, new ones closed
/// at once) and restored: an outage as admitpilot sees it, while the test still reaches the API server.
struct Relay {
    port: u16,
    open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Relay {
    async fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (is_open, tasks) = (open.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !is_open.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                tasks.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                }));
            }
        });
        Relay {
            port,
            open,
            connections,
            accept,
        }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

/// The port of the `https://127.0.0.1:PORT` server in `kubeconfig`.
fn server_port(kubeconfig: &Path) -> u16 {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let config: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let server = config["clusters"][0]["cluster"]["server"].as_str().unwrap();
    server.rsplit(':').next().unwrap().parse().unwrap()
}

/// Polls `url` until it answers `status` (with `body` when given), for at most [`RECOVER`].
async fn wait_for(url: &str, status: u16, body: Option<&str>, admitpilot: &Admitpilot) {
    let http = envoy::client();
    let deadline = tokio::time::Instant::now() + RECOVER;
    loop {
        let got = envoy::get(&http, url).await;
        if got
            .as_ref()
            .is_some_and(|(s, b)| *s == status && body.is_none_or(|body| b == body))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{url} never answered {status} {body:?}; last: {got:?}\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn kubectl_changes_reach_envoy_across_an_api_server_outage() {
    let Some(envoy_bin) = envoy::envoy_binary() else {
        return;
    };
    let Some(kube) = Kube::private("kube-watch").await else {
        return;
    };
    kube.install_crds(Path::new(CRDS)).await;
    let (first, second) = (
        Backend::start("first").await,
        Backend::start("second").await,
    );
    let port = envoy::free_port();
    let objects = [
        pipeline::gateway(port),
        pipeline::service_entry("first", "first.example.com", first.port),
        pipeline::virtual_service("api", "/api", first.port)
            .replace("backend.example.com", "first.example.com"),
    ];
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&objects.join("---\n")))
        .await;

    // admitpilot reaches the API server through the relay, with the admin's credentials.
    let relay = Relay::start(server_port(kube.kubeconfig())).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig(
        &kubeconfig,
        Some(&format!("https://127.0.0.1:{}", relay.port)),
        None,
    );
    // Plain Envoy without a token: no secrets are involved, so xDS runs unauthenticated.
    let admitpilot = Admitpilot::start_kube(&kubeconfig, None, &["--xds-auth=none".into()]).await;
    let bootstrap = envoy::bootstrap(AdsApi::Delta, admitpilot.xds_port, NODE_ID)
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&envoy_bin, &bootstrap, 61).await;
    let api = format!("http://127.0.0.1:{port}/api");
    let new = format!("http://127.0.0.1:{port}/new");
    wait_for(&api, 200, Some("first"), &admitpilot).await;
    envoy.assert_nothing_rejected("before the outage").await;

    // The outage: admitpilot is cut off, the API server stops; Envoy keeps the last config.
    relay.cut();
    kube.stop().await;
    wait_for(&api, 200, Some("first"), &admitpilot).await;
    // The API server comes back; while admitpilot still cannot reach it, a route is added and one deleted.
    kube.start().await;
    let changes = [
        pipeline::service_entry("second", "second.example.com", second.port),
        pipeline::virtual_service("new", "/new", second.port)
            .replace("backend.example.com", "second.example.com"),
    ];
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&changes.join("---\n")))
        .await;
    kube.kubectl_ok(&["-n", "default", "delete", "virtualservice", "api"], None)
        .await;
    relay.restore();

    wait_for(&new, 200, Some("second"), &admitpilot).await;
    wait_for(&api, 404, None, &admitpilot).await;
    envoy.assert_nothing_rejected("after the outage").await;
    assert_eq!(
        envoy::get(&envoy::client(), &new).await,
        Some((200, "second".to_string())),
        "Envoy is still serving"
    );
}
