//! BackendTLSPolicy as Istio DestinationRules (pure): takes the snapshot's BackendTLSPolicies and yields, per
//! targeted Service, a DestinationRule (`gateway-api~<policy>~<service>`, in the policy's namespace) whose client
//! TLS is the policy's, as istiod converts them (`pilot/pkg/config/kube/gateway/backend_policies.go`): mode
//! `SIMPLE`, SNI `validation.hostname`, the certificate checked against `subjectAltNames`, or the host name when
//! there are none (the spec: the host name "MUST be used for authentication" then); trusted CAs from the first
//! `caCertificateRefs` ConfigMap that resolves (a PEM `ca.crt`, served over SDS as `configmap://<ns>/<name>-cacert`,
//! Istio's name) or the gateway's system bundle for `wellKnownCACertificates: System`. References none of which
//! resolves (not a core ConfigMap, or none with `ca.crt`) still make a DestinationRule, whose CA never arrives: the
//! backend gets no traffic rather than unverified traffic. A `sectionName` narrows the policy to that Service port.
//! When two policies target the same Service port, the oldest wins (then namespace/name), as the spec's conflict
//! rule says. A DestinationRule of the config for the same host gets the policies' TLS set over its own, so it
//! cannot send a protected port in plain text. The gateway of a Gateway whose `spec.tls.backend.clientCertificateRef`
//! resolves presents that certificate on this TLS.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{naming, secret};
use admitpilot_model::gateway_api::backend_tls_policy::{
    oldest_first_policies, BackendTlsPolicy, BackendTlsValidation,
};
use admitpilot_model::gateway_api::common::LocalReference;
use admitpilot_model::gateway_api::reference_grant::granted;
use admitpilot_model::gateway_api::Gateway;
use admitpilot_model::istio::destination_rule::{
    ClientTlsMode, ClientTlsSettings, PortTrafficPolicy,
};
use admitpilot_model::istio::virtual_service::PortSelector;
use admitpilot_model::istio::DestinationRule;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, ObjectMeta, Snapshot, Spec};

/// A credential no secret is ever served for (no `<namespace>/<name>` in it, so it names no ConfigMap): a policy
/// whose CA cannot be resolved fails closed.
pub const UNRESOLVED_CREDENTIAL: &str = "configmap://~unresolved~";

/// Whether one `caCertificateRefs` entry of a policy in `namespace` resolves: a core ConfigMap whose `ca.crt` holds
/// PEM certificates ([`secret::configmap_ca_bundle`]); else the `ResolvedRefs` reason and message status gives.
pub fn ca_reference(
    snapshot: &Snapshot,
    namespace: &str,
    reference: &LocalReference,
) -> Result<(), (&'static str, String)> {
    let (group, kind, name) = (&reference.group, &reference.kind, &reference.name);
    if !group.is_empty() || kind != "ConfigMap" {
        return Err((
            "InvalidKind",
            format!("caCertificateRefs names a {group}/{kind}; only core ConfigMaps are read"),
        ));
    }
    if secret::configmap_ca_bundle(snapshot, namespace, name).is_none() {
        return Err((
            "InvalidCACertificateRef",
            format!(
                "ConfigMap {namespace}/{name} does not exist or has no PEM certificates in ca.crt"
            ),
        ));
    }
    Ok(())
}

