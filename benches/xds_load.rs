//! xDS load benchmark (`harness = false`): runs the xDS server in a child process (so its CPU and RSS can be
//! read from /proc) and N simulated Envoy clients (SotW or Delta ADS streams that subscribe to CDS, EDS, LDS and
//! RDS and ACK every response) in this process. Measures, per config change, the time until every client has
//! received and ACKed the change, plus server CPU time and RSS; `--idle N` measures RSS with N idle streams (every
//! client has ACKed its initial CDS/EDS/LDS/RDS responses and the server's CPU time has stopped growing).
//! `scripts/bench-xds` runs the whole table; `XDS_LOAD_SERVER_WRAPPER=heaptrack` (or `valgrind --tool=callgrind`)
//! runs the server under a profiler (heaptrack sees only malloc: leave out `--features jemalloc`, which
//! `scripts/bench-xds` passes, so the server uses the system allocator). `--floor` replaces admitpilot's server with
//! the transport's floor: a stock tonic ADS service (envoy-types' generated server, default settings) that
//! answers every new subscription with an empty response, so `--idle N --floor` is the memory tonic, hyper and
//! h2 need to hold N streams.
//!
//! ```text
//! cargo bench --bench xds_load -- --api sotw --clients 100 --routes 1000 --clusters 100 --rounds 20
//! cargo bench --bench xds_load -- --api delta --idle 10000
//! cargo bench --bench xds_load -- --api delta --idle 10000 --floor
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::xds_harness as harness;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use admitpilot::model::Snapshot;
use admitpilot::translate::{GatewayResources, Proxy};
use admitpilot::xds::{TranslateFn, XdsMetrics, XdsServer};
use envoy_types::pb::envoy::config::route::v3::route;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use harness::*;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

#[derive(Debug, Clone)]
struct Options {
    serve: bool,
    /// Serve the do-nothing tonic ADS service instead of admitpilot's.
    floor: bool,
    /// Set by `cargo bench`; without it the target only prints how to run it.
    bench: bool,
    api: String,
    clients: usize,
    routes: usize,
    clusters: usize,
    rounds: usize,
    idle: usize,
}

fn options() -> Options {
    let mut options = Options {
        serve: false,
        floor: false,
        bench: false,
        api: "sotw".into(),
        clients: 100,
        routes: 1000,
        clusters: 100,
        rounds: 20,
        idle: 0,
    };
    // Unknown arguments (cargo passes `--bench`) are ignored.
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match arg.as_str() {
            "--serve" => options.serve = true,
            "--floor" => options.floor = true,
            "--bench" => options.bench = true,
            "--api" => options.api = value(),
            "--clients" => options.clients = value().parse().unwrap(),
            "--routes" => options.routes = value().parse().unwrap(),
            "--clusters" => options.clusters = value().parse().unwrap(),
            "--rounds" => options.rounds = value().parse().unwrap(),
            "--idle" => options.idle = value().parse().unwrap(),
            _ => {}
        }
    }
    options
}

/// The resources every proxy gets at snapshot `version`: `routes` routes over `clusters` EDS clusters. Each
/// version changes one cluster's endpoints and the first route's timeout (so one EDS and one RDS update).
fn build(routes: usize, clusters: usize, version: u64) -> GatewayResources {
    let changed = (version as usize) % clusters;
    let names: Vec<String> = (0..clusters).map(|i| format!("svc-{i}")).collect();
    let prefixes: Vec<(String, String)> = (0..routes)
        .map(|j| (format!("/svc-{j}"), names[j % clusters].clone()))
        .collect();
    let pairs: Vec<(&str, &str)> = prefixes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let mut route_config = route_config("routes", &pairs);
    if let Some(route::Action::Route(action)) =
        route_config.virtual_hosts[0].routes[0].action.as_mut()
    {
        action.timeout = Some(envoy_types::pb::google::protobuf::Duration {
            seconds: (version % 10_000) as i64 + 1,
            nanos: 0,
        });
    }
    GatewayResources {
        clusters: names.iter().map(|n| eds_cluster(n)).collect(),
        endpoints: names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let port = if i == changed {
                    20_000 + (version % 10_000) as u16
                } else {
                    10_000 + i as u16
                };
                endpoints(n, &[port])
            })
            .collect(),
        listeners: vec![http_listener("http", 8080, "routes")],
        route_configs: vec![route_config],
        ..Default::default()
    }
}

