//! The objects of one provisioned Gateway (pure): takes the Gateway, its parameters and the [`Settings`], yields the
//! ServiceAccount, Role, RoleBinding, ConfigMap, Deployment and Service (and the PodDisruptionBudget and
//! HorizontalPodAutoscaler its parameters ask for) as JSON documents ready for a server-side apply, in the order
//! they are applied (what a later one names exists first), each with its parameters' overlays merged in
//! ([`crate::overlay`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::bootstrap::{self, BOOTSTRAP_KEY, CA_KEY, CONFIG_DIR, TOKEN_DIR};
use crate::overlay;
use crate::{
    infrastructure, object_name, Settings, GATEWAY_NAME_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE,
    READINESS_PORT,
};
use admitpilot_model::gateway_api::parameters::Parameters;
use admitpilot_model::gateway_api::{listener_set, Gateway};
use admitpilot_model::{ConfigObject, Snapshot};

/// The user and group the proxies run as (Envoy's image's `envoy` user).
const PROXY_UID: i64 = 101;

/// What every object keeps whatever its overlays say: its identity, owner and the labels that find it.
const KEPT: [&[&str]; 5] = [
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "ownerReferences"],
    &["metadata", "labels", MANAGED_BY_LABEL],
    &["metadata", "labels", GATEWAY_NAME_LABEL],
];

/// The objects that run the proxies of Gateway `object` (spec `gateway`, in `snapshot`, with its `parameters`), in
/// apply order; none when the Gateway has no UID yet (an owner reference needs it).
pub fn objects(
    snapshot: &Snapshot,
    (object, gateway): (&ConfigObject, &Gateway),
    parameters: &Parameters,
    settings: &Settings,
) -> Vec<Value> {
    let Some(uid) = object.metadata.uid.as_deref() else {
        return Vec::new();
    };
    let namespace = object.metadata.namespace.as_str();
    let gateway_name = object.metadata.name.as_str();
    let name = object_name(gateway_name, &gateway.gateway_class_name);
    let (infra_labels, annotations) = infrastructure(gateway);
    // The Gateway's own labels win over the infrastructure's, so a selector cannot be redirected.
    let mut labels = infra_labels.clone();
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
    labels.insert(GATEWAY_NAME_LABEL.into(), gateway_name.into());
    let metadata = |kind_name: &str| {
        json!({
            "name": kind_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "name": gateway_name,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        })
    };
    let selector: BTreeMap<&str, &str> = [(GATEWAY_NAME_LABEL, gateway_name)].into();
    let mut pod_labels = infra_labels;
    pod_labels.insert(GATEWAY_NAME_LABEL.into(), gateway_name.into());
    let ports = listener_ports(gateway);
    let bootstrap = bootstrap::bootstrap(namespace, &name, gateway_name, settings);
    let autoscaled = parameters.has("horizontalPodAutoscaler");
    let mut deployment = deployment(
        metadata(&name),
        &name,
        &Pods {
            selector: &selector,
            labels: &pod_labels,
            annotations: &annotations,
        },
        settings,
    );
    // The autoscaler owns the replicas: none generated, and none an overlay sets.
    let replicas: &[&str] = &["spec", "replicas"];
    if autoscaled {
        if let Some(spec) = deployment["spec"].as_object_mut() {
            spec.remove("replicas");
        }
    }
    let mut out = vec![
        overlaid(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(&name)}),
            parameters,
            "serviceAccount",
            &[],
        ),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(&name),
            // What admitpilot asks (a SubjectAccessReview per Secret) before it sends the proxies a certificate of
            // this namespace: exactly the Secrets their config names.
            "rules": secret_rules(snapshot, object, gateway),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(&name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(&name),
            "data": {BOOTSTRAP_KEY: bootstrap, CA_KEY: settings.ca_pem},
        }),
        overlaid(
            deployment,
            parameters,
            "deployment",
            &[
                &["spec", "selector"],
                &["spec", "template", "metadata", "labels", GATEWAY_NAME_LABEL],
                &["spec", "template", "spec", "serviceAccountName"],
                if autoscaled { replicas } else { &[] },
            ],
        ),
        overlaid(
            service(metadata(&name), &selector, &ports, gateway, settings),
            parameters,
            "service",
            &[&["spec", "selector"]],
        ),
    ];
    if parameters.has("podDisruptionBudget") {
        let budget = json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": metadata(&name),
            "spec": {"selector": {"matchLabels": selector}},
        });
        out.push(overlaid(
            budget,
            parameters,
            "podDisruptionBudget",
            &[&["spec", "selector"]],
        ));
    }
    if autoscaled {
        let autoscaler = json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": metadata(&name),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}},
        });
        out.push(overlaid(
            autoscaler,
            parameters,
            "horizontalPodAutoscaler",
            &[&["spec", "scaleTargetRef"]],
        ));
    }
    out
}

