//! Gateway API status written to a real kube-apiserver (`support::kube_server`) by `admitpilot serve --kube`, with
//! a real Envoy 1.40 whose node metadata names the Gateway:
//! - before any gateway connects, the Gateway is Accepted and Programmed=False (Pending, saying none is connected);
//!   once Envoy has acknowledged the config, Programmed=True with the Gateway's generation;
//! - the HTTPRoute's parent entry is admitpilot's, and another controller's entry in the same list is kept;
//! - two replicas: one holds the Lease and writes, counting the gateways connected to the other from its report;
//!   when it stops (SIGTERM releases the Lease and withdraws its report), the other takes over and writes the next
//!   generation;
//! - with `--istio-status`, Istio objects get the status istiod writes: `Reconciled` once the gateway that selects
//!   them acknowledged their generation, `validationMessages` with Istio's analyzer codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::kube_server;
use support::pipeline;

use std::path::Path;
use std::time::Duration;

use envoy::{AdsApi, EnvoyProcess};
use kube_server::Kube;
use pipeline::Admitpilot;
use serde_json::Value;

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/gateway-api");
const ISTIO_CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kube/istio-crds.yaml");
const WAIT: Duration = Duration::from_secs(60);

fn objects(ns: &str, class: &str, port: u16, hostname: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners: [{{name: http, port: {port}, protocol: HTTP, hostname: \"{hostname}\"}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
"
    )
}

/// `serve --kube` flags for a test in namespace `ns` (its Lease, config and mesh settings there; xDS without
/// tokens), then `extra`.
fn serve_flags(ns: &str, extra: &[&str]) -> Vec<String> {
    let mut flags = vec![
        "--xds-auth=none".to_string(),
        format!("--lease-namespace={ns}"),
        format!("--watch-namespaces={ns}"),
        format!("--higress-namespace={ns}"),
        format!("--istio-namespace={ns}"),
    ];
    flags.extend(extra.iter().map(ToString::to_string));
    flags
}

/// A Delta ADS bootstrap for a gateway of the Gateway `gw` in namespace `ns`.
fn gateway_bootstrap(xds_port: u16, ns: &str) -> String {
    envoy::bootstrap(
        AdsApi::Delta,
        xds_port,
        "router~127.0.0.1~gw.x~x.svc.cluster.local",
    )
    .replace("NAMESPACE: default", &format!("NAMESPACE: {ns}"))
    .replace("app: e2e", "gateway.networking.k8s.io/gateway-name: gw")
}

/// Polls `kind/name`'s JSON until `ready` holds, for at most [`WAIT`]; returns it.
pub(crate) async fn wait_status(
    kube: &Kube,
    what: &str,
    ready: impl Fn(&Value) -> bool,
    logs: &[&Admitpilot],
) -> Value {
    wait_get(kube, &[what], ready, logs).await
}

/// Polls `kubectl get <args> -o json` in the test's namespace until `ready` holds for its JSON (an error reads as
/// `null`), for at most [`WAIT`]; returns it. On timeout, the last JSON's `status` (else all of it) and `logs`.
pub(crate) async fn wait_get(
    kube: &Kube,
    args: &[&str],
    ready: impl Fn(&Value) -> bool,
    logs: &[&Admitpilot],
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut command = vec!["-n", kube.namespace(), "get"];
    command.extend(args);
    command.extend(["-o", "json"]);
    loop {
        let out = kube.kubectl(&command, None).await;
        let object: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if ready(&object) {
            return object;
        }
        let shown = if object["status"].is_null() {
            &object
        } else {
            &object["status"]
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "{args:?} never got there; last: {}\n{}",
            serde_json::to_string_pretty(shown).unwrap(),
            logs.iter()
                .map(|a| a.log())
                .collect::<Vec<_>>()
                .join("\n----\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the route `name` has a parent entry, and checks that entry's condition `kind` says `status` with
/// `reason`; returns the condition.
async fn parent_condition(
    kube: &Kube,
    name: &str,
    (kind, status, reason): (&str, &str, &str),
    logs: &[&Admitpilot],
) -> Value {
    let route = wait_status(
        kube,
        &format!("httproute/{name}"),
        |r| {
            r["status"]["parents"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
        },
        logs,
    )
    .await;
    let found = condition(&route["status"]["parents"][0]["conditions"], kind).clone();
    assert_eq!(
        (&found["status"], &found["reason"]),
        (&status.into(), &reason.into()),
        "{name}: {found}"
    );
    found
}

pub(crate) fn condition<'a>(conditions: &'a Value, kind: &str) -> &'a Value {
    conditions
        .as_array()
        .and_then(|list| list.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// Whether `object`'s status condition `kind` says `status` at `generation`.
fn says(object: &Value, kind: &str, status: &str, generation: i64) -> bool {
    let c = condition(&object["status"]["conditions"], kind);
    c["status"] == status && c["observedGeneration"] == generation
}

fn programmed(gateway: &Value, status: &str, generation: i64) -> bool {
    says(gateway, "Programmed", status, generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_says_what_the_gateways_serve_and_one_leader_writes_it() {
    let Some(envoy_bin) = envoy::envoy_binary() else {
        return;
    };
    let Some(kube) = Kube::shared("kube-status").await else {
        return;
    };
    kube.install_crds(Path::new(CRDS)).await;
    let ns = kube.namespace().to_string();
    let class = format!("admitpilot-{ns}");
    let port = envoy::free_port();
    kube.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&objects(&ns, &class, port, "*.example")),
    )
    .await;
    // Another controller's parent entry, already in the route's status.
    let other = r#"{"status":{"parents":[{"parentRef":{"name":"other-gw"},"controllerName":"example.com/other",
        "conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1}]}]}}"#;
    kube.kubectl_ok(
        &[
            "-n",
            &ns,
            "patch",
            "httproute",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            other,
        ],
        None,
    )
    .await;

    let mut first = Admitpilot::start_kube(kube.kubeconfig(), None, &serve_flags(&ns, &[])).await;
    // No gateway connected yet: Accepted, not Programmed.
    let gateway = wait_status(
        &kube,
        "gateway/gw",
        |g| programmed(g, "False", 1),
        &[&first],
    )
    .await;
    assert_eq!(
        condition(&gateway["status"]["conditions"], "Accepted")["status"],
        "True"
    );
    let pending = condition(&gateway["status"]["conditions"], "Programmed");
    assert_eq!(pending["reason"], "Pending");
    assert!(
        pending["message"].as_str().unwrap().contains("no gateway"),
        "{pending}"
    );

    // Envoy with the Gateway's name acknowledges the config: Programmed.
    let envoy = EnvoyProcess::start(&envoy_bin, &gateway_bootstrap(first.xds_port, &ns), 71).await;
    let gateway = wait_status(&kube, "gateway/gw", |g| programmed(g, "True", 1), &[&first]).await;
    let listener = &gateway["status"]["listeners"][0];
    assert_eq!(listener["attachedRoutes"], 1, "{listener}");
    let route = wait_status(
        &kube,
        "httproute/web",
        |r| {
            r["status"]["parents"]
                .as_array()
                .is_some_and(|p| p.len() == 2)
        },
        &[&first],
    )
    .await;
    let parents = route["status"]["parents"].as_array().unwrap();
    assert!(
        parents
            .iter()
            .any(|p| p["controllerName"] == "example.com/other"),
        "{parents:?}"
    );
    let ours = parents
        .iter()
        .find(|p| p["controllerName"] == "admitpilot.io/gateway-controller")
        .unwrap();
    assert_eq!(
        condition(&ours["conditions"], "Accepted")["status"],
        "True",
        "{ours}"
    );
    assert_eq!(
        condition(&ours["conditions"], "ResolvedRefs")["status"],
        "True",
        "{ours}"
    );
    envoy.assert_nothing_rejected("status written").await;

    // A second replica, with a gateway of its own; the first replica's gateway goes away. The leader (the first
    // replica) has no gateway of `gw` left: the next generation is Programmed from the second replica's report.
    let second = Admitpilot::start_kube(kube.kubeconfig(), None, &serve_flags(&ns, &[])).await;
    let second_envoy =
        EnvoyProcess::start(&envoy_bin, &gateway_bootstrap(second.xds_port, &ns), 72).await;
    drop(envoy);
    kube.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&objects(&ns, &class, port, "*.example.org")),
    )
    .await;
    let before = wait_status(
        &kube,
        "gateway/gw",
        |g| programmed(g, "True", 2),
        &[&first, &second],
    )
    .await;
    let accepted_since =
        condition(&before["status"]["conditions"], "Accepted")["lastTransitionTime"].clone();

    // The first replica stops (SIGTERM releases the Lease); the second takes over and writes the next generation.
    first.terminate();
    kube.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&objects(&ns, &class, port, "*.example.net")),
    )
    .await;
    let gateway = wait_status(
        &kube,
        "gateway/gw",
        |g| programmed(g, "True", 3),
        &[&second],
    )
    .await;
    assert_eq!(
        condition(&gateway["status"]["conditions"], "Accepted")["observedGeneration"],
        3
    );
    // The new leader read what was on the server: Accepted stayed True, so its transition time is kept.
    assert_eq!(
        condition(&gateway["status"]["conditions"], "Accepted")["lastTransitionTime"],
        accepted_since
    );
    second_envoy
        .assert_nothing_rejected("after the failover")
        .await;
    // A route deleted and created again under its name at once is another object: it gets its status written, though
    // the status is the same as the deleted one's (the writer remembers what it wrote per object, by UID).
    let route = objects(&ns, &class, port, "*.example.net");
    let route = &route[route.rfind("---").unwrap()..];
    kube.kubectl_ok(&["-n", &ns, "delete", "httproute", "web"], None)
        .await;
    kube.kubectl_ok(&["apply", "-f", "-"], Some(route)).await;
    wait_status(
        &kube,
        "httproute/web",
        |r| {
            r["status"]["parents"]
                .as_array()
                .is_some_and(|parents| !parents.is_empty())
        },
        &[&second],
    )
    .await;
    // The stopped replica withdrew its report.
    let reports = kube
        .kubectl_ok(
            &[
                "-n",
                &ns,
                "get",
                "configmaps",
                "-l",
                "admitpilot.io/status-report",
                "-o",
                "name",
            ],
            None,
        )
        .await;
    assert_eq!(reports.lines().count(), 1, "{reports}");
    let lease = kube.lease_holder(&ns, "admitpilot-leader").await;
    assert!(!lease.is_empty(), "the Lease has a holder");
    kube.kubectl_ok(&["delete", "gatewayclass", &class], None)
        .await;
}

/// What the status says when things go wrong, on the real API server: a route to a missing Service is
/// ResolvedRefs=False/BackendNotFound, and admitpilot's parent entry goes when the route moves elsewhere; a config Envoy rejects (served with the push guard off, as only a test does)
/// turns the Gateway Programmed=False with Envoy's message, and True again once it is gone; the Gateway's address is
/// its Service's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_missing_backends_and_what_envoy_rejects() {
    let Some(envoy_bin) = envoy::envoy_binary() else {
        return;
    };
    let Some(kube) = Kube::shared("kube-status-fail").await else {
        return;
    };
    kube.install_crds(Path::new(CRDS)).await;
    kube.install_crds(Path::new(ISTIO_CRDS)).await;
    let ns = kube.namespace().to_string();
    let class = format!("admitpilot-{ns}");
    let port = envoy::free_port();
    let proxies = format!(
        "apiVersion: v1
kind: Service
metadata: {{name: gw-proxies, namespace: {ns}}}
spec: {{selector: {{gateway.networking.k8s.io/gateway-name: gw}}, externalIPs: [203.0.113.7], ports: [{{port: 80}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: lost, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: missing, port: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: tls-backend, namespace: {ns}}}
spec: {{ports: [{{port: 443}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: unmet-tls, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [tls.example]
  rules: [{{backendRefs: [{{name: tls-backend, port: 443}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: no-ca, namespace: {ns}}}
spec:
  targetRefs: [{{group: '', kind: Service, name: tls-backend}}]
  validation: {{hostname: tls-backend.example, caCertificateRefs: [{{group: '', kind: ConfigMap, name: no-such-ca}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: refused, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{matches: [{{path: {{type: RegularExpression, value: '/(?=x)'}}}}]}}]
"
    );
    kube.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&objects(&ns, &class, port, "*.example")),
    )
    .await;
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&proxies)).await;
    let admitpilot = Admitpilot::start_kube(
        kube.kubeconfig(),
        None,
        &serve_flags(&ns, &["--no-push-guard"]),
    )
    .await;
    let envoy =
        EnvoyProcess::start(&envoy_bin, &gateway_bootstrap(admitpilot.xds_port, &ns), 73).await;
    let gateway = wait_status(
        &kube,
        "gateway/gw",
        |g| programmed(g, "True", 1),
        &[&admitpilot],
    )
    .await;
    assert_eq!(
        gateway["status"]["addresses"],
        serde_json::json!([{"type": "IPAddress", "value": "203.0.113.7"}])
    );
    // A LoadBalancer Service for the gateway: once its load balancer has an address (written here as a cloud
    // controller would, on the status subresource), the Gateway reports it too.
    let balancer = format!(
        "apiVersion: v1
kind: Service
metadata: {{name: gw-public, namespace: {ns}}}
spec: {{type: LoadBalancer, selector: {{gateway.networking.k8s.io/gateway-name: gw}}, ports: [{{port: 80}}]}}
"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&balancer))
        .await;
    kube.kubectl_ok(
        &[
            "-n",
            &ns,
            "patch",
            "service",
            "gw-public",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.4"}]}}}"#,
        ],
        None,
    )
    .await;
    wait_status(
        &kube,
        "gateway/gw",
        |g| {
            g["status"]["addresses"]
                == serde_json::json!([{"type": "IPAddress", "value": "203.0.113.7"},
                    {"type": "IPAddress", "value": "198.51.100.4"}])
        },
        &[&admitpilot],
    )
    .await;
    // The installed CRDs (`crds/gateway-api`, bundle v1.6.3) are a version admitpilot supports.
    let gateway_class = wait_status(
        &kube,
        &format!("gatewayclass/{class}"),
        |c| condition(&c["status"]["conditions"], "SupportedVersion")["status"] == "True",
        &[&admitpilot],
    )
    .await;
    let supported = condition(&gateway_class["status"]["conditions"], "SupportedVersion");
    assert_eq!(supported["reason"], "SupportedVersion", "{supported}");
    let refs = ("ResolvedRefs", "False", "BackendNotFound");
    parent_condition(&kube, "lost", refs, &[&admitpilot]).await;

    // A BackendTLSPolicy whose CA ConfigMap does not exist: its own status says so per Gateway (ancestor), the
    // route to its Service is not ResolvedRefs, and the Gateway's own references (no backend client certificate,
    // listeners resolved) are.
    let policy = wait_status(
        &kube,
        "backendtlspolicy/no-ca",
        |p| {
            p["status"]["ancestors"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        },
        &[&admitpilot],
    )
    .await;
    let ancestor = &policy["status"]["ancestors"][0];
    assert_eq!(ancestor["ancestorRef"]["name"], "gw", "{ancestor}");
    for (kind, reason) in [
        ("Accepted", "NoValidCACertificate"),
        ("ResolvedRefs", "InvalidCACertificateRef"),
    ] {
        let c = condition(&ancestor["conditions"], kind);
        assert_eq!(
            (&c["status"], &c["reason"]),
            (&"False".into(), &reason.into()),
            "{c}"
        );
    }
    let refs = ("ResolvedRefs", "False", "NoValidCACertificate");
    parent_condition(&kube, "unmet-tls", refs, &[&admitpilot]).await;
    let gateway_refs = condition(&gateway["status"]["conditions"], "ResolvedRefs");
    assert_eq!(
        (&gateway_refs["status"], &gateway_refs["reason"]),
        (&"True".into(), &"ResolvedRefs".into()),
        "{gateway_refs}"
    );

    // A route the API server stores (no webhook here) but admitpilot's validation refuses (look-ahead is not RE2):
    // its status says why, naming the field.
    let not_accepted = ("Accepted", "False", "UnsupportedValue");
    let accepted = parent_condition(&kube, "refused", not_accepted, &[&admitpilot]).await;
    let why = accepted["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("spec.rules[0].matches[0].path.value") && why.contains("serve nothing of it"),
        "{why}"
    );

    // The route moves to a Gateway admitpilot does not serve: admitpilot's parent entry goes.
    let moved = format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: lost, namespace: {ns}}}
spec:
  parentRefs: [{{name: elsewhere}}]
  rules: [{{backendRefs: [{{name: missing, port: 80}}]}}]
"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&moved)).await;
    wait_status(
        &kube,
        "httproute/lost",
        |r| r["status"]["parents"].as_array().is_none_or(Vec::is_empty),
        &[&admitpilot],
    )
    .await;

    // A second listener on the Gateway's address: Envoy rejects the listener update.
    let duplicate = format!(
        r#"apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: duplicate-listener, namespace: {ns}}}
spec:
  workloadSelector: {{labels: {{gateway.networking.k8s.io/gateway-name: gw}}}}
  configPatches:
  - applyTo: LISTENER
    match: {{context: GATEWAY}}
    patch:
      operation: ADD
      value:
        name: extra
        address: {{socket_address: {{address: 0.0.0.0, port_value: {port}}}}}
        filter_chains:
        - filters:
          - name: envoy.filters.network.tcp_proxy
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: BlackHoleCluster}}
"#
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&duplicate))
        .await;
    let gateway = wait_status(
        &kube,
        "gateway/gw",
        |g| {
            programmed(g, "False", 1)
                && condition(&g["status"]["conditions"], "Programmed")["reason"] == "Invalid"
        },
        &[&admitpilot],
    )
    .await;
    let rejected = condition(&gateway["status"]["conditions"], "Programmed");
    assert!(
        rejected["message"]
            .as_str()
            .unwrap()
            .contains("rejected the config"),
        "{rejected}"
    );
    kube.kubectl_ok(
        &["-n", &ns, "delete", "envoyfilter", "duplicate-listener"],
        None,
    )
    .await;
    wait_status(
        &kube,
        "gateway/gw",
        |g| programmed(g, "True", 1),
        &[&admitpilot],
    )
    .await;
    drop(envoy);
    kube.kubectl_ok(&["delete", "gatewayclass", &class], None)
        .await;
}

/// Whether an Istio object's `Reconciled` says `status` at `generation`.
fn reconciled(object: &Value, status: &str, generation: i64) -> bool {
    says(object, "Reconciled", status, generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istio_status_says_which_objects_the_gateways_serve() {
    let Some(envoy_bin) = envoy::envoy_binary() else {
        return;
    };
    let Some(kube) = Kube::shared("kube-status-istio").await else {
        return;
    };
    kube.install_crds(Path::new(ISTIO_CRDS)).await;
    let ns = kube.namespace().to_string();
    let port = envoy::free_port();
    let config = |prefix: &str| {
        format!(
            "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: {ns}}}
spec:
  selector: {{istio: edge}}
  servers: [{{port: {{number: {port}, name: http, protocol: HTTP}}, hosts: [\"*\"]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: {ns}}}
spec:
  hosts: [\"*\"]
  gateways: [edge]
  http: [{{match: [{{uri: {{prefix: {prefix}}}}}], route: [{{destination: {{host: web}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: orphan, namespace: {ns}}}
spec:
  hosts: [orphan.example]
  gateways: [missing]
  http: [{{route: [{{destination: {{host: web}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: refused, namespace: {ns}}}
spec:
  hosts: [refused.example]
  gateways: [edge]
  http: [{{match: [{{uri: {{regex: '(?=x)'}}}}], route: [{{destination: {{host: web}}}}]}}]
"
        )
    };
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&config("/web")))
        .await;
    // Istio status only: Gateway API status off.
    let admitpilot = Admitpilot::start_kube(
        kube.kubeconfig(),
        None,
        &serve_flags(&ns, &["--istio-status", "--no-status"]),
    )
    .await;
    let gateway = wait_status(
        &kube,
        "gateways.networking.istio.io/edge",
        |g| reconciled(g, "False", 1),
        &[&admitpilot],
    )
    .await;
    let pending = condition(&gateway["status"]["conditions"], "Reconciled");
    assert!(
        pending["message"]
            .as_str()
            .unwrap()
            .contains("no connected gateway selects it"),
        "{pending}"
    );

    let bootstrap = envoy::bootstrap(
        AdsApi::Delta,
        admitpilot.xds_port,
        "router~127.0.0.1~edge.x~x.svc.cluster.local",
    )
    .replace("NAMESPACE: default", &format!("NAMESPACE: {ns}"))
    .replace("app: e2e", "istio: edge");
    let envoy = EnvoyProcess::start(&envoy_bin, &bootstrap, 74).await;
    for served in [
        "gateways.networking.istio.io/edge",
        "virtualservices.networking.istio.io/web",
    ] {
        wait_status(&kube, served, |o| reconciled(o, "True", 1), &[&admitpilot]).await;
    }
    let orphan = wait_status(
        &kube,
        "virtualservices.networking.istio.io/orphan",
        |o| reconciled(o, "False", 1) && o["status"]["validationMessages"].is_array(),
        &[&admitpilot],
    )
    .await;
    let message = &orphan["status"]["validationMessages"][0];
    assert_eq!(
        (&message["type"]["code"], &message["level"]),
        (&"IST0101".into(), &"ERROR".into()),
        "{orphan}"
    );
    assert_eq!(orphan["status"]["observedGeneration"], 1);
    // One the API server stored (no webhook here) but admitpilot's validation refuses (look-ahead is not RE2): not
    // served, and its status says why as istiod's analysis would, with IST0106.
    let refused = wait_status(
        &kube,
        "virtualservices.networking.istio.io/refused",
        |o| reconciled(o, "False", 1) && o["status"]["validationMessages"].is_array(),
        &[&admitpilot],
    )
    .await;
    let message = &refused["status"]["validationMessages"][0];
    assert_eq!(message["type"]["code"], "IST0106", "{refused}");
    assert!(
        message["message"]
            .as_str()
            .unwrap_or_default()
            .contains("spec.http[0].match[0].uri: invalid regex"),
        "{refused}"
    );
    let reason = &condition(&refused["status"]["conditions"], "Reconciled")["reason"];
    assert_eq!(reason, "Invalid", "{refused}");

    // A new generation is Reconciled once the gateway acknowledged it.
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&config("/v2")))
        .await;
    wait_status(
        &kube,
        "virtualservices.networking.istio.io/web",
        |o| reconciled(o, "True", 2),
        &[&admitpilot],
    )
    .await;
    envoy.assert_nothing_rejected("istio status").await;
    // Gateway API status was not asked for: no report says otherwise, and nothing else was written.
    let web = wait_status(
        &kube,
        "virtualservices.networking.istio.io/web",
        |o| o["status"]["validationMessages"] == serde_json::json!([]),
        &[&admitpilot],
    )
    .await;
    assert_eq!(web["status"]["observedGeneration"], 2);
}