/// The credential of the client certificate a Gateway presents to the backends it calls over TLS (Gateway API
/// v1.6 `apis/v1/gateway_types.go`, `GatewayBackendTLS.ClientCertificateRef`, feature
/// GatewayBackendClientCertificate): `None` when `spec.tls.backend.clientCertificateRef` is not set; the Secret's
/// name when it is in the Gateway's namespace, `kubernetes-gateway://<namespace>/<name>` when a ReferenceGrant there
/// opens it to Gateways of the Gateway's namespace (the gateway's SDS lookup, `translate::secret`, checks the same
/// grant). Otherwise the Gateway's `ResolvedRefs` reason and message: `RefNotPermitted` (another namespace, no grant),
/// `InvalidClientCertificateRef` (not a core Secret, missing, or no certificate Envoy could load with its key). The
/// status layer writes this verdict, and the conversion presents only a credential it accepts.
pub fn client_certificate(
    snapshot: &Snapshot,
    object: &ConfigObject,
    gateway: &Gateway,
) -> Result<Option<String>, (&'static str, String)> {
    let Some(reference) = gateway.backend_client_certificate() else {
        return Ok(None);
    };
    let namespace = object.metadata.namespace.as_str();
    let target = reference.namespace_or(namespace);
    let (group, kind) = (
        reference.group.as_deref().unwrap_or(""),
        reference.kind.as_deref().unwrap_or("Secret"),
    );
    let name = &reference.name;
    if target != namespace
        && !granted(
            snapshot,
            ("Gateway", namespace),
            (group, kind, target, name),
        )
    {
        return Err((
            "RefNotPermitted",
            format!(
                "spec.tls.backend.clientCertificateRef: {kind} {target}/{name} is in another namespace and no \
                 ReferenceGrant there allows Gateways of {namespace}"
            ),
        ));
    }
    let usable = if reference.is_core_secret() {
        secret::serves_certificate(snapshot, target, name)
    } else {
        Err(format!("{group}/{kind} is not a core Secret"))
    };
    if let Err(why) = usable {
        return Err((
            "InvalidClientCertificateRef",
            format!("spec.tls.backend.clientCertificateRef {target}/{name}: {why}"),
        ));
    }
    Ok(Some(if target == namespace {
        name.clone()
    } else {
        naming::gateway_credential(target, name)
    }))
}

/// The client TLS a policy asks for, its CA resolved against `snapshot`, presenting the credential `presented` (the
/// Gateway's client certificate, [`client_certificate`]) when there is one.
fn client_tls(
    snapshot: &Snapshot,
    namespace: &str,
    validation: &BackendTlsValidation,
    presented: Option<&str>,
) -> ClientTlsSettings {
    let mut subject_alt_names: Vec<String> = validation
        .subject_alt_names
        .iter()
        .filter_map(|san| san.hostname.clone().or_else(|| san.uri.clone()))
        .collect();
    if subject_alt_names.is_empty() && !validation.hostname.is_empty() {
        subject_alt_names.push(validation.hostname.clone());
    }
    let refs = &validation.ca_certificate_refs;
    let credential_name = match refs
        .iter()
        .find(|reference| ca_reference(snapshot, namespace, reference).is_ok())
    {
        Some(reference) => naming::configmap_credential(namespace, &reference.name),
        None if !refs.is_empty() => UNRESOLVED_CREDENTIAL.to_string(),
        // `System`: the gateway's own CA bundle (`translate::policy::SYSTEM_CA_BUNDLE`).
        None => String::new(),
    };
    ClientTlsSettings {
        mode: Some(ClientTlsMode::Simple),
        credential_name,
        subject_alt_names,
        sni: validation.hostname.clone(),
        presented_credential: presented.unwrap_or_default().to_string(),
        ..ClientTlsSettings::default()
    }
}

/// The number of the port `section` names on the Service `namespace/name`, when both exist.
fn port_number(snapshot: &Snapshot, namespace: &str, name: &str, section: &str) -> Option<u32> {
    let service = snapshot.get(&ObjectKey::new(Kind::Service, namespace, name))?;
    let Spec::Service(spec) = &service.spec else {
        return None;
    };
    spec.ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(section))
        .and_then(|p| u32::try_from(p.port).ok())
}

/// The client TLS the policies ask for on one Service: for every port, and per port (`sectionName`).
#[derive(Debug, Default)]
struct ServiceTls {
    every_port: Option<ClientTlsSettings>,
    ports: BTreeMap<u32, ClientTlsSettings>,
}

