//! The real kube-apiserver (`support::kube_server`) judges admitpilot's Ingress spec rules
//! (`crates/validate/src/ingress.rs`, which mirrors `ValidateIngressSpec` of k8s v1.34): a table of networking.k8s.io/v1
//! Ingresses, valid ones and ones breaking each rule (rules or a default backend, host names, `pathType` and
//! paths, backends, ports, TLS hosts and secret names, the class name), goes to the API server as a server-side
//! dry run (`dryRun=All` creates, as `kubectl create --dry-run=server` sends them, no webhook installed) and
//! through `admitpilot::validate::validate_document`, the entry point of the admission webhook and the `validate`
//! CLI. For each: the API server's verdict is the one the table expects, and its errors (each Status cause as
//! `field: message`) are exactly admitpilot's error findings (field path and words).
//!
//! No annotations are set: the API server's one annotation rule (`kubernetes.io/ingress.class` must match
//! `ingressClassName`) is not part of the spec rules compared here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::differential::{self, metadata_mutants, mutants};
use support::kube_server;

use std::collections::BTreeSet;

use admitpilot::model::decode::DecodeOptions;
use futures::StreamExt;
use kube_server::Kube;
use serde_json::{json, Value};

/// Whether a case is one the API server accepts or one it rejects.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    Valid,
    Invalid,
}
use Expect::{Invalid, Valid};

/// A backend on Service `web`, port 80.
fn web() -> Value {
    json!({"service": {"name": "web", "port": {"number": 80}}})
}

/// A spec with one rule on `foo.example.com` and one path of `path_type` (none when `None`) and `path` (none
/// when `None`) to `backend`.
fn one_path(path_type: Option<&str>, path: Option<&str>, backend: Value) -> Value {
    let mut item = json!({"backend": backend});
    if let Some(path_type) = path_type {
        item["pathType"] = json!(path_type);
    }
    if let Some(path) = path {
        item["path"] = json!(path);
    }
    json!({"rules": [{"host": "foo.example.com", "http": {"paths": [item]}}]})
}

/// A spec with one Prefix path `/` on host `host`.
fn host(host: &str) -> Value {
    json!({"rules": [{"host": host, "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": web()}
    ]}}]})
}

/// A spec with one Prefix path `/` to `backend`.
fn backend(backend: Value) -> Value {
    one_path(Some("Prefix"), Some("/"), backend)
}

/// A spec with one Prefix path `/` to Service `web` at `port`.
fn port(port: Value) -> Value {
    backend(json!({"service": {"name": "web", "port": port}}))
}

/// A spec with one path to `web` and `tls`.
fn tls(tls: Value) -> Value {
    let mut spec = backend(web());
    spec["tls"] = tls;
    spec
}

