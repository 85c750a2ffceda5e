//! Authenticated xDS against the API-server double: who gets a gateway's private key. A client without a token,
//! with a token of another namespace, or whose service account may not read Secrets gets none; an authorized one
//! does; the plaintext port never sends one; tokens expire, reviews are cached, API errors deny, MCP subscribers
//! are authorized, and everything withheld is counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use support::apiserver::ApiServer;
use support::xds_auth::*;
use tonic::Code;

const AUDIENCE: &str = "admitpilot";

struct Setup {
    api: ApiServer,
    pki: Pki,
    server: AuthServer,
}

async fn setup() -> Setup {
    let api = ApiServer::start(Duration::from_secs(60)).await;
    let pki = Pki::new();
    let server = AuthServer::fixed(&pki, api.client(), AUDIENCE, gateway_secrets()).await;
    Setup { api, pki, server }
}

impl Setup {
    async fn sds(
        &self,
        token: Option<&str>,
        namespace: &str,
    ) -> Result<Vec<String>, tonic::Status> {
        let channel = tls_channel(self.server.tls_addr, &self.pki.ca_pem).await;
        first_response(channel, token, gateway_node(namespace), SDS, &[CERT, CA]).await
    }

    /// A token of gw/gateway, allowed to get Secrets in gw.
    fn authorized_token(&self) -> String {
        self.api
            .grant(("gw", "gateway"), "get", "", "secrets", "gw");
        self.api
            .issue_token("gw", "gateway", AUDIENCE, Duration::from_secs(3600))
    }
}

