//! xDS over TLS with client-certificate authentication (mTLS): a client with a certificate from the configured
//! CA is served, a client without one is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::xds_harness as harness;

use admitpilot::translate::GatewayResources;
use admitpilot::xds::TlsFiles;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use harness::*;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    Pki {
        ca: ca.pem(),
        server: leaf(
            vec!["localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        client: leaf(vec!["gateway".into()], ExtendedKeyUsagePurpose::ClientAuth),
    }
}

async fn cds(channel: Channel) -> Result<usize, tonic::Status> {
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let request = DiscoveryRequest {
        node: Some(node("tls-gw")),
        type_url: CDS.into(),
        ..Default::default()
    };
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::iter(vec![request]))
        .await?
        .into_inner();
    let response = responses.message().await?.expect("a response");
    Ok(response.resources.len())
}

#[tokio::test]
async fn mtls_requires_a_client_certificate() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let files = TlsFiles {
        cert: write("server.pem", &pki.server.0),
        key: write("server.key", &pki.server.1),
        client_ca: Some(write("ca.pem", &pki.ca)),
    };
    let server = TestServer::start_tls(
        GatewayResources {
            clusters: vec![eds_cluster("a")],
            ..Default::default()
        },
        files,
    )
    .await;
    let url = format!("https://localhost:{}", server.addr.port());
    let base_tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&pki.ca))
        .domain_name("localhost");

    let with_cert = Channel::from_shared(url.clone())
        .unwrap()
        .tls_config(
            base_tls
                .clone()
                .identity(Identity::from_pem(&pki.client.0, &pki.client.1)),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    assert_eq!(cds(with_cert).await.unwrap(), 1);

    let without_cert = Channel::from_shared(url)
        .unwrap()
        .tls_config(base_tls)
        .unwrap()
        .connect()
        .await;
    match without_cert {
        Err(_) => {}
        Ok(channel) => assert!(cds(channel).await.is_err()),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn unreadable_tls_files_are_reported() {
    let (_tx, rx) =
        tokio::sync::watch::channel(std::sync::Arc::new(admitpilot::model::Snapshot::default()));
    let server = admitpilot::xds::XdsServer::new(
        rx,
        admitpilot::xds::TranslateFn::caching(admitpilot::translate::Options::default()),
        admitpilot::xds::XdsMetrics::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let files = TlsFiles {
        cert: "/nonexistent/cert.pem".into(),
        key: "/nonexistent/key.pem".into(),
        client_ca: None,
    };
    let error = server
        .serve(listener, Some(&files), std::future::pending())
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("/nonexistent/cert.pem"),
        "{error}"
    );
}
