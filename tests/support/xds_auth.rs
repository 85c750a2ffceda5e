//! Authenticated-xDS test setup: a CA and a serving certificate for 127.0.0.1/localhost, an in-process xDS server
//! with an authenticated TLS endpoint (tokens checked against the API-server double or a real API server) and a
//! plaintext one, and gRPC clients that send a bearer token.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admitpilot::model::Snapshot;
use admitpilot::tls::{load_files, CertStore, TlsFiles as PemFiles};
use admitpilot::translate::{GatewayResources, Proxy};
use admitpilot::xds::{
    CallPolicy, ConnectionLimits, Endpoint, KubeAuth, TlsFiles, TranslateFn, XdsMetrics, XdsServer,
};
use envoy_types::pb::envoy::config::core::v3::{data_source, DataSource, Node};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    secret, CertificateValidationContext, Secret, TlsCertificate,
};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};
use prometheus_client::registry::Registry;
use prost::Message;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio::sync::{oneshot, watch};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

/// The SDS name of the gateway certificate of [`gateway_secrets`].
pub const CERT: &str = "kubernetes://gw-cert";
/// The SDS name of its CA bundle.
pub const CA: &str = "kubernetes://gw-cert-cacert";
/// The private key of [`CERT`], marked so a leak is easy to find.
pub const KEY: &str = "-----BEGIN PRIVATE KEY-----\nTOP-SECRET\n-----END PRIVATE KEY-----\n";

fn inline(text: &str) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(data_source::Specifier::InlineBytes(
            text.as_bytes().to_vec(),
        )),
        ..Default::default()
    })
}

/// A gateway's certificate with its private key ([`CERT`]), and its CA bundle ([`CA`]).
pub fn gateway_secrets() -> GatewayResources {
    GatewayResources {
        secrets: vec![
            Secret {
                name: CERT.into(),
                r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                    certificate_chain: inline("CERT"),
                    private_key: inline(KEY),
                    ..Default::default()
                })),
            },
            Secret {
                name: CA.into(),
                r#type: Some(secret::Type::ValidationContext(
                    CertificateValidationContext {
                        trusted_ca: inline("CA"),
                        ..Default::default()
                    },
                )),
            },
        ],
        ..Default::default()
    }
}

/// The SDS type URL.
pub const SDS: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// A CA and a serving certificate it signed for localhost, 127.0.0.1 and ::1, written to a folder.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca_pem: String,
    pub ca: PathBuf,
    pub files: TlsFiles,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    #[allow(clippy::new_without_default)] // each call mints a new PKI: not a default value
    pub fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        // Distinct subjects: BoringSSL (Envoy's gRPC) takes a leaf whose subject is its issuer's for self-signed.
        params
            .distinguished_name
            .push(DnType::CommonName, "admitpilot test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, issuer.pem()).unwrap();
        let (cert, key) = Self::leaf(&issuer, &["localhost", "127.0.0.1", "::1"]);
        let files = TlsFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        };
        std::fs::write(&files.cert, cert).unwrap();
        std::fs::write(&files.key, key).unwrap();
        Pki {
            ca_pem: issuer.pem(),
            ca,
            dir,
            files,
            issuer,
        }
    }

    fn leaf(issuer: &CertifiedIssuer<'static, KeyPair>, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        (
            params.signed_by(&key, issuer).unwrap().pem(),
            key.serialize_pem(),
        )
    }

    /// A certificate and key for `names` signed by this CA (PEM).
    pub fn issue(&self, names: &[&str]) -> (String, String) {
        Self::leaf(&self.issuer, names)
    }

    /// The server configuration serving the files (with reloading left to the caller).
    pub fn server_config(&self) -> (Arc<CertStore>, Arc<rustls::ServerConfig>) {
        let pair = PemFiles {
            cert: self.files.cert.clone(),
            key: self.files.key.clone(),
        };
        let (key, _) = load_files(&pair).unwrap();
        let store = CertStore::new(key);
        let config = self.files.server_config(store.clone()).unwrap();
        (store, config)
    }
}

