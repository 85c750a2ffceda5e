//! SDS secrets (pure): takes the Kubernetes Secret a Gateway server or DestinationRule names in `credentialName`
//! and yields the Envoy `Secret`s (`kubernetes://<name>` certificate + key, `kubernetes://<name>-cacert` CA
//! bundle); takes a `file-cert:`/`file-root:` name (DestinationRule TLS from files) and yields the Secret that has
//! the gateway's Envoy read those files, so a missing file fails that secret (and the clusters using it) alone.
//! Also looks those Secrets up in a snapshot for one namespace (`SecretsOf`): whether a server's credentials
//! are all there, and the SDS secrets for every credential in use. A `configmap://<ns>/<name>` credential (a
//! BackendTLSPolicy's CA) yields `configmap://<ns>/<name>-cacert` from that ConfigMap's `ca.crt` (public data, as
//! istiod serves it to any proxy).

use envoy_types::pb::envoy::config::core::v3::{data_source, DataSource};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    secret, CertificateValidationContext, Secret, TlsCertificate,
};
use k8s_openapi::api::core::v1::Secret as KubeSecret;

use std::collections::BTreeSet;

use admitpilot_model::gateway_api::reference_grant::granted;
use admitpilot_model::istio::gateway::ServerTlsSettings;
use admitpilot_model::{Kind, ObjectKey, Snapshot, Spec};

use super::gateway;
use super::naming;

/// Keys holding the certificate chain, in lookup order (kubernetes.io/tls first, then Istio's generic keys).
const CERT_KEYS: [&str; 2] = ["tls.crt", "cert"];
/// Keys holding the private key.
const KEY_KEYS: [&str; 2] = ["tls.key", "key"];
/// Keys holding the CA bundle for client certificate validation.
const CA_KEYS: [&str; 2] = ["ca.crt", "cacert"];

/// Reads the first present key of a Secret from `data` (decoded bytes) or `stringData`.
fn read(secret: &KubeSecret, keys: &[&str]) -> Option<Vec<u8>> {
    keys.iter().find_map(|key| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(*key))
            .map(|bytes| bytes.0.clone())
            .or_else(|| {
                secret
                    .string_data
                    .as_ref()
                    .and_then(|data| data.get(*key))
                    .map(|text| text.clone().into_bytes())
            })
            .filter(|bytes| !bytes.is_empty())
    })
}

/// A file on the gateway, read by its Envoy.
pub fn file(path: &str) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::Filename(path.to_string())),
        ..Default::default()
    }
}

fn inline(bytes: Vec<u8>) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineBytes(bytes)),
        ..Default::default()
    }
}

/// Builds the Secret a `file-cert:<cert>~<key>` or `file-root:<ca>` name stands for (see
/// [`naming::file_cert_secret`], [`naming::file_root_secret`]); `None` for any other name.
pub fn from_files(name: &str) -> Option<Secret> {
    let r#type = if let Some(paths) = name.strip_prefix(naming::FILE_CERT_PREFIX) {
        let (chain, key) = paths.rsplit_once('~')?;
        secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(file(chain)),
            private_key: Some(file(key)),
            ..Default::default()
        })
    } else {
        let ca = name.strip_prefix(naming::FILE_ROOT_PREFIX)?;
        secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(file(ca)),
            ..Default::default()
        })
    };
    Some(Secret {
        name: name.to_string(),
        r#type: Some(r#type),
    })
}

/// Why a TLS Secret holds no certificate and key Envoy could load, if it does not: a key missing, or not PEM (a
/// chain of `CERTIFICATE` blocks, a `PRIVATE KEY` block). istiod turns such a Secret down for Gateway API
/// listeners ("the certificate is malformed") instead of sending it.
pub fn unusable_certificate(secret: &KubeSecret) -> Option<String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let Some(chain) = read(secret, &CERT_KEYS) else {
        return Some("it has no tls.crt".into());
    };
    let Some(key) = read(secret, &KEY_KEYS) else {
        return Some("it has no tls.key".into());
    };
    let certificates: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&chain).collect();
    let Some(certificates) = certificates.ok().filter(|c| !c.is_empty()) else {
        return Some("its tls.crt is not a PEM certificate chain".into());
    };
    let Ok(key) = PrivateKeyDer::from_pem_slice(&key) else {
        return Some("its tls.key is not a PEM private key".into());
    };
    key_mismatch(certificates, key)
}

