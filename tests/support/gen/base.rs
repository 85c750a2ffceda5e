//! The config every generated batch joins: takes free ports and a test certificate, yields the YAML of one Istio
//! Gateway `edge/gw` with every kind of server (HTTP, HTTPS SIMPLE, HTTPS MUTUAL, TCP, TLS PASSTHROUGH), the
//! VirtualService routing each of them, the Services behind them, the TLS Secret, and the mesh config's external
//! authorization providers (gRPC, HTTP, and one naming a Service that does not exist) for CUSTOM policies.
//! The gateway is the proxy group `edge {istio=ingressgateway, gateway.networking.k8s.io/gateway-name=api-gw}`,
//! outside the root namespace, so that local, root-namespace and other-namespace policies differ.

use std::sync::Arc;

use admitpilot::model::{ConfigObject, Snapshot};
use admitpilot::translate::Proxy;

/// The gateway's namespace.
pub const NAMESPACE: &str = "edge";
/// The Gateway API Gateway the gateway's pods are labelled with (`targetRefs` name it).
pub const GATEWAY_API_NAME: &str = "api-gw";
/// The mesh config's external authorization providers.
pub const PROVIDERS: [&str; 3] = ["ext-authz-grpc", "ext-authz-http", "ext-authz-missing"];
/// The Services of the base config, as VirtualService and DestinationRule hosts.
pub const SERVICE_HOSTS: [&str; 2] = ["web.edge.svc.cluster.local", "authz.edge.svc.cluster.local"];

/// The base config, the ports its servers (and mutated Gateways) listen on, and certificate files for config that
/// names files (as a gateway pod has them mounted).
pub struct Base {
    /// Multi-document YAML.
    pub yaml: String,
    /// The server ports: HTTP, HTTPS, HTTPS MUTUAL, TCP, TLS PASSTHROUGH, then spares for mutated Gateways.
    pub ports: Vec<u16>,
    /// A certificate (also a CA) file.
    pub cert_file: String,
    /// Its key file.
    pub key_file: String,
    _files: tempfile::TempDir,
}

/// The proxy group of the gateway.
pub fn proxy() -> Proxy {
    Proxy {
        namespace: NAMESPACE.into(),
        labels: [
            ("istio".to_string(), "ingressgateway".to_string()),
            (
                admitpilot::translate::types::GATEWAY_NAME_LABEL.to_string(),
                GATEWAY_API_NAME.to_string(),
            ),
        ]
        .into(),
        ..Default::default()
    }
}

/// The node metadata of an Envoy in [`proxy`]'s group, for the bootstrap.
pub fn node_metadata() -> String {
    format!(
        "{{ NAMESPACE: {NAMESPACE}, LABELS: {{ istio: ingressgateway, \"{}\": {GATEWAY_API_NAME} }} }}",
        admitpilot::translate::types::GATEWAY_NAME_LABEL
    )
}

/// Builds the base config on `ports` (at least 5).
pub fn base(ports: Vec<u16>) -> Base {
    let certified = rcgen::generate_simple_self_signed(vec![
        "example.com".to_string(),
        "*.example.com".to_string(),
    ])
    .unwrap();
    let indent = |pem: String| {
        pem.lines()
            .map(|line| format!("    {line}\n"))
            .collect::<String>()
    };
    let files = tempfile::tempdir().unwrap();
    let cert_file = files.path().join("cert.pem");
    let key_file = files.path().join("key.pem");
    std::fs::write(&cert_file, certified.cert.pem()).unwrap();
    std::fs::write(&key_file, certified.signing_key.serialize_pem()).unwrap();
    let cert = indent(certified.cert.pem());
    let key = indent(certified.signing_key.serialize_pem());
    let [http, https, mtls, tcp, tls] = [ports[0], ports[1], ports[2], ports[3], ports[4]];
    let yaml = format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: gw, namespace: edge}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {http}, name: http, protocol: HTTP}}
    hosts: ["*"]
  - port: {{number: {https}, name: https, protocol: HTTPS}}
    hosts: ["*.example.com"]
    tls: {{mode: SIMPLE, credentialName: cert}}
  - port: {{number: {mtls}, name: https-mtls, protocol: HTTPS}}
    hosts: ["mtls.example.com"]
    tls: {{mode: MUTUAL, credentialName: cert}}
  - port: {{number: {tcp}, name: tcp, protocol: TCP}}
    hosts: ["*"]
  - port: {{number: {tls}, name: tls, protocol: TLS}}
    hosts: ["pass.example.com"]
    tls: {{mode: PASSTHROUGH}}
---
apiVersion: v1
kind: Secret
metadata: {{name: cert, namespace: edge}}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{cert}  tls.key: |
{key}  ca.crt: |
{cert}---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: edge}}
spec:
  ports: [{{name: http, port: 80}}, {{name: https, port: 443}}, {{name: tcp, port: 5000}}]
---
apiVersion: v1
kind: Service
metadata: {{name: authz, namespace: edge}}
spec:
  ports: [{{name: grpc, port: 9000}}, {{name: http, port: 8000}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: edge}}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - route: [{{destination: {{host: web.edge.svc.cluster.local, port: {{number: 80}}}}}}]
  tcp:
  - match: [{{port: {tcp}}}]
    route: [{{destination: {{host: web.edge.svc.cluster.local, port: {{number: 5000}}}}}}]
  tls:
  - match: [{{sniHosts: [pass.example.com], port: {tls}}}]
    route: [{{destination: {{host: web.edge.svc.cluster.local, port: {{number: 443}}}}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: istio, namespace: istio-system}}
data:
  mesh: |
    extensionProviders:
    - name: ext-authz-grpc
      envoyExtAuthzGrpc: {{service: authz.edge.svc.cluster.local, port: 9000, timeout: 2s}}
    - name: ext-authz-http
      envoyExtAuthzHttp:
        service: authz.edge.svc.cluster.local
        port: 8000
        includeRequestHeadersInCheck: [x-user]
        headersToUpstreamOnAllow: [x-authz]
    - name: ext-authz-missing
      envoyExtAuthzGrpc: {{service: missing.edge.svc.cluster.local, port: 9000}}
"#
    );
    Base {
        yaml,
        ports,
        cert_file: cert_file.display().to_string(),
        key_file: key_file.display().to_string(),
        _files: files,
    }
}

impl Base {
    /// The base config as a snapshot (through the sources' admission gate).
    pub fn snapshot(&self) -> Snapshot {
        crate::cases::snapshot_from_yaml(&self.yaml, "generator base")
    }
}

/// An object that differs for each load `n` (a Service `edge/marker` on port 1000 + `n` mod 60000, hence a new
/// cluster), so that every load changes the gateway's config and is acknowledged anew.
pub fn marker(n: u64) -> Arc<ConfigObject> {
    let yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: marker, namespace: edge}}\nspec:\n  ports: [{{name: http, port: {}}}]\n",
        1000 + n % 60_000
    );
    let snapshot = crate::cases::snapshot_from_yaml(&yaml, "marker");
    let object = snapshot
        .objects
        .values()
        .next()
        .expect("the marker Service");
    Arc::clone(object)
}
