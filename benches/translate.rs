//! Translation benchmark: full translation of one gateway with 100 / 1,000 / 10,000 HTTP routes (10 routes
//! per VirtualService, one host per VirtualService, 100 Services with EndpointSlices, a DestinationRule with
//! subsets per Service), the incremental rebuild after one VirtualService changes, and the webhook's effect check
//! of one changed VirtualService against that config (`effect_check_one_vs`; includes decoding nothing, but
//! building the candidate, translating it and comparing with the live output).
//!
//! The same for the Gateway API (`gateway_api_full`, `gateway_api_incremental_one_route_changed`): one Gateway of
//! admitpilot's class with an HTTP listener, N HTTPRoutes (ten per host name, each one rule with a path prefix and a
//! header match, a 90/10 split over two Services, a request timeout and a retry), the same Services and
//! EndpointSlices, translated for the proxy labelled with the Gateway's name.
//!
//! The same for Ingress (`ingress_full`, `ingress_incremental_one_changed`): N Ingresses of class `higress` (ten per
//! host, each one Prefix path with a timeout, retries, a request header and CORS), translated for Higress's gateway.
//!
//! Run: `cargo bench --bench translate`. Before the timings it prints, per size, the resident-memory growth
//! of one full translation (Linux `/proc/self/statm`) and the encoded size of the output.

use std::sync::Arc;

use admitpilot::model::decode::{decode, DecodeOptions, Decoded};
use admitpilot::model::{ConfigObject, Snapshot};
use admitpilot::translate::effect::EffectChecker;
use admitpilot::translate::{translate, GatewayResources, Options, Proxy, Translator};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use prost::Message;
use serde_json::{json, Value};

const ROUTES_PER_VS: usize = 10;
const SERVICES: usize = 100;

fn object(doc: Value) -> Arc<ConfigObject> {
    match decode(&doc, &DecodeOptions::default()) {
        Decoded::Object { object, .. } => Arc::new(object),
        other => panic!("benchmark document does not decode: {other:?}"),
    }
}

fn virtual_service(index: usize, variant: usize) -> Arc<ConfigObject> {
    let http: Vec<Value> = (0..ROUTES_PER_VS)
        .map(|r| {
            let service = (index * ROUTES_PER_VS + r) % SERVICES;
            json!({
                "name": format!("r{r}"),
                "match": [{"uri": {"prefix": format!("/api/v{variant}/r{r}")}, "headers": {"x-tenant": {"exact": format!("t{r}")}}}],
                "route": [
                    {"destination": {"host": format!("svc-{service}"), "subset": "v1"}, "weight": 90},
                    {"destination": {"host": format!("svc-{service}"), "subset": "v2"}, "weight": 10}
                ],
                "timeout": "5s",
                "retries": {"attempts": 2, "perTryTimeout": "1s"}
            })
        })
        .collect();
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": format!("vs-{index}"), "namespace": "apps"},
        "spec": {"hosts": [format!("host-{index}.example.com")], "gateways": ["istio-system/gw"], "http": http}
    }))
}

fn snapshot(routes: usize) -> Snapshot {
    let mut objects: Vec<Arc<ConfigObject>> = vec![object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "istio-system"},
        "spec": {"selector": {"istio": "ingressgateway"},
                 "servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}
    }))];
    for s in 0..SERVICES {
        objects.push(object(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{s}"), "namespace": "apps"},
            "spec": {"ports": [{"name": "http", "port": 8080}]}
        })));
        for version in ["v1", "v2"] {
            objects.push(object(json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": format!("svc-{s}-{version}"), "namespace": "apps",
                             "labels": {"kubernetes.io/service-name": format!("svc-{s}"), "version": version}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": [format!("10.{}.{}.1", s / 250, s % 250)]},
                              {"addresses": [format!("10.{}.{}.2", s / 250, s % 250)]}]
            })));
        }
        objects.push(object(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": format!("svc-{s}"), "namespace": "apps"},
            "spec": {"host": format!("svc-{s}"),
                     "trafficPolicy": {"outlierDetection": {"consecutive5xxErrors": 5, "interval": "10s"}},
                     "subsets": [{"name": "v1", "labels": {"version": "v1"}},
                                 {"name": "v2", "labels": {"version": "v2"}}]}
        })));
    }
    for v in 0..routes / ROUTES_PER_VS {
        objects.push(virtual_service(v, 0));
    }
    Snapshot {
        version: 1,
        objects: objects.into_iter().map(|o| (o.key(), o)).collect(),
    }
}

/// The Gateway API config: GatewayClass `ap`, Gateway `infra/gw` (HTTP :80), the Services and EndpointSlices of
/// [`snapshot`] and `routes` HTTPRoutes ([`http_route`]).
fn gateway_api_snapshot(routes: usize) -> Snapshot {
    let mut objects: Vec<Arc<ConfigObject>> = vec![
        object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "ap"}, "spec": {"controllerName": "admitpilot.io/gateway-controller"}
        })),
        object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "infra"},
            "spec": {"gatewayClassName": "ap", "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]}
        })),
    ];
    objects.extend(services());
    objects.extend((0..routes).map(|i| http_route(i, 0)));
    Snapshot {
        version: 1,
        objects: objects.into_iter().map(|o| (o.key(), o)).collect(),
    }
}