/// Whether the Secret `namespace/name` of `snapshot` exists and holds a certificate with its key that Envoy could
/// load ([`unusable_certificate`]), as a gateway is sent it; else why not.
pub fn serves_certificate(snapshot: &Snapshot, namespace: &str, name: &str) -> Result<(), String> {
    match snapshot
        .get(&ObjectKey::new(Kind::Secret, namespace, name))
        .map(|o| &o.spec)
    {
        Some(Spec::Secret(secret)) => unusable_certificate(secret).map_or(Ok(()), Err),
        _ => Err("it does not exist".to_string()),
    }
}

/// Why the key does not serve the chain's first certificate, if it does not: the certificate is not X.509 Envoy
/// could parse, or its public key is not the key's (Gateway API v1.6 `apis/v1/gateway_types.go`,
/// `ListenerReasonInvalidCertificateRef`: "a reference to a certificate whose data within that resource is
/// malformed"; Envoy would refuse the pair). A key ring cannot load (an algorithm it lacks, such as P-521) is left
/// to Envoy: only what is certainly wrong is turned down.
fn key_mismatch(
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> Option<String> {
    use rustls::crypto::ring::sign::any_supported_type;
    use rustls::sign::CertifiedKey;
    use rustls::{Error, InconsistentKeys};
    let signing_key = any_supported_type(&key).ok()?;
    match CertifiedKey::new(chain, signing_key).keys_match() {
        Ok(()) | Err(Error::InconsistentKeys(InconsistentKeys::Unknown)) => None,
        Err(Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            Some("its tls.key is not the private key of its tls.crt".into())
        }
        Err(_) => Some("its tls.crt is not a well-formed X.509 certificate".into()),
    }
}

/// Builds `kubernetes://<credential>` from the Secret's certificate and key; `None` when either is missing.
pub fn certificate(credential: &str, secret: &KubeSecret) -> Option<Secret> {
    let chain = read(secret, &CERT_KEYS)?;
    let key = read(secret, &KEY_KEYS)?;
    Some(Secret {
        name: naming::credential_secret(credential),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(chain)),
            private_key: Some(inline(key)),
            ..Default::default()
        })),
    })
}

/// Builds `kubernetes://<credential>-cacert` from `ca.crt` of the credential Secret, or else of the separate
/// `<credential>-cacert` Secret (both layouts are Istio's); `None` when neither holds a CA bundle.
pub fn ca_bundle(
    credential: &str,
    secret: &KubeSecret,
    separate: Option<&KubeSecret>,
) -> Option<Secret> {
    let ca = read(secret, &CA_KEYS).or_else(|| separate.and_then(|s| read(s, &CA_KEYS)))?;
    Some(Secret {
        name: naming::credential_ca_secret(credential),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: Some(inline(ca)),
                ..Default::default()
            },
        )),
    })
}

/// The Kubernetes Secrets of one namespace in a snapshot (a gateway reads only its own namespace's, and those of
/// other namespaces a ReferenceGrant gives its Gateways).
#[derive(Clone, Copy)]
pub(crate) struct SecretsOf<'a> {
    /// The snapshot.
    pub snapshot: &'a Snapshot,
    /// The gateway's namespace.
    pub namespace: &'a str,
    /// The TLS Secrets (namespace, name) of the Ingresses the gateway serves: `kubernetes-ingress://` credentials
    /// may name these only.
    pub ingress: &'a BTreeSet<(String, String)>,
}

/// The Secret a credential names: `kubernetes-ingress://<ns>/<name>` when an Ingress the gateway serves names it
/// (`SecretsOf::ingress`); `<name>` in the gateway's namespace, or `kubernetes-gateway://<ns>/<name>` in
/// `<ns>` when that is the gateway's namespace or a ReferenceGrant there lets the gateway's Gateways refer to it (as
/// istiod's SDS server checks before it sends such a secret).
fn kube_secret<'s>(secrets: SecretsOf<'s>, name: &str) -> Option<&'s KubeSecret> {
    if let Some((namespace, name)) = crate::ingress::parse_credential(name) {
        if !secrets
            .ingress
            .contains(&(namespace.to_string(), name.to_string()))
        {
            return None;
        }
        return lookup(secrets.snapshot, namespace, name);
    }
    let (namespace, name) = match naming::parse_gateway_credential(name) {
        Some((namespace, name)) => {
            let allowed = namespace == secrets.namespace
                || granted(
                    secrets.snapshot,
                    ("Gateway", secrets.namespace),
                    ("", "Secret", namespace, name),
                )
                || listener_set_certificate(secrets.snapshot, secrets.namespace, (namespace, name));
            if !allowed {
                return None;
            }
            (namespace, name)
        }
        None => (secrets.namespace, name),
    };
    lookup(secrets.snapshot, namespace, name)
}

