//! Admission webhook load benchmark (`harness = false`): starts `admitpilot serve --bench-noop` (release build)
//! in a child process and drives it over HTTPS keep-alive (HTTP/1.1, TLS 1.3, trusting only the generated CA)
//! with a typical VirtualService AdmissionReview (`benches/data/virtualservice-review.json`). In every
//! fixed-rate run, `/noop` (the same axum + rustls server answering `{}` without decoding: the transport's
//! floor) and `/validate` are offered the same rate at the same time, their requests interleaved, so both see
//! the same machine. Latency is taken per request with the monotonic clock, in microseconds, from just before
//! the request is written until the whole response is read.
//!
//! The client is blocking: one OS thread per connection, each sending at its own fixed schedule (requests are
//! spread evenly over threads and paths), so it needs no async timer (tokio's has 1 ms steps) and adds little
//! CPU. A send that falls behind its schedule is sent at once and counted as late. The peak runs are closed
//! loop: every thread sends its next request as soon as the last one is answered.
//!
//! With `--config-vs N` the server also holds a config folder (`serve --config-dir`): a Gateway selecting the
//! gateway the reviewed VirtualService names, and N VirtualServices of 10 routes each on it, so every review runs
//! the whole-config check (translation for that gateway with the reviewed object in place, Envoy's load checks,
//! references). `--config-routes N` holds the Gateway API instead: a GatewayClass of admitpilot's, a Gateway
//! `higress-system/gw` with an HTTP listener, the Service `bookinfo/reviews` and N HTTPRoutes on it (ten per host
//! name); `--review httproute` then sends an HTTPRoute attached to that Gateway. `--review configmap` sends an unrelated ConfigMap's review instead. `--hostile N` adds N
//! connections that send a 1.3 MB VirtualService of 60,000 hosts back to back during the fixed-rate runs (their
//! row is `/validate (hostile)`), to see what large reviews do to ordinary ones.
//!
//! ```text
//! cargo build --release --bin admitpilot
//! cargo bench --bench webhook_load                          # 10 s per run, rates 1000 and 5000, then peak
//! cargo bench --bench webhook_load -- --seconds 5 --rates 1000 --peak-threads 16
//! cargo bench --bench webhook_load -- --config-vs 1000 --rates 1000 --peak-threads 4
//! cargo bench --bench webhook_load -- --config-routes 1000 --review httproute --rates 1000 --peak-threads 4
//! cargo bench --bench webhook_load -- --seconds 5 --rates 500 --hostile 4
//! ```
//! `ADMITPILOT_BIN` names another server binary (default `target/release/admitpilot`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::reviews;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

const PATHS: [&str; 2] = ["/noop", "/validate"];
/// Requests sent before measuring, per run (connections, TLS sessions and caches settle).
const WARMUP: Duration = Duration::from_secs(1);

struct Options {
    bench: bool,
    seconds: u64,
    rates: Vec<u64>,
    peak_threads: usize,
    /// VirtualServices in the server's config folder (0: no folder, so no whole-config check).
    config_vs: usize,
    /// HTTPRoutes in the server's config folder (instead of VirtualServices).
    config_routes: usize,
    /// Which review is sent: `virtualservice` or `configmap`.
    review: String,
    /// Connections sending a 1.3 MB VirtualService of 60,000 hosts back to back during the fixed-rate runs.
    hostile: usize,
}

fn options() -> Options {
    let mut options = Options {
        bench: false,
        seconds: 10,
        rates: vec![1000, 5000],
        peak_threads: 16,
        config_vs: 0,
        config_routes: 0,
        review: "virtualservice".into(),
        hostile: 0,
    };
    // Unknown arguments (cargo passes `--bench`) are ignored.
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match arg.as_str() {
            "--bench" => options.bench = true,
            "--seconds" => options.seconds = value().parse().unwrap(),
            "--rates" => options.rates = value().split(',').map(|r| r.parse().unwrap()).collect(),
            "--peak-threads" => options.peak_threads = value().parse().unwrap(),
            "--config-vs" => options.config_vs = value().parse().unwrap(),
            "--config-routes" => options.config_routes = value().parse().unwrap(),
            "--review" => options.review = value(),
            "--hostile" => options.hostile = value().parse().unwrap(),
            _ => {}
        }
    }
    options
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The server child; killed when dropped.
struct Server {
    child: Child,
    webhook: SocketAddr,
    ca: PathBuf,
    _dir: tempfile::TempDir,
}

