//! The Helm chart (`charts/admitpilot`), checked with the real Helm CLI, `kubernetes-validate` and Envoy:
//! lint, renders of several value sets, a golden of the default render, the webhook rules and RBAC it grants,
//! the values schema, and the gateway's Envoy bootstrap. Tools come from `scripts/setup-tools`; a test whose tool is
//! missing prints why and passes without checking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use helm::{render, render_yaml, run_helm, CHART};
use support::helm;

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/chart/default-render.yaml"
);

/// Finds a tool through its environment variable, else at its place under the project folder.
fn tool(var: &str, fallback: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(fallback));
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "skipping: {} not found (run scripts/setup-tools)",
            path.display()
        );
        None
    }
}

fn helm() -> Option<PathBuf> {
    tool("ADMITPILOT_HELM", "tools/bin/helm")
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn lint_is_clean_in_strict_mode() {
    let Some(helm) = helm() else { return };
    let output = run_helm(&helm, &["lint", "--strict", CHART]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn default_render_matches_golden() {
    let Some(helm) = helm() else { return };
    let rendered = render_yaml(&helm, &[]);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(GOLDEN, &rendered).unwrap();
    }
    let golden =
        std::fs::read_to_string(GOLDEN).expect("golden exists (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        rendered, golden,
        "default render changed; rerun with UPDATE_GOLDEN=1 if intended"
    );
}

#[test]
fn every_value_combination_passes_kubernetes_validate() {
    let Some(helm) = helm() else { return };
    let Some(checker) = tool(
        "ADMITPILOT_KUBERNETES_VALIDATE",
        ".venv/bin/kubernetes-validate",
    ) else {
        return;
    };
    let combinations: [&[&str]; 10] = [
        &[],
        &[
            "gateway.enabled=true",
            "tlsGateways=true",
            "watchNamespaces={shop,web}",
            "mcpSources={xds://higress-controller.higress-system:15051}",
        ],
        &[
            "mcpSources={xds://admitpilot.other.svc:15012}",
            "mcpSourceAuth.caConfigMap=other-ca",
            "mcpSourceAuth.tokenAudience=admitpilot",
        ],
        &[
            "webhook.url=https://10.0.0.1:15017/validate",
            "webhook.failurePolicy=Ignore",
        ],
        &[
            "webhook.enabled=false",
            "podDisruptionBudget.enabled=false",
            "replicaCount=1",
        ],
        &[
            "serviceMonitor.enabled=true",
            "gateway.enabled=true",
            "gateway.xdsApiType=GRPC",
        ],
        &["xds.plaintext.enabled=true", "gateway.enabled=true"],
        &[
            "xds.auth=none",
            "provisioning.enabled=false",
            "gateway.enabled=true",
            "tlsGateways=true",
        ],
        &["istioStatus=true", "gatewayApi.writeStatus=false"],
        &[
            "ingress.class=",
            "ingress.gatewaySelector.higress=null",
            "ingress.gatewaySelector.app=gw",
            "ingress.httpPort=8080",
        ],
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, sets) in combinations.iter().enumerate() {
        let file = dir.path().join(format!("render-{i}.yaml"));
        std::fs::write(&file, render_yaml(&helm, sets)).unwrap();
        let output = Command::new(&checker)
            .args(["--strict", "-k", "1.30.0"])
            .arg(&file)
            .output()
            .expect("run kubernetes-validate");
        assert!(
            output.status.success(),
            "{sets:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn webhooks_cover_the_istio_and_higress_groups_and_only_their_two_configmaps() {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &[]);
    let vwc = find(&docs, "ValidatingWebhookConfiguration", "ap-admitpilot");
    let webhooks = vwc["webhooks"].as_array().unwrap();
    assert_eq!(webhooks.len(), 3);
    for webhook in webhooks {
        assert_eq!(webhook["sideEffects"], "None");
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(webhook["timeoutSeconds"], 10);
        assert_eq!(
            webhook["admissionReviewVersions"],
            serde_json::json!(["v1", "v1beta1"])
        );
        assert_eq!(webhook["clientConfig"]["service"]["path"], "/validate");
        assert_eq!(
            webhook["rules"][0]["operations"],
            serde_json::json!(["CREATE", "UPDATE"])
        );
    }
    let groups = &webhooks[0]["rules"][0]["apiGroups"];
    for group in [
        "networking.istio.io",
        "security.istio.io",
        "telemetry.istio.io",
        "extensions.istio.io",
        "networking.higress.io",
        "extensions.higress.io",
    ] {
        assert!(
            groups.as_array().unwrap().iter().any(|g| g == group),
            "{group}"
        );
    }
    // Ingresses, and nothing else of networking.k8s.io (NetworkPolicies, IngressClasses…).
    assert_eq!(
        webhooks[0]["rules"][1],
        serde_json::json!({
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["networking.k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["ingresses"],
            "scope": "Namespaced",
        })
    );
    assert_eq!(webhooks[0]["rules"].as_array().unwrap().len(), 2);
    for (config_maps, namespace, name) in [
        (&webhooks[1], "higress-system", "higress-config"),
        (&webhooks[2], "istio-system", "istio"),
    ] {
        assert_eq!(
            config_maps["rules"][0]["resources"],
            serde_json::json!(["configmaps"])
        );
        assert_eq!(
            config_maps["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            namespace
        );
        assert_eq!(
            config_maps["matchConditions"][0]["expression"],
            format!("object.metadata.name == '{name}'")
        );
    }

    let docs = render(
        &helm,
        &[
            "webhook.url=https://10.0.0.1:15017/validate",
            "webhook.failurePolicy=Ignore",
        ],
    );
    let vwc = find(&docs, "ValidatingWebhookConfiguration", "ap-admitpilot");
    assert_eq!(
        vwc["webhooks"][0]["clientConfig"]["url"],
        "https://10.0.0.1:15017/validate"
    );
    assert!(vwc["webhooks"][0]["clientConfig"]["service"].is_null());
    assert_eq!(vwc["webhooks"][1]["failurePolicy"], "Ignore");
}

/// Collects `(apiGroup, resource, verb)` triples a Role or ClusterRole grants.
fn grants(role: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    out.push((
                        group.as_str().unwrap().to_string(),
                        resource.as_str().unwrap().to_string(),
                        verb.as_str().unwrap().to_string(),
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn rbac_is_least_privilege() {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &[]);
    let controller = grants(find(&docs, "ClusterRole", "ap-admitpilot"));
    for (group, resource, verb) in &controller {
        let allowed = if resource == "events" {
            ["create", "patch"].contains(&verb.as_str())
        } else if resource.ends_with("/status") {
            // The status leader writes only the status subresources of the Gateway API kinds.
            group == "gateway.networking.k8s.io"
                && ["get", "patch", "update"].contains(&verb.as_str())
        } else {
            ["get", "list", "watch"].contains(&verb.as_str())
        };
        assert!(allowed, "controller may {verb} {group}/{resource}");
        assert_ne!(resource, "secrets", "secrets only with tlsGateways");
    }
    // Ingresses are read where the other namespaced kinds are; admitpilot writes no Ingress status.
    for verb in ["get", "list", "watch"] {
        assert!(controller.contains(&(
            "networking.k8s.io".into(),
            "ingresses".into(),
            verb.into()
        )));
    }
    // IngressClasses are cluster-scoped: read through the cluster-wide role, which a RoleBinding per watched
    // namespace does not replace.
    assert!(controller.iter().all(|(_, r, _)| r != "ingressclasses"));
    let cluster_wide = grants(find(&docs, "ClusterRole", "ap-admitpilot-gateway-classes"));
    for verb in ["get", "list", "watch"] {
        assert!(cluster_wide.contains(&(
            "networking.k8s.io".into(),
            "ingressclasses".into(),
            verb.into()
        )));
    }
    for (group, resource, verb) in &cluster_wide {
        if group == "networking.k8s.io" {
            assert!(
                resource == "ingressclasses" && ["get", "list", "watch"].contains(&verb.as_str()),
                "may {verb} {group}/{resource}"
            );
        }
    }
    for role in docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        assert!(
            grants(role)
                .iter()
                .all(|(_, r, _)| !r.starts_with("ingresses/") && !r.starts_with("ingressclasses/")),
            "{}",
            role["metadata"]["name"]
        );
    }
    // ConfigMaps are read (BackendTLSPolicy CAs) unless gatewayApi.referencedConfigMaps is off.
    assert!(controller.iter().any(|(_, r, _)| r == "configmaps"));
    let no_ca = render(&helm, &["gatewayApi.referencedConfigMaps=false"]);
    let without = grants(find(&no_ca, "ClusterRole", "ap-admitpilot"));
    assert!(
        without.iter().all(|(_, r, _)| r != "configmaps"),
        "{without:?}"
    );
    let args = serde_json::to_string(&find(&no_ca, "Deployment", "ap-admitpilot")["spec"]).unwrap();
    assert!(args.contains("--no-referenced-configmaps"));
    let config_role = find(&docs, "Role", "ap-admitpilot-higress-config");
    assert_eq!(config_role["metadata"]["namespace"], "higress-system");
    assert_eq!(
        config_role["rules"][0]["resourceNames"],
        serde_json::json!(["higress-config"])
    );
    assert!(docs
        .iter()
        .any(|d| d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == "ap-admitpilot"));

    // With istioStatus: the status subresources of the Istio kinds admitpilot serves, nothing more.
    let istio_groups = [
        "networking.istio.io",
        "security.istio.io",
        "telemetry.istio.io",
    ];
    let default_status: Vec<_> = controller
        .iter()
        .filter(|(_, r, _)| r.ends_with("/status"))
        .cloned()
        .collect();
    assert!(default_status
        .iter()
        .all(|(g, _, _)| !istio_groups.contains(&g.as_str())));
    let with_istio = render(&helm, &["istioStatus=true"]);
    let istio_status: Vec<_> = grants(find(&with_istio, "ClusterRole", "ap-admitpilot"))
        .into_iter()
        .filter(|(g, r, _)| r.ends_with("/status") && istio_groups.contains(&g.as_str()))
        .collect();
    assert!(istio_status
        .iter()
        .any(|(_, r, _)| r == "virtualservices/status"));
    assert!(istio_status
        .iter()
        .all(|(_, _, v)| ["get", "patch", "update"].contains(&v.as_str())));
    assert!(serve_args(&with_istio).contains(&"--istio-status".to_string()));

    // The leader Lease and the replicas' status reports (ConfigMaps): in the release namespace only.
    let lease_role = find(&docs, "Role", "ap-admitpilot-leader");
    assert_eq!(lease_role["metadata"]["namespace"], "higress-system");
    assert!(grants(lease_role)
        .iter()
        .all(|(g, r, _)| (g == "coordination.k8s.io" && r == "leases")
            || (g.is_empty() && r == "configmaps")));

    let certs = find(&docs, "ClusterRole", "ap-admitpilot-certs-gen");
    assert_eq!(
        certs["rules"][0]["resourceNames"],
        serde_json::json!(["ap-admitpilot"])
    );
    assert_eq!(
        grants(certs),
        [
            (
                "admissionregistration.k8s.io".into(),
                "validatingwebhookconfigurations".into(),
                "get".into()
            ),
            (
                "admissionregistration.k8s.io".into(),
                "validatingwebhookconfigurations".into(),
                "patch".into()
            ),
        ]
    );
    let secret_role = find(&docs, "Role", "ap-admitpilot-certs-gen");
    assert!(grants(secret_role).iter().all(|(_, r, _)| r == "secrets"));

    // The last-good state: one ConfigMap the chart creates, which replicas may only read and replace.
    let state_role = find(&docs, "Role", "ap-admitpilot-last-good");
    assert_eq!(
        state_role["rules"][0]["resourceNames"],
        serde_json::json!(["ap-admitpilot-last-good"])
    );
    assert_eq!(
        grants(state_role),
        [
            ("".into(), "configmaps".into(), "get".into()),
            ("".into(), "configmaps".into(), "update".into()),
        ]
    );
    let state = find(&docs, "ConfigMap", "ap-admitpilot-last-good");
    assert!(state["data"].is_null(), "the chart must not own the data");

    let args = &find(&docs, "Deployment", "ap-admitpilot")["spec"]["template"]["spec"]
        ["containers"][0]["args"];
    assert!(args
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--no-tls-secrets"));
    assert!(args
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--state-configmap=higress-system/ap-admitpilot-last-good"));

    let docs = render(&helm, &["tlsGateways=true", "watchNamespaces={shop,web}"]);
    let args = &find(&docs, "Deployment", "ap-admitpilot")["spec"]["template"]["spec"]
        ["containers"][0]["args"];
    assert!(!args
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--no-tls-secrets"));
    let controller = grants(find(&docs, "ClusterRole", "ap-admitpilot"));
    assert!(controller.contains(&("".into(), "secrets".into(), "watch".into())));
    let bindings: Vec<_> = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" && d["metadata"]["name"] == "ap-admitpilot")
        .map(|d| d["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(bindings, ["shop", "web"]);
    assert!(!docs
        .iter()
        .any(|d| d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == "ap-admitpilot"));
}

/// The `serve` arguments of the control plane in `docs`.
fn serve_args(docs: &[Value]) -> Vec<String> {
    find(docs, "Deployment", "ap-admitpilot")["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn ingress_values_become_serve_flags() {
    let Some(helm) = helm() else { return };
    let args = serve_args(&render(&helm, &[]));
    for wanted in [
        "--ingress-class=higress",
        "--ingress-controller=higress.io/higress-controller",
        "--ingress-gateway-selector=higress=higress-system-higress-gateway",
        "--ingress-http-port=80",
        "--ingress-https-port=443",
    ] {
        assert!(
            args.iter().any(|a| a == wanted),
            "{wanted} missing: {args:?}"
        );
    }
    let args = serve_args(&render(
        &helm,
        &[
            "ingress.class=",
            "ingress.controller=example.com/ingress",
            "ingress.gatewaySelector.higress=null",
            "ingress.gatewaySelector.tier=edge",
            "ingress.gatewaySelector.app=gw",
            "ingress.httpPort=8080",
            "ingress.httpsPort=8443",
        ],
    ));
    for wanted in [
        "--ingress-class=",
        "--ingress-controller=example.com/ingress",
        // Keys in order, whatever the order they were set in.
        "--ingress-gateway-selector=app=gw,tier=edge",
        "--ingress-http-port=8080",
        "--ingress-https-port=8443",
    ] {
        assert!(
            args.iter().any(|a| a == wanted),
            "{wanted} missing: {args:?}"
        );
    }
}

#[test]
fn xds_is_authenticated_by_default_and_plaintext_only_when_asked() {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &[]);
    let args = serve_args(&docs);
    for wanted in [
        "--xds-addr=0.0.0.0:15012",
        "--xds-tls-cert=/etc/admitpilot/tls/tls.crt",
        "--xds-tls-key=/etc/admitpilot/tls/tls.key",
        "--xds-auth=token",
        "--xds-token-audience=admitpilot",
    ] {
        assert!(
            args.iter().any(|a| a == wanted),
            "{wanted} missing: {args:?}"
        );
    }
    assert!(!args.iter().any(|a| a.starts_with("--xds-plaintext-addr")));
    assert!(!args
        .iter()
        .any(|a| a.starts_with("--xds-unauthenticated-secrets")));
    let ports = &find(&docs, "Service", "ap-admitpilot")["spec"]["ports"];
    assert!(
        !ports.as_array().unwrap().iter().any(|p| p["port"] == 15010),
        "{ports}"
    );
    // The review APIs only, create only, cluster-wide (they are cluster-scoped and read nothing).
    assert_eq!(
        grants(find(&docs, "ClusterRole", "ap-admitpilot-xds-auth")),
        [
            (
                "authentication.k8s.io".into(),
                "tokenreviews".into(),
                "create".into()
            ),
            (
                "authorization.k8s.io".into(),
                "subjectaccessreviews".into(),
                "create".into()
            ),
        ]
    );
    find(&docs, "ClusterRoleBinding", "ap-admitpilot-xds-auth");

    let docs = render(&helm, &["xds.plaintext.enabled=true"]);
    assert!(serve_args(&docs)
        .iter()
        .any(|a| a == "--xds-plaintext-addr=0.0.0.0:15010"));
    let ports = &find(&docs, "Service", "ap-admitpilot")["spec"]["ports"];
    assert!(
        ports.as_array().unwrap().iter().any(|p| p["port"] == 15010),
        "{ports}"
    );

    let docs = render(&helm, &["xds.auth=none", "provisioning.enabled=false"]);
    assert!(serve_args(&docs).iter().any(|a| a == "--xds-auth=none"));
    assert!(!docs
        .iter()
        .any(|d| d["metadata"]["name"] == "ap-admitpilot-xds-auth"));
}

#[test]
fn the_gateway_presents_a_projected_token_and_may_read_its_namespaces_secrets_only_with_tls_gateways(
) {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &["gateway.enabled=true", "tlsGateways=true"]);
    let pod = &find(&docs, "Deployment", "ap-admitpilot-gateway")["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "ap-admitpilot-gateway");
    let volumes = pod["volumes"].as_array().unwrap();
    let token = volumes.iter().find(|v| v["name"] == "xds-token").unwrap();
    let source = &token["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(source["audience"], "admitpilot");
    assert_eq!(source["expirationSeconds"], 3600);
    let ca = volumes.iter().find(|v| v["name"] == "xds-ca").unwrap();
    assert_eq!(
        ca["secret"]["items"],
        serde_json::json!([{"key": "ca.crt", "path": "ca.crt"}]),
        "only the CA certificate of the serving Secret reaches the gateway"
    );
    let role = find(&docs, "Role", "ap-admitpilot-gateway-secrets");
    assert_eq!(grants(role), [("".into(), "secrets".into(), "get".into())]);
    let bootstrap = find(&docs, "ConfigMap", "ap-admitpilot-gateway-bootstrap")["data"]
        ["envoy.yaml"]
        .as_str()
        .unwrap();
    assert!(bootstrap.contains("envoy.grpc_credentials.file_based_metadata"));
    assert!(bootstrap.contains("ap-admitpilot.higress-system.svc:15012"));
    assert!(bootstrap.contains("SERVICE_ACCOUNT: ap-admitpilot-gateway"));

    let docs = render(&helm, &["gateway.enabled=true"]);
    assert!(!docs
        .iter()
        .any(|d| d["metadata"]["name"] == "ap-admitpilot-gateway-secrets"));
}

#[test]
fn pods_run_non_root_with_a_read_only_root() {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &["gateway.enabled=true"]);
    for doc in docs
        .iter()
        .filter(|d| d["kind"] == "Deployment" || d["kind"] == "Job")
    {
        let pod = &doc["spec"]["template"]["spec"];
        assert_eq!(
            pod["securityContext"]["runAsNonRoot"], true,
            "{}",
            doc["metadata"]["name"]
        );
        for container in pod["containers"].as_array().unwrap() {
            assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
            assert_eq!(
                container["securityContext"]["allowPrivilegeEscalation"],
                false
            );
            assert!(container["resources"]["limits"].is_object());
        }
    }
    let deployment = find(&docs, "Deployment", "ap-admitpilot");
    let probes = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(probes["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(probes["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(deployment["spec"]["replicas"], 2);
}

#[test]
fn schema_rejects_bad_values_with_the_field_named() {
    let Some(helm) = helm() else { return };
    for (set, field) in [
        ("webhook.failurePolicy=Sometimes", "/webhook/failurePolicy"),
        ("xds.port=70000", "/xds/port"),
        ("higressNamespace=Not_A_Namespace", "/higressNamespace"),
        ("gateway.xdsApiType=REST", "/gateway/xdsApiType"),
        ("replicaCount=0", "/replicaCount"),
        ("mcpSources={http://a:1}", "/mcpSources/0"),
        ("mcpSourceAuth.tokenAudience=admitpilot", "/mcpSourceAuth"),
        ("ingress.httpPort=0", "/ingress/httpPort"),
        ("ingress.class=Not_A_Class", "/ingress/class"),
        (
            "ingress.gatewaySelector.higress=null",
            "/ingress/gatewaySelector",
        ),
        ("unknownKey=1", "unknownKey"),
    ] {
        let output = run_helm(&helm, &["template", "ap", CHART, "--set", set]);
        assert!(!output.status.success(), "{set} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(field),
            "{set}: message does not name {field}: {stderr}"
        );
    }
}

/// The chart's gateway Envoy runs as rendered: the container's command and args (with `$(POD_*)` expanded as the
/// kubelet does from the container's `env`), its volumes mounted (each mount path mapped to a folder holding what
/// the volume would: the bootstrap ConfigMap, the CA, the token), in Envoy's `validate` mode (the xDS server's
/// cluster DNS name does not resolve here). Envoy 1.40 refuses `--flag=value` arguments, so this is what would
/// crash-loop on a cluster.
#[test]
fn the_gateway_container_starts_envoy_as_rendered() {
    let Some(helm) = helm() else { return };
    let Some(envoy) = tool("ADMITPILOT_ENVOY", ".venv/bin/envoy") else {
        return;
    };
    for api_type in ["DELTA_GRPC", "GRPC"] {
        let docs = render(
            &helm,
            &[
                "gateway.enabled=true",
                &format!("gateway.xdsApiType={api_type}"),
            ],
        );
        let pod = &find(&docs, "Deployment", "ap-admitpilot-gateway")["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let strings = |value: &Value| -> Vec<String> {
            value
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        // What the downward API gives each env var the args use.
        let field_values = [
            ("status.podIP", "10.1.2.3"),
            ("metadata.name", "gw-0"),
            ("metadata.namespace", "higress-system"),
        ];
        let env: Vec<(String, String)> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|var| {
                let path = var["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap();
                let value = field_values
                    .iter()
                    .find(|(field, _)| *field == path)
                    .unwrap_or_else(|| panic!("no test value for {path}"))
                    .1;
                (var["name"].as_str().unwrap().to_string(), value.to_string())
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let bootstrap = find(&docs, "ConfigMap", "ap-admitpilot-gateway-bootstrap")["data"]
            ["envoy.yaml"]
            .as_str()
            .unwrap()
            .to_string();
        // Each mount path, and the folder standing in for it with the volume's files.
        let mounts: Vec<(String, std::path::PathBuf)> = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|mount| {
                let name = mount["name"].as_str().unwrap();
                let folder = dir.path().join(name);
                std::fs::create_dir_all(&folder).unwrap();
                let files: &[(&str, &str)] = match name {
                    "bootstrap" => &[("envoy.yaml", "")],
                    "xds-ca" => &[("ca.crt", "")],
                    "xds-token" => &[("token", "t")],
                    _ => &[],
                };
                for (file, content) in files {
                    std::fs::write(folder.join(file), content).unwrap();
                }
                (mount["mountPath"].as_str().unwrap().to_string(), folder)
            })
            .collect();
        // In one pass (placeholders first), so a folder under /tmp is not remapped again by the /tmp mount.
        let remap = |text: &str| {
            let marked = mounts
                .iter()
                .enumerate()
                .fold(text.to_string(), |text, (i, (path, _))| {
                    text.replace(&format!("{path}/"), &format!("\u{1}{i}\u{1}"))
                });
            mounts
                .iter()
                .enumerate()
                .fold(marked, |text, (i, (_, folder))| {
                    text.replace(&format!("\u{1}{i}\u{1}"), &format!("{}/", folder.display()))
                })
        };
        std::fs::write(dir.path().join("bootstrap/envoy.yaml"), remap(&bootstrap)).unwrap();
        let expand = |arg: &str| {
            env.iter().fold(arg.to_string(), |arg, (name, value)| {
                arg.replace(&format!("$({name})"), value)
            })
        };
        let command = strings(&container["command"]);
        assert_eq!(command, ["envoy"]);
        let args: Vec<String> = strings(&container["args"])
            .iter()
            .map(|arg| remap(&expand(arg)))
            .collect();
        assert!(args.iter().all(|arg| !arg.contains("$(")), "{args:?}");
        let output = Command::new(&envoy)
            .args(&args)
            .args(["--mode", "validate"])
            .output()
            .expect("run envoy");
        assert!(
            output.status.success(),
            "{api_type}: envoy {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Provisioning is on by default: the leader gets the flags (its xDS Service address, the certs-gen CA) and a role
/// of its own that writes only the six kinds it provisions and may `get` Secrets (to grant that to the proxies);
/// off, neither is there; with `xds.auth: none` the chart refuses to render it.
#[test]
fn provisioning_has_its_flags_and_a_role_that_writes_only_what_it_provisions() {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &[]);
    let args = serve_args(&docs);
    for flag in [
        "--provision-gateways",
        "--gateway-image=envoyproxy/envoy:v1.40.0",
        "--gateway-xds-address=ap-admitpilot.higress-system.svc:15012",
        "--gateway-ca-file=/etc/admitpilot/tls/ca.crt",
        "--gateway-service-type=LoadBalancer",
    ] {
        assert!(
            args.iter().any(|a| a == flag),
            "{flag} missing from {args:?}"
        );
    }
    let provisioning = grants(find(&docs, "ClusterRole", "ap-admitpilot-provisioning"));
    for (group, resource, verb) in &provisioning {
        let provisioned = matches!(
            (group.as_str(), resource.as_str()),
            ("", "serviceaccounts" | "configmaps" | "services")
                | ("apps", "deployments")
                | ("rbac.authorization.k8s.io", "roles" | "rolebindings")
                | ("policy", "poddisruptionbudgets")
                | ("autoscaling", "horizontalpodautoscalers")
        );
        let grantable = group.is_empty() && resource == "secrets" && verb == "get";
        assert!(
            provisioned || grantable,
            "provisioning may {verb} {group}/{resource}"
        );
    }
    assert!(docs.iter().any(|d| d["kind"] == "ClusterRoleBinding"
        && d["metadata"]["name"] == "ap-admitpilot-provisioning"));
    let pools = render(
        &helm,
        &["provisioning.addressPools={10.0.0.0/24,2001:db8::/64}"],
    );
    assert!(serve_args(&pools)
        .iter()
        .any(|a| a == "--gateway-address-pool=10.0.0.0/24,2001:db8::/64"));
    assert!(args
        .iter()
        .all(|a| !a.starts_with("--gateway-address-pool")));
    let off = render(&helm, &["provisioning.enabled=false"]);
    assert!(serve_args(&off)
        .iter()
        .all(|a| !a.starts_with("--provision")));
    assert!(off
        .iter()
        .all(|d| d["metadata"]["name"] != "ap-admitpilot-provisioning"));
    let refused = run_helm(&helm, &["template", "ap", CHART, "--set", "xds.auth=none"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr)
        .contains("provisioning.enabled needs xds.auth: token"));
}