#[tokio::test]
async fn an_authorized_gateway_gets_its_certificate() {
    let s = setup().await;
    let token = s.authorized_token();
    assert_eq!(s.sds(Some(&token), "gw").await.unwrap(), [CERT, CA]);
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_client_without_a_token_gets_nothing() {
    let s = setup().await;
    let status = s.sds(None, "gw").await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(
        status.message().contains("service-account token"),
        "{status:?}"
    );
    let forged = s.sds(Some("not-a-token"), "gw").await.unwrap_err();
    assert_eq!(forged.code(), Code::Unauthenticated, "{forged:?}");
    let text = s.server.metrics_text();
    assert!(
        text.contains("admitpilot_xds_auth_failures_total{reason=\"missing\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("admitpilot_xds_auth_failures_total{reason=\"invalid\"} 1"),
        "{text}"
    );
    s.server.shutdown().await;
}

#[tokio::test]
async fn the_plaintext_port_never_sends_a_secret() {
    // The issue's reproduction: a plain gRPC client claiming the gateway's namespace and labels.
    let s = setup().await;
    let channel = plain_channel(s.server.plain_addr).await;
    let names = first_response(channel, None, gateway_node("gw"), SDS, &[CERT, CA])
        .await
        .unwrap();
    assert!(names.is_empty(), "{names:?}");
    let text = s.server.metrics_text();
    assert!(
        text.contains("admitpilot_xds_secret_denied_total{reason=\"unauthenticated\"} 2"),
        "{text}"
    );
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_token_of_another_namespace_cannot_claim_the_gateway() {
    let s = setup().await;
    s.api
        .grant(("other", "gateway"), "get", "", "secrets", "other");
    let token = s
        .api
        .issue_token("other", "gateway", AUDIENCE, Duration::from_secs(3600));
    let status = s.sds(Some(&token), "gw").await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status
            .message()
            .contains("namespace gw is not the namespace of service account other/gateway"),
        "{status:?}"
    );
    assert!(s
        .server
        .metrics_text()
        .contains("admitpilot_xds_auth_failures_total{reason=\"namespace_mismatch\"} 1"));
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_service_account_without_secret_access_gets_the_ca_bundle_only() {
    let s = setup().await;
    let token = s
        .api
        .issue_token("gw", "no-rbac", AUDIENCE, Duration::from_secs(3600));
    assert_eq!(s.sds(Some(&token), "gw").await.unwrap(), [CA]);
    // Logged and counted once per stream and secret.
    assert_eq!(s.sds(Some(&token), "gw").await.unwrap(), [CA]);
    let text = s.server.metrics_text();
    assert!(
        text.contains("admitpilot_xds_secret_denied_total{reason=\"rbac\"} 2"),
        "{text}"
    );
    assert!(!text.contains("TOP-SECRET"));
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_token_for_another_audience_is_refused() {
    let s = setup().await;
    s.api.grant(("gw", "gateway"), "get", "", "secrets", "gw");
    let token = s
        .api
        .issue_token("gw", "gateway", "kubernetes", Duration::from_secs(3600));
    let status = s.sds(Some(&token), "gw").await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(
        status.message().contains("audience admitpilot"),
        "{status:?}"
    );
    s.server.shutdown().await;
}

#[tokio::test]
async fn an_expired_token_is_refused_and_a_stream_ends_when_its_token_expires() {
    let s = setup().await;
    s.api.grant(("gw", "gateway"), "get", "", "secrets", "gw");
    let expired = s.api.issue_token("gw", "gateway", AUDIENCE, Duration::ZERO);
    let status = s.sds(Some(&expired), "gw").await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    // A token valid for two more seconds gets its secret, then the stream ends at the token's expiry.
    let short = s
        .api
        .issue_token("gw", "gateway", AUDIENCE, Duration::from_secs(2));
    let channel = tls_channel(s.server.tls_addr, &s.pki.ca_pem).await;
    let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {short}").parse().unwrap();
    let mut client = envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient::with_interceptor(
        channel,
        move |mut request: tonic::Request<()>| {
            request.metadata_mut().insert("authorization", bearer.clone());
            Ok(request)
        },
    );
    let (sender, receiver) = tokio::sync::mpsc::channel(4);
    sender
        .send(
            envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest {
                node: Some(gateway_node("gw")),
                type_url: SDS.into(),
                resource_names: vec![CERT.into()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        responses.message().await.unwrap().unwrap().resources.len(),
        1
    );
    let ended = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .expect("the stream ends when the token expires")
        .unwrap_err();
    assert_eq!(ended.code(), Code::Unauthenticated, "{ended:?}");
    assert!(ended.message().contains("expired"), "{ended:?}");
    drop(sender);
    s.server.shutdown().await;
}

#[tokio::test]
async fn reviews_are_cached_and_api_errors_deny() {
    let s = setup().await;
    let token = s.authorized_token();
    for _ in 0..3 {
        assert_eq!(s.sds(Some(&token), "gw").await.unwrap(), [CERT, CA]);
    }
    assert_eq!(s.api.reviews_of("tokenreviews"), 1);
    // Two questions, each asked once: Secrets of its namespace, and of every namespace (Ingress TLS Secrets).
    assert_eq!(s.api.reviews_of("subjectaccessreviews"), 2);

    // The API server fails: an unknown token cannot be verified, and is refused.
    s.api.fail_reviews(true);
    let fresh = s
        .api
        .issue_token("gw", "gateway", AUDIENCE, Duration::from_secs(3600));
    let status = s.sds(Some(&fresh), "gw").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    // A verified token whose access check fails gets no key: the token is verified (and cached) by a call that
    // is refused for its node, then the access review fails.
    s.api.fail_reviews(false);
    let other = s
        .api
        .issue_token("gw", "other", AUDIENCE, Duration::from_secs(3600));
    let refused = s.sds(Some(&other), "elsewhere").await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    s.api.fail_reviews(true);
    assert_eq!(s.sds(Some(&other), "gw").await.unwrap(), [CA]);
    s.api.fail_reviews(false);
    assert!(s
        .server
        .metrics_text()
        .contains("admitpilot_xds_secret_denied_total{reason=\"api_error\"} 1"));
    let text = s.server.metrics_text();
    assert!(
        text.contains("admitpilot_xds_auth_failures_total{reason=\"unavailable\"} 1"),
        "{text}"
    );
    s.server.shutdown().await;
}

#[tokio::test]
async fn mcp_subscribers_need_a_token_that_may_list_the_config() {
    let s = setup().await;
    let collection = "networking.istio.io/v1/VirtualService";
    let channel = || tls_channel(s.server.tls_addr, &s.pki.ca_pem);
    let node = envoy_types::pb::envoy::config::core::v3::Node {
        id: "istiod".into(),
        ..Default::default()
    };
    let none = first_response(channel().await, None, node.clone(), collection, &[])
        .await
        .unwrap_err();
    assert_eq!(none.code(), Code::Unauthenticated, "{none:?}");
    let token = s.api.issue_token(
        "istio-system",
        "istiod",
        AUDIENCE,
        Duration::from_secs(3600),
    );
    let forbidden = first_response(channel().await, Some(&token), node.clone(), collection, &[])
        .await
        .unwrap_err();
    assert_eq!(forbidden.code(), Code::PermissionDenied, "{forbidden:?}");
    assert!(
        forbidden.message().contains("list virtualservices"),
        "{forbidden:?}"
    );
    s.api.grant(
        ("istio-system", "istiod"),
        "list",
        "networking.istio.io",
        "virtualservices",
        "",
    );
    // The denial was cached for a short while; a new token of the same account asks again only after it.
    let admin = s.api.issue_token(
        "istio-system",
        "mcp-reader",
        AUDIENCE,
        Duration::from_secs(3600),
    );
    s.api.grant(
        ("istio-system", "mcp-reader"),
        "list",
        "networking.istio.io",
        "virtualservices",
        "",
    );
    first_response(channel().await, Some(&admin), node, collection, &[])
        .await
        .unwrap();
    s.server.shutdown().await;
}
