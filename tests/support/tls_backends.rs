//! Test backends that speak TLS (or plain TCP) on 127.0.0.1, and the CA that signs their certificates: for the
//! Gateway API TLS listener and BackendTLSPolicy tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA that signs leaf certificates for the test's host names.
pub struct Ca {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    #[allow(clippy::new_without_default)] // each call mints a new CA: not a default value
    pub fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // A subject of its own: a leaf whose issuer equals its subject reads as self-signed to BoringSSL.
        params
            .distinguished_name
            .push(DnType::CommonName, "admitpilot e2e CA");
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `host` and its key, as PEM.
    pub fn leaf(&self, host: &str) -> (String, String) {
        self.leaf_for(&[host])
    }

    /// A certificate for every name of `hosts` (the first is its common name) and its key, as PEM.
    pub fn leaf_for(&self, hosts: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = hosts.iter().map(ToString::to_string).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, hosts.first().copied().unwrap_or("leaf"));
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A TLS client that trusts this CA and presents no certificate.
    pub fn client(&self) -> tokio_rustls::TlsConnector {
        self.connector(None)
    }

    /// A TLS client that trusts this CA and presents `identity` (certificate and key, PEM) when asked for one.
    pub fn client_presenting(&self, identity: (&str, &str)) -> tokio_rustls::TlsConnector {
        self.connector(Some(identity))
    }

    fn connector(&self, identity: Option<(&str, &str)>) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_slice_iter(cert.as_bytes())
                        .map(Result::unwrap)
                        .collect();
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
        };
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

/// A backend on 127.0.0.1 that answers each connection's first bytes with `<name>:<bytes>` (or, with `http`, an
/// HTTP/1.1 200 whose body is `<name> sni=<the SNI it was sent, if any>`), in TLS with the certificate and key `tls` when
/// set.
pub struct StreamBackend {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl StreamBackend {
    pub async fn start(name: &'static str, tls: Option<(String, String)>) -> StreamBackend {
        StreamBackend::start_as(name, tls, false).await
    }

    pub async fn start_as(
        name: &'static str,
        tls: Option<(String, String)>,
        http: bool,
    ) -> StreamBackend {
        let acceptor = tls.map(|(cert, key)| acceptor(&cert, &key, None));
        StreamBackend::start_with(name, acceptor, http).await
    }

    /// An HTTP backend in TLS with the certificate and key `tls` that completes a handshake only with a client
    /// certificate `client_ca` (PEM) signed.
    pub async fn start_mutual(
        name: &'static str,
        (cert, key): (String, String),
        client_ca: &str,
    ) -> StreamBackend {
        let acceptor = acceptor(&cert, &key, Some(client_ca));
        StreamBackend::start_with(name, Some(acceptor), true).await
    }

    async fn start_with(
        name: &'static str,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        http: bool,
    ) -> StreamBackend {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                let sni = stream.get_ref().1.server_name().map(str::to_string);
                                answer(name, http.then(|| sni.unwrap_or_default()), stream).await;
                            }
                        }
                        None => answer(name, None, stream).await,
                    }
                });
            }
        });
        StreamBackend { port, task }
    }
}

/// A TLS acceptor serving `cert` with `key`; with `client_ca`, it requires a client certificate that CA signed.
fn acceptor(cert: &str, key: &str, client_ca: Option<&str>) -> tokio_rustls::TlsAcceptor {
    let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certs, key).unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

impl Drop for StreamBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers one connection: as HTTP for `http` backends (`sni` is then the SNI it was sent, empty for none), else by echoing.
async fn answer(
    name: &str,
    sni: Option<String>,
    mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
) {
    let mut buf = [0u8; 4096];
    if let Ok(n) = stream.read(&mut buf).await {
        let reply = match sni {
            Some(sni) => {
                let body = format!("{name} sni={sni}");
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            }
            None => format!("{name}:{}", String::from_utf8_lossy(&buf[..n])),
        };
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
    }
}
