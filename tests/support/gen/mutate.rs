//! Mutations of the corpus: takes the valid VirtualServices, DestinationRules, Gateways and EnvoyFilters of
//! `../shared/corpus/istio/valid/` and a [`Rng`], yields a copy of one of them made to bear on the base gateway (its
//! namespace, selectors, gateway bindings and destination hosts; some left as they were) and then changed at random:
//! fields deleted, scalars replaced by edge values or values of another type, list items repeated, subtrees grafted
//! from another document of the same kind.
//!
//! Nothing may reach beyond 127.0.0.1 or the run's files: server ports are mapped onto the run's free ports, `bind`
//! addresses dropped, every `address` in an EnvoyFilter patch (a cluster endpoint, a DNS resolver) becomes
//! 127.0.0.1, and certificate files are the base's (as a gateway pod has its files mounted; CRLs dropped).

use std::path::Path;

use serde_json::{json, Value};

use super::base::{Base, NAMESPACE, SERVICE_HOSTS};
use super::Rng;

/// The kinds taken from the corpus.
pub const KINDS: [&str; 4] = [
    "VirtualService",
    "DestinationRule",
    "Gateway",
    "EnvoyFilter",
];

/// The corpus documents of each of [`KINDS`].
pub struct Corpus {
    docs: Vec<Vec<Value>>,
}

impl Corpus {
    /// Reads `<dir>/<Kind>/*.yaml` for each kind.
    pub fn read(dir: &Path) -> Corpus {
        let docs = KINDS
            .iter()
            .map(|kind| {
                let mut files: Vec<_> = std::fs::read_dir(dir.join(kind))
                    .map(|entries| entries.map(|e| e.unwrap().path()).collect())
                    .unwrap_or_default();
                files.sort();
                files
                    .iter()
                    .filter_map(|f| {
                        serde_yaml_ng::from_str::<Value>(&std::fs::read_to_string(f).ok()?).ok()
                    })
                    .filter(|doc| doc["spec"].is_object())
                    .collect()
            })
            .collect();
        Corpus { docs }
    }

    /// How many documents of each kind were read.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        KINDS
            .iter()
            .zip(&self.docs)
            .map(|(kind, docs)| (*kind, docs.len()))
            .collect()
    }

    /// A mutated document of a random kind, named `name`; `None` when the corpus has none of that kind.
    pub fn mutant(&self, rng: &mut Rng, name: &str, base: &Base) -> Option<Value> {
        let kind = rng.below(KINDS.len());
        let docs = &self.docs[kind];
        if docs.is_empty() {
            return None;
        }
        let mut doc = rng.pick(docs).clone();
        doc["metadata"]["name"] = json!(name);
        if rng.percent(85) {
            aim(rng, KINDS[kind], &mut doc);
        }
        let changes = if rng.percent(15) {
            0
        } else {
            rng.between(1, 3)
        };
        for _ in 0..changes {
            change(rng, &mut doc, docs);
        }
        doc["metadata"]["name"] = json!(name);
        sanitize(KINDS[kind], &mut doc, base);
        Some(doc)
    }
}

/// Makes a corpus document bear on the base gateway: its namespace, selectors, bindings and hosts.
fn aim(rng: &mut Rng, kind: &str, doc: &mut Value) {
    let namespace = if kind == "EnvoyFilter" && rng.percent(30) {
        "istio-system"
    } else {
        NAMESPACE
    };
    doc["metadata"]["namespace"] = json!(namespace);
    let spec = &mut doc["spec"];
    match kind {
        "Gateway" => spec["selector"] = json!({"istio": "ingressgateway"}),
        "VirtualService" => {
            let gateways: [&[&str]; 3] = [&["gw"], &["edge/gw"], &["gw", "mesh"]];
            spec["gateways"] = json!(*rng.pick(&gateways));
            for_each_key(spec, "destination", &mut |destination| {
                if rng.percent(60) {
                    destination["host"] = json!(*rng.pick(&SERVICE_HOSTS));
                    if rng.percent(70) {
                        destination["port"] =
                            json!({"number": *rng.pick(&[80, 443, 5000, 9000, 8000])});
                    }
                }
            });
        }
        "DestinationRule" => {
            if rng.percent(75) {
                spec["host"] = json!(*rng.pick(&[
                    SERVICE_HOSTS[0],
                    SERVICE_HOSTS[1],
                    "web",
                    "*.edge.svc.cluster.local"
                ]));
            }
        }
        _ => {
            if rng.percent(80) {
                spec["workloadSelector"] = json!({"labels": {"istio": "ingressgateway"}});
            }
            if let Some(patches) = spec["configPatches"].as_array_mut() {
                for patch in patches {
                    if rng.percent(70) && patch["match"].is_object() {
                        patch["match"]["context"] = json!("GATEWAY");
                    }
                }
            }
        }
    }
}

/// Calls `each` on every value under `key`, anywhere in `value`.
fn for_each_key(value: &mut Value, key: &str, each: &mut dyn FnMut(&mut Value)) {
    match value {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if k == key {
                    each(child);
                } else {
                    for_each_key(child, key, each);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                for_each_key(item, key, each);
            }
        }
        _ => {}
    }
}