/// Writes a config of `count` VirtualServices (10 routes each, hosts `vs<i>.example.com`) bound to the Gateway
/// `higress-system/higress-gateway`, plus that Gateway and the ServiceEntry and DestinationRule of
/// `reviews.bookinfo.svc.cluster.local` (the host and subsets the reviewed VirtualService routes to).
fn write_config(dir: &Path, count: usize) {
    let mut text = String::from(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: higress-gateway, namespace: higress-system}
spec:
  selector: {higress: higress-system-higress-gateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*/*"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews.bookinfo.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP}]
  endpoints: [{address: 127.0.0.1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: bookinfo}
spec:
  host: reviews.bookinfo.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}, {name: v3, labels: {version: v3}}]
"#,
    );
    for i in 0..count {
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: vs{i}, namespace: bookinfo}}\n\
             spec:\n  hosts: [vs{i}.example.com]\n  gateways: [higress-system/higress-gateway]\n  http:\n"
        ));
        for r in 0..10 {
            text.push_str(&format!(
                "  - match: [{{uri: {{prefix: /r{r}}}}}]\n    route: [{{destination: {{host: reviews.bookinfo.svc.cluster.local, subset: v1}}}}]\n"
            ));
        }
    }
    std::fs::write(dir.join("config.yaml"), text).unwrap();
}

/// Writes a Gateway API config of `count` HTTPRoutes (one rule each, ten per host name `route<i / 10>.example.com`)
/// attached to the Gateway `higress-system/gw` of admitpilot's class, plus the Service `bookinfo/reviews` they (and
/// the reviewed HTTPRoute) send to.
fn write_routes_config(dir: &Path, count: usize) {
    let mut text = String::from(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: admitpilot}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: higress-system}
spec:
  gatewayClassName: admitpilot
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: bookinfo}
spec: {ports: [{name: http, port: 9080}]}
"#,
    );
    for i in 0..count {
        text.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route{i}, namespace: bookinfo}}\n\
             spec:\n  parentRefs: [{{name: gw, namespace: higress-system}}]\n  hostnames: [route{}.example.com]\n\
             \x20 rules: [{{matches: [{{path: {{type: PathPrefix, value: /r{i}}}}}], backendRefs: [{{name: reviews, port: 9080}}]}}]\n",
            i / 10
        ));
    }
    std::fs::write(dir.join("config.yaml"), text).unwrap();
}

/// An AdmissionReview of an HTTPRoute `bookinfo/reviews` attached to `higress-system/gw`: a path prefix and a
/// header match, a 90/10 split, a request header modifier, a timeout.
fn http_route_review() -> Vec<u8> {
    let route = serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "reviews", "namespace": "bookinfo"},
        "spec": {
            "parentRefs": [{"name": "gw", "namespace": "higress-system"}],
            "hostnames": ["reviews.example.com"],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/reviews"},
                             "headers": [{"name": "x-canary", "value": "true"}]}],
                "filters": [{"type": "RequestHeaderModifier",
                             "requestHeaderModifier": {"set": [{"name": "x-route", "value": "reviews"}]}}],
                "backendRefs": [{"name": "reviews", "port": 9080, "weight": 90},
                                {"name": "reviews", "port": 9080, "weight": 10}],
                "timeouts": {"request": "5s"}
            }]
        }
    });
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "bench", "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "httproutes"},
            "operation": "UPDATE", "namespace": "bookinfo", "name": "reviews", "object": route}
    }))
    .unwrap()
}

/// An AdmissionReview of a ConfigMap admitpilot does not validate.
fn config_map_review() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "bench", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "operation": "UPDATE", "namespace": "default", "name": "app-settings",
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "app-settings", "namespace": "default"}, "data": {"level": "debug"}}}
    }))
    .unwrap()
}

impl Server {
    fn start(config_vs: usize, config_routes: usize) -> Server {
        let bin = std::env::var("ADMITPILOT_BIN").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/admitpilot").to_string()
        });
        assert!(
            Path::new(&bin).exists(),
            "{bin} not found: run `cargo build --release --bin admitpilot` first"
        );
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        let webhook: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut command = Command::new(&bin);
        command.args(["serve", "--bench-noop"]);
        if config_vs > 0 || config_routes > 0 {
            let config = dir.path().join("config");
            std::fs::create_dir(&config).unwrap();
            if config_routes > 0 {
                write_routes_config(&config, config_routes);
            } else {
                write_config(&config, config_vs);
            }
            command.arg("--config-dir").arg(config);
            command.args(["--xds-addr", &format!("127.0.0.1:{}", free_port())]);
        }
        let child = command
            .args(["--webhook-addr", &webhook.to_string()])
            .args(["--admin-addr", &admin.to_string()])
            .arg("--self-signed-ca-out")
            .arg(&ca)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server {
            child,
            webhook,
            ca,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready(admin) {
            assert!(Instant::now() < deadline, "the server did not get ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the admin port answers `/readyz` with 200.
fn ready(admin: SocketAddr) -> bool {
    let Ok(mut tcp) = TcpStream::connect(admin) else {
        return false;
    };
    let _ = tcp.write_all(b"GET /readyz HTTP/1.0\r\n\r\n");
    let mut status = String::new();
    let _ = BufReader::new(tcp).read_line(&mut status);
    status.split_whitespace().nth(1) == Some("200")
}

fn tls_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    Arc::new(config)
}

/// One keep-alive HTTPS connection sending the same POST again and again.
struct Connection {
    tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    request: Vec<u8>,
    buf: Vec<u8>,
}

impl Connection {
    fn open(server: &Server, tls: &Arc<rustls::ClientConfig>, path: &str, body: &[u8]) -> Self {
        let tcp = TcpStream::connect(server.webhook).unwrap();
        tcp.set_nodelay(true).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(tls.clone(), name).unwrap();
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        Connection {
            tls: rustls::StreamOwned::new(conn, tcp),
            request,
            buf: Vec::with_capacity(16 * 1024),
        }
    }

    /// Sends the request and reads the whole response; returns its status code.
    fn round_trip(&mut self) -> u16 {
        self.tls.write_all(&self.request).unwrap();
        self.tls.flush().unwrap();
        self.buf.clear();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            let n = self.tls.read(&mut chunk).unwrap();
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = std::str::from_utf8(&self.buf[..head_end]).unwrap();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().unwrap())
            })
            .expect("response without content-length");
        while self.buf.len() < head_end + length {
            let n = self.tls.read(&mut chunk).unwrap();
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        status
    }
}

/// What one thread measured.
#[derive(Default)]
struct Samples {
    /// Latencies in nanoseconds, after the warm-up.
    latencies: Vec<u64>,
    not_ok: usize,
    /// Sends that started more than 100 µs after their scheduled time.
    late: usize,
}

/// Runs one thread's connection: on a fixed schedule (`period`, first send at `start + offset`) or, without a
/// period, back to back; for `WARMUP + duration`.
fn drive(
    mut conn: Connection,
    start: Instant,
    period: Option<Duration>,
    offset: Duration,
    duration: Duration,
) -> Samples {
    let mut samples = Samples::default();
    let measure_from = start + WARMUP;
    let end = measure_from + duration;
    let mut next = start + offset;
    loop {
        if let Some(period) = period {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else if now - next > Duration::from_micros(100) && now >= measure_from {
                samples.late += 1;
            }
            next += period;
        }
        let sent = Instant::now();
        if sent >= end {
            return samples;
        }
        let status = conn.round_trip();
        let took = sent.elapsed();
        if sent >= measure_from {
            samples.latencies.push(took.as_nanos() as u64);
            samples.not_ok += usize::from(status != 200);
        }
    }
}

/// Per-path results of one run.
struct PathResult {
    path: &'static str,
    samples: Samples,
}

/// One run of every path in `paths` at once: `threads_per_path` connections per path, each at
/// `rate / threads_per_path` requests/s (back to back when `rate` is `None`).
fn run(
    server: &Server,
    paths: &[&'static str],
    rate: Option<u64>,
    threads_per_path: usize,
    duration: Duration,
    body: &[u8],
) -> Vec<PathResult> {
    let tls = tls_config(&server.ca);
    let total_threads = threads_per_path * paths.len();
    let period = rate.map(|r| Duration::from_secs_f64(threads_per_path as f64 / r as f64));
    let start = Instant::now() + Duration::from_millis(100);
    let mut handles = Vec::new();
    for (p, path) in paths.iter().enumerate() {
        for t in 0..threads_per_path {
            let conn = Connection::open(server, &tls, path, body);
            // Spread the first sends evenly over one period, alternating paths.
            let slot = t * paths.len() + p;
            let offset = period.map_or(Duration::ZERO, |period| {
                period.mul_f64(slot as f64 / total_threads as f64)
            });
            handles.push((
                *path,
                std::thread::spawn(move || drive(conn, start, period, offset, duration)),
            ));
        }
    }
    let mut results: Vec<PathResult> = paths
        .iter()
        .map(|path| PathResult {
            path,
            samples: Samples::default(),
        })
        .collect();
    for (path, handle) in handles {
        let samples = handle.join().unwrap();
        let result = results.iter_mut().find(|r| r.path == path).unwrap();
        result.samples.latencies.extend(samples.latencies);
        result.samples.not_ok += samples.not_ok;
        result.samples.late += samples.late;
    }
    for result in &mut results {
        result.samples.latencies.sort_unstable();
    }
    results
}

/// Starts `count` connections sending `body` to `/validate` back to back for the warm-up plus `duration`.
fn start_hostile(
    server: &Server,
    count: usize,
    duration: Duration,
    body: &[u8],
) -> Vec<std::thread::JoinHandle<Samples>> {
    let tls = tls_config(&server.ca);
    let start = Instant::now();
    (0..count)
        .map(|_| {
            let conn = Connection::open(server, &tls, "/validate", body);
            std::thread::spawn(move || drive(conn, start, None, Duration::ZERO, duration))
        })
        .collect()
}

fn percentile_us(sorted: &[u64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)] as f64 / 1000.0
}

fn print_row(offered: &str, result: &PathResult, seconds: f64) {
    let s = &result.samples;
    let l = &s.latencies;
    println!(
        "| `{}` | {offered} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} |",
        result.path,
        l.len() as f64 / seconds,
        percentile_us(l, 50.0),
        percentile_us(l, 90.0),
        percentile_us(l, 99.0),
        percentile_us(l, 99.9),
        percentile_us(l, 100.0),
        s.not_ok,
        s.late,
    );
}

fn main() {
    let options = options();
    if !options.bench {
        // `cargo test --all-targets` and nextest also run bench targets: only measure under `cargo bench`.
        eprintln!("webhook_load measures only under `cargo bench --bench webhook_load`");
        return;
    }
    let server = Server::start(options.config_vs, options.config_routes);
    let body = match options.review.as_str() {
        "configmap" => config_map_review(),
        "httproute" => http_route_review(),
        _ => std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/data/virtualservice-review.json"
        ))
        .unwrap(),
    };
    let duration = Duration::from_secs(options.seconds);
    let seconds = duration.as_secs_f64();
    let hostile_body = if options.hostile > 0 {
        reviews::many_hosts_review(60_000)
    } else {
        Vec::new()
    };
    println!(
        "HTTPS keep-alive (HTTP/1.1, TLS 1.3), {}s per run after a 1 s warm-up, {} cores; review: {}; config: {} VirtualServices, {} HTTPRoutes; hostile connections: {}",
        options.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        options.review,
        options.config_vs,
        options.config_routes,
        options.hostile
    );
    println!("\n| path | offered req/s | achieved req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | non-200 | late sends |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut overheads = Vec::new();
    for &rate in &options.rates {
        // One connection per path per 1,000 req/s keeps each connection's period above its response time.
        let threads = rate.div_ceil(1000).max(1) as usize;
        let hostile = start_hostile(&server, options.hostile, duration, &hostile_body);
        let results = run(&server, &PATHS, Some(rate), threads, duration, &body);
        for result in &results {
            print_row(&format!("{rate} (both at once)"), result, seconds);
        }
        if !hostile.is_empty() {
            let mut samples = Samples::default();
            for handle in hostile {
                let done = handle.join().unwrap();
                samples.latencies.extend(done.latencies);
                samples.not_ok += done.not_ok;
            }
            samples.latencies.sort_unstable();
            let result = PathResult {
                path: "/validate (hostile)",
                samples,
            };
            print_row(
                &format!("{} connections, back to back", options.hostile),
                &result,
                seconds,
            );
        }
        let p50 = |i: usize| percentile_us(&results[i].samples.latencies, 50.0);
        overheads.push((rate, p50(0), p50(1)));
    }
    for path in PATHS {
        let results = run(
            &server,
            &[path],
            None,
            options.peak_threads,
            duration,
            &body,
        );
        print_row(
            &format!("peak ({} connections)", options.peak_threads),
            &results[0],
            seconds,
        );
    }
    println!();
    for (rate, noop, validate) in overheads {
        println!(
            "at {rate} req/s: validation adds {:.0} µs to the transport's p50 of {noop:.0} µs ({:+.0} %)",
            validate - noop,
            (validate - noop) / noop * 100.0
        );
    }
}
