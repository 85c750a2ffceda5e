//! End-to-end restarts, with the real `admitpilot` binary (`serve --config-dir`) and a real Envoy 1.40 over ADS
//! (`GRPC` and `DELTA_GRPC`), Envoy's default `initial_fetch_timeout`:
//! - admitpilot is killed and started again on the same xDS address while requests keep flowing through Envoy:
//!   not one request fails, Envoy reconnects, and the next config change lands. The routed VirtualService's
//!   file was made invalid before the kill, so its route is served from the last good version, which the
//!   restarted admitpilot finds in its `--state-dir`;
//! - Envoy is restarted: it gets the whole config again and serves every route.
//!
//! Throughout, Envoy rejects no update and logs no deprecated field. Skips with a message when Envoy is not
//! installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy::*;
use pipeline::*;

const NODE_ID: &str = "router~127.0.0.1~gw-restart.default~default.svc.cluster.local";

/// Requests sent through Envoy in the background until stopped, with every failure kept.
struct Traffic {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    failures: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Traffic {
    /// GETs `url` every 10 ms, expecting 200 with `body`.
    fn start(url: String, body: &'static str) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicUsize::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let (flag, count, failed) = (stop.clone(), sent.clone(), failures.clone());
        let task = tokio::spawn(async move {
            let http = client();
            while !flag.load(Ordering::SeqCst) {
                let got = get(&http, &url).await;
                count.fetch_add(1, Ordering::SeqCst);
                if got
                    .as_ref()
                    .is_none_or(|(status, text)| *status != 200 || text != body)
                {
                    failed.lock().unwrap().push(format!("{got:?}"));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Traffic {
            stop,
            sent,
            failures,
            task,
        }
    }

    /// Stops the requests; returns how many were sent and the failures.
    async fn stop(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        let failures = self.failures.lock().unwrap().clone();
        (self.sent.load(Ordering::SeqCst), failures)
    }
}

/// Waits until admitpilot's `/debug/syncz` lists a connected proxy.
async fn wait_for_proxy(admitpilot: &Admitpilot) {
    admitpilot
        .wait_for_admin("/debug/syncz", "Envoy connected", |text| {
            text.contains(NODE_ID)
        })
        .await;
}

async fn run(api: AdsApi, base_id: u32) {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let port = free_port();
    let dir = api_config_dir(port, backend.port);
    let state = tempfile::tempdir().unwrap();
    let admitpilot = Admitpilot::start_on(dir.path(), free_port(), Some(state.path())).await;
    let xds_port = admitpilot.xds_port;
    let yaml = bootstrap(api, xds_port, NODE_ID).replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &yaml, base_id).await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;
    wait_for_proxy(&admitpilot).await;

    // The VirtualService turns invalid: its last good version stays in force and is persisted.
    write(
        dir.path(),
        "api.yaml",
        &virtual_service("api", "/api", backend.port).replace("http:", "http: 12\nignored:"),
    );
    let state_file = state.path().join("last-good.json");
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while !std::fs::read_to_string(&state_file)
        .is_ok_and(|text| text.contains(r#""origin":"api.yaml""#))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the last good version was never persisted:\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // admitpilot dies and comes back on the same address while requests keep flowing.
    let traffic = Traffic::start(format!("{base}/api/x"), "backend");
    drop(admitpilot);
    let admitpilot = Admitpilot::start_on(dir.path(), xds_port, Some(state.path())).await;
    wait_for_proxy(&admitpilot).await;
    write(
        dir.path(),
        "later.yaml",
        &virtual_service("later", "/later", backend.port),
    );
    wait_for_response(&http, &format!("{base}/later"), 200, "backend").await;
    let (sent, failures) = traffic.stop().await;
    assert!(sent > 0);
    assert_eq!(failures, Vec::<String>::new(), "of {sent} requests");
    envoy.assert_nothing_rejected("admitpilot restart").await;

    // Envoy restarts: it gets the whole config again.
    drop(envoy);
    let envoy = EnvoyProcess::start(&binary, &yaml, base_id).await;
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;
    wait_for_response(&http, &format!("{base}/later"), 200, "backend").await;
    envoy.assert_nothing_rejected("Envoy restart").await;
    drop(envoy);
    drop(admitpilot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_keep_serving_through_restarts_sotw() {
    run(AdsApi::Sotw, 46_100 + std::process::id() % 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_keep_serving_through_restarts_delta() {
    run(AdsApi::Delta, 47_100 + std::process::id() % 1000).await;
}
