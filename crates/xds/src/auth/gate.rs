//! What one stream may receive: takes its group's configurations, its [`SecretAccess`] and [`CollectionAccess`], and
//! yields the configurations without the MCP collections its identity may not list (answered empty) and without
//! the `kubernetes://` secrets it withholds (certificates with their private keys, and
//! on an open port also CA bundles). Secrets the gateway reads from its own files (`file-cert:`, `file-root:`)
//! carry no key material and always pass. Each newly withheld name is logged once per stream (names only, never
//! content) and counted in `admitpilot_xds_secret_denied_total{reason}`.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{secret, Secret};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;

use super::{Admitted, CollectionAccess, SecretAccess};
use crate::metrics::XdsMetrics;
use crate::resources::{Encoded, Family, GroupConfig, ResourceType, TypeResources};

/// Prefixes of the SDS names made from Kubernetes Secrets ([`admitpilot_translate::naming::credential_secret`]): of the
/// gateway's namespace, of another one a ReferenceGrant allows, and of an Ingress's namespace.
const KUBERNETES_PREFIXES: [&str; 3] = [
    "kubernetes://",
    "kubernetes-gateway://",
    admitpilot_translate::naming::INGRESS_CREDENTIAL_PREFIX,
];

/// Whether an SDS name is an Ingress TLS Secret of a namespace other than `namespace`.
fn other_namespace_ingress_secret(name: &str, namespace: &str) -> bool {
    admitpilot_translate::ingress::parse_credential(name)
        .is_some_and(|(secret_namespace, _)| secret_namespace != namespace)
}

/// The name of the Secret of `namespace` an SDS name is made from (`kubernetes://<name>`, or a
/// `kubernetes-gateway://` or `kubernetes-ingress://` credential of that namespace); `None` for any other.
fn own_namespace_secret<'a>(sds_name: &'a str, namespace: &str) -> Option<&'a str> {
    if let Some(name) = sds_name.strip_prefix("kubernetes://") {
        return Some(name);
    }
    let (secret_namespace, name) = admitpilot_translate::naming::parse_gateway_credential(sds_name)
        .or_else(|| admitpilot_translate::ingress::parse_credential(sds_name))?;
    (secret_namespace == namespace).then_some(name)
}

/// The Secrets of `namespace` whose certificates (not CA bundles: those are public) a group's config holds, by
/// name: what a gateway of that namespace is asked about one by one when it may not get every Secret there.
pub(crate) fn certificate_secrets(config: &GroupConfig, namespace: &str) -> BTreeSet<String> {
    config
        .of(ResourceType::Secret)
        .by_name
        .iter()
        .filter(|(_, entry)| !is_ca_bundle(entry))
        .filter_map(|(name, _)| own_namespace_secret(name, namespace))
        .map(str::to_string)
        .collect()
}

/// Which secrets of a group a stream does not get, by SDS name and content.
type Withhold = Box<dyn Fn(&str, &Encoded) -> bool>;

/// What one stream withholds, and what it has already reported.
pub(crate) struct SecretGate {
    access: SecretAccess,
    collections: CollectionAccess,
    reported: HashSet<Arc<str>>,
}

impl SecretGate {
    /// A gate applying `access`, with every MCP collection.
    #[cfg(test)]
    pub(crate) fn new(access: SecretAccess) -> Self {
        SecretGate {
            access,
            collections: CollectionAccess::All,
            reported: HashSet::new(),
        }
    }

    /// A gate applying what a stream was admitted to.
    pub(crate) fn admitted(admitted: &Admitted) -> Self {
        SecretGate {
            access: admitted.secrets.clone(),
            collections: admitted.collections.clone(),
            reported: HashSet::new(),
        }
    }

    /// `config` as the stream may see it: the same `Arc` when nothing is withheld.
    pub(crate) fn view(
        &mut self,
        config: Arc<GroupConfig>,
        proxy: impl FnOnce() -> String,
        metrics: &XdsMetrics,
    ) -> Arc<GroupConfig> {
        match config.family {
            Family::Envoy => self.secrets_view(config, proxy, metrics),
            Family::Mcp => self.collections_view(config),
        }
    }

