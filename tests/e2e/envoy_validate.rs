//! Real-Envoy check of translation output: every golden case and the example folder is translated, turned
//! into a static bootstrap (route configurations inlined into their connection managers with
//! `validate_clusters` on, EDS clusters made STATIC with their load assignments, SDS secrets made static,
//! test certificates in place of the fixtures' placeholders and files) and checked with
//! `envoy --mode validate`. Building the bootstrap also fails on any dangling reference: an RDS name,
//! an EDS cluster, an SDS secret or a TCP proxy cluster that the resources do not define.
//!
//! The Istio corpus's valid AuthorizationPolicies and RequestAuthentications (`../shared/corpus/istio/valid/`) are each put
//! onto the gateway of the `authorization-policy` golden case (moved to its namespace, selecting it) and checked the
//! same way, HTTP and TCP servers alike.
//!
//! Envoy comes from `ADMITPILOT_ENVOY`, else `.venv/bin/envoy`; without it the test prints why and passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::corpus;

use support::cases;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use admitpilot::model::Snapshot;
use admitpilot::translate::{output, translate, Proxy};
use serde_json::{json, Map, Value};

fn envoy() -> Option<PathBuf> {
    let path = std::env::var_os("ADMITPILOT_ENVOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/envoy"));
    path.exists().then_some(path)
}

/// Test credentials written once per run.
struct Credentials {
    cert_pem: String,
    key_pem: String,
    cert_file: PathBuf,
    key_file: PathBuf,
}

fn credentials(dir: &Path) -> Credentials {
    let certified = rcgen::generate_simple_self_signed(vec!["example.com".to_string()]).unwrap();
    let cert_pem = certified.cert.pem();
    let key_pem = certified.signing_key.serialize_pem();
    let cert_file = dir.join("cert.pem");
    let key_file = dir.join("key.pem");
    std::fs::write(&cert_file, &cert_pem).unwrap();
    std::fs::write(&key_file, &key_pem).unwrap();
    Credentials {
        cert_pem,
        key_pem,
        cert_file,
        key_file,
    }
}

fn by_name(list: Option<&Value>, key: &str) -> BTreeMap<String, Value> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|item| (item[key].as_str().unwrap().to_string(), item.clone()))
        .collect()
}

/// Rewrites one resource tree for a static bootstrap; panics on dangling references.
fn make_static(
    value: &mut Value,
    parent_key: &str,
    routes: &BTreeMap<String, Value>,
    clusters: &BTreeMap<String, Value>,
    secrets: &BTreeMap<String, Value>,
    creds: &Credentials,
    origin: &str,
) {
    match value {
        Value::Object(map) => {
            if let Some(rds) = map.remove("rds") {
                let name = rds["route_config_name"].as_str().unwrap();
                let mut inline = routes
                    .get(name)
                    .unwrap_or_else(|| panic!("{origin}: RDS {name} is not defined"))
                    .clone();
                inline["validate_clusters"] = json!(true);
                map.insert("route_config".into(), inline);
            }
            if let Some(config) = map.remove("sds_config") {
                assert!(config.get("ads").is_some(), "{origin}: SDS not over ADS");
                let name = map["name"].as_str().unwrap();
                assert!(
                    secrets.contains_key(name),
                    "{origin}: SDS secret {name} is not defined"
                );
            }
            if map
                .get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("tcp_proxy.v3.TcpProxy"))
            {
                let mut names: Vec<&str> = map
                    .get("cluster")
                    .and_then(Value::as_str)
                    .into_iter()
                    .collect();
                for weighted in map
                    .get("weighted_clusters")
                    .and_then(|w| w.get("clusters"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    names.push(weighted["name"].as_str().unwrap());
                }
                for name in names {
                    assert!(
                        clusters.contains_key(name),
                        "{origin}: TCP proxy cluster {name} is not defined"
                    );
                }
            }
            if let Some(file) = map.get_mut("filename") {
                *file = json!(if parent_key == "private_key" {
                    creds.key_file.display().to_string()
                } else {
                    creds.cert_file.display().to_string()
                });
            }
            for (key, child) in map.iter_mut() {
                make_static(child, key, routes, clusters, secrets, creds, origin);
            }
        }
        Value::Array(items) => {
            for item in items {
                make_static(item, parent_key, routes, clusters, secrets, creds, origin);
            }
        }
        _ => {}
    }
}

fn bootstrap(resources: &Value, creds: &Credentials, origin: &str) -> Value {
    let routes = by_name(resources.get("route_configs"), "name");
    let clusters = by_name(resources.get("clusters"), "name");
    let secrets = by_name(resources.get("secrets"), "name");
    let endpoints = by_name(resources.get("endpoints"), "cluster_name");
    let pem = |text: &str| json!({"inline_string": text});
    let mut static_secrets: Vec<Value> = Vec::new();
    for (name, secret) in &secrets {
        let mut secret = secret.clone();
        if secret.get("tls_certificate").is_some() {
            secret["tls_certificate"] = json!({
                "certificate_chain": pem(&creds.cert_pem),
                "private_key": pem(&creds.key_pem),
            });
        }
        if secret.get("validation_context").is_some() {
            secret["validation_context"]["trusted_ca"] = pem(&creds.cert_pem);
        }
        assert_eq!(secret["name"], json!(name));
        static_secrets.push(secret);
    }
    let mut static_clusters: Vec<Value> = Vec::new();
    for (name, cluster) in &clusters {
        let mut cluster = cluster.clone();
        if cluster["type"] == json!("EDS") {
            let assignment = endpoints.get(name).unwrap_or_else(|| {
                panic!("{origin}: EDS cluster {name} has no endpoints resource")
            });
            let fields = cluster.as_object_mut().unwrap();
            fields.remove("eds_cluster_config");
            fields.insert("type".into(), json!("STATIC"));
            fields.insert("load_assignment".into(), assignment.clone());
        }
        make_static(
            &mut cluster,
            "",
            &routes,
            &clusters,
            &secrets,
            creds,
            origin,
        );
        static_clusters.push(cluster);
    }
    let mut listeners = resources.get("listeners").cloned().unwrap_or(json!([]));
    make_static(
        &mut listeners,
        "",
        &routes,
        &clusters,
        &secrets,
        creds,
        origin,
    );
    let mut static_resources = Map::new();
    static_resources.insert("listeners".into(), listeners);
    static_resources.insert("clusters".into(), Value::Array(static_clusters));
    static_resources.insert("secrets".into(), Value::Array(static_secrets));
    json!({
        "node": {"id": "envoy-validate", "cluster": "envoy-validate"},
        "static_resources": static_resources,
    })
}

