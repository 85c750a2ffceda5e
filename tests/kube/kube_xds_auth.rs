//! Authenticated xDS against a REAL kube-apiserver (`scripts/kube-up`, found through `ADMITPILOT_KUBECONFIG`):
//! real ServiceAccounts, tokens minted by the TokenRequest API, a real Role and RoleBinding. TokenReview decides who
//! the caller is and SubjectAccessReview (the RBAC authorizer) whether it gets the gateway's key.
//!
//! Skips with a message when no API server is configured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use support::xds_auth::*;
use tonic::Code;

const AUDIENCE: &str = "admitpilot";

/// A client of the real API server, or `None` after a skip message.
async fn client() -> Option<kube::Client> {
    let Some(path) = std::env::var_os("ADMITPILOT_KUBECONFIG") else {
        eprintln!(
            "skipping: no real API server (run scripts/kube-up and set ADMITPILOT_KUBECONFIG)"
        );
        return None;
    };
    Some(
        admitpilot::source::kubernetes::client(Some(std::path::Path::new(&path)))
            .await
            .unwrap(),
    )
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        ..Default::default()
    }
}

/// A fresh namespace (the test API server has no namespace controller: names are never reused) with the
/// ServiceAccounts `gateway` (bound to a Role that may `get` Secrets) and `no-rbac`.
async fn namespace(client: &kube::Client) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let ns = format!("xds-auth-{}-{}", std::process::id(), nanos % 1_000_000_000);
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(
            &pp,
            &Namespace {
                metadata: meta(&ns, None),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns);
    for name in ["gateway", "no-rbac"] {
        accounts
            .create(
                &pp,
                &ServiceAccount {
                    metadata: meta(name, Some(&ns)),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    Api::<Role>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &Role {
                metadata: meta("gateway-secrets", Some(&ns)),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["secrets".into()]),
                    verbs: vec!["get".into()],
                    ..Default::default()
                }]),
            },
        )
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &RoleBinding {
                metadata: meta("gateway-secrets", Some(&ns)),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: "gateway-secrets".into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: "gateway".into(),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .unwrap();
    ns
}