    /// An MCP feed without the collections the stream may not list: each is answered empty.
    fn collections_view(&self, config: Arc<GroupConfig>) -> Arc<GroupConfig> {
        let CollectionAccess::Only(allowed) = &self.collections else {
            return config;
        };
        let mut view = (*config).clone();
        for kind in Family::Mcp.types() {
            let ResourceType::Mcp(collection) = kind else {
                continue;
            };
            if !allowed.contains(&collection.kind()) {
                if let Some(slot) = view.types.get_mut(kind.index()) {
                    *slot = Arc::new(TypeResources::new(Default::default()));
                }
            }
        }
        Arc::new(view)
    }

    /// An Envoy group's config without the secrets the stream withholds.
    fn secrets_view(
        &mut self,
        config: Arc<GroupConfig>,
        proxy: impl FnOnce() -> String,
        metrics: &XdsMetrics,
    ) -> Arc<GroupConfig> {
        let (reason, detail, withhold): (&str, String, Withhold) = match &self.access {
            SecretAccess::All => return config,
            SecretAccess::Withheld {
                reason,
                detail,
                ca_bundles,
            } => {
                let ca_bundles = *ca_bundles;
                (
                    *reason,
                    detail.clone(),
                    Box::new(move |name, entry| is_withheld(name, entry, ca_bundles)),
                )
            }
            SecretAccess::OwnNamespace { namespace } => {
                let namespace = namespace.clone();
                (
                    "rbac",
                    format!("its identity may not get Secrets outside its namespace {namespace}"),
                    Box::new(move |name, _| other_namespace_ingress_secret(name, &namespace)),
                )
            }
            SecretAccess::Named { namespace, allowed } => {
                let (namespace, allowed) = (namespace.clone(), Arc::clone(allowed));
                (
                    "rbac",
                    format!(
                        "its identity may get only these Secrets of its namespace {namespace}: {allowed:?}"
                    ),
                    Box::new(move |name, entry| {
                        other_namespace_ingress_secret(name, &namespace)
                            || own_namespace_secret(name, &namespace).is_some_and(|secret| {
                                !allowed.contains(secret) && !is_ca_bundle(entry)
                            })
                    }),
                )
            }
        };
        let secrets = config.of(ResourceType::Secret);
        let (kept, withheld): (Vec<_>, Vec<_>) = secrets
            .by_name
            .iter()
            .partition(|(name, entry)| !withhold(name, entry));
        if withheld.is_empty() {
            return config;
        }
        let new: Vec<&str> = withheld
            .iter()
            .filter(|(name, _)| self.reported.insert(Arc::clone(name)))
            .map(|(name, _)| &***name)
            .collect();
        if !new.is_empty() {
            metrics.secret_denied(reason, new.len() as u64);
            tracing::warn!(
                proxy = proxy(),
                secrets = ?new,
                reason,
                why = %detail,
                "secrets withheld from an xDS stream: its identity may not read them"
            );
        }
        let kept = kept
            .into_iter()
            .map(|(name, entry)| (Arc::clone(name), Arc::clone(entry)))
            .collect();
        let mut view = (*config).clone();
        if let Some(slot) = view.types.get_mut(ResourceType::Secret.index()) {
            *slot = Arc::new(TypeResources::new(kept));
        }
        Arc::new(view)
    }
}

/// Whether the stream must not get this secret.
fn is_withheld(name: &str, entry: &Encoded, ca_bundles: bool) -> bool {
    KUBERNETES_PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix))
        && !(ca_bundles && is_ca_bundle(entry))
}