/// Child process: the xDS server. Prints `READY <port>`, bumps the snapshot on every stdin line.
async fn serve(options: Options) {
    let (snapshots, receiver) = tokio::sync::watch::channel(Arc::new(Snapshot {
        version: 1,
        ..Snapshot::default()
    }));
    let (routes, clusters) = (options.routes, options.clusters);
    let translate = TranslateFn::stateless(move |snapshot: &Snapshot, _: &Proxy| {
        build(routes, clusters, snapshot.version)
    });
    let server = XdsServer::new(receiver, translate, XdsMetrics::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("READY {}", listener.local_addr().unwrap().port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            if line.is_err() {
                break;
            }
            snapshots.send_modify(|s| {
                *s = Arc::new(Snapshot {
                    version: s.version + 1,
                    objects: Default::default(),
                })
            });
        }
        let _ = stop.send(());
    });
    server
        .serve(listener, None, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
}

/// The transport's floor: answers each request that opens a subscription (no response nonce) with an empty
/// response of its type, and nothing else.
struct FloorAds;

type FloorStream<T> = tokio_stream::wrappers::ReceiverStream<Result<T, tonic::Status>>;

/// Runs one floor stream: `respond` turns a request into its answer, if it gets one.
fn floor_stream<Req, Resp>(
    mut requests: tonic::Streaming<Req>,
    respond: fn(Req) -> Option<Resp>,
) -> FloorStream<Resp>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: Send + 'static,
{
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        while let Ok(Some(request)) = requests.message().await {
            if let Some(response) = respond(request) {
                if tx.send(Ok(response)).await.is_err() {
                    break;
                }
            }
        }
    });
    FloorStream::new(rx)
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for FloorAds {
    type StreamAggregatedResourcesStream = FloorStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = FloorStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: tonic::Request<tonic::Streaming<DiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::StreamAggregatedResourcesStream>, tonic::Status> {
        Ok(tonic::Response::new(floor_stream(
            request.into_inner(),
            |request| {
                request
                    .response_nonce
                    .is_empty()
                    .then(|| DiscoveryResponse {
                        type_url: request.type_url,
                        version_info: "1".into(),
                        nonce: "1".into(),
                        ..Default::default()
                    })
            },
        )))
    }

    async fn delta_aggregated_resources(
        &self,
        request: tonic::Request<tonic::Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::DeltaAggregatedResourcesStream>, tonic::Status> {
        Ok(tonic::Response::new(floor_stream(
            request.into_inner(),
            |request| {
                request
                    .response_nonce
                    .is_empty()
                    .then(|| DeltaDiscoveryResponse {
                        type_url: request.type_url,
                        system_version_info: "1".into(),
                        nonce: "1".into(),
                        ..Default::default()
                    })
            },
        )))
    }
}

/// Child process: the floor server. Prints `READY <port>`, exits when stdin closes.
async fn serve_floor() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("READY {}", listener.local_addr().unwrap().port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if line.is_err() {
                break;
            }
        }
        let _ = stop.send(());
    });
    tonic::transport::Server::builder()
        .add_service(AggregatedDiscoveryServiceServer::new(FloorAds))
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            async {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
}

struct ServerProcess {
    child: Child,
    port: u16,
}

impl ServerProcess {
    /// Starts the server child; `XDS_LOAD_SERVER_WRAPPER` (e.g. `heaptrack` or `valgrind --tool=callgrind`)
    /// runs it under a profiler.
    fn start(options: &Options) -> ServerProcess {
        let wrapper = std::env::var("XDS_LOAD_SERVER_WRAPPER").unwrap_or_default();
        let mut words: Vec<String> = wrapper.split_whitespace().map(String::from).collect();
        words.push(std::env::current_exe().unwrap().display().to_string());
        let mut child = Command::new(&words[0])
            .args(&words[1..])
            .args(["--serve", "--routes", &options.routes.to_string()])
            .args(["--clusters", &options.clusters.to_string()])
            .args(options.floor.then_some("--floor"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // A profiler wrapper may print its own lines first.
        let port = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .find_map(|line| line.unwrap().trim().strip_prefix("READY ")?.parse().ok())
            .expect("the server did not start");
        ServerProcess { child, port }
    }

    fn change(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"change\n").unwrap();
        stdin.flush().unwrap();
    }

    fn proc_status(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse().ok())
            .unwrap_or(0)
    }

