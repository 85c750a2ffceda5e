//! The chart's admission webhook installed in a real kube-apiserver (`support::kube_server`, a private server per test,
//! since a webhook configuration is cluster-wide), as `helm install` would do it, with three deviations a cluster
//! without Pods needs: the webhooks call `admitpilot serve` on 127.0.0.1 (`webhook.url`), the certs-gen hook Jobs'
//! commands are run here with `--ip 127.0.0.1` and their own folder, and `admitpilot serve` runs here with the
//! Deployment's flags (addresses and certificate paths replaced).
//!
//! Everything runs with the chart's RBAC: certs-gen and admitpilot authenticate with tokens of the chart's
//! ServiceAccounts (TokenRequest API), so a missing permission fails the test.
//!
//! Then real `kubectl apply`: invalid VirtualServices and higress-config ConfigMaps are denied with admitpilot's own
//! message (the one its webhook answers for the same object), valid ones admitted; matchConditions and
//! namespaceSelector keep other ConfigMaps away from the webhook (they are admitted while it is down); with the
//! webhook down, failurePolicy `Fail` (the default) denies and `Ignore` admits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::helm;
use support::kube_server;
use support::pipeline;
use support::xds_auth;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use admitpilot::model::document::parse_documents;
use kube_server::Kube;
use pipeline::{Admitpilot, WebhookTls};
use serde_json::{json, Value};

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kube/istio-crds.yaml");
const RELEASE_NS: &str = "higress-system";
/// How long the API server may take to start using a webhook configuration (it watches them).
const WEBHOOK_ACTIVE: Duration = Duration::from_secs(30);

/// A VirtualService in `ns`; `valid: false` gives it a route without a destination.
fn virtual_service(ns: &str, name: &str, valid: bool) -> Value {
    let route = if valid {
        json!({"destination": {"host": "web.example.com"}})
    } else {
        json!({"weight": 100})
    };
    json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hosts": ["web.example.com"], "http": [{"route": [route]}]}})
}

/// A ConfigMap `ns/name` whose `higress` key sets gzip's minContentLength to `min` (0 is invalid).
fn higress_config(ns: &str, name: &str, min: i64) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
        "data": {"higress": format!("gzip:\n  enable: true\n  minContentLength: {min}\n")}})
}

fn helm_binary() -> PathBuf {
    std::env::var_os("ADMITPILOT_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/bin/helm"))
}

/// The chart rendered (release `ap` in the release namespace) with `sets`.
fn helm_template(sets: &[String]) -> String {
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    helm::render_yaml(&helm_binary(), &sets)
}

/// The chart installed on a private API server, its webhook served by `admitpilot serve`.
struct Installed {
    /// Dropped (stopped) before the API server, whose shutdown would otherwise wait for its watches.
    admitpilot: Option<Admitpilot>,
    kube: Kube,
    url: String,
    _certs: tempfile::TempDir,
}

impl Installed {
    /// Installs the chart rendered with `sets` (plus `webhook.url`), runs certs-gen's hooks and `serve`, and waits
    /// until the API server calls the webhook. `None` when there is no real API server (outside CI).
    async fn start(test: &str, sets: &[&str]) -> Option<Installed> {
        let kube = Kube::private(test).await?;
        for ns in [RELEASE_NS, "istio-system"] {
            kube.create_namespace(ns).await;
        }
        kube.install_crds(Path::new(CRDS)).await;

        let port = envoy::free_port();
        let url = format!("https://127.0.0.1:{port}/validate");
        let mut all_sets: Vec<String> = sets.iter().map(ToString::to_string).collect();
        all_sets.push(format!("webhook.url={url}"));
        let rendered = helm_template(&all_sets);
        let docs: Vec<Value> = parse_documents(&rendered)
            .into_iter()
            .map(|d| d.value.expect("rendered YAML parses"))
            .collect();
        kube.kubectl_ok(&["apply", "-f", "-"], Some(&rendered))
            .await;

        // The pre-install hook: certs-gen creates the certificates and their Secret.
        let certs = tempfile::tempdir().unwrap();
        let (pre, post) = certs_gen_jobs(&docs);
        run_job(&kube, pre, certs.path()).await;
        let tls = WebhookTls {
            port,
            cert: certs.path().join("tls.crt"),
            key: certs.path().join("tls.key"),
            ca: certs.path().join("ca.crt"),
        };
        let admitpilot = start_deployment(&kube, &docs, &tls, certs.path()).await;
        // The post-install hook: certs-gen puts the CA into the webhook configuration's caBundle.
        run_job(&kube, post, certs.path()).await;

        let installed = Installed {
            admitpilot: Some(admitpilot),
            kube,
            url,
            _certs: certs,
        };
        installed.wait_until_called().await;
        Some(installed)
    }

