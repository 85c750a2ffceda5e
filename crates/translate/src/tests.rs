//! Unit tests of [`Translator`]: cached translation equals a fresh [`translate`] after every kind of change.

use envoy_types::pb::envoy::config::route::v3::VirtualHost;
use serde_json::{json, Value};

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot};

use admitpilot_model::decode::test_object as object;

fn vs(name: &str, prefix: &str, delegate: Option<&str>) -> Arc<ConfigObject> {
    let rule = match delegate {
        Some(d) => json!({"match": [{"uri": {"prefix": prefix}}], "delegate": {"name": d}}),
        None => json!({"match": [{"uri": {"prefix": prefix}}],
                       "route": [{"destination": {"host": "web"}}]}),
    };
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"hosts": [format!("{name}.example.com")], "gateways": ["istio-system/gw"],
                 "http": [rule]}
    }))
}

fn delegate(name: &str, prefix: &str) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"http": [{"match": [{"uri": {"prefix": prefix}}],
                           "route": [{"destination": {"host": "web"}}]}]}
    }))
}

fn gateway(servers: Value) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "istio-system"},
        "spec": {"selector": {"istio": "ingressgateway"}, "servers": servers}
    }))
}

fn http_gateway() -> Arc<ConfigObject> {
    gateway(json!([{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]))
}

/// A snapshot holding these objects (later ones replace earlier ones with the same key).
fn snapshot_of(objects: impl IntoIterator<Item = Arc<ConfigObject>>) -> Snapshot {
    let objects: BTreeMap<ObjectKey, Arc<ConfigObject>> =
        objects.into_iter().map(|o| (o.key(), o)).collect();
    Snapshot {
        version: 1,
        objects: objects.into_iter().collect(),
    }
}

fn snapshot(objects: Vec<Arc<ConfigObject>>) -> Snapshot {
    snapshot_of(std::iter::once(http_gateway()).chain(objects))
}

/// The snapshot with `changes` applied: objects replace those with the same key.
fn with(base: &Snapshot, changes: Vec<Arc<ConfigObject>>) -> Snapshot {
    snapshot_of(base.objects.values().cloned().chain(changes))
}

/// The snapshot without the object `kind/namespace/name`.
fn without(base: &Snapshot, kind: Kind, namespace: &str, name: &str) -> Snapshot {
    let key = ObjectKey::new(kind, namespace, name);
    snapshot_of(base.objects.values().filter(|o| o.key() != key).cloned())
}

fn proxy() -> Proxy {
    Proxy {
        namespace: "istio-system".into(),
        labels: [("istio".to_string(), "ingressgateway".to_string())].into(),
        ..Default::default()
    }
}

#[test]
fn cached_translation_equals_fresh_translation_after_changes() {
    let mut translator = Translator::new(Options::default());
    let first = snapshot(vec![vs("a", "/a", None), vs("b", "/b", None)]);
    assert_eq!(
        translator.translate(&first, &proxy()),
        &translate(&first, &proxy())
    );
    let second = with(&first, vec![vs("a", "/a2", None)]);
    let incremental = translator.translate(&second, &proxy()).clone();
    assert_eq!(incremental, translate(&second, &proxy()));
    let paths = format!("{:?}", incremental.route_configs);
    assert!(paths.contains("/a2") && !paths.contains("\"/a\""));
    assert_eq!(translator.tables["http.80"].len(), 2);
}

#[test]
fn delegate_change_invalidates_the_root() {
    let mut translator = Translator::new(Options::default());
    let first = snapshot(vec![
        vs("root", "/x", Some("child")),
        delegate("child", "/x/1"),
    ]);
    translator.translate(&first, &proxy());
    let second = with(&first, vec![delegate("child", "/x/2")]);
    let out = translator.translate(&second, &proxy()).clone();
    assert_eq!(out, translate(&second, &proxy()));
    assert!(format!("{:?}", out.route_configs).contains("/x/2"));
}

#[test]
fn unknown_destinations_get_an_empty_cluster() {
    let out = translate(&snapshot(vec![vs("a", "/a", None)]), &proxy());
    let name = "outbound|80||web.apps.svc.cluster.local";
    assert!(out.clusters.iter().any(|c| c.name == name));
    let cla = out.endpoints.iter().find(|e| e.cluster_name == name);
    assert!(cla.is_some_and(|e| e.endpoints.is_empty()));
}

#[test]
fn unselected_proxy_gets_nothing() {
    let other = Proxy {
        namespace: "istio-system".into(),
        labels: [("app".to_string(), "other".to_string())].into(),
        ..Default::default()
    };
    let out = translate(&snapshot(vec![vs("a", "/a", None)]), &other);
    assert!(out.listeners.is_empty() && out.route_configs.is_empty());
}

fn service(name: &str, port: u16) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"ports": [{"name": "http", "port": port}]}
    }))
}