    /// Resident memory in MiB.
    fn rss_mib(&self) -> f64 {
        self.proc_status("VmRSS:") as f64 / 1024.0
    }

    /// Peak resident memory in MiB.
    fn peak_mib(&self) -> f64 {
        self.proc_status("VmHWM:") as f64 / 1024.0
    }

    /// Waits until the server has handled everything the clients sent (its CPU time stops growing for half a
    /// second; at most 30 s), so an idle measurement sees only idle streams.
    async fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = self.cpu_seconds();
        let mut quiet = 0;
        while quiet < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = self.cpu_seconds();
            quiet = if now == last { quiet + 1 } else { 0 };
            last = now;
        }
    }

    /// User + system CPU seconds so far.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 of /proc/pid/stat (utime, stime); `after` starts at field 3.
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        ticks as f64 / 100.0
    }
}

impl Drop for ServerProcess {
    /// Closes the server's stdin (it then shuts down and exits, so profilers can write their output) and
    /// kills it if it has not exited within 30 s.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Event {
    Ready,
    Updated(usize, Instant),
}

fn node_for(id: usize) -> envoy_types::pb::envoy::config::core::v3::Node {
    node(&format!(
        "router~10.{}.{}.{}~gw-{id}.bench~bench.svc.cluster.local",
        id / 65536 % 256,
        id / 256 % 256,
        id % 256
    ))
}

async fn sotw_client(
    id: usize,
    endpoint: String,
    clusters: Vec<String>,
    events: mpsc::UnboundedSender<Event>,
    permit: OwnedSemaphorePermit,
) {
    let names: Vec<&str> = clusters.iter().map(String::as_str).collect();
    let mut client = SotwClient::connect(&endpoint).await;
    client.request(Some(node_for(id)), CDS, &[], "", "").await;
    let cds = client.next().await;
    client.ack(&cds, &[]).await;
    client.request(None, EDS, &names, "", "").await;
    let eds = client.next().await;
    client.ack(&eds, &names).await;
    client.request(None, LDS, &[], "", "").await;
    let lds = client.next().await;
    client.ack(&lds, &[]).await;
    client.request(None, RDS, &["routes"], "", "").await;
    let rds = client.next().await;
    client.ack(&rds, &["routes"]).await;
    let _ = events.send(Event::Ready);
    drop(permit);
    while let Some(response) = client.recv().await {
        let subscribed: &[&str] = match response.type_url.as_str() {
            EDS => &names,
            RDS => &["routes"],
            _ => &[],
        };
        client.ack(&response, subscribed).await;
        let _ = events.send(Event::Updated(id, Instant::now()));
    }
}

