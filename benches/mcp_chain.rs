//! MCP benchmark (`harness = false`), with the real `admitpilot` binary:
//! - **chain latency** (`--runs N`, needs Envoy): admitpilot A (`serve --config-dir`) → MCP → admitpilot B
//!   (`serve --mcp-source xds://A`) → xDS → a real Envoy 1.40. Each run writes a new VirtualService file into
//!   A's folder and times until Envoy behind B answers 200 on its new path (polled every millisecond). Prints
//!   the median, p90 and maximum.
//! - **subscriber memory** (`--subscribers N`): A loaded with `--objects M` VirtualServices; N MCP subscribers
//!   (SotW ADS streams, one connection each, subscribed to every collection, ACKing) connect; prints A's RSS
//!   before and after and the growth per subscriber, and how long it took until every subscriber had every
//!   collection.
//!
//! ```text
//! cargo bench --bench mcp_chain -- --runs 25
//! cargo bench --bench mcp_chain -- --subscribers 1000 --objects 1000
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;
use support::xds_harness as harness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy::*;
use pipeline::*;
use tokio::sync::{mpsc, Semaphore};

struct Options {
    bench: bool,
    runs: usize,
    subscribers: usize,
    objects: usize,
}

fn options() -> Options {
    let mut options = Options {
        bench: false,
        runs: 0,
        subscribers: 0,
        objects: 1000,
    };
    // Unknown arguments (cargo passes `--bench`) are ignored.
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match arg.as_str() {
            "--bench" => options.bench = true,
            "--runs" => options.runs = value().parse().unwrap(),
            "--subscribers" => options.subscribers = value().parse().unwrap(),
            "--objects" => options.objects = value().parse().unwrap(),
            _ => {}
        }
    }
    if options.runs == 0 && options.subscribers == 0 {
        options.runs = 20;
    }
    options
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// A file change on A until Envoy behind B serves it, `runs` times.
async fn chain(runs: usize) {
    let Some(binary) = envoy_binary() else {
        eprintln!("chain latency needs Envoy (ADMITPILOT_ENVOY or scripts/setup-tools)");
        return;
    };
    let chain = McpChain::start().await;
    let (backend, port, dir) = (&chain.backend, chain.port, &chain.dir);
    let (source, edge) = (&chain.source, &chain.edge);
    let node = "router~127.0.0.1~gw-bench.default~default.svc.cluster.local";
    let yaml = chain.bootstrap(AdsApi::Sotw, node);
    let envoy = EnvoyProcess::start(&binary, &yaml, 55_100).await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;
    let mut times = Vec::with_capacity(runs);
    for run in 0..runs {
        // A trailing slash, so no run's prefix is a prefix of another's path.
        let prefix = format!("/run-{run}/");
        let url = format!("{base}{prefix}x");
        let started = Instant::now();
        write(
            dir.path(),
            &format!("run-{run}.yaml"),
            &virtual_service(&format!("run-{run}"), &prefix, backend.port),
        );
        loop {
            if get(&http, &url)
                .await
                .is_some_and(|(status, _)| status == 200)
            {
                break;
            }
            assert!(
                started.elapsed() < CONVERGE,
                "run {run}: {url} never served:\nA:\n{}\nB:\n{}",
                source.log(),
                edge.log()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    envoy.assert_nothing_rejected("MCP chain bench").await;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "chain: file change on A -> Envoy behind B, {runs} runs: median {:.1} ms, p90 {:.1} ms, max {:.1} ms, min {:.1} ms",
        percentile(&sorted, 50.0),
        percentile(&sorted, 90.0),
        sorted[sorted.len() - 1],
        sorted[0]
    );
}

/// A's resident set size.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib / 1024.0
}

/// Waits until A's RSS stops growing (three readings 200 ms apart within 0.1 MiB).
async fn settled_rss(pid: u32) -> f64 {
    let mut last = rss_mib(pid);
    let mut steady = 0;
    while steady < 3 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = rss_mib(pid);
        steady = if (now - last).abs() < 0.1 {
            steady + 1
        } else {
            0
        };
        last = now;
    }
    last
}

/// `subscribers` MCP subscribers of A holding `objects` VirtualServices.
async fn subscribers(subscribers: usize, objects: usize) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    write(dir.path(), "gateway.yaml", &gateway(port));
    let mut text = String::new();
    for i in 0..objects {
        text.push_str(&virtual_service(
            &format!("vs-{i}"),
            &format!("/p{i}"),
            8080,
        ));
        text.push_str("---\n");
    }
    write(dir.path(), "routes.yaml", &text);
    let source = Admitpilot::start(dir.path()).await;
    let pid = source.pid();
    let before = settled_rss(pid).await;
    let collections: Vec<&'static str> = admitpilot::mcp::SERVED
        .iter()
        .filter_map(|kind| admitpilot::mcp::collection(*kind))
        .collect();
    let endpoint = format!("http://127.0.0.1:{}", source.xds_port);
    let (ready_tx, mut ready) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(128));
    let started = Instant::now();
    let mut clients = Vec::with_capacity(subscribers);
    for id in 0..subscribers {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let (endpoint, collections, ready_tx) =
            (endpoint.clone(), collections.clone(), ready_tx.clone());
        clients.push(tokio::spawn(async move {
            let mut client = harness::SotwClient::connect(&endpoint).await;
            for (i, collection) in collections.iter().enumerate() {
                let node = (i == 0).then(|| harness::node(&format!("mcp-bench-{id}")));
                client.request(node, collection, &[], "", "").await;
            }
            let mut answered = std::collections::HashSet::new();
            let mut resources = 0;
            while answered.len() < collections.len() {
                let response = client.next().await;
                resources += response.resources.len();
                client.ack(&response, &[]).await;
                answered.insert(response.type_url);
            }
            let _ = ready_tx.send(resources);
            drop(permit);
            // Stay subscribed until the bench ends.
            while client.recv().await.is_some() {}
        }));
    }
    drop(ready_tx);
    for _ in 0..subscribers {
        let resources = ready.recv().await.unwrap();
        assert!(
            resources >= objects,
            "a subscriber got {resources} resources"
        );
    }
    let connected = started.elapsed();
    let after = settled_rss(pid).await;
    println!(
        "subscribers: {subscribers} MCP subscribers (SotW, {} collections each) of {objects} VirtualServices: all served in {:.2} s; A's RSS {before:.1} MiB -> {after:.1} MiB, {:.1} KiB per subscriber",
        collections.len(),
        connected.as_secs_f64(),
        (after - before) * 1024.0 / subscribers as f64
    );
    for client in clients {
        client.abort();
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    if !options.bench {
        // `cargo test --all-targets` and nextest also run bench targets: only measure under `cargo bench`.
        eprintln!("mcp_chain measures only under `cargo bench --bench mcp_chain`");
        return;
    }
    if options.runs > 0 {
        chain(options.runs).await;
    }
    if options.subscribers > 0 {
        subscribers(options.subscribers, options.objects).await;
    }
}