/// Whether the Gateway or ListenerSet `owner` may use the Secret `namespace/name` as a listener certificate: one of
/// its own namespace, or one a ReferenceGrant there opens to its kind and namespace. Gateway API v1.6
/// `apis/v1/listenerset_types.go`, "ReferenceGrant Semantics": "ReferenceGrants applied to a Gateway are not
/// inherited by child ListenerSets", "ReferenceGrants applied to a ListenerSet do not grant permission to the parent
/// Gateway's listeners", "A ListenerSet can reference secrets/backends in its own namespace without a
/// ReferenceGrant".
pub fn listener_may_use(
    snapshot: &Snapshot,
    owner: admitpilot_model::gateway_api::attachment::Owner<'_>,
    (namespace, name): (&str, &str),
) -> bool {
    namespace == owner.namespace
        || granted(
            snapshot,
            (owner.kind, owner.namespace),
            ("", "Secret", namespace, name),
        )
}

/// Whether a ListenerSet attached to a Gateway of `gateway_namespace` has a terminating listener whose first
/// certificate is the Secret `namespace/name` and may use it ([`listener_may_use`]): the gateways of that namespace
/// then get it without a ReferenceGrant to their Gateway (the set's own namespace needs none, and a grant to the
/// set is the set's; see `translate::gateway_api::terminating_tls`, which names only such Secrets).
fn listener_set_certificate(
    snapshot: &Snapshot,
    gateway_namespace: &str,
    (namespace, name): (&str, &str),
) -> bool {
    use admitpilot_model::gateway_api::attachment::Owner;
    use admitpilot_model::gateway_api::listener_set;
    snapshot
        .of_kind(Kind::KubernetesGateway)
        .filter(|object| object.metadata.namespace == gateway_namespace)
        .filter_map(|object| match &object.spec {
            Spec::KubernetesGateway(gateway) => Some((object, gateway)),
            _ => None,
        })
        .any(|(object, gateway)| {
            listener_set::attached(snapshot, object, gateway)
                .into_iter()
                .any(|(set, spec)| {
                    let owner = Owner::listener_set(set);
                    spec.listeners
                        .iter()
                        .filter(|l| l.terminates())
                        .any(|listener| {
                            listener
                                .tls
                                .as_ref()
                                .and_then(|tls| tls.certificates().first())
                                .is_some_and(|cert| {
                                    cert.is_core_secret()
                                        && cert.namespace_or(owner.namespace) == namespace
                                        && cert.name == name
                                        && listener_may_use(snapshot, owner, (namespace, name))
                                })
                        })
                })
        })
}

/// The Secret `namespace/name` of the snapshot.
fn lookup<'s>(snapshot: &'s Snapshot, namespace: &str, name: &str) -> Option<&'s KubeSecret> {
    snapshot
        .get(&ObjectKey::new(Kind::Secret, namespace, name))
        .and_then(|o| match &o.spec {
            Spec::Secret(s) => Some(s.as_ref()),
            _ => None,
        })
}

/// Tells whether every Secret a terminating server names exists with the keys it needs.
pub(crate) fn credentials_present(secrets: SecretsOf<'_>, tls: &ServerTlsSettings) -> bool {
    let creds = gateway::credentials(tls);
    creds
        .certificates
        .iter()
        .all(|name| kube_secret(secrets, name).is_some_and(|s| certificate(name, s).is_some()))
        && creds
            .ca
            .iter()
            .all(|name| ca_secret(secrets, name).is_some())
}

fn ca_secret(secrets: SecretsOf<'_>, name: &str) -> Option<Secret> {
    if name.starts_with(naming::CONFIGMAP_CREDENTIAL_PREFIX) {
        return configmap_ca(secrets.snapshot, name);
    }
    let separate = kube_secret(secrets, &format!("{name}-cacert"));
    match kube_secret(secrets, name) {
        Some(s) => ca_bundle(name, s, separate),
        None => separate.and_then(|s| ca_bundle(name, s, None)),
    }
}

/// The `ca.crt` of ConfigMap `namespace/name` when Envoy could load it as trusted CAs: one or more PEM
/// `CERTIFICATE` blocks (an empty or malformed one would have Envoy refuse the whole secret: "DataSource cannot be
/// empty").
pub fn configmap_ca_bundle<'a>(
    snapshot: &'a Snapshot,
    namespace: &str,
    name: &str,
) -> Option<&'a str> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let object = snapshot.get(&ObjectKey::new(
        Kind::ReferencedConfigMap,
        namespace,
        name.to_string(),
    ))?;
    let Spec::ReferencedConfigMap(configmap) = &object.spec else {
        return None;
    };
    let ca = configmap.data.as_ref()?.get("ca.crt")?;
    let certificates: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(ca.as_bytes()).collect();
    certificates
        .is_ok_and(|c| !c.is_empty())
        .then_some(ca.as_str())
}