/// `generated` with the parameters' documents of `key` merged in, then [`KEPT`] and `kept` put back.
fn overlaid(generated: Value, parameters: &Parameters, key: &str, kept: &[&[&str]]) -> Value {
    let mut merged = generated.clone();
    for patch in parameters.patches(key) {
        overlay::merge(&mut merged, patch);
    }
    overlay::keep(&mut merged, &generated, &KEPT);
    overlay::keep(&mut merged, &generated, kept);
    merged
}

/// The Role's rules: `get` on the Secrets of the Gateway's namespace its config needs ([`needed_secrets`]), by
/// name; none when it needs none.
fn secret_rules(snapshot: &Snapshot, object: &ConfigObject, gateway: &Gateway) -> Value {
    let names = needed_secrets(snapshot, object, gateway);
    if names.is_empty() {
        return json!([]);
    }
    json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": names}])
}

/// The Secrets of the Gateway's namespace its proxies are sent: the certificates of its terminating listeners and
/// of the ListenerSets attached to it, and its client certificate for backends (`spec.tls.backend`), each when it
/// names a core Secret of that namespace. Secrets of other namespaces reach the proxies through ReferenceGrants, not
/// through the proxies' RBAC.
fn needed_secrets(
    snapshot: &Snapshot,
    object: &ConfigObject,
    gateway: &Gateway,
) -> BTreeSet<String> {
    let namespace = object.metadata.namespace.as_str();
    let sets = listener_set::attached(snapshot, object, gateway);
    let listeners = gateway
        .listeners
        .iter()
        .map(|l| (l, namespace))
        .chain(sets.iter().flat_map(|(set, spec)| {
            spec.listeners
                .iter()
                .map(|l| (l, set.metadata.namespace.as_str()))
        }));
    let client_certificate = gateway.backend_client_certificate();
    let certificates = listeners
        .filter(|(listener, _)| listener.terminates())
        .flat_map(|(listener, owner_namespace)| {
            listener
                .tls
                .iter()
                .flat_map(|tls| tls.certificates())
                .map(move |reference| (reference, owner_namespace))
        })
        .chain(
            client_certificate
                .iter()
                .map(|reference| (reference, namespace)),
        );
    certificates
        .filter(|(reference, owner_namespace)| {
            reference.is_core_secret() && reference.namespace_or(owner_namespace) == namespace
        })
        .map(|(reference, _)| reference.name.clone())
        .collect()
}

/// The distinct ports of the Gateway's listeners, with their transport (`UDP` for UDP listeners, else `TCP`).
fn listener_ports(gateway: &Gateway) -> Vec<(u32, &'static str)> {
    let mut ports: Vec<(u32, &'static str)> = gateway
        .listeners
        .iter()
        .map(|l| (l.port, if l.protocol == "UDP" { "UDP" } else { "TCP" }))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// What a Deployment's pods are selected by and carry.
struct Pods<'a> {
    selector: &'a BTreeMap<&'a str, &'a str>,
    labels: &'a BTreeMap<String, String>,
    annotations: &'a BTreeMap<String, String>,
}

/// The Deployment: Envoy with the bootstrap, the projected token and the CA, non-root on a read-only root file
/// system, ready when Envoy is (its `/ready`, through the readiness listener).
fn deployment(metadata: Value, name: &str, pods: &Pods<'_>, settings: &Settings) -> Value {
    // Only the readiness port: listener ports are the Service's, so a listener change does not roll the pods.
    let container_ports = [json!({"name": "readiness", "containerPort": READINESS_PORT})];
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": pods.selector},
            "template": {
                "metadata": {"labels": pods.labels, "annotations": pods.annotations},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": PROXY_UID,
                        "runAsGroup": PROXY_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                        // Listener ports below 1024 without a capability, as istiod's gateways do.
                        "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}],
                    },
                    "containers": [{
                        "name": "envoy",
                        "image": settings.image,
                        "command": ["envoy"],
                        // Envoy's command line (TCLAP) takes each value as its own argument.
                        "args": [
                            "--config-path", bootstrap::BOOTSTRAP_PATH,
                            "--service-node",
                            "router~$(POD_IP)~$(POD_NAME).$(POD_NAMESPACE)~$(POD_NAMESPACE).svc.cluster.local",
                            "--disable-hot-restart",
                            "--log-level", "info",
                        ],
                        "env": [
                            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        ],
                        "ports": container_ports,
                        "readinessProbe": {
                            "httpGet": {"path": "/healthz/ready", "port": READINESS_PORT},
                            "periodSeconds": 5,
                        },
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "128Mi"},
                            "limits": {"memory": "1Gi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [
                            {"name": "bootstrap", "mountPath": CONFIG_DIR, "readOnly": true},
                            {"name": "xds-token", "mountPath": TOKEN_DIR, "readOnly": true},
                            {"name": "tmp", "mountPath": "/tmp"},
                        ],
                    }],
                    "volumes": [
                        {"name": "bootstrap", "configMap": {"name": name}},
                        {"name": "xds-token", "projected": {"sources": [{"serviceAccountToken": {
                            "path": "token",
                            "audience": settings.token_audience,
                            "expirationSeconds": settings.token_expiration_seconds,
                        }}]}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    })
}

