//! What the real API server of the test suite (`support::kube_server`, the shared one of `scripts/test-all`) provides to
//! tests that need more than objects: ServiceAccount tokens from the TokenRequest API checked by TokenReview
//! (audience and validity), SubjectAccessReview answered by RBAC, CRDs with a status subresource, and Leases.
//! Each test keeps to its own namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::kube_server;

use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube_server::Kube;
use serde_json::Value;

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kube/istio-crds.yaml");

/// TokenReview of `token` for `audiences`: (authenticated, username, audiences).
async fn review(kube: &Kube, token: &str, audiences: &[&str]) -> (bool, String, Vec<String>) {
    let api: kube::Api<TokenReview> = kube::Api::all(kube.client().await);
    let request = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: Some(audiences.iter().map(ToString::to_string).collect()),
        },
        ..Default::default()
    };
    let status = api
        .create(&Default::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap();
    let user = status.user.unwrap_or_default();
    (
        status.authenticated.unwrap_or(false),
        user.username.unwrap_or_default(),
        status.audiences.unwrap_or_default(),
    )
}

#[tokio::test]
async fn token_review_checks_audience_of_requested_tokens() {
    let Some(kube) = Kube::shared("token-review").await else {
        return;
    };
    let ns = kube.namespace();
    kube.create_service_account("gateway").await;
    let token = kube
        .token(ns, "gateway", Some("admitpilot-xds"), "10m")
        .await;

    let (authenticated, user, audiences) = review(&kube, &token, &["admitpilot-xds"]).await;
    assert!(authenticated);
    assert_eq!(user, format!("system:serviceaccount:{ns}:gateway"));
    assert_eq!(audiences, ["admitpilot-xds"]);
    // The same token is not valid for another audience.
    let (authenticated, _, _) = review(&kube, &token, &["someone-else"]).await;
    assert!(!authenticated);
}

/// SubjectAccessReview: may `user` list VirtualServices in `ns`?
async fn allowed(kube: &Kube, user: &str, ns: &str) -> bool {
    let api: kube::Api<SubjectAccessReview> = kube::Api::all(kube.client().await);
    let request = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.to_string()),
                group: Some("networking.istio.io".into()),
                resource: Some("virtualservices".into()),
                verb: Some("list".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let review = api.create(&Default::default(), &request).await.unwrap();
    review.status.unwrap().allowed
}

/// The VirtualService `ns/web` as JSON.
async fn get_vs(kube: &Kube, ns: &str) -> Value {
    let args = ["-n", ns, "get", "virtualservice", "web", "-o", "json"];
    serde_json::from_str(&kube.kubectl_ok(&args, None).await).unwrap()
}

#[tokio::test]
async fn subject_access_review_follows_rbac() {
    let Some(kube) = Kube::shared("access-review").await else {
        return;
    };
    let ns = kube.namespace().to_string();
    kube.create_service_account("gateway").await;
    let user = format!("system:serviceaccount:{ns}:gateway");
    assert!(!allowed(&kube, &user, &ns).await);
    let rbac = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: read-vs, namespace: {ns}}}\n\
         rules: [{{apiGroups: [networking.istio.io], resources: [virtualservices], verbs: [list]}}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: read-vs, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-vs}}\n\
         subjects: [{{kind: ServiceAccount, name: gateway, namespace: {ns}}}]\n"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&rbac)).await;
    // RBAC's authorizer follows its informers: poll until the binding is seen.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while !allowed(&kube, &user, &ns).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "RoleBinding never took effect"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn crd_status_subresource_and_leases() {
    let Some(kube) = Kube::shared("crd-status").await else {
        return;
    };
    let ns = kube.namespace();
    kube.install_crds(Path::new(CRDS)).await;
    let vs = format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: web, namespace: {ns}}}\n\
         spec: {{hosts: [web.example.com]}}\nstatus: {{ignored: true}}\n"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&vs)).await;
    // The status in a create is dropped; it is written through the status subresource only.
    assert_eq!(get_vs(&kube, ns).await["status"], Value::Null);
    let patch = r#"{"status": {"conditions": [{"type": "Reconciled", "status": "True"}]}}"#;
    kube.kubectl_ok(
        &[
            "-n",
            ns,
            "patch",
            "virtualservice",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            patch,
        ],
        None,
    )
    .await;
    let stored = get_vs(&kube, ns).await;
    assert_eq!(stored["status"]["conditions"][0]["type"], "Reconciled");
    assert_eq!(stored["spec"]["hosts"][0], "web.example.com");
    assert_eq!(
        stored["metadata"]["generation"], 1,
        "a status write is no new generation"
    );

    let lease = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: admitpilot-leader, namespace: {ns}}}\n\
         spec: {{holderIdentity: replica-a, leaseDurationSeconds: 15}}\n"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&lease)).await;
    let holder = kube.lease_holder(ns, "admitpilot-leader").await;
    assert_eq!(holder, "replica-a");
}
