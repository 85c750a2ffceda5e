//! Gateway provisioning on a real cluster (`scripts/kube-up`: kube-apiserver and kube-controller-manager): `kubectl
//! apply` of a GatewayClass, a Gateway with an HTTPS listener whose certificate is a Secret of its namespace, and an
//! HTTPRoute; admitpilot (`--provision-gateways`, xDS over TLS with tokens, as the chart ships it) creates the
//! gateway's ServiceAccount, Role (`get` on that one Secret, by name), ConfigMap, Deployment and Service; the controller-manager makes the ReplicaSet
//! and the Pod; the test plays the kubelet ([`support::kubelet`]): it runs the Pod's Envoy container as rendered,
//! with its ConfigMap bootstrap, a projected token minted by TokenRequest and the CA, and reports it Ready. HTTPS
//! traffic then flows through it with the Gateway's certificate; the Gateway is Programmed; deleting the Gateway
//! deletes everything (garbage collection).
//!
//! Skips with a message when no API server or no Envoy is available.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use support::envoy::{self, Backend};
use support::kube_server::Kube;
use support::kubelet;
use support::pipeline::Admitpilot;
use support::tls_backends::Ca;
use support::xds_auth::Pki;

use super::kube_status::{condition, wait_get, wait_status};

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/gateway-api");
const HOST: &str = "shop.example";