/// The cases: name, expected verdict, spec.
fn cases() -> Vec<(&'static str, Expect, Value)> {
    vec![
        // ------------------------------------------------------------------------------------------ valid
        (
            "default backend only",
            Valid,
            json!({"defaultBackend": web()}),
        ),
        (
            "Prefix and Exact paths, port by name, class name",
            Valid,
            json!({"ingressClassName": "higress", "rules": [{"host": "foo.example.com", "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": web()},
                {"path": "/api/v1", "pathType": "Exact",
                 "backend": {"service": {"name": "api", "port": {"name": "http"}}}},
                {"path": "/foo.bar/..baz/.x", "pathType": "Prefix", "backend": web()},
            ]}}]}),
        ),
        ("wildcard host", Valid, host("*.example.com")),
        (
            "rule without host, rule without http",
            Valid,
            json!({"rules": [
                {"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": web()}]}},
                {"host": "bar.example.com"},
            ]}),
        ),
        (
            "ImplementationSpecific with odd paths and no path",
            Valid,
            json!({"rules": [{"http": {"paths": [
                {"path": "/a//b/./c/../%2f/..", "pathType": "ImplementationSpecific", "backend": web()},
                {"pathType": "ImplementationSpecific", "backend": web()},
                {"path": "", "pathType": "ImplementationSpecific", "backend": web()},
            ]}}]}),
        ),
        (
            "resource backend",
            Valid,
            backend(json!({"resource":
                {"apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "static-assets"}})),
        ),
        (
            "resource backend in the core group",
            Valid,
            backend(json!({"resource": {"kind": "ConfigMap", "name": "my.page"}})),
        ),
        (
            "TLS with hosts (an IP address among them), wildcard and no secret name",
            Valid,
            tls(json!([
                {"hosts": ["foo.example.com", "*.example.com", "10.0.0.1"], "secretName": "tls-cert"},
                {"hosts": ["bar.example.com"]},
                {"secretName": ""},
            ])),
        ),
        (
            "longest port name, highest port",
            Valid,
            json!({"rules": [{"http": {"paths": [
                {"path": "/a", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"name": "a23456789012345"}}}},
                {"path": "/b", "pathType": "Prefix",
                 "backend": {"service": {"name": "w", "port": {"number": 65535}}}},
            ]}}]}),
        ),
        // ----------------------------------------------------------------------------------------- invalid
        ("neither rules nor default backend", Invalid, json!({})),
        (
            "null rules, no default backend",
            Invalid,
            json!({"rules": null}),
        ),
        (
            "empty rules, no default backend",
            Invalid,
            json!({"rules": [], "tls": []}),
        ),
        ("host is an IPv4 address", Invalid, host("10.0.0.1")),
        (
            "host is an IPv4 address with leading zeros",
            Invalid,
            host("010.001.0.1"),
        ),
        ("host is an IPv6 address", Invalid, host("fe80::1")),
        (
            "host is IPv6 text with a sloppy IPv4 tail",
            Invalid,
            host("1::02.3.4.5"),
        ),
        ("host in upper case", Invalid, host("Foo.Example.com")),
        ("host with a port", Invalid, host("foo.example.com:8080")),
        ("wildcard without a dot", Invalid, host("*foo.com")),
        ("wildcard with nothing after", Invalid, host("*.")),
        ("wildcard inside", Invalid, host("foo.*.com")),
        (
            "host too long",
            Invalid,
            host(&format!("{}.com", "a".repeat(250))),
        ),
        (
            "wildcard host too long",
            Invalid,
            host(&format!("*.{}", "a".repeat(260))),
        ),
        (
            "pathType missing",
            Invalid,
            one_path(None, Some("/"), web()),
        ),
        (
            "pathType unsupported",
            Invalid,
            one_path(Some("Regex"), Some("/a.*"), web()),
        ),
        (
            "Prefix path not absolute",
            Invalid,
            one_path(Some("Prefix"), Some("foo"), web()),
        ),
        (
            "Exact path missing",
            Invalid,
            one_path(Some("Exact"), None, web()),
        ),
        (
            "Exact and Prefix paths with invalid sequences",
            Invalid,
            json!({"rules": [{"http": {"paths": [
                {"path": "/a//b", "pathType": "Exact", "backend": web()},
                {"path": "/a/./b", "pathType": "Prefix", "backend": web()},
                {"path": "/a/../b", "pathType": "Prefix", "backend": web()},
                {"path": "/a%2fb%2Fc", "pathType": "Exact", "backend": web()},
                {"path": "/a/..", "pathType": "Prefix", "backend": web()},
                {"path": "/a/.", "pathType": "Exact", "backend": web()},
                {"path": "a/../b//", "pathType": "Prefix", "backend": web()},
            ]}}]}),
        ),
        (
            "ImplementationSpecific path not absolute",
            Invalid,
            one_path(Some("ImplementationSpecific"), Some("api"), web()),
        ),
        (
            "backend with both service and resource",
            Invalid,
            backend(json!({
                "service": {"name": "Web", "port": {"number": 0}},
                "resource": {"kind": "", "name": "x"},
            })),
        ),
        ("backend with neither", Invalid, backend(json!({}))),
        (
            "service port with neither name nor number",
            Invalid,
            port(json!({})),
        ),
        (
            "service without port",
            Invalid,
            backend(json!({"service": {"name": "web"}})),
        ),
        ("service port number 0", Invalid, port(json!({"number": 0}))),
        (
            "service port number 70000",
            Invalid,
            port(json!({"number": 70000})),
        ),
        (
            "service port number negative",
            Invalid,
            port(json!({"number": -1})),
        ),
        (
            "service port with name and number",
            Invalid,
            port(json!({"name": "http", "number": 80})),
        ),
        (
            "bad port names",
            Invalid,
            json!({"rules": [{"http": {"paths": [
                {"path": "/a", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"name": "HTTP_1"}}}},
                {"path": "/b", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"name": "-a--b-0123456789"}}}},
                {"path": "/c", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"name": "8080"}}}},
            ]}}]}),
        ),
        (
            "bad service names",
            Invalid,
            json!({"rules": [{"http": {"paths": [
                {"path": "/a", "pathType": "Prefix",
                 "backend": {"service": {"name": "1web", "port": {"number": 80}}}},
                {"path": "/b", "pathType": "Prefix",
                 "backend": {"service": {"name": "web.svc", "port": {"number": 80}}}},
                {"path": "/c", "pathType": "Prefix",
                 "backend": {"service": {"name": "a".repeat(64), "port": {"number": 80}}}},
                {"path": "/d", "pathType": "Prefix",
                 "backend": {"service": {"name": "", "port": {"number": 80}}}},
            ]}}]}),
        ),
        (
            "bad resource backends",
            Invalid,
            json!({"rules": [{"http": {"paths": [
                {"path": "/a", "pathType": "Prefix",
                 "backend": {"resource": {"apiGroup": "", "kind": "", "name": ""}}},
                {"path": "/b", "pathType": "Prefix",
                 "backend": {"resource": {"apiGroup": "Bad_Group", "kind": "a/b%", "name": ".."}}},
                {"path": "/c", "pathType": "Prefix",
                 "backend": {"resource": {"kind": "Bucket", "name": "."}}},
            ]}}]}),
        ),
        (
            "TLS hosts invalid",
            Invalid,
            tls(
                json!([{"hosts": ["Foo.example.com", "*foo.com", "*.", "a.*.com"], "secretName": "cert"}]),
            ),
        ),
        (
            "TLS secret name invalid",
            Invalid,
            tls(
                json!([{"hosts": ["foo.example.com"], "secretName": "My_Secret"}, {"secretName": "ok"}]),
            ),
        ),
        (
            "class name invalid",
            Invalid,
            json!({"ingressClassName": "Higress!", "defaultBackend": web()}),
        ),
        (
            "class name empty",
            Invalid,
            json!({"ingressClassName": "", "defaultBackend": web()}),
        ),
        (
            "default backend invalid",
            Invalid,
            json!({"defaultBackend": {"service": {"name": "Web", "port": {"number": 0}}}}),
        ),
        (
            "empty paths list",
            Invalid,
            json!({"rules": [{"host": "foo.example.com", "http": {"paths": []}}]}),
        ),
        (
            "errors in several rules and paths",
            Invalid,
            json!({"rules": [
                {"host": "ok.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": web()},
                    {"path": "x", "pathType": "Exact",
                     "backend": {"service": {"name": "web", "port": {"number": 99999}}}},
                ]}},
                {"host": "*.bad*.com", "http": {"paths": [
                    {"path": "/y", "backend": web()},
                ]}},
            ]}),
        ),
    ]
}