/// The CA bundle of a `configmap://<ns>/<name>` credential: the ConfigMap's `ca.crt` ([`configmap_ca_bundle`]).
fn configmap_ca(snapshot: &Snapshot, credential: &str) -> Option<Secret> {
    let (namespace, name) = naming::parse_configmap_credential(credential)?;
    let ca = configmap_ca_bundle(snapshot, namespace, name)?;
    Some(Secret {
        name: naming::credential_ca_secret(credential),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: Some(inline(ca.as_bytes().to_vec())),
                ..Default::default()
            },
        )),
    })
}

/// Builds the SDS secrets for the credentials in use (certificate and, when present, CA bundle) and for the
/// `file-cert:`/`file-root:` names of TLS settings given as files.
pub(crate) fn build_secrets(secrets: SecretsOf<'_>, credentials: &BTreeSet<String>) -> Vec<Secret> {
    let mut out = Vec::new();
    for name in credentials {
        if let Some(s) = from_files(name) {
            out.push(s);
            continue;
        }
        if name.starts_with(naming::CONFIGMAP_CREDENTIAL_PREFIX) {
            out.extend(configmap_ca(secrets.snapshot, name));
            continue;
        }
        if let Some(s) = kube_secret(secrets, name).and_then(|s| certificate(name, s)) {
            out.push(s);
        }
        if let Some(ca) = ca_secret(secrets, name) {
            out.push(ca);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn kube(pairs: &[(&str, &str)]) -> KubeSecret {
        KubeSecret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn builds_certificate_and_ca() {
        let s = kube(&[("tls.crt", "C"), ("tls.key", "K"), ("ca.crt", "A")]);
        let cert = certificate("gw-cert", &s).unwrap();
        assert_eq!(cert.name, "kubernetes://gw-cert");
        let ca = ca_bundle("gw-cert", &s, None).unwrap();
        assert_eq!(ca.name, "kubernetes://gw-cert-cacert");
    }

    #[test]
    fn file_names_become_file_secrets() {
        let cert = from_files(&naming::file_cert_secret("/c.pem", "/k.pem")).unwrap();
        let Some(secret::Type::TlsCertificate(tls)) = cert.r#type else {
            panic!("not a certificate: {cert:?}");
        };
        assert_eq!(
            tls.private_key.unwrap().specifier,
            Some(data_source::Specifier::Filename("/k.pem".into()))
        );
        let root = from_files(&naming::file_root_secret("/certs/ca~2024.pem")).unwrap();
        let Some(secret::Type::ValidationContext(ca)) = root.r#type else {
            panic!("not a CA: {root:?}");
        };
        assert_eq!(
            ca.trusted_ca.unwrap().specifier,
            Some(data_source::Specifier::Filename(
                "/certs/ca~2024.pem".into()
            ))
        );
        assert!(from_files("kubernetes://x").is_none());
    }

    #[test]
    fn missing_key_yields_nothing() {
        let s = kube(&[("tls.crt", "C")]);
        assert!(certificate("x", &s).is_none());
        assert!(ca_bundle("x", &s, None).is_none());
        let sep = kube(&[("cacert", "A")]);
        assert!(ca_bundle("x", &s, Some(&sep)).is_some());
    }

    #[test]
    fn a_key_that_is_not_the_certificates_makes_it_unusable() {
        let pair = |name: &str| rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let (a, b) = (pair("a.example"), pair("b.example"));
        let (cert, key) = (a.cert.pem(), a.signing_key.serialize_pem());
        assert_eq!(
            unusable_certificate(&kube(&[("tls.crt", &cert), ("tls.key", &key)])),
            None
        );
        let other = b.signing_key.serialize_pem();
        let mismatch = unusable_certificate(&kube(&[("tls.crt", &cert), ("tls.key", &other)]));
        assert!(mismatch.unwrap().contains("not the private key"));
        let garbage = "-----BEGIN CERTIFICATE-----\nSGVsbG8gd29ybGQK\n-----END CERTIFICATE-----\n";
        let malformed = unusable_certificate(&kube(&[("tls.crt", garbage), ("tls.key", &key)]));
        assert!(malformed.unwrap().contains("not a well-formed X.509"));
    }
}
