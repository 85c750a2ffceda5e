//! `admitpilot render --status` on the bundled Gateway API example: the status admitpilot gives each object of its
//! GatewayClass, without a cluster (issue 31's folder mode).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

fn render_status(dir: &str) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_admitpilot"))
        .args([
            "render",
            "--config-dir",
            dir,
            "--status",
            "--output",
            "json",
        ])
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

/// A route in the folder that validation refuses is not served, and its status says so (the same code path as
/// `serve --kube` for a route the API server stored without the webhook).
#[test]
fn a_refused_route_says_why_in_its_status() {
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
",
    )
    .unwrap();
    let objects = render_status(dir.path().to_str().unwrap());
    let route = objects
        .iter()
        .find(|o| o["kind"] == "HTTPRoute")
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
