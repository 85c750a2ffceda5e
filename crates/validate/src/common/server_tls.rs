//! Server TLS (pure): takes a server's TLS settings, records Istio's `validateTLSOptions` findings; shared by
//! Gateway servers and Sidecar ingress listeners.

use std::collections::BTreeSet;

use super::path::FieldPath;
use admitpilot_model::istio::gateway::{ServerTlsMode, ServerTlsSettings, TlsProtocol};
use admitpilot_model::Findings;

/// Cipher suites Envoy accepts by name.
const CIPHER_SUITES: &[&str] = &[
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// Validates server-side TLS settings (Istio's `validateTLSOptions`); shared with Sidecar ingress.
pub fn validate_server_tls(tls: &ServerTlsSettings, p: &mut FieldPath, out: &mut Findings) {
    let path = p.as_str();
    if matches!(
        tls.min_protocol_version,
        Some(TlsProtocol::TlsV1_0 | TlsProtocol::TlsV1_1)
    ) && tls.cipher_suites.is_empty()
    {
        out.warning(
            p.child("minProtocolVersion"),
            "TLS versions below 1.2 need compatible cipherSuites set; the defaults no longer include any",
        );
    }
    validate_cipher_suites(&tls.cipher_suites, &p.child("cipherSuites"), out);
    if !tls.credential_name.is_empty() && !tls.credential_names.is_empty() {
        out.error(
            path,
            "only one of credentialName and credentialNames may be set",
        );
    }
    for (field, len) in [
        ("credentialNames", tls.credential_names.len()),
        ("tlsCertificates", tls.tls_certificates.len()),
    ] {
        if len > 2 {
            out.error(
                p.child(field),
                format!("{field} may hold at most 2 entries"),
            );
        }
    }
    let mode = tls.mode.unwrap_or(ServerTlsMode::Passthrough);
    if mode == ServerTlsMode::IstioMutual {
        for (set, field) in [
            (!tls.server_certificate.is_empty(), "serverCertificate"),
            (!tls.private_key.is_empty(), "privateKey"),
            (!tls.ca_certificates.is_empty(), "caCertificates"),
            (!tls.tls_certificates.is_empty(), "tlsCertificates"),
            (!tls.credential_name.is_empty(), "credentialName"),
            (!tls.credential_names.is_empty(), "credentialNames"),
        ] {
            if set {
                out.error(
                    p.child(field),
                    format!("ISTIO_MUTUAL mode cannot have {field}"),
                );
            }
        }
        return;
    }
    if matches!(
        mode,
        ServerTlsMode::Passthrough | ServerTlsMode::AutoPassthrough
    ) && (!tls.ca_crl.is_empty()
        || !tls.server_certificate.is_empty()
        || !tls.private_key.is_empty()
        || !tls.ca_certificates.is_empty()
        || !tls.tls_certificates.is_empty()
        || !tls.credential_name.is_empty()
        || !tls.credential_names.is_empty())
    {
        out.warning(
            path,
            "passthrough modes do not use certificates; they are ignored",
        );
    }
    let sources = usize::from(!tls.server_certificate.is_empty() && !tls.private_key.is_empty())
        + usize::from(!tls.credential_name.is_empty())
        + usize::from(!tls.credential_names.is_empty())
        + usize::from(!tls.tls_certificates.is_empty());
    if sources > 1 {
        out.error(
            path,
            "only one of credentialName, credentialNames, serverCertificate/privateKey and tlsCertificates may be set",
        );
    }
    let terminating = matches!(
        mode,
        ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
    );
    let has_credential = !tls.credential_name.is_empty() || !tls.credential_names.is_empty();
    if terminating && !has_credential {
        let what = if mode == ServerTlsMode::Simple {
            "SIMPLE"
        } else {
            "MUTUAL"
        };
        if mode != ServerTlsMode::Simple && tls.ca_certificates.is_empty() {
            out.error(
                p.child("caCertificates"),
                format!("{what} TLS needs a client CA bundle (caCertificates)"),
            );
        }
        if tls.tls_certificates.is_empty() {
            check_cert_pair(&tls.server_certificate, &tls.private_key, what, path, out);
        } else {
            let mut certs = p.field("tlsCertificates");
            for (i, cert) in tls.tls_certificates.iter().enumerate() {
                check_cert_pair(
                    &cert.server_certificate,
                    &cert.private_key,
                    what,
                    certs.index(i).as_str(),
                    out,
                );
            }
        }
    }
    if !tls.ca_crl.is_empty() {
        if !tls.credential_name.is_empty() {
            out.error(
                p.child("caCrl"),
                "caCrl cannot be combined with credentialName; put the CRL in the credential",
            );
        }
        if mode == ServerTlsMode::Simple {
            out.error(p.child("caCrl"), "caCrl is not supported with SIMPLE TLS");
        }
    }
}

fn check_cert_pair(cert: &str, key: &str, what: &str, path: &str, out: &mut Findings) {
    if cert.is_empty() {
        out.error(path, format!("{what} TLS needs a server certificate"));
    }
    if key.is_empty() {
        out.error(path, format!("{what} TLS needs a private key"));
    }
}

fn validate_cipher_suites(suites: &[String], path: &str, out: &mut Findings) {
    let mut invalid = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut duplicate = BTreeSet::new();
    for suite in suites {
        let operator = suite.chars().next().is_some_and(|c| !c.is_alphanumeric());
        let valid = suite.is_empty()
            || suite == "ALL"
            || operator
            || CIPHER_SUITES.contains(&suite.as_str());
        if !valid {
            invalid.insert(suite.as_str());
        } else if !seen.insert(suite.as_str()) {
            duplicate.insert(suite.as_str());
        }
    }
    if !invalid.is_empty() {
        out.warning(path, format!("ignoring unknown cipher suites {invalid:?}"));
    }
    if !duplicate.is_empty() {
        out.warning(
            path,
            format!("ignoring duplicate cipher suites {duplicate:?}"),
        );
    }
}