fn endpoint_slice(service: &str, version: &str, address: &str) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-{version}"), "namespace": "apps",
                     "labels": {"kubernetes.io/service-name": service, "version": version}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": [address]}]
    }))
}

fn destination_rule(subsets: &[&str], consecutive_errors: u32) -> Arc<ConfigObject> {
    let subsets: Vec<Value> = subsets
        .iter()
        .map(|s| json!({"name": s, "labels": {"version": s}}))
        .collect();
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {"host": "web",
                 "trafficPolicy": {"outlierDetection": {"consecutive5xxErrors": consecutive_errors}},
                 "subsets": subsets}
    }))
}

fn routed_vs(name: &str, host: &str, subset: &str) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"hosts": [host], "gateways": ["istio-system/gw"],
                 "http": [{"match": [{"uri": {"prefix": format!("/{name}")}}],
                           "route": [{"destination": {"host": "web", "subset": subset}}]},
                          {"route": [{"destination": {"host": "external.example.org"}}]}],
                 "tls": [{"match": [{"sniHosts": ["tls.example.com"]}],
                          "route": [{"destination": {"host": "backend", "port": {"number": 9443}}}]}]}
    }))
}

fn service_entry(address: &str) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": "external", "namespace": "apps"},
        "spec": {"hosts": ["external.example.org"], "resolution": "STATIC", "location": "MESH_EXTERNAL",
                 "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
                 "endpoints": [{"address": address}]}
    }))
}

fn secret(name: &str, cert: &str) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "istio-system"},
        "type": "kubernetes.io/tls", "data": {"tls.crt": cert, "tls.key": "a2V5"}
    }))
}

fn higress_config(gzip: bool) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "higress-config", "namespace": "higress-system"},
        "data": {"higress": format!("gzip:\n  enable: {gzip}\n")},
    }))
}

fn envoy_filter(name: &str, timeout: &str) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
        "metadata": {"name": name, "namespace": "istio-system"},
        "spec": {"configPatches": [
            {"applyTo": "HTTP_ROUTE", "match": {"context": "GATEWAY"},
             "patch": {"operation": "MERGE", "value": {"route": {"timeout": timeout}}}},
            {"applyTo": "CLUSTER", "match": {"context": "GATEWAY", "cluster": {"service": "web.apps.svc.cluster.local"}},
             "patch": {"operation": "MERGE", "value": {"connect_timeout": timeout}}},
            {"applyTo": "CLUSTER", "match": {"context": "GATEWAY"},
             "patch": {"operation": "ADD", "value": {"name": format!("added-{name}"), "type": "STATIC",
                                                        "connect_timeout": "1s"}}}
        ]}
    }))
}