/// HTTPRoute `apps/route-<index>` on `infra/gw`, host `host-<index / 10>.example.com`, path `/api/v<variant>/r<index>`.
fn http_route(index: usize, variant: usize) -> Arc<ConfigObject> {
    let service = index % SERVICES;
    object(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": format!("route-{index}"), "namespace": "apps"},
        "spec": {
            "parentRefs": [{"name": "gw", "namespace": "infra"}],
            "hostnames": [format!("host-{}.example.com", index / ROUTES_PER_VS)],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": format!("/api/v{variant}/r{index}")},
                             "headers": [{"name": "x-tenant", "value": format!("t{}", index % ROUTES_PER_VS)}]}],
                "backendRefs": [
                    {"name": format!("svc-{service}"), "port": 8080, "weight": 90},
                    {"name": format!("svc-{}", (service + 1) % SERVICES), "port": 8080, "weight": 10}
                ],
                "timeouts": {"request": "5s"},
                "retry": {"attempts": 2}
            }]
        }
    }))
}

/// The Services and EndpointSlices of the Istio workload.
fn services() -> Vec<Arc<ConfigObject>> {
    snapshot(0)
        .objects
        .values()
        .filter(|o| {
            matches!(
                o.kind(),
                admitpilot::model::Kind::Service | admitpilot::model::Kind::EndpointSlice
            )
        })
        .cloned()
        .collect()
}

/// The Istio workload's Services and EndpointSlices, an IngressClass of Higress's controller and N Ingresses
/// `ingress-<i>` (ten per host, each one Prefix path with canary-free route annotations: a timeout, retries, a
/// request header and CORS), translated for Higress's gateway.
fn ingress_snapshot(ingresses: usize) -> Snapshot {
    let mut objects: Vec<Arc<ConfigObject>> = vec![object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "higress"}, "spec": {"controller": "higress.io/higress-controller"}
    }))];
    objects.extend(services());
    objects.extend((0..ingresses).map(|i| ingress(i, 0)));
    Snapshot {
        version: 1,
        objects: objects.into_iter().map(|o| (o.key(), o)).collect(),
    }
}

/// Ingress `apps/ingress-<index>`, host `host-<index / 10>.example.com`, path `/api/v<variant>/r<index>`.
fn ingress(index: usize, variant: usize) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": format!("ingress-{index}"), "namespace": "apps",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {
                "higress.io/timeout": "5",
                "nginx.ingress.kubernetes.io/proxy-next-upstream": "error http_503",
                "higress.io/request-header-control-add": format!("x-tenant t{}", index % ROUTES_PER_VS),
                "nginx.ingress.kubernetes.io/enable-cors": "true"
            }},
        "spec": {
            "ingressClassName": "higress",
            "rules": [{"host": format!("host-{}.example.com", index / ROUTES_PER_VS), "http": {"paths": [{
                "path": format!("/api/v{variant}/r{index}"), "pathType": "Prefix",
                "backend": {"service": {"name": format!("svc-{}", index % SERVICES), "port": {"number": 8080}}}
            }]}}]
        }
    }))
}

fn ingress_proxy() -> Proxy {
    Proxy {
        namespace: "higress-system".into(),
        labels: [(
            "higress".to_string(),
            "higress-system-higress-gateway".to_string(),
        )]
        .into(),
        ..Default::default()
    }
}

fn gateway_api_proxy() -> Proxy {
    Proxy {
        namespace: "infra".into(),
        labels: [(
            "gateway.networking.k8s.io/gateway-name".to_string(),
            "gw".to_string(),
        )]
        .into(),
        ..Default::default()
    }
}

fn proxy() -> Proxy {
    Proxy {
        namespace: "istio-system".into(),
        labels: [("istio".to_string(), "ingressgateway".to_string())].into(),
        ..Default::default()
    }
}

fn route_count(resources: &GatewayResources) -> usize {
    resources
        .route_configs
        .iter()
        .flat_map(|rc| &rc.virtual_hosts)
        .map(|vh| vh.routes.len())
        .sum()
}

fn encoded_bytes(resources: &GatewayResources) -> usize {
    resources
        .listeners
        .iter()
        .map(Message::encoded_len)
        .sum::<usize>()
        + resources
            .route_configs
            .iter()
            .map(Message::encoded_len)
            .sum::<usize>()
        + resources
            .clusters
            .iter()
            .map(Message::encoded_len)
            .sum::<usize>()
        + resources
            .endpoints
            .iter()
            .map(Message::encoded_len)
            .sum::<usize>()
}

