//! Serving certificates for the webhook and the xDS server: takes PEM files (or nothing, for a local self-signed
//! webhook) and yields a rustls [`ServerConfig`] (TLS 1.2 and 1.3 only) whose certificate can be swapped while the
//! server runs.
//!
//! Files are re-read when their folders report a change (and on a slow poll, as a fallback); when their contents
//! change and the new pair is valid, new handshakes get the new certificate. Established connections keep the one
//! they negotiated. A bad pair is logged and the previous certificate stays in use.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

/// Errors loading, generating or writing certificates.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A certificate or key file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The certificate file holds no PEM `CERTIFICATE` block, or a block is damaged.
    #[error("{path}: no usable PEM certificate: {reason}")]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The key file holds no usable PEM private key.
    #[error("{path}: no usable PEM private key: {reason}")]
    Key {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// rustls refused the pair (unsupported key type, or key and certificate do not match).
    #[error("certificate {cert} and key {key} cannot be used together: {source}")]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// Generating the self-signed certificate failed.
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The self-signed CA could not be written.
    #[error("cannot write the self-signed CA to {path}: {source}")]
    WriteCa {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// rustls rejected the server configuration.
    #[error("cannot build the TLS configuration: {0}")]
    Config(rustls::Error),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the webhook's serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// PEM files, reloaded when they change.
    Files(TlsFiles),
    /// An in-memory certificate signed by a fresh in-memory CA whose certificate is written to `ca_out`
    /// (local use only: nothing outside this process trusts it unless told to).
    SelfSigned {
        /// Where to write the CA certificate (PEM).
        ca_out: PathBuf,
    },
}

/// A PEM certificate chain file and its private key file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert: PathBuf,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The certificate currently served; swapped atomically on reload.
#[derive(Debug)]
pub struct CertStore {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertStore {
    /// Creates a store serving `initial`.
    pub fn new(initial: CertifiedKey) -> Arc<Self> {
        Arc::new(CertStore {
            current: RwLock::new(Arc::new(initial)),
        })
    }

    /// Serves `next` to every new handshake from now on.
    pub fn replace(&self, next: CertifiedKey) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
    }

    /// Returns the certificate being served.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The crypto provider used by every admitpilot TLS endpoint (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds a server config that serves whatever `store` holds, over TLS 1.3 or 1.2, HTTP/2 or HTTP/1.1.
pub fn server_config(store: Arc<CertStore>) -> Result<Arc<ServerConfig>, Error> {
    let mut config = versions()?.with_no_client_auth().with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Builds a server config for gRPC (HTTP/2 only) that serves whatever `store` holds, over TLS 1.3 or 1.2; with
/// `client_ca` (PEM), every client must present a certificate chaining to it (mTLS).
pub fn grpc_server_config(
    store: Arc<CertStore>,
    client_ca: Option<(&Path, &[u8])>,
) -> Result<Arc<ServerConfig>, Error> {
    let builder = versions()?;
    let mut config = match client_ca {
        None => builder.with_no_client_auth(),
        Some((path, pem)) => {
            let certificate = |reason: String| Error::Certificate {
                path: path.to_path_buf(),
                reason,
            };
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                roots
                    .add(cert.map_err(|e| certificate(e.to_string()))?)
                    .map_err(|e| certificate(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| certificate(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    }
    .with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The start of every server config: ring, TLS 1.3 and 1.2 only.
fn versions() -> Result<rustls::ConfigBuilder<ServerConfig, rustls::WantsVerifier>, Error> {
    ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(Error::Config)
}

/// The raw contents of a certificate/key pair, to notice changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemPair {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// Reads both files.
pub fn read_pair(files: &TlsFiles) -> Result<PemPair, Error> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    Ok(PemPair {
        cert: read(&files.cert)?,
        key: read(&files.key)?,
    })
}

/// Parses a pair read from `files` and checks that the key matches the certificate.
pub fn parse_pair(files: &TlsFiles, pair: &PemPair) -> Result<CertifiedKey, Error> {
    let chain = CertificateDer::pem_slice_iter(&pair.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Certificate {
            path: files.cert.clone(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(Error::Certificate {
            path: files.cert.clone(),
            reason: "the file has no CERTIFICATE block".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&pair.key).map_err(|e| Error::Key {
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|source| Error::Pair {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })
}

/// Loads and checks the pair in `files`.
pub fn load_files(files: &TlsFiles) -> Result<(CertifiedKey, PemPair), Error> {
    let pair = read_pair(files)?;
    Ok((parse_pair(files, &pair)?, pair))
}

/// Generates an in-memory CA and a serving certificate for localhost, 127.0.0.1 and ::1 signed by it; writes
/// the CA certificate (PEM) to `ca_out`.
pub fn self_signed(ca_out: &Path) -> Result<CertifiedKey, Error> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };

    let mut ca_params = CertificateParams::new(Vec::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "admitpilot local webhook CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf_params =
        CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "admitpilot webhook");
    let leaf_key = KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer)?;

    write_ca(ca_out, &ca_cert.pem())?;
    let key = PrivateKeyDer::try_from(leaf_key.serialize_der()).map_err(|reason| Error::Key {
        path: PathBuf::from("<generated>"),
        reason: reason.into(),
    })?;
    CertifiedKey::from_der(vec![leaf.der().clone()], key, &provider()).map_err(|source| {
        Error::Pair {
            cert: PathBuf::from("<generated>"),
            key: PathBuf::from("<generated>"),
            source,
        }
    })
}

fn write_ca(path: &Path, pem: &str) -> Result<(), Error> {
    let fail = |source| Error::WriteCa {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    // Write beside the target, then rename: a reader never sees half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, pem).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

/// Waits after a file notification before re-reading, so that a certificate and key written one after the other
/// are read as a pair.
const SETTLE: Duration = Duration::from_millis(20);

/// Watches the folders holding `files` (not the files: Kubernetes swaps a mounted Secret by renaming its `..data`
/// link in the folder) and wakes `wake` on every change. `None` when watching is impossible; the poll remains.
fn watch_folders(
    files: &TlsFiles,
    what: &'static str,
    wake: Arc<tokio::sync::Notify>,
) -> Option<RecommendedWatcher> {
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reading the files ourselves raises access events; only changes matter.
        if event.is_ok_and(|e| !matches!(e.kind, EventKind::Access(_))) {
            wake.notify_one();
        }
    });
    let mut watcher = match watcher {
        Ok(watcher) => watcher,
        Err(error) => {
            tracing::warn!(%error, what, "cannot watch the certificate files; polling only");
            return None;
        }
    };
    for file in [&files.cert, &files.key] {
        let folder = file
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if let Err(error) = watcher.watch(folder, RecursiveMode::NonRecursive) {
            tracing::warn!(%error, what, folder = %folder.display(), "cannot watch a certificate folder; polling it");
        }
    }
    Some(watcher)
}

/// What [`watch_files`] reloads, and whom it tells.
pub struct Reloading<F> {
    /// Names the certificate in logs (`webhook`, `xDS`).
    pub what: &'static str,
    /// Called after each attempt to load changed files, with whether the new pair is served.
    pub observe: F,
}

/// Swaps the served certificate when the files at `files` changed since `last` and hold a valid pair; updates
/// `last` either way, so a broken pair is retried only once it changes again.
fn reload(
    files: &TlsFiles,
    last: &mut PemPair,
    store: &CertStore,
    reloading: &Reloading<impl Fn(bool)>,
) {
    let what = reloading.what;
    let pair = match read_pair(files) {
        Ok(pair) if pair == *last => return,
        Ok(pair) => pair,
        Err(error) => {
            tracing::warn!(%error, what, "cannot re-read the serving certificate; keeping the current one");
            return;
        }
    };
    match parse_pair(files, &pair) {
        Ok(key) => {
            store.replace(key);
            (reloading.observe)(true);
            tracing::info!(what, cert = %files.cert.display(), "serving certificate reloaded");
        }
        Err(error) => {
            // Often the certificate was written before its key; the next change retries.
            (reloading.observe)(false);
            tracing::warn!(%error, what, "new serving certificate is not usable; keeping the current one");
        }
    }
    *last = pair;
}

/// Reloads `files` when their folders report a change, and every `interval` as a fallback, until `shutdown`
/// resolves; the served certificate is swapped when the contents change and the new pair is valid.
pub async fn watch_files(
    files: TlsFiles,
    mut last: PemPair,
    store: Arc<CertStore>,
    interval: Duration,
    reloading: Reloading<impl Fn(bool)>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let wake = Arc::new(tokio::sync::Notify::new());
    let _watcher = watch_folders(&files, reloading.what, Arc::clone(&wake));
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticker.tick() => {}
            _ = wake.notified() => tokio::time::sleep(SETTLE).await,
        }
        reload(&files, &mut last, &store, &reloading);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, names: &[&str]) -> TlsFiles {
        let generated = rcgen::generate_simple_self_signed(
            names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        let files = TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        std::fs::write(&files.cert, generated.cert.pem()).unwrap();
        std::fs::write(&files.key, generated.signing_key.serialize_pem()).unwrap();
        files
    }

    #[test]
    fn loads_a_matching_pair() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_pair(dir.path(), &["localhost"]);
        let (key, _) = load_files(&files).unwrap();
        assert_eq!(key.cert.len(), 1);
    }

    #[test]
    fn rejects_a_key_from_another_pair() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_pair(dir.path(), &["a"]);
        let other = tempfile::tempdir().unwrap();
        let other_files = write_pair(other.path(), &["b"]);
        std::fs::copy(&other_files.key, &files.key).unwrap();
        let err = load_files(&files).unwrap_err();
        assert!(matches!(err, Error::Pair { .. }), "{err}");
    }

    #[test]
    fn names_the_file_when_pem_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_pair(dir.path(), &["a"]);
        std::fs::write(&files.cert, "not pem").unwrap();
        let err = load_files(&files).unwrap_err().to_string();
        assert!(err.contains("tls.crt"), "{err}");
    }

    #[test]
    fn self_signed_writes_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("sub/ca.crt");
        self_signed(&ca).unwrap();
        let pem = std::fs::read(&ca).unwrap();
        assert_eq!(CertificateDer::pem_slice_iter(&pem).count(), 1);
    }
}