/// Applies a sequence of changes of every kind translation reads and checks after each step that the
/// caching translator's output equals a fresh translation.
#[test]
fn every_kind_of_change_gives_the_fresh_translation() {
    let servers = json!([
        {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]},
        {"port": {"number": 443, "name": "https", "protocol": "HTTPS"}, "hosts": ["secure.example.com"],
         "tls": {"mode": "SIMPLE", "credentialName": "cert"}},
        {"port": {"number": 8443, "name": "tls", "protocol": "TLS"}, "hosts": ["*"],
         "tls": {"mode": "PASSTHROUGH"}}
    ]);
    let base = snapshot_of(vec![
        gateway(servers.clone()),
        routed_vs("a", "a.example.com", "v1"),
        routed_vs("b", "b.example.com", "v2"),
        routed_vs("s", "secure.example.com", "v1"),
        service("web", 80),
        endpoint_slice("web", "v1", "10.0.0.1"),
        endpoint_slice("web", "v2", "10.0.0.2"),
        destination_rule(&["v1", "v2"], 5),
        secret("cert", "Y2VydA=="),
    ]);
    let other_proxy = Proxy {
        namespace: "apps".into(),
        labels: proxy().labels,
        ..Default::default()
    };
    let gateway_with_more_hosts = {
        let mut servers = servers.clone();
        servers[0]["hosts"] = json!(["a.example.com", "c.example.com"]);
        gateway(servers)
    };
    let mut steps: Vec<(&str, Snapshot, Proxy)> = vec![("initial", base.clone(), proxy())];
    let gw = proxy();
    let mut push = |name: &'static str, proxy: &Proxy, change: &dyn Fn(&Snapshot) -> Snapshot| {
        let next = change(&steps[steps.len() - 1].1);
        steps.push((name, next, proxy.clone()));
    };
    push("unchanged snapshot", &gw, &|s| s.clone());
    push("VirtualService edited", &gw, &|s| {
        with(s, vec![routed_vs("a", "a.example.com", "v2")])
    });
    push("VirtualService added on a shared host", &gw, &|s| {
        with(s, vec![routed_vs("c", "a.example.com", "v1")])
    });
    push("VirtualService deleted", &gw, &|s| {
        without(s, Kind::VirtualService, "apps", "b")
    });
    push("Service port changed", &gw, &|s| {
        with(s, vec![service("web", 8080)])
    });
    push("DestinationRule subsets changed", &gw, &|s| {
        with(s, vec![destination_rule(&["v1"], 7)])
    });
    push("ServiceEntry added", &gw, &|s| {
        with(s, vec![service_entry("192.0.2.1")])
    });
    push("ServiceEntry changed", &gw, &|s| {
        with(s, vec![service_entry("192.0.2.2")])
    });
    push("EndpointSlice changed", &gw, &|s| {
        with(s, vec![endpoint_slice("web", "v1", "10.0.0.9")])
    });
    push("Secret changed", &gw, &|s| {
        with(s, vec![secret("cert", "Y2VydDI=")])
    });
    push("Gateway changed", &gw, &|s| {
        with(s, vec![gateway_with_more_hosts.clone()])
    });
    push("higress-config added", &gw, &|s| {
        with(s, vec![higress_config(true)])
    });
    push("higress-config changed", &gw, &|s| {
        with(s, vec![higress_config(false)])
    });
    push("EnvoyFilter added", &gw, &|s| {
        with(s, vec![envoy_filter("f", "3s")])
    });
    push("VirtualService edited under an EnvoyFilter", &gw, &|s| {
        with(s, vec![routed_vs("c", "a.example.com", "v2")])
    });
    push("EnvoyFilter changed", &gw, &|s| {
        with(s, vec![envoy_filter("f", "4s")])
    });
    push("EnvoyFilter deleted", &gw, &|s| {
        without(s, Kind::EnvoyFilter, "istio-system", "f")
    });
    push("proxy changed", &other_proxy, &|s| s.clone());
    push("proxy changed back", &proxy(), &|s| s.clone());
    push("Secret deleted", &gw, &|s| {
        without(s, Kind::Secret, "istio-system", "cert")
    });
    push("DestinationRule deleted", &gw, &|s| {
        without(s, Kind::DestinationRule, "apps", "web")
    });

    let mut translator = Translator::new(Options::default());
    let mut previous: Option<GatewayResources> = None;
    for (name, snapshot, proxy) in &steps {
        let fresh = translate(snapshot, proxy);
        let cached = translator.translate(snapshot, proxy);
        assert_eq!(cached, &fresh, "step {name:?}");
        if let Some(previous) = &previous {
            assert!(
                name.contains("unchanged") || *previous != fresh,
                "step {name:?} changes nothing, so it tests nothing"
            );
        }
        previous = Some(fresh);
    }
}

/// Every virtual host of `out`, by route configuration and virtual host name.
fn vhosts(out: &GatewayResources) -> BTreeMap<(String, String), VirtualHost> {
    out.route_configs
        .iter()
        .flat_map(|c| {
            c.virtual_hosts
                .iter()
                .map(|h| ((c.name.clone(), h.name.clone()), h.clone()))
        })
        .collect()
}

