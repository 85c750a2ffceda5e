//! BackendTLSPolicy as Istio DestinationRules (pure): takes the snapshot's BackendTLSPolicies and yields, per
//! targeted Service, a DestinationRule (`gateway-api~<policy>~<service>`, in the policy's namespace) whose client
//! TLS is the policy's, as istiod converts them (`pilot/pkg/config/kube/gateway/backend_policies.go`): mode
//! `SIMPLE`, SNI `validation.hostname`, the certificate checked against `subjectAltNames`, or the host name when
//! there are none (the spec: the host name "MUST be used for authentication" then); trusted CAs from the first
//! `caCertificateRefs` ConfigMap (`ca.crt`, served over SDS as `configmap://<ns>/<name>-cacert`, Istio's name) or
//! the gateway's system bundle for `wellKnownCACertificates: System`. A reference admitpilot cannot resolve (not a
//! core ConfigMap, or none with `ca.crt`) still makes a DestinationRule, whose CA never arrives: the backend gets no
//! traffic rather than unverified traffic. A `sectionName` narrows the policy to that Service port. When two
//! policies target the same Service port, the oldest wins (then namespace/name), as the spec's conflict rule says.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::model::gateway_api::backend_tls_policy::BackendTlsValidation;
use crate::model::gateway_api::BackendTlsPolicy;
use crate::model::istio::destination_rule::{
    ClientTlsMode, ClientTlsSettings, PortTrafficPolicy, TrafficPolicy,
};
use crate::model::istio::virtual_service::PortSelector;
use crate::model::istio::DestinationRule;
use crate::model::{ConfigObject, Kind, ObjectKey, ObjectMeta, Snapshot, Spec};
use crate::translate::naming;

/// A credential no secret is ever served for: a policy whose CA cannot be resolved fails closed.
pub const UNRESOLVED_CREDENTIAL: &str = "configmap://unresolved/ca";

/// The client TLS a policy asks for, its CA resolved against `snapshot`.
fn client_tls(
    snapshot: &Snapshot,
    namespace: &str,
    validation: &BackendTlsValidation,
) -> ClientTlsSettings {
    let mut subject_alt_names: Vec<String> = validation
        .subject_alt_names
        .iter()
        .filter_map(|san| san.hostname.clone().or_else(|| san.uri.clone()))
        .collect();
    if subject_alt_names.is_empty() && !validation.hostname.is_empty() {
        subject_alt_names.push(validation.hostname.clone());
    }
    let credential_name = match validation.ca_certificate_refs.first() {
        Some(reference) => {
            let resolves = reference.group.is_empty()
                && reference.kind == "ConfigMap"
                && snapshot
                    .get(&ObjectKey::new(
                        Kind::CaConfigMap,
                        namespace,
                        reference.name.clone(),
                    ))
                    .is_some();
            if resolves {
                format!(
                    "{}{namespace}/{}",
                    naming::CONFIGMAP_CREDENTIAL_PREFIX,
                    reference.name
                )
            } else {
                UNRESOLVED_CREDENTIAL.to_string()
            }
        }
        // `System`: the gateway's own CA bundle (`translate::policy::SYSTEM_CA_BUNDLE`).
        None => String::new(),
    };
    ClientTlsSettings {
        mode: Some(ClientTlsMode::Simple),
        credential_name,
        subject_alt_names,
        sni: validation.hostname.clone(),
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

/// The DestinationRules of every BackendTLSPolicy of `snapshot` (one per policy and Service, with the policy's
/// creation time).
pub fn destination_rules(snapshot: &Snapshot, domain_suffix: &str) -> Vec<Arc<ConfigObject>> {
    let mut policies: Vec<(&Arc<ConfigObject>, &BackendTlsPolicy)> = snapshot
        .of_kind(Kind::BackendTlsPolicy)
        .filter_map(|object| match &object.spec {
            Spec::BackendTlsPolicy(policy) => Some((object, policy)),
            _ => None,
        })
        .collect();
    policies.sort_by(|(a, _), (b, _)| {
        let key = |o: &ConfigObject| {
            (
                o.metadata.creation_timestamp.clone(),
                o.metadata.namespace.clone(),
                o.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    // (namespace, service, port or None for every port) already taken by an older policy.
    let mut taken: BTreeSet<(String, String, Option<u32>)> = BTreeSet::new();
    let mut rules: BTreeMap<(String, String), ConfigObject> = BTreeMap::new();
    for (object, policy) in policies {
        let namespace = object.metadata.namespace.as_str();
        let tls = client_tls(snapshot, namespace, &policy.validation);
        for target in &policy.target_refs {
            if !target.group.is_empty() || target.kind != "Service" {
                continue;
            }
            let port = match &target.section_name {
                Some(section) => match port_number(snapshot, namespace, &target.name, section) {
                    Some(port) => Some(port),
                    None => continue,
                },
                None => None,
            };
            let id = (namespace.to_string(), target.name.clone(), port);
            if !taken.insert(id) {
                continue;
            }
            let name = format!(
                "{}{}~{}",
                super::SYNTHESIZED,
                object.metadata.name,
                target.name
            );
            let rule = rules
                .entry((namespace.to_string(), name.clone()))
                .or_insert_with(|| ConfigObject {
                    api_version: Kind::DestinationRule.api_version(),
                    metadata: ObjectMeta {
                        name,
                        namespace: namespace.to_string(),
                        creation_timestamp: object.metadata.creation_timestamp.clone(),
                        ..ObjectMeta::default()
                    },
                    spec: Spec::DestinationRule(DestinationRule {
                        host: naming::service_fqdn(&target.name, namespace, domain_suffix),
                        traffic_policy: Some(Box::default()),
                        ..DestinationRule::default()
                    }),
                });
            let Spec::DestinationRule(rule) = &mut rule.spec else {
                continue;
            };
            let traffic: &mut TrafficPolicy = rule.traffic_policy.get_or_insert_with(Box::default);
            match port {
                None => traffic.tls = Some(tls.clone()),
                Some(number) => traffic.port_level_settings.push(PortTrafficPolicy {
                    port: Some(PortSelector {
                        number: Some(number),
                    }),
                    tls: Some(tls.clone()),
                    ..PortTrafficPolicy::default()
                }),
            }
        }
    }
    rules.into_values().map(Arc::new).collect()
}