/// ServiceAccount `ns/account`, allowed to `get` the one Secret `ns/secret` (a Role with `resourceNames`).
async fn named_secret_reader(client: &kube::Client, ns: &str, account: &str, secret: &str) {
    let pp = PostParams::default();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(
            &pp,
            &ServiceAccount {
                metadata: meta(account, Some(ns)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    Api::<Role>::namespaced(client.clone(), ns)
        .create(
            &pp,
            &Role {
                metadata: meta(account, Some(ns)),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["secrets".into()]),
                    verbs: vec!["get".into()],
                    resource_names: Some(vec![secret.into()]),
                    ..Default::default()
                }]),
            },
        )
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(
            &pp,
            &RoleBinding {
                metadata: meta(account, Some(ns)),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: account.into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: account.into(),
                    namespace: Some(ns.into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .unwrap();
}

/// A token of `ns`/`account` for `audience`, from the TokenRequest API.
async fn token(client: &kube::Client, ns: &str, account: &str, audience: &str) -> String {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![audience.into()],
            expiration_seconds: Some(600),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer: TokenRequest = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_subresource("token", account, &PostParams::default(), &request)
        .await
        .unwrap();
    answer.status.unwrap().token
}

#[tokio::test]
async fn real_tokens_and_rbac_decide_who_gets_the_key() {
    let Some(client) = client().await else {
        return;
    };
    let ns = namespace(&client).await;
    let pki = Pki::new();
    let server = AuthServer::fixed(&pki, client.clone(), AUDIENCE, gateway_secrets()).await;
    let sds = |token: Option<String>, namespace: String| {
        let ca = pki.ca_pem.clone();
        let addr = server.tls_addr;
        async move {
            let channel = tls_channel(addr, &ca).await;
            first_response(
                channel,
                token.as_deref(),
                gateway_node(&namespace),
                SDS,
                &[CERT, CA],
            )
            .await
        }
    };

    // The bound service account gets its certificate and key.
    let gateway = token(&client, &ns, "gateway", AUDIENCE).await;
    assert_eq!(
        sds(Some(gateway.clone()), ns.clone()).await.unwrap(),
        [CERT, CA]
    );

    // A service account RBAC does not let read Secrets: the CA bundle only.
    let no_rbac = token(&client, &ns, "no-rbac", AUDIENCE).await;
    assert_eq!(sds(Some(no_rbac), ns.clone()).await.unwrap(), [CA]);

    // Roles with `resourceNames` (what provisioning grants): asked about by name, the certificate goes to the
    // account allowed that very Secret, not to one allowed another.
    for (account, secret) in [("named", "gw-cert"), ("other-name", "other")] {
        named_secret_reader(&client, &ns, account, secret).await;
    }
    let named = token(&client, &ns, "named", AUDIENCE).await;
    assert_eq!(sds(Some(named), ns.clone()).await.unwrap(), [CERT, CA]);
    let other_name = token(&client, &ns, "other-name", AUDIENCE).await;
    assert_eq!(sds(Some(other_name), ns.clone()).await.unwrap(), [CA]);

    // The right account cannot claim another namespace's gateway.
    let status = sds(Some(gateway), "default".into()).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");

    // A real token for another audience (the API server's own) is refused by TokenReview.
    let other_audience = token(&client, &ns, "gateway", "https://kubernetes.default.svc").await;
    let status = sds(Some(other_audience), ns.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    // No token at all.
    let status = sds(None, ns.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    let text = server.metrics_text();
    assert!(
        text.contains("admitpilot_xds_secret_denied_total{reason=\"rbac\"} 2"),
        "{text}"
    );
    server.shutdown().await;
}

/// An open stream outlives neither its RoleBinding nor its ServiceAccount: re-checked every second here (30 s by
/// default), the stream with the key ends `PERMISSION_DENIED` once the RoleBinding is deleted, and one whose
/// ServiceAccount is deleted ends `UNAUTHENTICATED`; reconnecting gets what is allowed now.
#[tokio::test]
async fn an_open_stream_ends_when_its_permission_or_account_is_revoked() {
    let Some(client) = client().await else {
        return;
    };
    let ns = namespace(&client).await;
    let pki = Pki::new();
    let recheck = std::time::Duration::from_secs(1);
    let server = AuthServer::fixed_with(
        &pki,
        client.clone(),
        AUDIENCE,
        gateway_secrets(),
        (recheck, admitpilot::xds::ConnectionLimits::default()),
    )
    .await;
    let open = |token: String| {
        let (ca, addr, ns) = (pki.ca_pem.clone(), server.tls_addr, ns.clone());
        async move {
            let channel = tls_channel(addr, &ca).await;
            open_stream(channel, Some(&token), gateway_node(&ns), SDS, &[CERT, CA])
                .await
                .unwrap()
        }
    };
    let deadline = std::time::Duration::from_secs(20);

    // The key goes out while the RoleBinding exists; deleting it ends the stream.
    let gateway = token(&client, &ns, "gateway", AUDIENCE).await;
    let (mut responses, _open) = open(gateway.clone()).await;
    let first = responses.message().await.unwrap().unwrap();
    assert_eq!(resource_names(&first), [CERT, CA]);
    Api::<RoleBinding>::namespaced(client.clone(), &ns)
        .delete("gateway-secrets", &Default::default())
        .await
        .unwrap();
    let status = stream_end(&mut responses, deadline).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    // Reconnecting with the same token: the CA bundle only.
    let (mut responses, _open) = open(gateway).await;
    let again = responses.message().await.unwrap().unwrap();
    assert_eq!(resource_names(&again), [CA]);

    // A deleted ServiceAccount's token stops verifying: its open stream ends.
    let no_rbac = token(&client, &ns, "no-rbac", AUDIENCE).await;
    let (mut responses, _open) = open(no_rbac).await;
    assert!(responses.message().await.unwrap().is_some());
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .delete("no-rbac", &Default::default())
        .await
        .unwrap();
    let status = stream_end(&mut responses, deadline).await;
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    server.shutdown().await;
}

/// `/debug/*` from the pod network (a peer address that is not loopback): refused without a token, refused for a
/// verified service account of another namespace, served to one of admitpilot's namespace; `/metrics` stays open.
#[tokio::test]
async fn debug_pages_need_a_verified_account_of_admitpilots_namespace() {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;
    let Some(client) = client().await else {
        return;
    };
    let ns = namespace(&client).await;
    let other = namespace(&client).await;
    let access = admitpilot::admin::DebugAccess::LoopbackOrToken {
        auth: admitpilot::xds::KubeAuth::new(client.clone(), AUDIENCE.into()),
        namespace: ns.clone(),
    };
    let debug =
        axum::Router::new().route("/debug/configz", axum::routing::get(|| async { "config" }));
    let router = admitpilot::admin::router(
        std::sync::Arc::new(prometheus_client::registry::Registry::default()),
        admitpilot::admin::Readiness::new(),
        access,
        [debug],
    );
    let pod_network: std::net::SocketAddr = "10.20.30.40:5555".parse().unwrap();
    let get = |path: &str, token: Option<String>| {
        let mut request = Request::get(path).extension(axum::extract::ConnectInfo(pod_network));
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let router = router.clone();
        let request = request.body(Body::empty()).unwrap();
        async move { router.oneshot(request).await.unwrap().status() }
    };
    assert_eq!(get("/metrics", None).await, StatusCode::OK);
    assert_eq!(get("/debug/configz", None).await, StatusCode::UNAUTHORIZED);
    let outsider = token(&client, &other, "gateway", AUDIENCE).await;
    assert_eq!(
        get("/debug/configz", Some(outsider)).await,
        StatusCode::FORBIDDEN
    );
    let wrong_audience = token(&client, &ns, "gateway", "https://kubernetes.default.svc").await;
    assert_eq!(
        get("/debug/configz", Some(wrong_audience)).await,
        StatusCode::UNAUTHORIZED
    );
    let insider = token(&client, &ns, "no-rbac", AUDIENCE).await;
    assert_eq!(get("/debug/configz", Some(insider)).await, StatusCode::OK);
}