fn config(
    ns: &str,
    (class, controller): (&str, &str),
    port: u16,
    (cert, key): (&str, &str),
    (backend_ip, backend_port): (std::net::IpAddr, u16),
) -> String {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec: {{controllerName: {controller}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: shop-cert, namespace: {ns}}}
type: kubernetes.io/tls
data: {{tls.crt: {}, tls.key: {}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  infrastructure: {{labels: {{team: shop}}}}
  listeners:
  - {{name: https, port: {port}, protocol: HTTPS, hostname: {HOST}, tls: {{certificateRefs: [{{name: shop-cert}}]}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, namespace: {ns}, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: {backend_port}, protocol: TCP}}]
endpoints: [{{addresses: [\"{backend_ip}\"], conditions: {{ready: true}}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
",
        b64(cert),
        b64(key),
    )
}

/// admitpilot provisioning the Gateways of a class of this test's namespace, as the chart runs it (xDS over TLS with
/// tokens): the namespace, the class and its controller name (this test's own: no other test's Gateway is
/// provisioned here), and admitpilot with the PKI of its xDS port (whose CA it reads again at every pass).
async fn start_provisioning(kube: &Kube) -> (String, (String, String), (Admitpilot, Pki)) {
    kube.install_crds(Path::new(CRDS)).await;
    let ns = kube.namespace().to_string();
    let class = format!("{ns}-class");
    let controller = format!("admitpilot.io/{ns}");
    let pki = Pki::new();
    let xds_port = envoy::free_port();
    let flags: Vec<String> = [
        "--xds-auth=token".to_string(),
        format!("--xds-tls-cert={}", pki.files.cert.display()),
        format!("--xds-tls-key={}", pki.files.key.display()),
        format!("--lease-namespace={ns}"),
        format!("--watch-namespaces={ns}"),
        format!("--higress-namespace={ns}"),
        format!("--istio-namespace={ns}"),
        format!("--gateway-controller-name={controller}"),
        "--provision-gateways".to_string(),
        format!("--gateway-xds-address=localhost:{xds_port}"),
        format!("--gateway-ca-file={}", pki.ca.display()),
        "--gateway-service-type=ClusterIP".to_string(),
    ]
    .into();
    let admitpilot = Admitpilot::start_kube_at(kube.kubeconfig(), xds_port, &flags).await;
    (ns, (class, controller), (admitpilot, pki))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applied_gateway_becomes_a_running_authenticated_envoy_and_goes_with_its_gateway() {
    let Some(envoy_bin) = envoy::envoy_binary() else {
        return;
    };
    let Some(kube) = Kube::shared("kube-provision").await else {
        return;
    };
    let (ns, (class, controller), (admitpilot, _pki)) = start_provisioning(&kube).await;
    let Some((backend, backend_ip)) = Backend::start_for_pods("provisioned backend").await else {
        eprintln!("skipping: this machine has no address but loopback, which an EndpointSlice may not name");
        return;
    };
    let site_ca = Ca::new();
    let (cert, key) = site_ca.leaf(HOST);
    let port = envoy::free_port();
    kube.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&config(
            &ns,
            (&class, &controller),
            port,
            (&cert, &key),
            (backend_ip, backend.port),
        )),
    )
    .await;

    // What provisioning made, named `<gateway>-<class>`, labelled with the infrastructure's labels.
    let name = format!("gw-{class}");
    let deployment = wait_get(
        &kube,
        &["deployment", &name],
        |d| d["kind"] == "Deployment",
        &[&admitpilot],
    )
    .await;
    assert_eq!(
        deployment["metadata"]["labels"]["team"], "shop",
        "{deployment}"
    );
    assert_eq!(
        deployment["metadata"]["ownerReferences"][0]["kind"],
        "Gateway"
    );
    for kind in [
        "serviceaccount",
        "role",
        "rolebinding",
        "configmap",
        "service",
    ] {
        wait_get(
            &kube,
            &[kind, &name],
            |o| o["metadata"]["name"] == name.as_str(),
            &[&admitpilot],
        )
        .await;
    }
    // The proxies may read exactly the Secret their config names (admitpilot then asks about it by name).
    let role = wait_get(
        &kube,
        &["role", &name],
        |r| r["kind"] == "Role",
        &[&admitpilot],
    )
    .await;
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
            "resourceNames": ["shop-cert"]}]),
        "{role}"
    );
    // The controller-manager's ReplicaSet made the Pod.
    let pods = wait_get(
        &kube,
        &["pods", "-l", "gateway.networking.k8s.io/gateway-name=gw"],
        |list| {
            list["items"]
                .as_array()
                .is_some_and(|items| !items.is_empty())
        },
        &[&admitpilot],
    )
    .await;
    let pod_name = pods["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let pod = kubelet::pod(&kube, &pod_name).await;
    let running = kubelet::run_envoy_pod(&kube, &pod, &envoy_bin, &[15021, 15000]).await;
    // Its proxy has the config, but until the Pod is Ready the Deployment has no available replica: not Programmed.
    let pending = wait_status(
        &kube,
        "gateway/gw",
        |g| {
            let programmed = condition(&g["status"]["conditions"], "Programmed");
            programmed["reason"] == "Pending"
                && programmed["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("0 of 1 replicas available"))
        },
        &[&admitpilot],
    )
    .await;
    assert_eq!(
        condition(&pending["status"]["conditions"], "Programmed")["status"],
        "False"
    );
    kubelet::report_ready(&kube, &pod_name, &running, "/healthz/ready").await;

    // HTTPS through the provisioned gateway, with the Gateway's certificate (sent over the authenticated port).
    let https = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(site_ca.pem.as_bytes()).unwrap())
        .resolve(HOST, SocketAddr::from(([127, 0, 0, 1], port)))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!("https://{HOST}:{port}/");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match https.get(&url).send().await {
            Ok(response) if response.status() == 200 => {
                assert_eq!(response.text().await.unwrap(), "provisioned backend");
                break;
            }
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "no HTTPS through the provisioned gateway: {other:?}\n{}\n{}",
                running.envoy.log(),
                admitpilot.log()
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    running
        .envoy
        .assert_nothing_rejected("provisioned gateway")
        .await;

    // The Deployment is available (the controller-manager counts the Ready pod) and the Gateway Programmed.
    wait_get(
        &kube,
        &["deployment", &name],
        |d| d["status"]["availableReplicas"] == 1,
        &[&admitpilot],
    )
    .await;
    let gateway = wait_status(
        &kube,
        "gateway/gw",
        |g| condition(&g["status"]["conditions"], "Programmed")["status"] == "True",
        &[&admitpilot],
    )
    .await;
    assert!(
        gateway["status"]["addresses"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{gateway}"
    );

    // A user's edit of a generated field is put back.
    kube.kubectl_ok(
        &[
            "-n",
            &ns,
            "patch",
            "service",
            &name,
            "--type=merge",
            "-p",
            r#"{"spec":{"selector":{"gateway.networking.k8s.io/gateway-name":"other"}}}"#,
        ],
        None,
    )
    .await;
    wait_get(
        &kube,
        &["service", &name],
        |s| s["spec"]["selector"]["gateway.networking.k8s.io/gateway-name"] == "gw",
        &[&admitpilot],
    )
    .await;

    // Opted out (deployed by hand from now on): what was made for it is deleted; opted in again, it is back.
    let annotate = |value: &'static str| {
        let ns = ns.clone();
        let kube = &kube;
        async move {
            kube.kubectl_ok(
                &[
                    "-n",
                    &ns,
                    "annotate",
                    "--overwrite",
                    "gateway",
                    "gw",
                    &format!("admitpilot.io/manual-deployment={value}"),
                ],
                None,
            )
            .await;
        }
    };
    annotate("true").await;
    wait_get(
        &kube,
        &["deployments"],
        |list| list["items"] == serde_json::json!([]),
        &[&admitpilot],
    )
    .await;
    annotate("false").await;
    wait_get(
        &kube,
        &["deployment", &name],
        |d| d["kind"] == "Deployment",
        &[&admitpilot],
    )
    .await;

    // Deleting the Gateway deletes what was made for it (garbage collection of owned objects).
    kube.kubectl_ok(&["-n", &ns, "delete", "gateway", "gw"], None)
        .await;
    for kind in [
        "deployment",
        "service",
        "configmap",
        "serviceaccount",
        "role",
        "rolebinding",
    ] {
        // Gone: `kubectl get` fails and prints nothing, read as null.
        wait_get(
            &kube,
            &[kind, &name],
            |object| object.is_null(),
            &[&admitpilot],
        )
        .await;
    }
    drop(running);
}

/// The GatewayClass's and the Gateway's parameters (ConfigMaps): what they say is on the provisioned objects, the
/// PodDisruptionBudget and autoscaler they ask for exist while they ask, and parameters that do not parse are told
/// on the Gateway (`Accepted` False, `InvalidParameters`, naming the key) while its objects stay as they were.
const PARAMETERS: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: class-defaults, namespace: NS}
data:
  horizontalPodAutoscaler: |
    spec: {minReplicas: 1, maxReplicas: 3}
  deployment: |
    spec:
      template:
        spec:
          containers:
          - name: envoy
            resources: {limits: {memory: 512Mi}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: gw-params, namespace: NS}
data:
  deployment: |
    metadata: {labels: {tier: edge}}
  podDisruptionBudget: |
    spec: {maxUnavailable: 1}
  service: |
    metadata: {annotations: {lb: internal}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: CLASS}
spec:
  controllerName: CONTROLLER
  parametersRef: {group: '', kind: ConfigMap, name: class-defaults, namespace: NS}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: NS}