/// The API server's errors for `doc` (server-side dry run, `dryRun=All`), as `field: message` lines (the Status
/// causes); empty when it accepts it; `Err` with the reason when it refuses it before validation.
async fn server_errors(
    client: &kube::Client,
    namespace: &str,
    doc: &Value,
) -> Result<BTreeSet<String>, String> {
    let request = axum::http::Request::post(format!(
        "/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses?dryRun=All"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(doc).unwrap())
    .unwrap();
    let status = match client.request_text(request).await {
        Ok(_) => return Ok(BTreeSet::new()),
        Err(kube::Error::Api(status)) if status.reason == "Invalid" => status,
        Err(error) => return Err(error.to_string()),
    };
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    if causes.is_empty() {
        return Err(format!("Invalid without causes: {}", status.message));
    }
    Ok(causes
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect())
}

/// admitpilot's errors for `doc`, as `field: message`.
fn our_errors(doc: &Value) -> BTreeSet<String> {
    admitpilot::validate::validate_document(doc, &DecodeOptions::default())
        .findings
        .iter()
        .filter(|f| f.is_error())
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_and_admitpilot_agree_on_ingresses() {
    let Some(kube) = Kube::shared("kube-ingress-validation").await else {
        return;
    };
    let namespace = kube.namespace().to_string();
    let cases: Vec<_> = cases()
        .into_iter()
        .enumerate()
        .map(|(i, (name, expect, spec))| {
            let doc = json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"name": format!("case-{i}"), "namespace": namespace},
                "spec": spec,
            });
            (name, expect, doc)
        })
        .collect();
    let names: BTreeSet<_> = cases.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(names.len(), cases.len(), "case names repeat");
    let client = kube.client().await;
    // Several dry runs in flight: each is one round trip to the API server.
    let verdicts: Vec<_> = futures::stream::iter(cases)
        .map(|(name, expect, doc)| {
            let client = client.clone();
            let namespace = namespace.clone();
            async move {
                let server = server_errors(&client, &namespace, &doc).await;
                (name, expect, server, our_errors(&doc))
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let (mut valid, mut invalid) = (0, 0);
    let mut problems = Vec::new();
    for (name, expect, server, ours) in &verdicts {
        let server = match server {
            Ok(server) => server,
            Err(reason) => {
                problems.push(format!("{name}: refused before validation: {reason}"));
                continue;
            }
        };
        let verdict = if server.is_empty() { Valid } else { Invalid };
        match verdict {
            Valid => valid += 1,
            Invalid => invalid += 1,
        }
        if verdict != *expect {
            problems.push(format!(
                "{name}: expected {expect:?}, the API server says {verdict:?}: {server:#?}"
            ));
        }
        if server != ours {
            let missing: Vec<_> = server.difference(ours).collect();
            let extra: Vec<_> = ours.difference(server).collect();
            problems.push(format!(
                "{name}:\n  API server only: {missing:#?}\n  admitpilot only: {extra:#?}"
            ));
        }
    }
    println!(
        "compared {} Ingresses with the API server: {valid} accepted, {invalid} rejected, {} problems",
        verdicts.len(),
        problems.len()
    );
    assert!(
        valid >= 5 && invalid >= 20,
        "{valid} valid, {invalid} invalid"
    );
    assert!(
        problems.is_empty(),
        "{} of {} cases:\n{}",
        problems.len(),
        verdicts.len(),
        problems.join("\n")
    );
}

/// The generative differential for Ingresses: mutants of every valid case of the table (`support::differential`:
/// every place of the spec changed in turn, and the metadata) go to the API server as dry runs and through
/// admitpilot's validation. Verdicts must agree, and every error the API server gives must be one of admitpilot's.
/// A mutant the API server refuses before validation (a wrong JSON type does not decode into the Go type) is not a
/// validation verdict and is left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_ingresses_are_judged_alike() {
    let Some(kube) = Kube::shared("kube-ingress-differential").await else {
        return;
    };
    let namespace = kube.namespace().to_string();
    let mut documents = Vec::new();
    for (i, (name, expect, spec)) in cases().into_iter().enumerate() {
        if expect != Valid {
            continue;
        }
        let base = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": format!("generated-{i}"), "namespace": namespace},
            "spec": spec,
        });
        documents.extend(
            mutants(&base)
                .into_iter()
                .chain(metadata_mutants(&base))
                .map(|(how, doc)| (format!("{name}, {how}"), doc)),
        );
    }
    let client = kube.client().await;
    let verdicts: Vec<_> = futures::stream::iter(documents)
        .map(|(case, doc)| {
            let client = client.clone();
            async move {
                (
                    case,
                    differential::server_errors(&client, &doc).await,
                    our_errors(&doc),
                )
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let (mut compared, mut rejected) = (0, 0);
    let mut disagreements = Vec::new();
    for (case, server, ours) in verdicts {
        let Some(server) = server else {
            continue;
        };
        compared += 1;
        rejected += usize::from(!server.is_empty());
        let missing: Vec<&String> = server.iter().filter(|e| !ours.contains(*e)).collect();
        if server.is_empty() != ours.is_empty() || !missing.is_empty() {
            disagreements.push(format!(
                "{case}:\n  API server: {server:?}\n  admitpilot: {ours:?}"
            ));
        }
    }
    println!(
        "compared {compared} generated Ingresses with the API server: {rejected} rejected, {} disagreements",
        disagreements.len()
    );
    assert!(compared >= 500, "only {compared} documents compared");
    assert!(
        disagreements.is_empty(),
        "{} of {compared} documents judged differently:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
