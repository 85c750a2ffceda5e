//! `admitpilot render --status` on the bundled Gateway API example: the status admitpilot gives each object of its
//! GatewayClass, without a cluster (issue 31's folder mode).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

fn render_status(dir: &str) -> Vec<Value> {
    render_status_with(dir, &[])
}

fn render_status_with(dir: &str, extra: &[&str]) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_admitpilot"))
        .args([
            "render",
            "--config-dir",
            dir,
            "--status",
            "--output",
            "json",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {status}"))
}

#[test]
fn the_example_is_accepted_and_pending_without_gateways() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gateway-api");
    let objects = render_status(dir);
    let of = |kind: &'static str| objects.iter().filter(move |o| o["kind"] == kind);
    let class = of("GatewayClass").next().expect("the GatewayClass");
    assert_eq!(condition(&class["status"], "Accepted")["status"], "True");
    let gateway = of("Gateway").next().expect("the Gateway");
    assert_eq!(condition(&gateway["status"], "Accepted")["status"], "True");
    let programmed = condition(&gateway["status"], "Programmed");
    assert_eq!(
        (&programmed["status"], &programmed["reason"]),
        (&"False".into(), &"Pending".into())
    );
    let attached: u64 = gateway["status"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["attachedRoutes"].as_u64().unwrap())
        .sum();
    let routes: Vec<&Value> = of("HTTPRoute").collect();
    assert!(!routes.is_empty() && attached > 0);
    for route in routes {
        for parent in route["status"]["parents"].as_array().unwrap() {
            assert_eq!(parent["controllerName"], "admitpilot.io/gateway-controller");
            let parent_ref = parent["parentRef"].as_object().unwrap();
            assert_eq!(parent_ref["name"], "public");
            assert!(parent_ref.values().all(|v| !v.is_null()), "{parent_ref:?}");
            assert_eq!(condition(parent, "Accepted")["status"], "True", "{route}");
            // The example's `shop` route sends a share to a Service that is not deployed (answered 500).
            let resolved = condition(parent, "ResolvedRefs");
            if route["name"] == "shop" {
                assert_eq!(
                    (&resolved["status"], &resolved["reason"]),
                    (&"False".into(), &"BackendNotFound".into())
                );
            } else {
                assert_eq!(resolved["status"], "True", "{route}");
            }
        }
    }
}

/// A route, a BackendTLSPolicy and a VirtualService in the folder that validation refuses are not served, and
/// their status says so (the same code path as `serve --kube` for objects the API server stored without the
/// webhook): the route's parent is not accepted (`UnsupportedValue`), the policy's ancestor not accepted
/// (`Invalid`), the VirtualService not reconciled, with istiod's IST0106.
#[test]
fn refused_objects_say_why_in_their_status() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ap}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: ap
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: refused, namespace: default, generation: 2}
spec:
  parentRefs: [{name: gw}]
  rules: [{matches: [{path: {type: RegularExpression, value: '/(?=x)'}}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-secure, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
---
apiVersion: v1
kind: Service
metadata: {name: secure, namespace: default}
spec: {ports: [{port: 443}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: bad-host, namespace: default, generation: 3}
spec:
  targetRefs: [{group: '', kind: Service, name: secure}]
  validation: {hostname: Not_A_Host, wellKnownCACertificates: System}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bad-regex, namespace: default, generation: 4}
spec:
  hosts: [a.example]
  http: [{match: [{uri: {regex: '(?=x)'}}], route: [{destination: {host: secure}}]}]
",
    )
    .unwrap();
    let objects = render_status_with(dir.path().to_str().unwrap(), &["--istio-status"]);
    let policy = objects
        .iter()
        .find(|o| o["kind"] == "BackendTLSPolicy")
        .expect("the refused policy has a status");
    let ancestor = &policy["status"]["ancestors"][0];
    assert_eq!(ancestor["ancestorRef"]["name"], "gw", "{policy}");
    let accepted = condition(ancestor, "Accepted");
    assert_eq!(
        (
            &accepted["status"],
            &accepted["reason"],
            &accepted["observedGeneration"]
        ),
        (&"False".into(), &"Invalid".into(), &3.into())
    );
    assert!(accepted["message"]
        .as_str()
        .unwrap()
        .contains("spec.validation.hostname"));
    let service = objects
        .iter()
        .find(|o| o["kind"] == "VirtualService")
        .expect("the refused VirtualService has a status");
    let reconciled = condition(&service["status"], "Reconciled");
    assert_eq!(
        (&reconciled["status"], &reconciled["reason"]),
        (&"False".into(), &"Invalid".into()),
        "{service}"
    );
    let finding = &service["status"]["validationMessages"][0];
    assert_eq!(finding["type"]["code"], "IST0106", "{service}");
    let objects = render_status(dir.path().to_str().unwrap());
    let route = objects
        .iter()
        .find(|o| o["kind"] == "HTTPRoute" && o["name"] == "refused")
        .expect("the refused route has a status");
    let parent = &route["status"]["parents"][0];
    let accepted = condition(parent, "Accepted");
    assert_eq!(
        (
            &accepted["status"],
            &accepted["reason"],
            &accepted["observedGeneration"]
        ),
        (&"False".into(), &"UnsupportedValue".into(), &2.into())
    );
    assert!(accepted["message"]
        .as_str()
        .unwrap()
        .contains("spec.rules[0].matches[0].path.value: invalid regex"));
}