fn validate(
    envoy: &Path,
    dir: &Path,
    name: &str,
    snapshot: &Snapshot,
    proxy: &Proxy,
) -> Option<String> {
    let creds = credentials(dir);
    let resources = output::to_json(&translate(snapshot, proxy), false).unwrap();
    let config = bootstrap(&resources, &creds, name);
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let out = Command::new(envoy)
        .args(["--mode", "validate", "--log-level", "error", "-c"])
        .arg(&file)
        .output()
        .unwrap();
    if out.status.success() {
        None
    } else {
        Some(format!(
            "{name}: envoy rejected {}:\n{}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn envoy_accepts_every_golden_and_the_example() {
    let Some(envoy) = envoy() else {
        println!("skipping: no Envoy at ADMITPILOT_ENVOY or .venv/bin/envoy");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().to_path_buf();
    let mut failures = Vec::new();
    for case in cases::golden_cases() {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(case.join("input.yaml")).unwrap();
        let snapshot = cases::snapshot_from_yaml(&text, &name);
        failures.extend(validate(
            &envoy,
            &keep,
            &name,
            &snapshot,
            &cases::golden_proxy(),
        ));
    }
    let example = cases::snapshot_from_dir(&cases::example_dir());
    failures.extend(validate(
        &envoy,
        &keep,
        "example",
        &example,
        &cases::example_proxy(),
    ));
    if !failures.is_empty() {
        // Keep the bootstraps for inspection.
        let kept = dir.keep();
        panic!("{} in {}", failures.join("\n"), kept.display());
    }
}

/// Every valid AuthorizationPolicy and RequestAuthentication of the corpus, applied to a gateway, translates to
/// config Envoy accepts. CUSTOM
/// policies are not translated (the webhook warns) and are counted apart; so are path templates (`{*}`), on which
/// Envoy 1.40's `--mode validate` aborts though a serving Envoy accepts them (`tests/e2e/e2e_authz.rs`).
#[test]
fn envoy_accepts_every_corpus_authorization_policy_on_a_gateway() {
    let Some(envoy) = envoy() else {
        println!("skipping: no Envoy at ADMITPILOT_ENVOY or .venv/bin/envoy");
        return;
    };
    let Some(corpus) = corpus::corpus_dir("istio/valid") else {
        return;
    };
    let policies = std::fs::read_dir(corpus.join("AuthorizationPolicy")).unwrap();
    let authentications = std::fs::read_dir(corpus.join("RequestAuthentication")).unwrap();
    let base =
        std::fs::read_to_string(cases::golden_root().join("authorization-policy/input.yaml"))
            .unwrap();
    let base: String = base
        .split("\n---\n")
        .filter(|doc| {
            !doc.contains("kind: AuthorizationPolicy")
                && !doc.contains("kind: RequestAuthentication")
        })
        .collect::<Vec<_>>()
        .join("\n---\n");
    let mut files: Vec<PathBuf> = policies
        .chain(authentications)
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let dir = tempfile::tempdir().unwrap();
    let (mut checked, mut custom, mut templates) = (0, 0, 0);
    let mut failures = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut policy: Value = serde_yaml_ng::from_str(&text).unwrap();
        if policy["spec"]["action"] == "CUSTOM" {
            custom += 1;
            continue;
        }
        if text.contains('{') && text.contains("paths") && text.contains("{*") {
            templates += 1;
            continue;
        }
        policy["metadata"]["namespace"] = json!("istio-system");
        if !policy["spec"].is_object() {
            policy["spec"] = json!({});
        }
        let spec = policy["spec"].as_object_mut().unwrap();
        spec.remove("targetRef");
        spec.remove("targetRefs");
        spec.insert(
            "selector".into(),
            json!({"matchLabels": {"istio": "ingressgateway"}}),
        );
        let yaml = format!(
            "{base}\n---\n{}",
            serde_yaml_ng::to_string(&policy).unwrap()
        );
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        let snapshot = cases::snapshot_from_yaml(&yaml, &name);
        failures.extend(validate(
            &envoy,
            dir.path(),
            &name,
            &snapshot,
            &cases::golden_proxy(),
        ));
        checked += 1;
    }
    println!(
        "{checked} policies checked, {custom} CUSTOM not translated, {templates} with path templates"
    );
    assert!(checked > 40, "only {checked} policies checked");
    if !failures.is_empty() {
        let kept = dir.keep();
        panic!("{} in {}", failures.join("\n"), kept.display());
    }
}