/// An xDS server with an authenticated TLS endpoint and a plaintext one, serving fixed resources to everyone.
pub struct AuthServer {
    pub tls_addr: SocketAddr,
    pub plain_addr: SocketAddr,
    pub metrics: XdsMetrics,
    pub registry: Arc<Mutex<Registry>>,
    pub server: XdsServer,
    /// The snapshot channel of [`AuthServer::fixed`].
    pub snapshots: Option<watch::Sender<Arc<Snapshot>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl AuthServer {
    /// Serves what `translate` makes of the `snapshots`, with tokens for `audience` verified by `client`'s API
    /// server, open streams checked again every `recheck`, each port under `limits`.
    pub async fn start(
        pki: &Pki,
        client: kube::Client,
        audience: &str,
        translate: TranslateFn,
        receiver: watch::Receiver<Arc<Snapshot>>,
        (recheck, limits): (Duration, ConnectionLimits),
    ) -> AuthServer {
        let mut registry = Registry::with_prefix("admitpilot");
        let metrics = XdsMetrics::register(&mut registry);
        let server = XdsServer::new(receiver, translate, metrics.clone());
        let tls_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let plain_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (tls_addr, plain_addr) = (
            tls_listener.local_addr().unwrap(),
            plain_listener.local_addr().unwrap(),
        );
        let (_, config) = pki.server_config();
        let endpoints = vec![
            Endpoint {
                listener: tls_listener,
                tls: Some(config),
                policy: CallPolicy::Token(KubeAuth::with_recheck(
                    client,
                    audience.to_string(),
                    recheck,
                )),
                limits,
            },
            Endpoint {
                listener: plain_listener,
                tls: None,
                policy: CallPolicy::Open {
                    serve_secrets: false,
                },
                limits,
            },
        ];
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = server.clone();
        let task = tokio::spawn(async move {
            serving
                .serve_endpoints(endpoints, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        AuthServer {
            tls_addr,
            plain_addr,
            metrics,
            registry: Arc::new(Mutex::new(registry)),
            server,
            snapshots: None,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Serves fixed `resources` to every proxy, with the default re-check interval and limits.
    pub async fn fixed(
        pki: &Pki,
        client: kube::Client,
        audience: &str,
        resources: GatewayResources,
    ) -> AuthServer {
        Self::fixed_with(pki, client, audience, resources, default_settings()).await
    }

    /// Serves fixed `resources` to every proxy, re-checking every `recheck`, each port under `limits`.
    pub async fn fixed_with(
        pki: &Pki,
        client: kube::Client,
        audience: &str,
        resources: GatewayResources,
        settings: (Duration, ConnectionLimits),
    ) -> AuthServer {
        let translate = TranslateFn::stateless(move |_: &Snapshot, _: &Proxy| resources.clone());
        let (sender, receiver) = watch::channel(Arc::new(Snapshot {
            version: 1,
            ..Snapshot::default()
        }));
        let mut server = Self::start(pki, client, audience, translate, receiver, settings).await;
        server.snapshots = Some(sender);
        server
    }

    /// The metrics text.
    pub fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry.lock().unwrap())
            .unwrap();
        text
    }

    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
    }
}

/// The default re-check interval and connection limits, for [`AuthServer::start`].
pub fn default_settings() -> (Duration, ConnectionLimits) {
    (
        admitpilot::xds::auth::RECHECK_INTERVAL,
        ConnectionLimits::default(),
    )
}

/// A TLS channel to `addr` trusting `ca_pem` (server name localhost).
pub async fn tls_channel(addr: SocketAddr, ca_pem: &str) -> Channel {
    Channel::from_shared(format!("https://localhost:{}", addr.port()))
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca_pem))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A plaintext channel to `addr`.
pub async fn plain_channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A gateway node claiming `namespace` and the labels `app: gw`.
pub fn gateway_node(namespace: &str) -> Node {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.into())),
    };
    let labels = Value {
        kind: Some(Kind::StructValue(Struct {
            fields: [("app".to_string(), string("gw"))].into_iter().collect(),
        })),
    };
    Node {
        id: format!("router~127.0.0.1~gw-0.{namespace}~{namespace}.svc.cluster.local"),
        cluster: "gw".into(),
        metadata: Some(Struct {
            fields: [
                ("NAMESPACE".to_string(), string(namespace)),
                ("LABELS".to_string(), labels),
            ]
            .into_iter()
            .collect(),
        }),
        ..Default::default()
    }
}

/// An open SotW stream: its responses, and the sender that keeps it open (and can send more requests).
pub type OpenStream = (
    tonic::Streaming<DiscoveryResponse>,
    tokio::sync::mpsc::Sender<DiscoveryRequest>,
);

/// Opens a SotW stream on `channel` (with `token` as bearer, if any) as `node`, asking for `type_url` with `names`.
pub async fn open_stream(
    channel: Channel,
    token: Option<&str>,
    node: Node,
    type_url: &str,
    names: &[&str],
) -> Result<OpenStream, tonic::Status> {
    let bearer: Option<tonic::metadata::MetadataValue<_>> =
        token.map(|t| format!("Bearer {t}").parse().unwrap());
    let mut client = AggregatedDiscoveryServiceClient::with_interceptor(
        channel,
        move |mut request: tonic::Request<()>| {
            if let Some(bearer) = &bearer {
                request
                    .metadata_mut()
                    .insert("authorization", bearer.clone());
            }
            Ok(request)
        },
    );
    let request = DiscoveryRequest {
        node: Some(node),
        type_url: type_url.into(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    };
    let (sender, receiver) = tokio::sync::mpsc::channel(4);
    sender.send(request).await.unwrap();
    let responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await?
        .into_inner();
    Ok((responses, sender))
}

/// The names of a response's resources (a Secret's name, else the type URL).
pub fn resource_names(response: &DiscoveryResponse) -> Vec<String> {
    response
        .resources
        .iter()
        .map(|any| {
            if any.type_url == SDS {
                Secret::decode(any.value.as_slice()).unwrap().name
            } else {
                any.type_url.clone()
            }
        })
        .collect()
}

/// The status that ends an open stream, waiting at most `deadline` (responses before it are skipped).
pub async fn stream_end(
    responses: &mut tonic::Streaming<DiscoveryResponse>,
    deadline: std::time::Duration,
) -> tonic::Status {
    let start = tokio::time::Instant::now();
    loop {
        let left = deadline.saturating_sub(start.elapsed());
        match tokio::time::timeout(left, responses.message()).await {
            Err(_) => panic!("the stream was not ended within {deadline:?}"),
            Ok(Err(status)) => return status,
            Ok(Ok(None)) => return tonic::Status::ok("ended"),
            Ok(Ok(Some(_))) => {}
        }
    }
}

/// Opens a SotW stream on `channel` (with `token` as bearer, if any) as `node`, asks for `type_url` with
/// `names`, and returns the names of the first response's resources (the call's status when it fails).
pub async fn first_response(
    channel: Channel,
    token: Option<&str>,
    node: Node,
    type_url: &str,
    names: &[&str],
) -> Result<Vec<String>, tonic::Status> {
    let (mut responses, sender) = open_stream(channel, token, node, type_url, names).await?;
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), responses.message())
        .await
        .expect("a response within 10 s")?
        .ok_or_else(|| tonic::Status::unknown("the stream ended without a response"))?;
    drop(sender);
    Ok(resource_names(&response))
}