/// The Service: one port per listener port, selecting the proxies; the Gateway's first `IPAddress` in
/// `spec.addresses` that the address pools hold asked of the load balancer (`loadBalancerIP`).
fn service(
    metadata: Value,
    selector: &BTreeMap<&str, &str>,
    ports: &[(u32, &str)],
    gateway: &Gateway,
    settings: &Settings,
) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(port, protocol)| {
            json!({
                "name": format!("{}-{port}", protocol.to_ascii_lowercase()),
                "port": port,
                "targetPort": port,
                "protocol": protocol,
            })
        })
        .collect();
    let mut spec = json!({"type": settings.service_type, "selector": selector, "ports": ports});
    let requested_ip = gateway
        .requested_ips()
        .into_iter()
        .map(|(_, value)| value)
        .find(|value| settings.address_pools.usable(value));
    if let (Some(ip), Some(spec)) = (requested_ip, spec.as_object_mut()) {
        spec.insert("loadBalancerIP".into(), json!(ip));
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::decode::test_object;
    use admitpilot_model::Spec;

    fn settings() -> Settings {
        Settings {
            image: "envoyproxy/envoy:v1.40.0".into(),
            xds_address: "admitpilot.admitpilot.svc:15012".into(),
            token_audience: "admitpilot".into(),
            token_expiration_seconds: 3600,
            ca_pem: "-----BEGIN CERTIFICATE-----\n".into(),
            service_type: "LoadBalancer".into(),
            address_pools: Default::default(),
        }
    }

    #[test]
    fn a_gateway_gets_its_proxies_owned_by_it_with_its_infrastructure() {
        let object = test_object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "apps", "uid": "u-1"},
            "spec": {"gatewayClassName": "admitpilot",
                "infrastructure": {"labels": {"team": "a", GATEWAY_NAME_LABEL: "other"},
                    "annotations": {"note": "x"}},
                "addresses": [{"type": "IPAddress", "value": "203.0.113.9"}],
                "tls": {"backend": {"clientCertificateRef": {"name": "client"}}},
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"},
                    {"name": "https", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [
                        {"name": "site"}, {"name": "elsewhere", "namespace": "certs"}]}},
                    {"name": "h2", "port": 80, "protocol": "HTTP", "hostname": "b.example"}]}}));
        let Spec::KubernetesGateway(gateway) = &object.spec else {
            panic!("a Gateway");
        };
        let out = objects(
            &Snapshot::default(),
            (&object, gateway),
            &Parameters::default(),
            &settings(),
        );
        assert_eq!(
            out[1]["rules"],
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                "resourceNames": ["client", "site"]}]),
            "the Secrets of its namespace its config names, by name"
        );
        let kinds: Vec<&str> = out.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ConfigMap",
                "Deployment",
                "Service"
            ]
        );
        for object in &out {
            let meta = &object["metadata"];
            assert_eq!(meta["name"], "gw-admitpilot");
            assert_eq!(meta["namespace"], "apps");
            assert_eq!(meta["labels"]["team"], "a");
            assert_eq!(
                meta["labels"][GATEWAY_NAME_LABEL], "gw",
                "the Gateway's label wins"
            );
            assert_eq!(meta["labels"][MANAGED_BY_LABEL], MANAGED_BY_VALUE);
            assert_eq!(meta["annotations"]["note"], "x");
            assert_eq!(meta["ownerReferences"][0]["uid"], "u-1");
        }
        let deployment = &out[4]["spec"]["template"];
        assert_eq!(deployment["metadata"]["labels"][GATEWAY_NAME_LABEL], "gw");
        assert_eq!(
            deployment["metadata"]["annotations"]["note"], "x",
            "pods carry them too"
        );
        assert_eq!(deployment["spec"]["serviceAccountName"], "gw-admitpilot");
        let service = &out[5]["spec"];
        let ports: Vec<u64> = service["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["port"].as_u64().unwrap())
            .collect();
        assert_eq!(ports, [80, 443], "one port per listener port");
        assert_eq!(service["type"], "LoadBalancer");
        assert_eq!(service["loadBalancerIP"], "203.0.113.9");
        let bootstrap = out[3]["data"][BOOTSTRAP_KEY].as_str().unwrap();
        assert!(bootstrap.contains("admitpilot.admitpilot.svc:15012"));
        assert!(bootstrap.contains("\"SERVICE_ACCOUNT\": \"gw-admitpilot\""));
    }

    #[test]
    fn parameters_overlay_the_objects_but_not_what_ties_them_together() {
        use admitpilot_model::gateway_api::parameters::Overlay;
        let object = test_object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "apps", "uid": "u-1"},
            "spec": {"gatewayClassName": "admitpilot",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}));
        let Spec::KubernetesGateway(gateway) = &object.spec else {
            panic!("a Gateway");
        };
        let layer = |patches: Vec<(&'static str, Value)>| Overlay {
            origin: "test".into(),
            patches: patches.into_iter().collect(),
        };
        let parameters = Parameters {
            layers: vec![
                layer(vec![
                    (
                        "deployment",
                        json!({"spec": {"replicas": 2, "template": {"spec": {
                        "containers": [{"name": "envoy", "resources": {"limits": {"memory": "2Gi"}}}]}}}}),
                    ),
                    (
                        "horizontalPodAutoscaler",
                        json!({"spec": {"minReplicas": 2, "maxReplicas": 5}}),
                    ),
                ]),
                layer(vec![
                    (
                        "deployment",
                        json!({
                        "metadata": {"labels": {"team": "a", MANAGED_BY_LABEL: "me"}},
                        "spec": {"selector": {"matchLabels": {"x": "y"}},
                            "template": {"spec": {"serviceAccountName": "admin",
                                "nodeSelector": {"zone": "a"}}}}}),
                    ),
                    (
                        "service",
                        json!({"metadata": {"annotations": {"lb": "internal"}},
                        "spec": {"type": "NodePort", "selector": {"x": "y"}}}),
                    ),
                    (
                        "serviceAccount",
                        json!({"imagePullSecrets": [{"name": "pull"}]}),
                    ),
                    ("podDisruptionBudget", json!({"spec": {"minAvailable": 1}})),
                ]),
            ],
        };
        let out = objects(
            &Snapshot::default(),
            (&object, gateway),
            &parameters,
            &settings(),
        );
        let kinds: Vec<&str> = out.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds[6..],
            ["PodDisruptionBudget", "HorizontalPodAutoscaler"]
        );
        assert_eq!(out[0]["imagePullSecrets"], json!([{"name": "pull"}]));
        let deployment = &out[4];
        assert_eq!(
            deployment["spec"].get("replicas"),
            None,
            "the autoscaler owns them"
        );
        assert_eq!(deployment["metadata"]["labels"]["team"], "a");
        assert_eq!(
            deployment["metadata"]["labels"][MANAGED_BY_LABEL],
            MANAGED_BY_VALUE
        );
        assert_eq!(
            deployment["spec"]["selector"]["matchLabels"],
            json!({GATEWAY_NAME_LABEL: "gw"})
        );
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(
            pod["serviceAccountName"], "gw-admitpilot",
            "the proxies' identity is admitpilot's"
        );
        assert_eq!(pod["nodeSelector"]["zone"], "a");
        assert_eq!(pod["containers"][0]["resources"]["limits"]["memory"], "2Gi");
        assert_eq!(pod["containers"][0]["image"], "envoyproxy/envoy:v1.40.0");
        let service = &out[5];
        assert_eq!(service["spec"]["type"], "NodePort");
        assert_eq!(
            service["spec"]["selector"],
            json!({GATEWAY_NAME_LABEL: "gw"})
        );
        assert_eq!(service["metadata"]["annotations"]["lb"], "internal");
        assert_eq!(
            out[6]["spec"],
            json!({"minAvailable": 1,
            "selector": {"matchLabels": {GATEWAY_NAME_LABEL: "gw"}}})
        );
        assert_eq!(
            out[7]["spec"],
            json!({"minReplicas": 2, "maxReplicas": 5,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gw-admitpilot"}})
        );
        assert_eq!(out[7]["metadata"]["ownerReferences"][0]["uid"], "u-1");
    }

    #[test]
    fn a_gateway_not_yet_stored_gets_nothing() {
        let object = test_object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "apps"},
            "spec": {"gatewayClassName": "c", "listeners": []}}));
        let Spec::KubernetesGateway(gateway) = &object.spec else {
            panic!("a Gateway");
        };
        assert!(objects(
            &Snapshot::default(),
            (&object, gateway),
            &Parameters::default(),
            &settings()
        )
        .is_empty());
    }
}
