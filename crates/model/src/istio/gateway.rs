//! Istio `Gateway` spec: takes Kubernetes camelCase JSON, yields the servers (port, hosts, TLS) a gateway proxy
//! listens with. Also defines [`ServerTlsSettings`] (reused by Sidecar ingress) and [`Port`] (reused by Sidecar
//! listeners and ServiceEntry).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `spec` of a Gateway.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gateway {
    /// Servers exposed by the gateway.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<Server>,
    /// Labels of the gateway pods this applies to.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub selector: BTreeMap<String, String>,
}

/// One server: a port, the hosts served on it and TLS.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Server {
    /// Listening port (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<Port>,
    /// Bind address (IP or `unix://` path).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// Hosts (`ns/host` or `host`) served (required).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// TLS settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ServerTlsSettings>,
    /// Default endpoint (`127.0.0.1:port` or `unix://`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_endpoint: String,
    /// Server name (unique within the gateway).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Host names whose requests the server answers with a fixed status instead of routing them; what a Gateway API
    /// HTTPS listener gives ([`crate::gateway_api::attachment::misdirected`]). Not part of Istio's API: set by the
    /// Gateway API conversion only, never read from a document.
    #[serde(skip)]
    pub answered_hosts: Vec<AnsweredHost>,
}

/// A host name a server answers for with `status` (421 Misdirected Request, 404 Not Found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnsweredHost {
    /// The host name (`*` for every host no other virtual host names).
    pub host: String,
    /// The HTTP status of every answer.
    pub status: u32,
}

/// A port: the Gateway server port, and the same message as Sidecar listener port and ServiceEntry port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Port {
    /// Port number (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
    /// Protocol: HTTP, HTTPS, GRPC, GRPC-WEB, HTTP2, MONGO, TCP or TLS (required).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// Port name (required).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Port on the endpoints (ServiceEntry); deprecated elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_port: Option<u32>,
}

/// Server-side TLS mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServerTlsMode {
    /// Forward by SNI without terminating.
    Passthrough,
    /// Terminate TLS.
    Simple,
    /// Terminate TLS, require client certificates.
    Mutual,
    /// SNI passthrough with automatic routing.
    AutoPassthrough,
    /// Mutual TLS with Istio certificates.
    IstioMutual,
    /// Terminate TLS, client certificates optional.
    OptionalMutual,
}

/// TLS protocol versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TlsProtocol {
    /// Automatic choice.
    #[serde(rename = "TLS_AUTO")]
    TlsAuto,
    /// TLS 1.0.
    #[serde(rename = "TLSV1_0")]
    TlsV1_0,
    /// TLS 1.1.
    #[serde(rename = "TLSV1_1")]
    TlsV1_1,
    /// TLS 1.2.
    #[serde(rename = "TLSV1_2")]
    TlsV1_2,
    /// TLS 1.3.
    #[serde(rename = "TLSV1_3")]
    TlsV1_3,
}

/// Server-side TLS settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerTlsSettings {
    /// Redirect plain HTTP to HTTPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https_redirect: Option<bool>,
    /// TLS mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<ServerTlsMode>,
    /// Server certificate file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_certificate: String,
    /// Private key file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// CA bundle file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
    /// CRL file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_crl: String,
    /// Secret holding the credentials.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub credential_name: String,
    /// Several secrets (e.g. RSA and ECDSA).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub credential_names: Vec<String>,
    /// Secret holding only the CA certificate.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_cert_credential_name: String,
    /// Inline certificate file sets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls_certificates: Vec<TlsCertificate>,
    /// Accepted client SANs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
    /// Accepted client SPKI hashes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verify_certificate_spki: Vec<String>,
    /// Accepted client certificate hashes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verify_certificate_hash: Vec<String>,
    /// Minimum TLS version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_protocol_version: Option<TlsProtocol>,
    /// Maximum TLS version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_protocol_version: Option<TlsProtocol>,
    /// Allowed cipher suites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cipher_suites: Vec<String>,
    /// Skip client certificate verification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_skip_verify: Option<bool>,
    /// With `OPTIONAL_MUTUAL`: a client certificate the CA did not sign is let through too (Gateway API
    /// `AllowInsecureFallback`). Not part of Istio's API: set by the Gateway API conversion only.
    #[serde(skip)]
    pub accept_untrusted_client_certificates: bool,
}

/// One certificate set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsCertificate {
    /// Server certificate file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_certificate: String,
    /// Private key file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// CA bundle file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
}