/// Every virtual host that differs from the previous call's output is in [`Translator::rebuilt_virtual_hosts`]
/// (what the webhook's effect check relies on to compare only those), and an unchanged one is not.
#[test]
fn rebuilt_virtual_hosts_cover_every_change() {
    let base = snapshot(vec![vs("a", "/a", None), vs("b", "/b", None)]);
    let steps = [
        with(&base, vec![vs("a", "/a2", None)]),
        with(&base, vec![vs("a", "/a2", None)]),
        base.clone(),
        with(&base, vec![vs("c", "/c", None)]),
        without(&base, Kind::VirtualService, "apps", "b"),
        with(&base, vec![vs("b", "/b", Some("d")), delegate("d", "/b")]),
    ];
    let mut translator = Translator::new(Options::default());
    let mut previous = vhosts(translator.translate(&base, &proxy()));
    for (index, step) in steps.iter().enumerate() {
        let now = vhosts(translator.translate(step, &proxy()));
        let rebuilt = translator
            .rebuilt_virtual_hosts()
            .expect("no EnvoyFilter here");
        for (key, host) in &now {
            if previous.get(key) != Some(host) {
                assert!(
                    rebuilt.contains(&key.0, &key.1),
                    "step {index}: {key:?} changed but was not rebuilt"
                );
            }
        }
        let untouched = ("http.80".to_string(), "b.example.com:80".to_string());
        if index < 3 {
            assert!(now.contains_key(&untouched));
            assert!(
                !rebuilt.contains(&untouched.0, &untouched.1),
                "step {index}: {rebuilt:?}"
            );
        }
        previous = now;
    }
}

/// A small deterministic generator (a linear congruential one), so the sequence below is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// Between one and `max` distinct items of `items`.
    fn some<'a>(&mut self, items: &[&'a str], max: usize) -> Vec<&'a str> {
        let mut out: Vec<&str> = (0..=self.below(max)).map(|_| self.pick(items)).collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// A VirtualService with what the route tables key on drawn at random: namespace, creation time (Istio order),
/// exportTo, hosts (shared, wildcard, short), gateways, and rules that route, or delegate to another
/// VirtualService of the pool.
fn random_vs(rng: &mut Lcg, index: usize) -> Arc<ConfigObject> {
    let namespace = if index % 4 == 3 { "other" } else { "apps" };
    let hosts = rng.some(
        &[
            "a.example.com",
            "b.example.com",
            "*.example.com",
            "c.example.org",
            "secure.example.com",
            "web",
        ],
        2,
    );
    let gateways = rng.some(&["istio-system/gw-a", "istio-system/gw-b", "mesh"], 2);
    let export_to: Vec<&str> = match rng.below(6) {
        0 => vec!["."],
        1 => vec!["istio-system"],
        2 => vec!["*"],
        _ => Vec::new(),
    };
    let rules: Vec<Value> = (0..=rng.below(2))
        .map(|r| {
            let prefix = format!("/{}/{}", rng.below(4), r);
            match rng.below(5) {
                0 => json!({"match": [{"uri": {"prefix": prefix}}],
                            "delegate": {"name": format!("v{}", rng.below(POOL)), "namespace": "apps"}}),
                1 => json!({"route": [{"destination": {"host": "web", "subset": rng.pick(&["v1", "v2"])}}]}),
                _ => json!({"match": [{"uri": {"prefix": prefix}}],
                            "route": [{"destination": {"host": rng.pick(&["web", "external.example.org"])}}]}),
            }
        })
        .collect();
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": format!("v{index}"), "namespace": namespace,
                     "creationTimestamp": format!("2026-01-0{}T00:00:00Z", 1 + rng.below(3))},
        "spec": {"hosts": hosts, "gateways": gateways, "exportTo": export_to, "http": rules}
    }))
}

/// VirtualServices the random sequence draws from.
const POOL: usize = 90;

fn named_gateway(name: &str, servers: Value) -> Arc<ConfigObject> {
    object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": "istio-system"},
        "spec": {"selector": {"istio": "ingressgateway"}, "servers": servers}
    }))
}

/// The second Gateway: its plain-HTTP server on port 80 shares `http.80` with `gw-a`'s, and may redirect to HTTPS.
fn gateway_b(redirect: bool, hosts: &[&str]) -> Arc<ConfigObject> {
    named_gateway(
        "gw-b",
        json!([{"port": {"number": 80, "name": "http-b", "protocol": "HTTP"}, "hosts": hosts,
                "tls": {"httpsRedirect": redirect}}]),
    )
}

