//! Worst-case review cost (`harness = false`): for each shape a hostile or careless user can give one object (many
//! hosts, routes, matches, destinations, regexes, SNI hosts, servers, subsets, endpoints, rules, patches), builds an
//! AdmissionReview at 1×, 10× and 100× its base size and times the webhook's whole review path without HTTP
//! (`admitpilot::admission::review::review`: parse, decode, every rule, the response), best and median of
//! `--runs` runs. The last column is the 100× time over the 1× time: near 100 is linear, near 10,000 quadratic.
//!
//! ```text
//! cargo bench --bench worst_case                      # every shape, 5 runs each
//! cargo bench --bench worst_case -- --runs 3 hosts    # shapes whose name contains "hosts"
//! ```

use std::time::{Duration, Instant};

use admitpilot::admission::review::review;
use admitpilot::model::decode::DecodeOptions;
use serde_json::{json, Value};

/// One shape: its name, the base count, the API group/version/kind and how to build the spec for a count.
struct Shape {
    name: &'static str,
    base: usize,
    kind: (&'static str, &'static str, &'static str),
    spec: fn(usize) -> Value,
}

const NETWORKING: &str = "networking.istio.io";
const SECURITY: &str = "security.istio.io";

fn route() -> Value {
    json!([{"destination": {"host": "backend.default.svc.cluster.local", "port": {"number": 80}}}])
}

fn vs_hosts(n: usize) -> Value {
    let hosts: Vec<String> = (0..n).map(|i| format!("h{i}.example.com")).collect();
    json!({"hosts": hosts, "gateways": ["gw"], "http": [{"route": route()}]})
}

fn vs_wildcard_hosts(n: usize) -> Value {
    let hosts: Vec<String> = (0..n)
        .map(|i| format!("*.h{i}.example.com"))
        .chain(["*.example.com".to_string()])
        .collect();
    json!({"hosts": hosts, "gateways": ["gw"], "http": [{"route": route()}]})
}

fn vs_routes(n: usize) -> Value {
    let http: Vec<Value> = (0..n)
        .map(|i| json!({"match": [{"uri": {"prefix": format!("/p{i}")}}], "route": route()}))
        .collect();
    json!({"hosts": ["a.example.com"], "gateways": ["gw"], "http": http})
}

fn vs_same_prefix_matches(n: usize) -> Value {
    let matches: Vec<Value> = (0..n)
        .map(|i| json!({"uri": {"prefix": "/api"}, "headers": {"x-user": {"exact": format!("u{i}")}}}))
        .collect();
    let covered: Vec<Value> = (0..n)
        .map(|i| json!({"uri": {"prefix": "/api/v1"}, "headers": {"x-id": {"exact": format!("i{i}")}}}))
        .collect();
    json!({"hosts": ["a.example.com"], "gateways": ["gw"], "http": [
        {"match": matches, "route": route()}, {"match": covered, "route": route()}]})
}

fn vs_destinations(n: usize) -> Value {
    let weight = (100 / n).max(1);
    let route: Vec<Value> = (0..n)
        .map(|i| json!({"destination": {"host": format!("b{i}.default.svc.cluster.local")}, "weight": weight}))
        .collect();
    json!({"hosts": ["a.example.com"], "gateways": ["gw"], "http": [{"route": route}]})
}

fn vs_same_regex(n: usize) -> Value {
    let http: Vec<Value> = (0..n)
        .map(|_| json!({"match": [{"uri": {"regex": r"\w{300}"}}], "route": route()}))
        .collect();
    json!({"hosts": ["a.example.com"], "gateways": ["gw"], "http": http})
}

fn vs_distinct_unicode_regex(n: usize) -> Value {
    let http: Vec<Value> = (0..n)
        .map(|i| json!({"match": [{"uri": {"regex": format!(r"\pL{{120}}x{i}")}}], "route": route()}))
        .collect();
    json!({"hosts": ["a.example.com"], "gateways": ["gw"], "http": http})
}

fn vs_sni(n: usize) -> Value {
    let hosts: Vec<String> = (0..n).map(|i| format!("h{i}.example.com")).collect();
    let tls: Vec<Value> = (0..n)
        .map(|i| json!({"match": [{"sniHosts": [format!("h{i}.example.com")]}],
            "route": [{"destination": {"host": "backend.default.svc.cluster.local", "port": {"number": 443}}}]}))
        .collect();
    json!({"hosts": hosts, "gateways": ["gw"], "tls": tls})
}

fn gateway_servers(n: usize) -> Value {
    let servers: Vec<Value> = (0..n)
        .map(|i| json!({"port": {"number": 8000 + i % 1000, "name": format!("http-{i}"), "protocol": "HTTP"},
            "hosts": [format!("h{i}.example.com")]}))
        .collect();
    json!({"selector": {"istio": "ingressgateway"}, "servers": servers})
}

fn gateway_hosts(n: usize) -> Value {
    let hosts: Vec<String> = (0..n).map(|i| format!("ns/h{i}.example.com")).collect();
    json!({"selector": {"istio": "ingressgateway"}, "servers": [
        {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": hosts}]})
}

fn dr_subsets(n: usize) -> Value {
    let subsets: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("v{i}"), "labels": {"version": format!("v{i}")}}))
        .collect();
    let ports: Vec<Value> = (0..n)
        .map(|i| json!({"port": {"number": 1 + i % 65000}, "loadBalancer": {"simple": "ROUND_ROBIN"}}))
        .collect();
    json!({"host": "reviews", "subsets": subsets, "trafficPolicy": {"portLevelSettings": ports}})
}

fn se_endpoints(n: usize) -> Value {
    let hosts: Vec<String> = (0..n).map(|i| format!("s{i}.example.com")).collect();
    let endpoints: Vec<Value> = (0..n)
        .map(
            |i| json!({"address": format!("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256)}),
        )
        .collect();
    let ports: Vec<Value> = (0..n.min(1000))
        .map(|i| json!({"number": 1000 + i, "name": format!("p{i}"), "protocol": "HTTP"}))
        .collect();
    json!({"hosts": hosts, "ports": ports, "resolution": "STATIC", "endpoints": endpoints})
}

fn ap_rules(n: usize) -> Value {
    let rules: Vec<Value> = (0..n)
        .map(|i| {
            json!({"from": [{"source": {"principals": [format!("cluster.local/ns/a/sa/s{i}")]}}],
            "to": [{"operation": {"paths": [format!("/p{i}/*")], "methods": ["GET"]}}],
            "when": [{"key": "request.headers[x-id]", "values": [format!("v{i}")]}]})
        })
        .collect();
    json!({"action": "ALLOW", "rules": rules})
}

fn ef_patches(n: usize) -> Value {
    let patches: Vec<Value> = (0..n)
        .map(|i| {
            json!({"applyTo": "CLUSTER", "match": {"cluster": {"name": format!("c{i}")}},
            "patch": {"operation": "MERGE", "value": {"connect_timeout": "1s"}}})
        })
        .collect();
    json!({"configPatches": patches})
}

const SHAPES: [Shape; 14] = [
    Shape {
        name: "vs_hosts",
        base: 600,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_hosts,
    },
    Shape {
        name: "vs_wildcard_hosts",
        base: 600,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_wildcard_hosts,
    },
    Shape {
        name: "vs_routes",
        base: 140,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_routes,
    },
    Shape {
        name: "vs_same_prefix_matches",
        base: 100,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_same_prefix_matches,
    },
    Shape {
        name: "vs_destinations",
        base: 100,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_destinations,
    },
    Shape {
        name: "vs_same_regex",
        base: 15,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_same_regex,
    },
    Shape {
        name: "vs_distinct_unicode_regex",
        base: 15,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_distinct_unicode_regex,
    },
    Shape {
        name: "vs_sni_hosts",
        base: 100,
        kind: (NETWORKING, "v1", "VirtualService"),
        spec: vs_sni,
    },
    Shape {
        name: "gateway_servers",
        base: 100,
        kind: (NETWORKING, "v1", "Gateway"),
        spec: gateway_servers,
    },
    Shape {
        name: "gateway_hosts",
        base: 600,
        kind: (NETWORKING, "v1", "Gateway"),
        spec: gateway_hosts,
    },
    Shape {
        name: "dr_subsets_and_ports",
        base: 100,
        kind: (NETWORKING, "v1", "DestinationRule"),
        spec: dr_subsets,
    },
    Shape {
        name: "se_hosts_and_endpoints",
        base: 100,
        kind: (NETWORKING, "v1", "ServiceEntry"),
        spec: se_endpoints,
    },
    Shape {
        name: "ap_rules",
        base: 100,
        kind: (SECURITY, "v1", "AuthorizationPolicy"),
        spec: ap_rules,
    },
    Shape {
        name: "ef_patches",
        base: 50,
        kind: (NETWORKING, "v1alpha3", "EnvoyFilter"),
        spec: ef_patches,
    },
];

fn admission_review(shape: &Shape, n: usize) -> Vec<u8> {
    let (group, version, kind) = shape.kind;
    let object = json!({"apiVersion": format!("{group}/{version}"), "kind": kind,
        "metadata": {"name": "big", "namespace": "default"}, "spec": (shape.spec)(n)});
    let resource = format!("{}s", kind.to_lowercase());
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-0000-0000-000000000001",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "name": "big", "namespace": "default", "operation": "CREATE",
        "userInfo": {"username": "bench"}, "object": object, "dryRun": false}}),
    )
    .unwrap_or_default()
}

/// Best and median of `runs` reviews of `body`, and whether the object was allowed.
fn time(body: &[u8], runs: usize) -> (Duration, Duration, String) {
    let options = DecodeOptions::default();
    let mut times = Vec::with_capacity(runs);
    let mut verdict = String::new();
    for _ in 0..runs {
        let started = Instant::now();
        let reviewed = review(body, &options, None);
        times.push(started.elapsed());
        verdict = match reviewed {
            Ok(r) => format!("{:?}", r.verdict).chars().take(12).collect(),
            Err(e) => format!("error: {e}"),
        };
    }
    times.sort();
    (times[0], times[times.len() / 2], verdict)
}

fn main() {
    let mut runs = 5;
    let mut bench = false;
    let mut filters = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(runs)
                    .max(1)
            }
            "--bench" => bench = true,
            other if other.starts_with('-') => {}
            other => filters.push(other.to_string()),
        }
    }
    if !bench {
        // `cargo test --all-targets` and nextest also run (and list) bench targets: only measure under `cargo bench`.
        eprintln!("worst_case measures only under `cargo bench --bench worst_case`");
        return;
    }
    println!("| shape | n | body | best | median | verdict | 100× / 1× |");
    println!("|---|---:|---:|---:|---:|---|---:|");
    for shape in SHAPES
        .iter()
        .filter(|s| filters.is_empty() || filters.iter().any(|f| s.name.contains(f.as_str())))
    {
        let mut first = None;
        for scale in [1, 10, 100] {
            let n = shape.base * scale;
            let body = admission_review(shape, n);
            let (best, median, verdict) = time(&body, runs);
            let base = *first.get_or_insert(median);
            let ratio = if scale == 100 {
                format!("{:.0}", median.as_secs_f64() / base.as_secs_f64().max(1e-9))
            } else {
                String::new()
            };
            println!(
                "| {} | {n} | {} KB | {:.2} ms | {:.2} ms | {verdict} | {ratio} |",
                shape.name,
                body.len() / 1024,
                best.as_secs_f64() * 1e3,
                median.as_secs_f64() * 1e3,
            );
        }
    }
}