/// Resident set size in bytes (Linux), or 0 elsewhere.
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn bench(c: &mut Criterion) {
    let proxy = proxy();
    let mut full = c.benchmark_group("translate_full");
    full.sample_size(10);
    for routes in [100, 1_000, 10_000] {
        let snap = snapshot(routes);
        let before = rss();
        let resources = translate(&snap, &proxy);
        let grown = rss().saturating_sub(before);
        assert_eq!(route_count(&resources), routes);
        eprintln!(
            "routes={routes}: clusters={} rss_growth={:.1}MiB encoded_output={:.1}MiB",
            resources.clusters.len(),
            grown as f64 / 1_048_576.0,
            encoded_bytes(&resources) as f64 / 1_048_576.0
        );
        drop(resources);
        full.bench_with_input(BenchmarkId::from_parameter(routes), &snap, |b, snap| {
            b.iter(|| translate(snap, &proxy));
        });
    }
    full.finish();

    incremental(
        c,
        "translate_incremental_one_vs_changed",
        &proxy,
        |routes| {
            let base = snapshot(routes);
            let mut changed = base.clone();
            let edited = virtual_service(0, 1);
            changed.objects.insert(edited.key(), edited);
            (base, changed)
        },
    );

    // What the webhook does per review: the live config stays, each candidate replaces one VirtualService.
    let mut effect = c.benchmark_group("effect_check_one_vs");
    effect.sample_size(20);
    for routes in [1_000, 10_000] {
        let live = snapshot(routes);
        let checker = EffectChecker::new(Options::default());
        // Decoded once, so the check is timed and not the decoding; each check still replaces the VirtualService the
        // checker's translator holds with another object.
        let variants = [virtual_service(0, 1), virtual_service(0, 2)];
        let mut variant = 0;
        effect.bench_with_input(BenchmarkId::from_parameter(routes), &routes, |b, _| {
            b.iter(|| {
                variant = (variant + 1) % 2;
                checker
                    .check(&live, Arc::clone(&variants[variant]), &[])
                    .len()
            });
        });
    }
    effect.finish();

    let proxy = gateway_api_proxy();
    let mut full = c.benchmark_group("gateway_api_full");
    full.sample_size(10);
    for routes in [1_000, 10_000] {
        let snap = gateway_api_snapshot(routes);
        let resources = translate(&snap, &proxy);
        // Each PathPrefix match is served as two Envoy routes: the exact path and the segment prefix.
        assert_eq!(
            route_count(&resources),
            2 * routes,
            "every HTTPRoute is served"
        );
        full.bench_with_input(BenchmarkId::from_parameter(routes), &snap, |b, snap| {
            b.iter(|| translate(snap, &proxy));
        });
    }
    full.finish();

    incremental(
        c,
        "gateway_api_incremental_one_route_changed",
        &proxy,
        |routes| {
            let base = gateway_api_snapshot(routes);
            let mut changed = base.clone();
            let edited = http_route(0, 1);
            changed.objects.insert(edited.key(), edited);
            (base, changed)
        },
    );
}

fn bench_ingress(c: &mut Criterion) {
    let proxy = ingress_proxy();
    let mut full = c.benchmark_group("ingress_full");
    full.sample_size(10);
    for ingresses in [1_000, 10_000] {
        let snap = ingress_snapshot(ingresses);
        let resources = translate(&snap, &proxy);
        // Each Prefix path is served as two Envoy routes: the exact path and the segment prefix.
        assert_eq!(
            route_count(&resources),
            2 * ingresses,
            "every Ingress path is served"
        );
        full.bench_with_input(BenchmarkId::from_parameter(ingresses), &snap, |b, snap| {
            b.iter(|| translate(snap, &proxy));
        });
    }
    full.finish();
    incremental(c, "ingress_incremental_one_changed", &proxy, |ingresses| {
        let base = ingress_snapshot(ingresses);
        let mut changed = base.clone();
        let edited = ingress(0, 1);
        changed.objects.insert(edited.key(), edited);
        (base, changed)
    });
}

/// One warmed `Translator` (as each xDS proxy group keeps) alternating between the two snapshots `pair` makes for
/// 1,000 and 10,000 routes (they differ in one object); checks first that the incremental output equals a fresh
/// translation.
fn incremental(
    c: &mut Criterion,
    group: &str,
    proxy: &Proxy,
    pair: impl Fn(usize) -> (Snapshot, Snapshot),
) {
    let mut incremental = c.benchmark_group(group);
    incremental.sample_size(20);
    for routes in [1_000, 10_000] {
        let (base, changed) = pair(routes);
        let mut translator = Translator::new(Options::default());
        translator.translate(&base, proxy);
        assert_eq!(
            translator.translate(&changed, proxy),
            &translate(&changed, proxy),
            "the incremental output equals a fresh translation"
        );
        let mut flip = false;
        incremental.bench_with_input(BenchmarkId::from_parameter(routes), &routes, |b, _| {
            b.iter(|| {
                flip = !flip;
                translator
                    .translate(if flip { &base } else { &changed }, proxy)
                    .route_configs
                    .len()
            });
        });
    }
    incremental.finish();
}

criterion_group!(benches, bench, bench_ingress);
criterion_main!(benches);