impl ServiceTls {
    /// Sets the policies' TLS on `rule`, over any TLS it had (its own, or a port's), so no DestinationRule can
    /// leave a port the policies protect in plain text.
    fn overlay(&self, rule: &mut DestinationRule) {
        let traffic = rule.traffic_policy.get_or_insert_with(Box::default);
        if let Some(tls) = &self.every_port {
            traffic.tls = Some(tls.clone());
            for port in &mut traffic.port_level_settings {
                if port.tls.is_some() {
                    port.tls = Some(tls.clone());
                }
            }
        }
        for (number, tls) in &self.ports {
            let existing = traffic
                .port_level_settings
                .iter_mut()
                .find(|p| p.port.as_ref().and_then(|p| p.number) == Some(*number));
            match existing {
                Some(port) => port.tls = Some(tls.clone()),
                None => traffic.port_level_settings.push(PortTrafficPolicy {
                    port: Some(PortSelector {
                        number: Some(*number),
                    }),
                    tls: Some(tls.clone()),
                    ..PortTrafficPolicy::default()
                }),
            }
        }
    }
}

/// The BackendTLSPolicy that decides the TLS to port `port` of the Service `namespace/name` (a policy naming that
/// port by `sectionName` over one for every port, the oldest first within each, as [`destination_rules`] sets
/// them), when the CA it asks for cannot be had: `caCertificateRefs` none of which resolves. The backend then gets
/// no traffic (the CA never arrives), so a route to it is not resolved (Gateway API v1.6 `apis/v1/httproute_types.go`,
/// `HTTPBackendRef`: a BackendRef is invalid if "a BackendTLSPolicy is present that refers to the Service, and the
/// implementation is unable to meet the requirement"). Returns the policy's name.
pub fn unmet_policy(snapshot: &Snapshot, namespace: &str, name: &str, port: u32) -> Option<String> {
    let targets = |policy: &BackendTlsPolicy, by_section: bool| {
        policy.target_refs.iter().any(|target| {
            target.group.is_empty()
                && target.kind == "Service"
                && target.name == name
                && match &target.section_name {
                    Some(section) => {
                        by_section && port_number(snapshot, namespace, name, section) == Some(port)
                    }
                    None => !by_section,
                }
        })
    };
    let policies = oldest_first_policies(snapshot);
    let in_namespace = || {
        policies
            .iter()
            .filter(|(object, _)| object.metadata.namespace == namespace)
    };
    let (object, policy) = in_namespace()
        .find(|(_, policy)| targets(policy, true))
        .or_else(|| in_namespace().find(|(_, policy)| targets(policy, false)))?;
    let refs = &policy.validation.ca_certificate_refs;
    let unmet = !refs.is_empty()
        && refs
            .iter()
            .all(|reference| ca_reference(snapshot, namespace, reference).is_err());
    unmet.then(|| object.metadata.name.clone())
}

/// What the policies ask for, per targeted Service (namespace, name); the oldest policy wins a port.
fn service_tls(
    snapshot: &Snapshot,
    presented: Option<&str>,
) -> BTreeMap<(String, String), (ServiceTls, Option<String>)> {
    let policies = oldest_first_policies(snapshot);
    let mut out: BTreeMap<(String, String), (ServiceTls, Option<String>)> = BTreeMap::new();
    for (object, policy) in policies {
        let namespace = object.metadata.namespace.as_str();
        let tls = client_tls(snapshot, namespace, &policy.validation, presented);
        for target in &policy.target_refs {
            if !target.group.is_empty() || target.kind != "Service" {
                continue;
            }
            let entry = out
                .entry((namespace.to_string(), target.name.clone()))
                .or_insert_with(|| {
                    (
                        ServiceTls::default(),
                        object.metadata.creation_timestamp.clone(),
                    )
                });
            match &target.section_name {
                Some(section) => {
                    if let Some(port) = port_number(snapshot, namespace, &target.name, section) {
                        entry.0.ports.entry(port).or_insert_with(|| tls.clone());
                    }
                }
                None => {
                    entry.0.every_port.get_or_insert_with(|| tls.clone());
                }
            }
        }
    }
    out
}