/// Whether an encoded secret is a CA bundle only (a validation context: public, no key).
fn is_ca_bundle(entry: &Encoded) -> bool {
    Any::decode(entry.any.as_ref())
        .ok()
        .and_then(|any| Secret::decode(any.value.as_slice()).ok())
        .is_some_and(|secret| matches!(secret.r#type, Some(secret::Type::ValidationContext(_))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, TlsCertificate,
    };
    use std::collections::BTreeMap;
    use std::time::Instant;

    fn encoded(name: &str, r#type: secret::Type) -> (Arc<str>, Arc<Encoded>) {
        let secret = Secret {
            name: name.into(),
            r#type: Some(r#type),
        };
        (
            Arc::from(name),
            Arc::new(Encoded::new(
                name,
                ResourceType::Secret.type_url().into(),
                secret.encode_to_vec(),
            )),
        )
    }

    fn config() -> Arc<GroupConfig> {
        let secrets: BTreeMap<_, _> = [
            encoded(
                "kubernetes://gw-cert",
                secret::Type::TlsCertificate(TlsCertificate::default()),
            ),
            encoded(
                "kubernetes://gw-cert-cacert",
                secret::Type::ValidationContext(CertificateValidationContext::default()),
            ),
            encoded(
                "file-cert:/c~/k",
                secret::Type::TlsCertificate(TlsCertificate::default()),
            ),
            encoded(
                "kubernetes-gateway://certs/gw",
                secret::Type::TlsCertificate(TlsCertificate::default()),
            ),
            encoded(
                "kubernetes-ingress://shop/shop-tls",
                secret::Type::TlsCertificate(TlsCertificate::default()),
            ),
            encoded(
                "kubernetes-ingress://higress-system/own-tls",
                secret::Type::TlsCertificate(TlsCertificate::default()),
            ),
        ]
        .into_iter()
        .collect();
        let mut config = GroupConfig::empty();
        config.snapshot_version = 1;
        config.published = Instant::now();
        config.types[ResourceType::Secret.index()] = Arc::new(TypeResources::new(secrets));
        Arc::new(config)
    }

    fn names(config: &GroupConfig) -> Vec<String> {
        config
            .of(ResourceType::Secret)
            .by_name
            .keys()
            .map(|n| n.to_string())
            .collect()
    }

    fn withheld(reason: &'static str, ca_bundles: bool) -> SecretAccess {
        SecretAccess::Withheld {
            reason,
            detail: String::new(),
            ca_bundles,
        }
    }

    #[test]
    fn full_access_shares_the_group_config() {
        let config = config();
        let mut gate = SecretGate::new(SecretAccess::All);
        let view = gate.view(config.clone(), String::new, &XdsMetrics::default());
        assert!(Arc::ptr_eq(&view, &config));
    }

    #[test]
    fn a_proxy_without_rbac_gets_ca_bundles_and_file_secrets_only() {
        let metrics = XdsMetrics::default();
        let mut gate = SecretGate::new(withheld("rbac", true));
        let view = gate.view(config(), String::new, &metrics);
        assert_eq!(
            names(&view),
            ["file-cert:/c~/k", "kubernetes://gw-cert-cacert"]
        );
        // Reported once: the same withheld name on the next push is not counted again.
        gate.view(config(), String::new, &metrics);
        assert_eq!(gate.reported.len(), 4);
    }

    /// Ingress TLS Secrets of other namespaces need read access to every namespace's Secrets.
    #[test]
    fn a_proxy_reading_its_namespace_only_gets_no_other_namespace_ingress_secret() {
        let mut gate = SecretGate::new(SecretAccess::OwnNamespace {
            namespace: "higress-system".into(),
        });
        let view = gate.view(config(), String::new, &XdsMetrics::default());
        assert!(!names(&view).contains(&"kubernetes-ingress://shop/shop-tls".to_string()));
        assert!(names(&view).contains(&"kubernetes-ingress://higress-system/own-tls".to_string()));
        assert_eq!(names(&view).len(), 5);
    }

    /// A Role with `resourceNames`: of its own namespace's certificates, only those named; CA bundles, file
    /// secrets and granted Secrets of other namespaces as before.
    #[test]
    fn a_proxy_allowed_some_secrets_by_name_gets_only_those_of_its_namespace() {
        let config = config();
        assert_eq!(
            certificate_secrets(&config, "higress-system"),
            BTreeSet::from(["gw-cert".to_string(), "own-tls".to_string()])
        );
        let mut gate = SecretGate::new(SecretAccess::Named {
            namespace: "higress-system".into(),
            allowed: Arc::new(BTreeSet::from(["own-tls".to_string()])),
        });
        let view = gate.view(config, String::new, &XdsMetrics::default());
        assert_eq!(
            names(&view),
            [
                "file-cert:/c~/k",
                "kubernetes-gateway://certs/gw",
                "kubernetes-ingress://higress-system/own-tls",
                "kubernetes://gw-cert-cacert"
            ]
        );
    }

    #[test]
    fn an_unverified_proxy_gets_no_kubernetes_secret() {
        let mut gate = SecretGate::new(withheld("unauthenticated", false));
        let view = gate.view(config(), String::new, &XdsMetrics::default());
        assert_eq!(names(&view), ["file-cert:/c~/k"]);
    }
}