/// Every JSON pointer under `spec`, with the last key of each (`None` for a list item).
fn pointers(
    value: &Value,
    at: String,
    key: Option<String>,
    out: &mut Vec<(String, Option<String>)>,
) {
    out.push((at.clone(), key));
    match value {
        Value::Object(map) => {
            for (k, child) in map {
                let escaped = k.replace('~', "~0").replace('/', "~1");
                pointers(child, format!("{at}/{escaped}"), Some(k.clone()), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), None, out);
            }
        }
        _ => {}
    }
}

/// Values a scalar may be replaced with: edges of numbers, durations, names, hosts and types.
fn edge_value(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => json!(*rng.pick(&[0, 1, -1, 65535, 65536, 2147483647, 4294967296i64])),
        1 => json!(*rng.pick(&[0.5, 1e-9, 100.0])),
        2 => json!(rng.percent(50)),
        3 => json!(*rng.pick(&[
            "0s",
            "1ms",
            "1.5s",
            "315576000001s",
            "-1s",
            "1h",
            "0.000000001s"
        ])),
        _ => json!(*rng.pick(&[
            "",
            "*",
            "a",
            "*.example.com",
            "web.edge.svc.cluster.local",
            "/",
            "/x{*}",
            "^(.*$",
            "ROUND_ROBIN",
            "MUTUAL",
            "ISTIO_MUTUAL",
            "x-header",
            "GATEWAY",
            "127.0.0.1",
            "ünï",
        ])),
    }
}

/// One random change to `doc`'s spec.
fn change(rng: &mut Rng, doc: &mut Value, donors: &[Value]) {
    let mut all = Vec::new();
    pointers(&doc["spec"], "/spec".into(), Some("spec".into()), &mut all);
    let (at, key) = rng.pick(&all).clone();
    if at == "/spec" {
        return;
    }
    match rng.below(10) {
        0..=1 => delete(doc, &at),
        2..=4 => {
            if let Some(target) = doc.pointer_mut(&at) {
                if !target.is_object() && !target.is_array() || rng.percent(20) {
                    *target = edge_value(rng);
                }
            }
        }
        5 => {
            if let Some(Value::Array(items)) = doc.pointer_mut(&at) {
                if let Some(item) = items.first().cloned() {
                    items.push(item);
                }
            }
        }
        _ => {
            // Graft a subtree of the same key from another document.
            let Some(key) = key else { return };
            let donor = rng.pick(donors);
            let mut theirs = Vec::new();
            pointers(
                &donor["spec"],
                "/spec".into(),
                Some("spec".into()),
                &mut theirs,
            );
            let same: Vec<&String> = theirs
                .iter()
                .filter(|(_, k)| k.as_deref() == Some(key.as_str()))
                .map(|(p, _)| p)
                .collect();
            if same.is_empty() {
                return;
            }
            let from = rng.pick(&same);
            if let (Some(graft), Some(target)) =
                (donor.pointer(from).cloned(), doc.pointer_mut(&at))
            {
                *target = graft;
            }
        }
    }
}

fn delete(doc: &mut Value, at: &str) {
    let Some((parent, last)) = at.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = last.parse::<usize>() {
                if i < items.len() {
                    items.remove(i);
                }
            }
        }
        _ => {}
    }
}

/// Keeps a document on 127.0.0.1, the run's ports and the run's certificate files (see the module doc).
fn sanitize(kind: &str, doc: &mut Value, base: &Base) {
    let ports = &base.ports;
    // Certificate files a gateway pod would have mounted: the base's files. CRLs are dropped.
    for (key, file) in [
        ("serverCertificate", &base.cert_file),
        ("clientCertificate", &base.cert_file),
        ("caCertificates", &base.cert_file),
        ("privateKey", &base.key_file),
    ] {
        for_each_key(&mut doc["spec"], key, &mut |value| {
            if value.as_str().is_some_and(|v| !v.is_empty()) {
                *value = json!(file);
            }
        });
    }
    for_each_key(&mut doc["spec"], "tls", &mut |tls| {
        if let Some(tls) = tls.as_object_mut() {
            tls.remove("caCrl");
        }
    });
    let map_port = |n: &Value| -> Value {
        match n.as_u64() {
            Some(n) => json!(ports[(n % ports.len() as u64) as usize]),
            None => n.clone(),
        }
    };
    match kind {
        "Gateway" => {
            if let Some(servers) = doc["spec"]["servers"].as_array_mut() {
                for server in servers {
                    if let Some(server) = server.as_object_mut() {
                        server.remove("bind");
                        if let Some(port) = server.get_mut("port") {
                            if port["number"].is_u64() {
                                port["number"] = map_port(&port["number"]);
                            }
                        }
                    }
                }
            }
        }
        "VirtualService" => {
            // Route match ports name the Gateway server ports.
            for section in ["http", "tcp", "tls"] {
                for_each_key(&mut doc["spec"][section], "match", &mut |matches| {
                    for m in matches.as_array_mut().into_iter().flatten() {
                        if m["port"].is_u64() {
                            m["port"] = map_port(&m["port"]);
                        }
                    }
                });
            }
        }
        "EnvoyFilter" => {
            for_each_key(&mut doc["spec"], "address", &mut |address| {
                if address.is_string() {
                    *address = json!("127.0.0.1");
                }
            });
            for_each_key(&mut doc["spec"], "port_value", &mut |port| {
                if port.is_u64() {
                    *port = map_port(port);
                }
            });
            for_each_key(&mut doc["spec"], "hostname", &mut |host| {
                if host.is_string() {
                    *host = json!("localhost");
                }
            });
        }
        _ => {}
    }
}