async fn delta_client(
    id: usize,
    endpoint: String,
    clusters: Vec<String>,
    events: mpsc::UnboundedSender<Event>,
    permit: OwnedSemaphorePermit,
) {
    let mut client = DeltaClient::connect(&endpoint).await;
    let subscribe = |node, type_url: &str, names: Vec<String>| DeltaDiscoveryRequest {
        node,
        type_url: type_url.into(),
        resource_names_subscribe: names,
        ..Default::default()
    };
    client
        .send(subscribe(Some(node_for(id)), CDS, vec![]))
        .await;
    let cds = client.next().await;
    client.ack(&cds).await;
    client.send(subscribe(None, EDS, clusters.clone())).await;
    let eds = client.next().await;
    client.ack(&eds).await;
    client.send(subscribe(None, LDS, vec![])).await;
    let lds = client.next().await;
    client.ack(&lds).await;
    client
        .send(subscribe(None, RDS, vec!["routes".into()]))
        .await;
    let rds = client.next().await;
    client.ack(&rds).await;
    let _ = events.send(Event::Ready);
    drop(permit);
    while let Some(response) = client.recv().await {
        client.ack(&response).await;
        let _ = events.send(Event::Updated(id, Instant::now()));
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn connect_all(
    options: &Options,
    server: &ServerProcess,
    count: usize,
) -> mpsc::UnboundedReceiver<Event> {
    let endpoint = format!("http://127.0.0.1:{}", server.port);
    let clusters: Vec<String> = (0..options.clusters).map(|i| format!("svc-{i}")).collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    // At most 256 clients connecting and fetching at once; a client frees its slot once it is ready.
    let gate = Arc::new(Semaphore::new(256));
    for id in 0..count {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let (endpoint, clusters, events) = (endpoint.clone(), clusters.clone(), tx.clone());
        let delta = options.api == "delta";
        tokio::spawn(async move {
            if delta {
                delta_client(id, endpoint, clusters, events, permit).await
            } else {
                sotw_client(id, endpoint, clusters, events, permit).await
            }
        });
    }
    drop(tx);
    let mut ready = 0;
    while ready < count {
        match rx.recv().await {
            Some(Event::Ready) => ready += 1,
            Some(Event::Updated(..)) => {}
            None => panic!("clients ended before all were ready"),
        }
    }
    rx
}

#[tokio::main]
async fn main() {
    let options = options();
    if !options.serve && !options.bench {
        // `cargo test --all-targets` and nextest also run bench targets: only measure under `cargo bench`.
        eprintln!("xds_load measures only under `cargo bench --bench xds_load`");
        return;
    }
    if options.serve && options.floor {
        serve_floor().await;
        return;
    }
    if options.serve {
        serve(options).await;
        return;
    }
    let mut server = ServerProcess::start(&options);
    let idle_rss = server.rss_mib();
    if options.idle > 0 {
        let started = Instant::now();
        let _events = connect_all(&options, &server, options.idle).await;
        let connected = started.elapsed();
        server.settle().await;
        let rss = server.rss_mib();
        println!(
            "| idle{} | {} | {} | {} routes / {} clusters | connect+initial fetch {:.1} s | server RSS {:.0} MiB (empty {:.0} MiB, {:.1} KiB/stream), peak {:.0} MiB, CPU {:.1} s |",
            if options.floor { " (tonic floor)" } else { "" },
            options.api,
            options.idle,
            options.routes,
            options.clusters,
            connected.as_secs_f64(),
            rss,
            idle_rss,
            (rss - idle_rss) * 1024.0 / options.idle as f64,
            server.peak_mib(),
            server.cpu_seconds()
        );
        return;
    }
    let mut events = connect_all(&options, &server, options.clients).await;
    let connected_rss = server.rss_mib();
    let cpu_before = server.cpu_seconds();
    let mut per_client = Vec::new();
    let mut all_acked = Vec::new();
    for _ in 0..options.rounds {
        let mut pending = vec![2u8; options.clients];
        let mut remaining = options.clients;
        let start = Instant::now();
        server.change();
        let mut last = start;
        while remaining > 0 {
            match tokio::time::timeout(Duration::from_secs(60), events.recv()).await {
                Ok(Some(Event::Updated(id, at))) => {
                    pending[id] = pending[id].saturating_sub(1);
                    if pending[id] == 0 {
                        remaining -= 1;
                        per_client.push((at - start).as_secs_f64() * 1000.0);
                        last = last.max(at);
                    }
                }
                Ok(Some(Event::Ready)) => {}
                Ok(None) | Err(_) => panic!("clients stopped converging ({remaining} left)"),
            }
        }
        all_acked.push((last - start).as_secs_f64() * 1000.0);
    }
    let cpu = server.cpu_seconds() - cpu_before;
    per_client.sort_by(f64::total_cmp);
    all_acked.sort_by(f64::total_cmp);
    println!(
        "| {} | {} | {} routes / {} clusters | {} | all-ACKed p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms | per-client p50 {:.1} ms, p99 {:.1} ms | server CPU {:.3} s/change | RSS {:.0} MiB connected, {:.0} MiB after, peak {:.0} MiB |",
        options.api,
        options.clients,
        options.routes,
        options.clusters,
        options.rounds,
        percentile(&all_acked, 50.0),
        percentile(&all_acked, 99.0),
        all_acked.last().copied().unwrap_or(f64::NAN),
        percentile(&per_client, 50.0),
        percentile(&per_client, 99.0),
        cpu / options.rounds as f64,
        connected_rss,
        server.rss_mib(),
        server.peak_mib(),
    );
}