/// The DestinationRules that carry every BackendTLSPolicy of `snapshot`: one per targeted Service
/// (`gateway-api~backend-tls~<service>`, in its namespace, with the oldest policy's creation time; the settings of
/// the config's first DestinationRule for that host, if any), and every DestinationRule of the config for that
/// host with the policies' TLS set over its own (same key, so it stands in for it): whichever rule the translator
/// picks for the host, the policies' TLS is in it. The TLS presents the credential `presented`, the client
/// certificate of the Gateway the proxy serves ([`client_certificate`]), when it has one.
pub fn destination_rules(
    snapshot: &Snapshot,
    domain_suffix: &str,
    presented: Option<&str>,
) -> Vec<Arc<ConfigObject>> {
    let wanted = service_tls(snapshot, presented);
    if wanted.is_empty() {
        return Vec::new();
    }
    let by_host: BTreeMap<String, &ServiceTls> = wanted
        .iter()
        .map(|((namespace, name), (tls, _))| {
            (naming::service_fqdn(name, namespace, domain_suffix), tls)
        })
        .collect();
    // The config's own rules for those hosts: each gets the policies' TLS over its own.
    let mut theirs: BTreeMap<String, Vec<&Arc<ConfigObject>>> = BTreeMap::new();
    for object in snapshot.of_kind(Kind::DestinationRule) {
        if let Spec::DestinationRule(rule) = &object.spec {
            let host =
                naming::resolve_short_name(&rule.host, &object.metadata.namespace, domain_suffix);
            if by_host.contains_key(&host) {
                theirs.entry(host).or_default().push(object);
            }
        }
    }
    let mut out = Vec::new();
    for ((namespace, name), (tls, created)) in &wanted {
        let host = naming::service_fqdn(name, namespace, domain_suffix);
        // Whichever rule the translator picks for the host carries the same settings: the first of the config's
        // (its load balancing, connection pool…, for every namespace), or none, with the policies' TLS.
        let mut rule = match theirs.get(&host).and_then(|list| list.first()) {
            Some(object) => match &object.spec {
                Spec::DestinationRule(rule) => DestinationRule {
                    export_to: Vec::new(),
                    workload_selector: None,
                    ..rule.clone()
                },
                _ => DestinationRule::default(),
            },
            None => DestinationRule::default(),
        };
        rule.host = host;
        tls.overlay(&mut rule);
        out.push(Arc::new(ConfigObject {
            api_version: Kind::DestinationRule.api_version(),
            metadata: ObjectMeta {
                name: format!("{}backend-tls~{name}", super::SYNTHESIZED),
                namespace: namespace.clone(),
                creation_timestamp: created.clone(),
                ..ObjectMeta::default()
            },
            spec: Spec::DestinationRule(rule),
        }));
    }
    for (host, objects) in &theirs {
        let Some(tls) = by_host.get(host) else {
            continue;
        };
        for object in objects {
            let Spec::DestinationRule(rule) = &object.spec else {
                continue;
            };
            let mut rule = rule.clone();
            tls.overlay(&mut rule);
            out.push(Arc::new(ConfigObject {
                spec: Spec::DestinationRule(rule),
                ..ConfigObject::clone(object)
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml;

    /// A Service with two named ports, a policy for every port whose CA is gone, and one for port `https` that
    /// trusts the system's CAs.
    const CONFIG: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{name: https, port: 443}, {name: admin, port: 8443}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: every-port, namespace: default, creationTimestamp: '2026-01-01T00:00:00Z'}
spec:
  targetRefs: [{group: '', kind: Service, name: web}]
  validation: {hostname: web.example, caCertificateRefs: [{group: '', kind: ConfigMap, name: gone}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: https-port, namespace: default, creationTimestamp: '2026-01-02T00:00:00Z'}
spec:
  targetRefs: [{group: '', kind: Service, name: web, sectionName: https}]
  validation: {hostname: web.example, wellKnownCACertificates: System}
";

    #[test]
    fn a_port_policy_decides_its_port_and_an_unresolved_ca_is_unmet_elsewhere() {
        let snapshot = snapshot_from_yaml(CONFIG);
        assert_eq!(unmet_policy(&snapshot, "default", "web", 443), None);
        assert_eq!(
            unmet_policy(&snapshot, "default", "web", 8443).as_deref(),
            Some("every-port")
        );
        assert_eq!(unmet_policy(&snapshot, "default", "other", 443), None);
        assert_eq!(unmet_policy(&snapshot, "elsewhere", "web", 8443), None);
    }
}
