//! MCP-over-xDS served by the real `admitpilot serve --config-dir` binary, read by an independent client: a Python
//! grpcio program (`tests/support/mcp_client.py`) that generates its own message classes from `proto/` with
//! protoc, subscribes to every collection over SotW and over Delta, ACKs, and decodes each
//! `istio.mcp.v1alpha1.Resource` and its body with `protobuf`. Every body, written as proto JSON, must equal the
//! `spec` of the YAML file it came from, with the object's name, labels and annotations; an invalid file is never
//! served. Skips with a message when python with grpcio-tools is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use std::path::Path;
use std::process::Command;

use pipeline::*;
use serde_json::Value;

/// The config A serves: one object of most kinds, with values proto JSON writes back the same way.
const FILES: &[(&str, &str)] = &[
    (
        "gateway.yaml",
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: default}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*.example.com\"]\n",
    ),
    (
        "vs.yaml",
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: web\n  namespace: default\n  labels: {app: web}\n  annotations: {note: kept}\nspec:\n  hosts: [web.example.com]\n  gateways: [gw]\n  http:\n  - name: primary\n    match:\n    - uri: {prefix: /api}\n      headers:\n        x-user: {exact: a}\n    route:\n    - destination: {host: web.default.svc.cluster.local, subset: v1, port: {number: 8080}}\n      weight: 90\n    - destination: {host: web.default.svc.cluster.local, subset: v2, port: {number: 8080}}\n      weight: 10\n    timeout: 5s\n    retries: {attempts: 3, perTryTimeout: 2s, retryOn: 5xx}\n",
    ),
    (
        "dr.yaml",
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: web, namespace: default}\nspec:\n  host: web.default.svc.cluster.local\n  trafficPolicy:\n    loadBalancer: {simple: LEAST_REQUEST}\n    connectionPool:\n      tcp: {maxConnections: 100}\n    outlierDetection: {consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}\n  subsets:\n  - name: v1\n    labels: {version: v1}\n  - name: v2\n    labels: {version: v2}\n",
    ),
    (
        "se.yaml",
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ext, namespace: default}\nspec:\n  hosts: [api.external.com]\n  ports:\n  - {number: 443, name: https, protocol: TLS}\n  location: MESH_INTERNAL\n  resolution: DNS\n",
    ),
    (
        "authz.yaml",
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny-admin, namespace: default}\nspec:\n  selector:\n    matchLabels: {app: web}\n  action: DENY\n  rules:\n  - to:\n    - operation: {paths: [/admin*], methods: [POST]}\n",
    ),
    (
        "jwt.yaml",
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: jwt, namespace: default}\nspec:\n  selector:\n    matchLabels: {app: web}\n  jwtRules:\n  - issuer: https://issuer.example.com\n    jwksUri: https://issuer.example.com/jwks\n",
    ),
    (
        "peer.yaml",
        "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: strict, namespace: default}\nspec:\n  mtls: {mode: STRICT}\n",
    ),
    (
        "filter.yaml",
        "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: server-name, namespace: default}\nspec:\n  configPatches:\n  - applyTo: NETWORK_FILTER\n    match:\n      context: GATEWAY\n      listener:\n        filterChain:\n          filter: {name: envoy.filters.network.http_connection_manager}\n    patch:\n      operation: MERGE\n      value:\n        typed_config:\n          \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n          server_name: my-gateway\n",
    ),
    (
        "telemetry.yaml",
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: logs, namespace: default}\nspec:\n  accessLogging:\n  - providers:\n    - {name: envoy}\n",
    ),
    (
        "broken.yaml",
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: broken, namespace: default}\nspec:\n  hosts: [web.example.com]\n  http:\n  - route:\n    - destination: {host: web}\n    retries: {attempts: -1}\n",
    ),
];

/// Every collection admitpilot serves, by its MCP name.
fn collections() -> Vec<&'static str> {
    admitpilot::mcp::SERVED
        .iter()
        .filter_map(|kind| admitpilot::mcp::collection(*kind))
        .collect()
}

/// Runs the client against `server` with `api`; returns the resources it decoded, by collection.
fn subscribe(python: &Path, server: &str, api: &str) -> serde_json::Map<String, Value> {
    let out = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(python)
        .arg(root.join("tests/support/mcp_client.py"))
        .args(["--server", server, "--api", api])
        .arg("--proto-root")
        .arg(root.join("proto/admitpilot"))
        .arg("--out")
        .arg(out.path())
        .args(["--collections", &collections().join(",")])
        .output()
        .expect("run the python MCP client");
    assert!(
        output.status.success(),
        "python MCP client failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).expect("client output is JSON");
    result["collections"].as_object().unwrap().clone()
}

/// Checks that every valid file came back as its collection's resource, equal to its source, and that the invalid
/// one did not.
fn check(served: &serde_json::Map<String, Value>, api: &str) {
    for collection in collections() {
        assert!(
            served.contains_key(collection),
            "{api}: collection {collection} never answered"
        );
    }
    let mut seen = 0;
    for (file, text) in FILES {
        let doc: Value = serde_yaml_ng::from_str(text).unwrap();
        let kind = doc["kind"].as_str().unwrap();
        let name = format!(
            "{}/{}",
            doc["metadata"]["namespace"].as_str().unwrap(),
            doc["metadata"]["name"].as_str().unwrap()
        );
        let found: Vec<&Value> = served
            .iter()
            .filter(|(collection, _)| collection.ends_with(&format!("/{kind}")))
            .flat_map(|(_, resources)| resources.as_array().unwrap())
            .filter(|resource| resource["name"] == name.as_str())
            .collect();
        if *file == "broken.yaml" {
            assert!(
                found.is_empty(),
                "{api}: the invalid {name} was served: {found:?}"
            );
            continue;
        }
        assert_eq!(found.len(), 1, "{api}: {kind} {name} in {served:?}");
        let resource = found[0];
        assert_eq!(
            resource["spec"], doc["spec"],
            "{api}: body of {kind} {name} ({file})"
        );
        let labels = doc["metadata"]
            .get("labels")
            .cloned()
            .unwrap_or(serde_json::json!({}));
        let annotations = doc["metadata"]
            .get("annotations")
            .cloned()
            .unwrap_or(serde_json::json!({}));
        assert_eq!(resource["labels"], labels, "{api}: labels of {name}");
        assert_eq!(
            resource["annotations"], annotations,
            "{api}: annotations of {name}"
        );
        assert!(
            resource["body_type"]
                .as_str()
                .is_some_and(|t| t.starts_with("type.googleapis.com/istio.")),
            "{api}: body type of {name}: {}",
            resource["body_type"]
        );
        assert!(resource["version"].as_str().is_some_and(|v| !v.is_empty()));
        seen += 1;
    }
    assert_eq!(seen, FILES.len() - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_python_client_decodes_every_served_body_as_its_source() {
    let Some(python) =
        envoy::python_with("grpc, grpc_tools.protoc, envoy.service.discovery.v3.ads_pb2_grpc")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in FILES {
        write(dir.path(), file, text);
    }
    let admitpilot = Admitpilot::start(dir.path()).await;
    let server = format!("127.0.0.1:{}", admitpilot.xds_port);
    for api in ["sotw", "delta"] {
        let python = python.clone();
        let server = server.clone();
        let served = tokio::task::spawn_blocking(move || subscribe(&python, &server, api))
            .await
            .unwrap();
        check(&served, api);
    }
}
