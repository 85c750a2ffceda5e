//! Client certificate validation on HTTPS listeners (pure): takes a Gateway's `spec.tls.frontend` (Gateway API v1.6
//! `FrontendTLSValidation`, features GatewayFrontendClientCertificateValidation and its InsecureFallback) and one of
//! its HTTPS listeners, and yields the CA the listener validates client certificates with, and what status says of
//! the references. One function decides both, so what is enforced and what status says agree:
//!
//! * each `caCertificateRefs` entry must be a core ConfigMap (else `InvalidCACertificateKind`), of the Gateway's
//!   namespace or one a ReferenceGrant opens to Gateways of it (else `RefNotPermitted`), whose `ca.crt` holds PEM
//!   certificates (else `InvalidCACertificateRef`); the listener's `ResolvedRefs` is False with the first such
//!   reason;
//! * the first entry that resolves is the CA (served over SDS as `configmap://<ns>/<name>-cacert`); with none, the
//!   listener is not accepted (`NoValidCACertificate`) and not served: a listener that should check client
//!   certificates never serves without checking them;
//! * `mode: AllowInsecureFallback` asks for a certificate but lets a connection through without one, or with one
//!   the CA did not sign (the Gateway then says `InsecureFrontendValidationMode`).

use admitpilot_model::gateway_api::gateway::Listener;
use admitpilot_model::gateway_api::reference_grant::granted;
use admitpilot_model::gateway_api::Gateway;
use admitpilot_model::ConfigObject;
use admitpilot_model::Snapshot;

use crate::{naming, secret};

/// The CA a listener validates client certificates with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientValidation {
    /// The CA's credential (`configmap://<ns>/<name>`).
    pub ca_credential: String,
    /// `AllowInsecureFallback`: connections without a valid client certificate pass too.
    pub insecure_fallback: bool,
}

/// What a listener's client certificate validation resolves to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the Gateway asks this listener to validate client certificates.
    pub configured: bool,
    /// The CA it validates with (`None` when it is not configured, or no reference resolves).
    pub validation: Option<ClientValidation>,
    /// The first reference that does not resolve: the listener's `ResolvedRefs` reason and message.
    pub unresolved: Option<(&'static str, String)>,
}

impl Verdict {
    /// Whether the listener must not be served: it should validate client certificates but has no CA to do it with
    /// (its `Accepted` is False, `NoValidCACertificate`).
    pub fn refused(&self) -> bool {
        self.configured && self.validation.is_none()
    }
}

/// The client certificate validation of `listener` (an HTTPS listener of Gateway `object`, spec `gateway`, or of a
/// ListenerSet attached to it): see the module docs. Listeners of other protocols validate nothing.
pub fn client_validation(
    snapshot: &Snapshot,
    (object, gateway): (&ConfigObject, &Gateway),
    listener: &Listener,
) -> Verdict {
    if listener.protocol != "HTTPS" {
        return Verdict::default();
    }
    let Some(frontend) = gateway.frontend_validation(listener.port) else {
        return Verdict::default();
    };
    let namespace = object.metadata.namespace.as_str();
    let mut verdict = Verdict {
        configured: true,
        ..Verdict::default()
    };
    for (i, reference) in frontend.ca_refs.iter().enumerate() {
        let field = format!("{}.caCertificateRefs[{i}]", frontend.field);
        let (group, kind) = (
            reference.group.as_deref().unwrap_or(""),
            reference.kind.as_deref().unwrap_or(""),
        );
        let target = reference.namespace_or(namespace);
        let name = reference.name.as_str();
        let problem = if !group.is_empty() || kind != "ConfigMap" {
            Some((
                "InvalidCACertificateKind",
                format!("{field}: {group}/{kind} {name} is not a core ConfigMap"),
            ))
        } else if target != namespace
            && !granted(
                snapshot,
                ("Gateway", namespace),
                ("", "ConfigMap", target, name),
            )
        {
            Some((
                "RefNotPermitted",
                format!(
                    "{field}: ConfigMap {target}/{name} is in another namespace and no ReferenceGrant there \
                     allows Gateways of {namespace}"
                ),
            ))
        } else if secret::configmap_ca_bundle(snapshot, target, name).is_none() {
            Some((
                "InvalidCACertificateRef",
                format!("{field}: ConfigMap {target}/{name} does not exist or has no PEM certificates in ca.crt"),
            ))
        } else {
            None
        };
        match problem {
            Some(problem) => {
                verdict.unresolved.get_or_insert(problem);
            }
            None => {
                verdict.validation.get_or_insert(ClientValidation {
                    ca_credential: naming::configmap_credential(target, name),
                    insecure_fallback: frontend.insecure_fallback,
                });
            }
        }
    }
    verdict
}
