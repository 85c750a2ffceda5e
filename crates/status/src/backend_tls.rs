//! BackendTLSPolicy status (pure): takes a snapshot and the Gateways of admitpilot's GatewayClasses, and yields each
//! BackendTLSPolicy's `status.ancestors` entries of admitpilot's controller: one per such Gateway that has a route to
//! a Service the policy targets (the policy's ancestor, as the spec defines it for Service targets), each with
//! `Accepted` and `ResolvedRefs` (gateway-api `apis/v1/backendtlspolicy_types.go`, `policy_types.go`):
//!
//! * `Accepted` False, reason `Conflicted`, when an older policy (then namespace/name) already targets the same
//!   Service and section, as translation lets the oldest win (`translate::gateway_api::backend_tls`); False,
//!   `NoValidCACertificate`, when no `caCertificateRefs` entry resolves (the backend then gets no traffic);
//! * `ResolvedRefs` False, `InvalidKind`, for a reference that is not a core ConfigMap, `InvalidCACertificateRef`
//!   for a ConfigMap that does not exist or has no PEM certificates in `ca.crt`.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::gateway_api::{condition, generation, StatusUpdate};
use admitpilot_model::gateway_api::backend_tls_policy::{
    oldest_first_policies, BackendTlsValidation,
};
use admitpilot_model::gateway_api::{route_view, GROUP, ROUTE_KINDS};
use admitpilot_model::{ConfigObject, Snapshot};
use admitpilot_translate::gateway_api::backend_tls::ca_reference;

/// The `ResolvedRefs` verdict of a policy's CA references (the first failing one's reason) and whether any of
/// them resolves (or the system's CAs are asked for instead).
fn ca_refs(
    snapshot: &Snapshot,
    namespace: &str,
    validation: &BackendTlsValidation,
) -> (Result<(), (&'static str, String)>, bool) {
    let verdicts: Vec<_> = validation
        .ca_certificate_refs
        .iter()
        .map(|r| ca_reference(snapshot, namespace, r))
        .collect();
    let any_valid = verdicts.is_empty() || verdicts.iter().any(Result::is_ok);
    let first_error = verdicts.into_iter().find_map(Result::err);
    (first_error.map_or(Ok(()), Err), any_valid)
}

/// The Gateways (of `gateways`) with a route whose backends include Service `namespace/name` for any of `services`.
pub(crate) fn ancestors<'a>(
    snapshot: &Snapshot,
    gateways: &[&'a ConfigObject],
    namespace: &str,
    services: &BTreeSet<&str>,
) -> Vec<&'a ConfigObject> {
    let mut out: Vec<&ConfigObject> = Vec::new();
    for object in ROUTE_KINDS.iter().flat_map(|kind| snapshot.of_kind(*kind)) {
        let Some(route) = route_view(object) else {
            continue;
        };
        let route_namespace = object.metadata.namespace.as_str();
        let sends_there = route.backend_refs.iter().any(|b| {
            b.group().is_empty()
                && b.kind() == "Service"
                && services.contains(b.name.as_str())
                && b.namespace_or(route_namespace) == namespace
        });
        if !sends_there {
            continue;
        }
        for parent in route.parent_refs {
            let found = gateways.iter().find(|g| {
                parent.group() == GROUP
                    && parent.kind() == "Gateway"
                    && g.metadata.name == parent.name
                    && g.metadata.namespace == parent.namespace_or(route_namespace)
            });
            if let Some(gateway) = found {
                if !out.iter().any(|o| o.key() == gateway.key()) {
                    out.push(gateway);
                }
            }
        }
    }
    out.sort_by_key(|g| g.key());
    out
}

/// One `status.ancestors` entry: the Gateway `gateway`, admitpilot's `controller`, and `conditions`.
pub(crate) fn ancestor_entry(
    gateway: &ConfigObject,
    controller: &str,
    conditions: &[Value],
) -> Value {
    json!({
        "ancestorRef": {
            "group": GROUP,
            "kind": "Gateway",
            "namespace": gateway.metadata.namespace,
            "name": gateway.metadata.name,
        },
        "controllerName": controller,
        "conditions": conditions,
    })
}