spec:
  gatewayClassName: CLASS
  infrastructure: {parametersRef: {group: '', kind: ConfigMap, name: gw-params}}
  listeners: [{name: http, port: 8080, protocol: HTTP}]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_configmaps_overlay_the_provisioned_objects() {
    let Some(kube) = Kube::shared("kube-provision-parameters").await else {
        return;
    };
    let (ns, (class, controller), (admitpilot, _pki)) = start_provisioning(&kube).await;
    let manifest = PARAMETERS
        .replace("CONTROLLER", &controller)
        .replace("CLASS", &class)
        .replace("NS", &ns);
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&manifest))
        .await;
    let name = format!("gw-{class}");
    let apis = &[&admitpilot];

    // The class's overlay, then the Gateway's, on the Deployment; the autoscaler owns its replicas.
    let deployment = wait_get(
        &kube,
        &["deployment", &name, "--show-managed-fields"],
        |d| {
            d["metadata"]["labels"]["tier"] == "edge"
                && d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
                    == "512Mi"
        },
        apis,
    )
    .await;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "envoy", "{deployment}");
    assert!(container["image"].as_str().is_some_and(|i| !i.is_empty()));
    let owned_replicas = deployment["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["manager"] == "admitpilot-provisioner")
        .any(|f| f["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    assert!(
        !owned_replicas,
        "the autoscaler owns the replicas: {deployment}"
    );
    let budget = wait_get(
        &kube,
        &["pdb", &name],
        |p| p["kind"] == "PodDisruptionBudget",
        apis,
    )
    .await;
    assert_eq!(budget["spec"]["maxUnavailable"], 1, "{budget}");
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"]["gateway.networking.k8s.io/gateway-name"],
        "gw"
    );
    let autoscaler = wait_get(
        &kube,
        &["hpa", &name],
        |h| h["kind"] == "HorizontalPodAutoscaler",
        apis,
    )
    .await;
    assert_eq!(autoscaler["spec"]["maxReplicas"], 3, "{autoscaler}");
    assert_eq!(autoscaler["spec"]["scaleTargetRef"]["name"], name.as_str());
    wait_get(
        &kube,
        &["service", &name],
        |s| s["metadata"]["annotations"]["lb"] == "internal",
        apis,
    )
    .await;
    wait_status(
        &kube,
        &format!("gatewayclass/{class}"),
        |c| condition(&c["status"]["conditions"], "Accepted")["status"] == "True",
        apis,
    )
    .await;
    wait_status(
        &kube,
        "gateway/gw",
        |g| condition(&g["status"]["conditions"], "Accepted")["status"] == "True",
        apis,
    )
    .await;

    // Parameters changed: the Deployment follows, and the PodDisruptionBudget no longer asked for goes.
    kube.kubectl_ok(
        &["-n", &ns, "patch", "configmap", "gw-params", "--type=json", "-p",
            r#"[{"op":"remove","path":"/data/podDisruptionBudget"},
                {"op":"replace","path":"/data/deployment","value":"metadata: {labels: {tier: core}}"}]"#],
        None,
    )
    .await;
    wait_get(
        &kube,
        &["deployment", &name],
        |d| d["metadata"]["labels"]["tier"] == "core",
        apis,
    )
    .await;
    wait_get(&kube, &["pdb", &name], |p| p.is_null(), apis).await;

    // Parameters that do not parse: the Gateway says which key and why.
    kube.kubectl_ok(
        &[
            "-n",
            &ns,
            "patch",
            "configmap",
            "gw-params",
            "--type=merge",
            "-p",
            r#"{"data":{"deployment":"spec: ["}}"#,
        ],
        None,
    )
    .await;
    let refused = wait_status(
        &kube,
        "gateway/gw",
        |g| condition(&g["status"]["conditions"], "Accepted")["reason"] == "InvalidParameters",
        apis,
    )
    .await;
    let message = condition(&refused["status"]["conditions"], "Accepted")["message"].to_string();
    // What runs the gateway stays as last provisioned: a broken ConfigMap takes nothing down.
    let kept = wait_get(
        &kube,
        &["deployment", &name],
        |d| d["kind"] == "Deployment",
        apis,
    )
    .await;
    assert_eq!(kept["metadata"]["labels"]["tier"], "core", "{kept}");
    assert!(
        message.contains(&format!(
            "ConfigMap {ns}/gw-params data.deployment: not YAML"
        )),
        "{message}"
    );
}