/// A long random sequence of changes to VirtualServices (one, a few, or more than a route table updates in place),
/// Gateways, DestinationRules, ServiceEntries and EnvoyFilters: after every step the caching translator's output
/// equals a fresh translation, and every virtual host that differs from the step before is among those it reports
/// rebuilt.
#[test]
fn random_changes_give_the_fresh_translation() {
    let mut rng = Lcg(15);
    let gateway_a = named_gateway(
        "gw-a",
        json!([
            {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]},
            {"port": {"number": 443, "name": "https", "protocol": "HTTPS"},
             "hosts": ["secure.example.com", "apps/*.example.com"],
             "tls": {"mode": "SIMPLE", "credentialName": "cert"}}
        ]),
    );
    let mut objects: BTreeMap<ObjectKey, Arc<ConfigObject>> = BTreeMap::new();
    fn put(objects: &mut BTreeMap<ObjectKey, Arc<ConfigObject>>, object: Arc<ConfigObject>) {
        objects.insert(object.key(), object);
    }
    for o in [
        gateway_a,
        gateway_b(true, &["a.example.com", "*/c.example.org"]),
        service("web", 80),
        destination_rule(&["v1", "v2"], 5),
        service_entry("192.0.2.1"),
        secret("cert", "Y2VydA=="),
    ] {
        put(&mut objects, o);
    }
    for index in 0..POOL / 3 {
        put(&mut objects, random_vs(&mut rng, index));
    }
    let mut translator = Translator::new(Options::default());
    let mut previous: Option<GatewayResources> = None;
    for step in 0..400 {
        let what = match rng.below(20) {
            0..=8 => {
                let index = rng.below(POOL);
                put(&mut objects, random_vs(&mut rng, index));
                format!("VirtualService v{index} put")
            }
            9..=11 => {
                let index = rng.below(POOL);
                let namespace = if index % 4 == 3 { "other" } else { "apps" };
                let key = ObjectKey::new(Kind::VirtualService, namespace, format!("v{index}"));
                objects.remove(&key);
                format!("VirtualService v{index} removed")
            }
            12 => {
                for _ in 0..3 {
                    let index = rng.below(POOL);
                    put(&mut objects, random_vs(&mut rng, index));
                }
                "three VirtualServices put".into()
            }
            13 => {
                for index in 0..POOL {
                    put(&mut objects, random_vs(&mut rng, index));
                }
                "every VirtualService put".into()
            }
            14 => {
                let hosts = rng.some(&["a.example.com", "*/c.example.org", "*"], 2);
                put(&mut objects, gateway_b(rng.below(2) == 0, &hosts));
                "gw-b changed".into()
            }
            15 => {
                let subsets = rng.some(&["v1", "v2"], 2);
                put(&mut objects, destination_rule(&subsets, 5));
                "DestinationRule changed".into()
            }
            16 => {
                put(
                    &mut objects,
                    service_entry(rng.pick(&["192.0.2.1", "192.0.2.2"])),
                );
                "ServiceEntry changed".into()
            }
            17 => {
                put(&mut objects, envoy_filter("f", rng.pick(&["3s", "4s"])));
                "EnvoyFilter put".into()
            }
            18 => {
                objects.remove(&ObjectKey::new(Kind::EnvoyFilter, "istio-system", "f"));
                "EnvoyFilter removed".into()
            }
            _ => "nothing changed".into(),
        };
        let snapshot = snapshot_of(objects.values().cloned());
        let fresh = translate(&snapshot, &proxy());
        let cached = translator.translate(&snapshot, &proxy());
        assert_eq!(cached, &fresh, "step {step}: {what}");
        if let (Some(previous), Some(rebuilt)) = (&previous, translator.rebuilt_virtual_hosts()) {
            let before = vhosts(previous);
            for (key, host) in vhosts(&fresh) {
                assert!(
                    before.get(&key) == Some(&host) || rebuilt.contains(&key.0, &key.1),
                    "step {step}: {what}: {key:?} changed but was not rebuilt"
                );
            }
            for (config, at, name) in rebuilt.iter() {
                let found = fresh
                    .route_configs
                    .iter()
                    .find(|c| c.name == config)
                    .and_then(|c| c.virtual_hosts.get(at))
                    .map(|h| h.name.as_str());
                assert_eq!(
                    found,
                    Some(name),
                    "step {step}: {what}: position {at} of {config}"
                );
                assert_eq!(translator.virtual_host_position(config, name), Some(at));
            }
        }
        previous = Some(fresh);
    }
}