    fn admitpilot(&self) -> &Admitpilot {
        self.admitpilot.as_ref().expect("admitpilot is running")
    }

    /// Polls a server-side dry run of an invalid VirtualService until the webhook denies it: the API server has
    /// picked up the configuration and its caBundle.
    async fn wait_until_called(&self) {
        let probe = yaml(&virtual_service(self.kube.namespace(), "probe", false));
        let deadline = tokio::time::Instant::now() + WEBHOOK_ACTIVE;
        loop {
            let args = ["apply", "--dry-run=server", "-f", "-"];
            let output = self.kube.kubectl(&args, Some(&probe)).await;
            let stderr = String::from_utf8_lossy(&output.stderr).to_string();
            if stderr.contains("denied the request") {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the API server never called the webhook at {}: {stderr}\n{}",
                self.url,
                self.admitpilot().log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `kubectl apply` of `object` must be denied by `webhook` with admitpilot's message for it.
    async fn assert_denied(&self, webhook: &str, object: &Value) {
        let review = self.admitpilot().review(object.clone()).await;
        assert_eq!(review["allowed"], false, "{review}");
        let message = review["status"]["message"].as_str().unwrap().to_string();
        assert!(!message.is_empty(), "{review}");
        let output = self.kube.apply(&yaml(object)).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{object} was admitted");
        let expected = format!("admission webhook \"{webhook}\" denied the request: {message}");
        assert!(
            stderr.contains(&expected),
            "kubectl said:\n{stderr}\nexpected:\n{expected}"
        );
    }

    /// `kubectl apply` of `object` must succeed and the object be stored.
    async fn assert_admitted(&self, object: &Value) {
        let output = self.kube.apply(&yaml(object)).await;
        assert!(
            output.status.success(),
            "{object} was not admitted: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let (kind, ns, name) = identity(object);
        self.kube
            .kubectl_ok(&["-n", &ns, "get", &kind, &name], None)
            .await;
    }

    /// Stops `admitpilot serve`: the webhook's URL refuses connections.
    fn stop_webhook(&mut self) {
        self.admitpilot = None;
    }
}

/// Kind (lowercase, for kubectl), namespace and name of `object`.
fn identity(object: &Value) -> (String, String, String) {
    let kind = object["kind"].as_str().unwrap().to_lowercase();
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    (kind, ns, name)
}

fn yaml(object: &Value) -> String {
    serde_yaml_ng::to_string(object).unwrap()
}

/// The certs-gen hook Jobs: (pre-install, post-install: the one that patches the webhook configuration).
fn certs_gen_jobs(docs: &[Value]) -> (&Value, &Value) {
    let jobs: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Job").collect();
    let patches = |job: &Value| {
        job["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str().unwrap().starts_with("--webhook-config"))
    };
    let pre = jobs.iter().find(|j| !patches(j)).expect("pre-install Job");
    let post = jobs.iter().find(|j| patches(j)).expect("post-install Job");
    (pre, post)
}

/// A kubeconfig at `dir/<sa>.kubeconfig` authenticating as ServiceAccount `sa` of the release namespace.
async fn service_account_kubeconfig(kube: &Kube, sa: &str, dir: &Path) -> PathBuf {
    let token = kube.token(RELEASE_NS, sa, None, "1h").await;
    let path = dir.join(format!("{sa}.kubeconfig"));
    kube.write_kubeconfig(&path, None, Some(&token));
    path
}

/// Runs the certs-gen command of hook Job `job` here, as its ServiceAccount, writing the files to `dir` and
/// adding 127.0.0.1 to the certificate's names.
async fn run_job(kube: &Kube, job: &Value, dir: &Path) {
    let pod = &job["spec"]["template"]["spec"];
    let sa = pod["serviceAccountName"].as_str().unwrap();
    let kubeconfig = service_account_kubeconfig(kube, sa, dir).await;
    let mut args: Vec<String> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .filter(|a| !a.starts_with("--out-dir"))
        .collect();
    args.push(format!("--out-dir={}", dir.display()));
    args.push("--ip=127.0.0.1".into());
    let certs_gen = Path::new(env!("CARGO_BIN_EXE_admitpilot")).with_file_name("certs-gen");
    assert!(
        certs_gen.exists(),
        "{} is not built (cargo build -p certs-gen)",
        certs_gen.display()
    );
    let output = tokio::task::spawn_blocking(move || {
        Command::new(certs_gen)
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "certs-gen failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Where the chart mounts the certificate certs-gen writes.
const MOUNTED_TLS: &str = "/etc/admitpilot/tls/";

/// Starts `admitpilot serve` with the Deployment's flags, as its ServiceAccount, the webhook on `tls`.
async fn start_deployment(kube: &Kube, docs: &[Value], tls: &WebhookTls, dir: &Path) -> Admitpilot {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let sa = pod["serviceAccountName"].as_str().unwrap();
    let kubeconfig = service_account_kubeconfig(kube, sa, dir).await;
    // launch() sets the addresses and the webhook's certificate itself; the rest are the chart's flags, with the
    // mounted certificate (the xDS server's too) read from the test's certificate folder.
    let tls_dir = tls.cert.parent().expect("certificate folder");
    let replaced = [
        "serve",
        "--kube",
        "--webhook-addr",
        "--tls-",
        "--xds-addr",
        "--admin-addr",
    ];
    let args: Vec<String> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .filter(|a| !replaced.iter().any(|r| a.starts_with(r)))
        .map(|a| a.replace(MOUNTED_TLS, &format!("{}/", tls_dir.display())))
        .collect();
    Admitpilot::start_kube(&kubeconfig, Some(tls), &args).await
}

#[tokio::test]
async fn chart_webhook_denies_invalid_objects_through_kubectl() {
    let Some(installed) = Installed::start("chart-webhook", &[]).await else {
        return;
    };
    let ns = installed.kube.namespace().to_string();

    // Istio objects: any namespace, through the `crds` webhook.
    installed
        .assert_denied("crds.admitpilot.io", &virtual_service(&ns, "broken", false))
        .await;
    let get = installed
        .kube
        .kubectl(&["-n", &ns, "get", "virtualservice", "broken"], None)
        .await;
    assert!(!get.status.success(), "the denied VirtualService exists");
    installed
        .assert_admitted(&virtual_service(&ns, "web", true))
        .await;
    // An update to an invalid spec is denied too (operations CREATE and UPDATE), and the stored one is kept.
    installed
        .assert_denied("crds.admitpilot.io", &virtual_service(&ns, "web", false))
        .await;
    let stored = installed
        .kube
        .kubectl_ok(
            &[
                "-n",
                &ns,
                "get",
                "virtualservice",
                "web",
                "-o",
                "jsonpath={.spec.http[0].route[0].destination.host}",
            ],
            None,
        )
        .await;
    assert_eq!(stored, "web.example.com");

    // Ingresses (networking.k8s.io/v1, the one resource of that group in the rules): Higress's annotations are
    // checked, a bad value is denied.
    let ingress = |name: &str, weight: &str| {
        serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": ns, "annotations": {
                "nginx.ingress.kubernetes.io/canary": "true",
                "nginx.ingress.kubernetes.io/canary-weight": weight}},
            "spec": {"ingressClassName": "higress", "rules": [{"host": "a.example", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
    };
    installed
        .assert_denied("crds.admitpilot.io", &ingress("canary", "abc"))
        .await;
    installed.assert_admitted(&ingress("canary", "30")).await;

    // higress-config in the Higress namespace, through the `higress-config` webhook.
    installed
        .assert_denied(
            "higress-config.admitpilot.io",
            &higress_config(RELEASE_NS, "higress-config", 0),
        )
        .await;
    installed
        .assert_admitted(&higress_config(RELEASE_NS, "higress-config", 1024))
        .await;
}

#[tokio::test]
async fn chart_webhook_scope_and_failure_policy() {
    let Some(mut installed) = Installed::start("chart-webhook-down", &[]).await else {
        return;
    };
    let ns = installed.kube.namespace().to_string();
    installed.stop_webhook();

    // failurePolicy Fail (the chart's default): with the webhook down, even a valid VirtualService is denied.
    let output = installed
        .kube
        .apply(&yaml(&virtual_service(&ns, "web", true)))
        .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "admitted with the webhook down");
    assert!(
        stderr.contains("failed calling webhook \"crds.admitpilot.io\""),
        "{stderr}"
    );
    // matchConditions: another ConfigMap in the Higress namespace never reaches the webhook, so it is admitted
    // while the webhook is down, whatever it holds; higress-config itself is denied.
    installed
        .assert_admitted(&higress_config(RELEASE_NS, "coredns", 0))
        .await;
    let output = installed
        .kube
        .apply(&yaml(&higress_config(RELEASE_NS, "higress-config", 1024)))
        .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("failed calling webhook \"higress-config.admitpilot.io\""),
        "{stderr}"
    );
    // namespaceSelector: a ConfigMap named higress-config in another namespace is not Higress's.
    installed
        .assert_admitted(&higress_config(&ns, "higress-config", 0))
        .await;
    // The mesh config webhook: the ConfigMap `istio` in istio-system only.
    let mesh = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": "istio-system"}, "data": {"mesh": "{}"}});
    let output = installed.kube.apply(&yaml(&mesh)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("failed calling webhook \"mesh-config.admitpilot.io\""),
        "{stderr}"
    );

    // failurePolicy Ignore: the same chart with webhook.failurePolicy=Ignore admits while the webhook is down.
    let rendered = helm_template(&[
        "webhook.failurePolicy=Ignore".into(),
        format!("webhook.url={}", installed.url),
    ]);
    let vwc: Vec<Value> = parse_documents(&rendered)
        .into_iter()
        .filter_map(|d| d.value.ok())
        .filter(|d| d["kind"] == "ValidatingWebhookConfiguration")
        .collect();
    assert_eq!(vwc.len(), 1);
    installed
        .kube
        .kubectl_ok(&["apply", "-f", "-"], Some(&yaml(&vwc[0])))
        .await;
    let invalid = virtual_service(&ns, "unchecked", false);
    let deadline = tokio::time::Instant::now() + WEBHOOK_ACTIVE;
    loop {
        let output = installed.kube.apply(&yaml(&invalid)).await;
        if output.status.success() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "failurePolicy Ignore never took effect: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// With the chart's defaults (and `tlsGateways=true`, so admitpilot reads TLS Secrets at all), on a real API server:
/// the xDS port is TLS; a caller without a token gets no stream; a ServiceAccount RBAC does not let read Secrets
/// gets no certificate; the gateway's ServiceAccount, bound to a Role that may, gets its certificate and key.
#[tokio::test]
async fn chart_defaults_send_a_key_only_to_a_verified_identity_allowed_to_read_it() {
    let Some(installed) = Installed::start("chart-xds-secrets", &["tlsGateways=true"]).await else {
        return;
    };
    let kube = &installed.kube;
    let ns = kube.namespace().to_string();
    let pki = xds_auth::Pki::new();
    let (cert, key) = pki.issue(&["secure.example"]);
    let b64 = |text: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(text)
    };
    let objects = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: gw-cert, namespace: {ns}}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: {}, tls.key: {}}}\n---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {ns}}}\nspec:\n  selector: {{app: gw}}\n  servers:\n  - port: {{number: 8443, name: https, protocol: HTTPS}}\n    hosts: [secure.example]\n    tls: {{mode: SIMPLE, credentialName: gw-cert}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: read-secrets, namespace: {ns}}}\nrules: [{{apiGroups: [\"\"], resources: [secrets], verbs: [get]}}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: gateway-reads-secrets, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-secrets}}\nsubjects: [{{kind: ServiceAccount, name: gateway, namespace: {ns}}}]\n",
        b64(&cert),
        b64(&key)
    );
    kube.create_service_account("gateway").await;
    kube.create_service_account("no-rbac").await;
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&objects)).await;

    // The chart's xDS certificate is certs-gen's, for the Service's names.
    let ca = std::fs::read_to_string(installed._certs.path().join("ca.crt")).unwrap();
    let xds_port = installed.admitpilot().xds_port;
    let channel = || async {
        tonic::transport::Channel::from_shared(format!("https://127.0.0.1:{xds_port}"))
            .unwrap()
            .tls_config(
                tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(&ca))
                    .domain_name(format!("ap-admitpilot.{RELEASE_NS}.svc")),
            )
            .unwrap()
            .connect()
            .await
            .unwrap()
    };
    let sds = |token: Option<String>| {
        let ns = ns.clone();
        async move {
            xds_auth::first_response(
                channel().await,
                token.as_deref(),
                xds_auth::gateway_node(&ns),
                xds_auth::SDS,
                &["kubernetes://gw-cert"],
            )
            .await
        }
    };

    // No token: no stream at all.
    let status = sds(None).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    // The gateway's ServiceAccount gets its certificate, once admitpilot has the Gateway and its Secret.
    let gateway = kube.token(&ns, "gateway", Some("admitpilot"), "10m").await;
    let deadline = tokio::time::Instant::now() + WEBHOOK_ACTIVE;
    loop {
        let names = sds(Some(gateway.clone())).await.unwrap();
        if names == ["kubernetes://gw-cert"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway never got its certificate: {names:?}\n{}",
            installed.admitpilot().log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A verified identity of the same namespace that RBAC does not let read Secrets: nothing, though the config
    // holds the certificate.
    let no_rbac = kube.token(&ns, "no-rbac", Some("admitpilot"), "10m").await;
    assert_eq!(sds(Some(no_rbac)).await.unwrap(), Vec::<String>::new());
}