/// The status of every BackendTLSPolicy that has an ancestor among `gateways` (of admitpilot's classes).
pub fn backend_tls_policy_status(
    snapshot: &Snapshot,
    gateways: &[&ConfigObject],
    controller: &str,
    now: &str,
) -> Vec<StatusUpdate> {
    let policies = oldest_first_policies(snapshot);
    // (namespace, Service, section) already taken by an older policy.
    let mut claimed: BTreeSet<(&str, &str, Option<&str>)> = BTreeSet::new();
    let mut out = Vec::new();
    for (object, policy) in policies {
        let namespace = object.metadata.namespace.as_str();
        let mut conflicted = false;
        let mut services = BTreeSet::new();
        for target in &policy.target_refs {
            if !target.group.is_empty() || target.kind != "Service" {
                continue;
            }
            services.insert(target.name.as_str());
            conflicted |= !claimed.insert((
                namespace,
                target.name.as_str(),
                target.section_name.as_deref(),
            ));
        }
        let gateways = ancestors(snapshot, gateways, namespace, &services);
        if gateways.is_empty() {
            continue;
        }
        let generation = generation(object);
        let (refs, any_valid) = ca_refs(snapshot, namespace, &policy.validation);
        let cond =
            |kind, ok, reason, message: &str| condition(kind, ok, reason, message, generation, now);
        let accepted = if conflicted {
            cond(
                "Accepted",
                false,
                "Conflicted",
                "an older BackendTLSPolicy targets the same Service and section",
            )
        } else if !any_valid {
            cond(
                "Accepted",
                false,
                "NoValidCACertificate",
                "no caCertificateRefs entry resolves: the backend gets no traffic",
            )
        } else {
            cond("Accepted", true, "Accepted", "accepted")
        };
        let resolved = match &refs {
            Ok(()) => cond("ResolvedRefs", true, "ResolvedRefs", "references resolved"),
            Err((reason, message)) => cond("ResolvedRefs", false, reason, message),
        };
        let entries: Vec<Value> = gateways
            .iter()
            .map(|gateway| {
                ancestor_entry(gateway, controller, &[accepted.clone(), resolved.clone()])
            })
            .collect();
        out.push(StatusUpdate {
            key: object.key(),
            generation,
            status: json!({ "ancestors": entries }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml as snapshot;

    const CONFIG: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: ap
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: secure, port: 443}, {name: other, port: 443}]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ca, namespace: default}
data:
  ca.crt: |
    -----BEGIN CERTIFICATE-----
    MIIBezCCASGgAwIBAgIUYm5vdGFyZWFsY2VydGlmaWNhdGUwCgYIKoZIzj0EAwIw
    -----END CERTIFICATE-----
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: first, namespace: default, creationTimestamp: '2026-01-01T00:00:00Z', generation: 2}
spec:
  targetRefs: [{group: '', kind: Service, name: secure}]
  validation: {hostname: secure.example, caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: second, namespace: default, creationTimestamp: '2026-01-02T00:00:00Z'}
spec:
  targetRefs: [{group: '', kind: Service, name: secure}]
  validation: {hostname: secure.example, wellKnownCACertificates: System}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: port, namespace: default, creationTimestamp: '2026-01-03T00:00:00Z'}
spec:
  targetRefs: [{group: '', kind: Service, name: secure, sectionName: https}]
  validation: {hostname: secure.example, wellKnownCACertificates: System}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: bad-ca, namespace: default}
spec:
  targetRefs: [{group: '', kind: Service, name: other}]
  validation:
    hostname: other.example
    caCertificateRefs: [{group: '', kind: Secret, name: ca}, {group: '', kind: ConfigMap, name: missing}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: unused, namespace: default}
spec:
  targetRefs: [{group: '', kind: Service, name: nobody-routes-here}]
  validation: {hostname: x.example, wellKnownCACertificates: System}
";

    /// A condition's type, status and reason.
    type Row = (String, String, String);

    /// (policy, its conditions) of each update's single ancestor, which must be `gw`.
    fn verdicts(updates: &[StatusUpdate]) -> Vec<(String, Vec<Row>)> {
        updates
            .iter()
            .map(|u| {
                let ancestors = u.status["ancestors"].as_array().unwrap();
                assert_eq!(ancestors.len(), 1, "{}", u.key);
                assert_eq!(ancestors[0]["ancestorRef"]["name"], "gw");
                assert_eq!(ancestors[0]["controllerName"], "ctl");
                let conditions = ancestors[0]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| {
                        let text = |k: &str| c[k].as_str().unwrap().to_string();
                        (text("type"), text("status"), text("reason"))
                    })
                    .collect();
                (u.key.name.clone(), conditions)
            })
            .collect()
    }

    fn row(kind: &str, status: &str, reason: &str) -> Row {
        (kind.into(), status.into(), reason.into())
    }

    #[test]
    fn policies_report_conflicts_and_unresolved_ca_references_per_gateway() {
        let snapshot = snapshot(CONFIG);
        let gateway = snapshot
            .get(&admitpilot_model::ObjectKey::new(
                admitpilot_model::Kind::KubernetesGateway,
                "default",
                "gw",
            ))
            .unwrap();
        let updates = backend_tls_policy_status(&snapshot, &[gateway], "ctl", "now");
        let resolved = row("ResolvedRefs", "True", "ResolvedRefs");
        assert_eq!(
            verdicts(&updates),
            [
                // No creation time: oldest first.
                (
                    "bad-ca".to_string(),
                    vec![
                        row("Accepted", "False", "NoValidCACertificate"),
                        row("ResolvedRefs", "False", "InvalidKind")
                    ]
                ),
                (
                    "first".to_string(),
                    vec![row("Accepted", "True", "Accepted"), resolved.clone()]
                ),
                (
                    "second".to_string(),
                    vec![row("Accepted", "False", "Conflicted"), resolved.clone()]
                ),
                (
                    "port".to_string(),
                    vec![row("Accepted", "True", "Accepted"), resolved.clone()]
                ),
            ]
        );
        assert_eq!(
            updates[1].status["ancestors"][0]["conditions"][0]["observedGeneration"],
            2
        );
    }
}
