//! `BackendTLSPolicy` spec (gateway.networking.k8s.io v1, v1alpha3): takes the `spec` JSON, yields the Services
//! it targets and how the gateway verifies their certificates.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::common::LocalReference;
use crate::{ConfigObject, Kind, Snapshot, Spec};

/// Every BackendTLSPolicy of `snapshot` with its spec, oldest first (then namespace/name): the order in which
/// they claim Service ports under the spec's conflict rule, for translation and status alike.
pub fn oldest_first_policies(snapshot: &Snapshot) -> Vec<(&Arc<ConfigObject>, &BackendTlsPolicy)> {
    let mut policies: Vec<_> = snapshot
        .of_kind(Kind::BackendTlsPolicy)
        .filter_map(|object| match &object.spec {
            Spec::BackendTlsPolicy(policy) => Some((object, policy)),
            _ => None,
        })
        .collect();
    policies.sort_by(|(a, _), (b, _)| super::oldest_first(a, b));
    policies
}

/// The `spec` of a BackendTLSPolicy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackendTlsPolicy {
    /// Services (optionally one port by name) the policy applies to.
    pub target_refs: Vec<LocalReference>,
    /// How the backend's certificate is verified.
    pub validation: BackendTlsValidation,
    /// Implementation-specific options.
    pub options: std::collections::BTreeMap<String, String>,
}

/// `BackendTLSPolicyValidation`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackendTlsValidation {
    /// ConfigMaps (or Secrets) holding CA certificates.
    pub ca_certificate_refs: Vec<LocalReference>,
    /// `System` to trust the system's CAs.
    #[serde(rename = "wellKnownCACertificates")]
    pub well_known_ca_certificates: Option<String>,
    /// SNI and the name the certificate must carry.
    pub hostname: String,
    /// Other names the certificate may carry.
    pub subject_alt_names: Vec<SubjectAltName>,
}

/// `SubjectAltName`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubjectAltName {
    /// `Hostname` or `URI`.
    #[serde(rename = "type")]
    pub san_type: String,
    /// The DNS name.
    pub hostname: Option<String>,
    /// The URI.
    pub uri: Option<String>,
}
