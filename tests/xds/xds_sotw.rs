//! SotW ADS protocol tests against an in-process server with hand-built resources.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::xds_harness as harness;

use admitpilot::translate::GatewayResources;
use admitpilot::xds::resources::ResourceType;
use envoy_types::pb::google::rpc::Status as RpcStatus;
use harness::*;

fn base() -> GatewayResources {
    GatewayResources {
        clusters: vec![eds_cluster("a"), eds_cluster("b")],
        endpoints: vec![endpoints("a", &[1001]), endpoints("b", &[1002])],
        listeners: vec![http_listener("l1", 10080, "r1")],
        route_configs: vec![route_config("r1", &[("/api", "a")])],
        ..Default::default()
    }
}

#[tokio::test]
async fn initial_push_ack_and_subscriptions() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;

    client.request(Some(node("gw-1")), CDS, &[], "", "").await;
    let cds = client.next().await;
    assert_eq!(cds.type_url, CDS);
    assert_eq!(sotw_names(&cds), ["a", "b"]);
    assert!(!cds.nonce.is_empty());
    client.ack(&cds, &[]).await;

    // EDS only returns subscribed names.
    client.request(None, EDS, &["a"], "", "").await;
    let eds = client.next().await;
    assert_eq!(sotw_names(&eds), ["a"]);
    client.ack(&eds, &["a"]).await;

    // Growing the subscription answers with the full subscribed set.
    client
        .request(None, EDS, &["a", "b"], &eds.version_info, &eds.nonce)
        .await;
    // (The ACK above produced no response, so eds.nonce is still the current nonce.)
    let eds2 = client.next().await;
    assert_eq!(sotw_names(&eds2), ["a", "b"]);
    assert_ne!(eds2.version_info, eds.version_info);
    client.ack(&eds2, &["a", "b"]).await;

    // Explicit wildcard for EDS: a subscription change is always answered.
    client
        .request(None, EDS, &["*"], &eds2.version_info, &eds2.nonce)
        .await;
    let eds3 = client.next().await;
    assert_eq!(sotw_names(&eds3), ["a", "b"]);
    assert_eq!(eds3.version_info, eds2.version_info);
    client.ack(&eds3, &["*"]).await;
    // An ACK without change gets no response: the next one is the LDS answer.
    client.request(None, LDS, &[], "", "").await;
    let lds = client.next().await;
    assert_eq!(lds.type_url, LDS);
    assert_eq!(sotw_names(&lds), ["l1"]);

    let status = server.server.status().list();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].node_id, "gw-1");
    assert_eq!(status[0].namespace, "default");
    assert_eq!(
        status[0].types["cds"].acked_version.map(|v| v.to_string()),
        Some(cds.version_info.clone())
    );
    drop(client);
    server.shutdown().await;
}

#[tokio::test]
async fn push_in_warming_order_and_only_changed_types() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    client.request(Some(node("gw-1")), CDS, &[], "", "").await;
    let cds = client.next().await;
    client.ack(&cds, &[]).await;
    client.request(None, EDS, &["a", "b"], "", "").await;
    let eds = client.next().await;
    client.ack(&eds, &["a", "b"]).await;
    client.request(None, LDS, &[], "", "").await;
    let lds = client.next().await;
    client.ack(&lds, &[]).await;
    client.request(None, RDS, &["r1"], "", "").await;
    let rds = client.next().await;
    client.ack(&rds, &["r1"]).await;
    wait_acked(&server, "gw-1", "rds", &rds.version_info).await;

    // Change a cluster, its endpoints and the route at once.
    server.update(|r| {
        r.clusters.push(eds_cluster("c"));
        r.endpoints[0] = endpoints("a", &[2001]);
        r.route_configs[0] = route_config("r1", &[("/api", "c")]);
    });
    let first = client.next().await;
    assert_eq!(first.type_url, CDS);
    assert_eq!(sotw_names(&first), ["a", "b", "c"]);
    let second = client.next().await;
    assert_eq!(second.type_url, EDS);
    let third = client.next().await;
    assert_eq!(
        third.type_url, RDS,
        "LDS did not change, so it is not resent"
    );
    for response in [&first, &second, &third] {
        client.ack(response, &[]).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn nack_is_recorded_and_not_resent_until_change() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    client
        .request(Some(node("gw-nack")), CDS, &[], "", "")
        .await;
    let cds = client.next().await;
    client.ack(&cds, &[]).await;
    wait_acked(&server, "gw-nack", "cds", &cds.version_info).await;

    server.update(|r| r.clusters.push(eds_cluster("bad")));
    let pushed = client.next().await;
    assert_eq!(sotw_names(&pushed), ["a", "b", "bad"]);
    // NACK: previous version + error detail.
    client
        .send(
            envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest {
                type_url: CDS.into(),
                version_info: cds.version_info.clone(),
                response_nonce: pushed.nonce.clone(),
                error_detail: Some(RpcStatus {
                    code: 3,
                    message: "cluster bad: rejected by test".into(),
                    details: vec![],
                }),
                ..Default::default()
            },
        )
        .await;
    // The next response must be the LDS answer, not a CDS resend.
    client.request(None, LDS, &[], "", "").await;
    let next = client.next().await;
    assert_eq!(next.type_url, LDS);
    assert_eq!(server.metrics.nack_count(ResourceType::Cluster), 1);
    let status = server.server.status().list();
    let cds_status = &status[0].types["cds"];
    assert_eq!(
        cds_status.acked_version.map(|v| v.to_string()),
        Some(cds.version_info.clone())
    );
    let nack = cds_status.last_nack.as_ref().unwrap();
    assert_eq!(cds_status.nacks, 1);
    assert_eq!(nack.message, "cluster bad: rejected by test");
    assert_eq!(nack.version.to_string(), pushed.version_info);

    // A new snapshot with the same (rejected) content is not resent; a fix is.
    server.update(|_| {});
    server.update(|r| {
        r.clusters.pop();
    });
    let fixed = client.next().await;
    assert_eq!(fixed.type_url, CDS);
    assert_eq!(sotw_names(&fixed), ["a", "b"]);
    assert_eq!(
        fixed.version_info, cds.version_info,
        "content hash versions"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn stale_nonce_is_ignored() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    client
        .request(Some(node("gw-stale")), EDS, &["a"], "", "")
        .await;
    let first = client.next().await;
    client.ack(&first, &["a"]).await;
    wait_acked(&server, "gw-stale", "eds", &first.version_info).await;
    server.update(|r| r.endpoints[0] = endpoints("a", &[3001]));
    let second = client.next().await;
    assert_ne!(first.nonce, second.nonce);
    // A request answering the old nonce, asking for more names: ignored entirely.
    client
        .request(None, EDS, &["a", "b"], &first.version_info, &first.nonce)
        .await;
    client.request(None, LDS, &[], "", "").await;
    assert_eq!(client.next().await.type_url, LDS);
    // The same request with the current nonce is served.
    client
        .request(None, EDS, &["a", "b"], &second.version_info, &second.nonce)
        .await;
    let third = client.next().await;
    assert_eq!(sotw_names(&third), ["a", "b"]);
    server.shutdown().await;
}

#[tokio::test]
async fn removed_resources_leave_the_state_of_the_world() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    client.request(Some(node("gw-rm")), CDS, &[], "", "").await;
    let cds = client.next().await;
    client.ack(&cds, &[]).await;
    wait_acked(&server, "gw-rm", "cds", &cds.version_info).await;
    server.update(|r| {
        r.clusters.retain(|c| c.name != "b");
    });
    let next = client.next().await;
    assert_eq!(sotw_names(&next), ["a"]);
    server.shutdown().await;
}

/// Requests that reach a process whose sources have not synced yet are answered once the first snapshot is
/// loaded, in order: an answer from the empty placeholder would remove everything a reconnecting gateway holds.
#[tokio::test]
async fn requests_before_the_first_load_are_answered_after_it() {
    let server = TestServer::start_unloaded().await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    client
        .request(Some(node("gw-early")), CDS, &[], "", "")
        .await;
    client.request(None, LDS, &[], "", "").await;
    wait_until("the stream has joined its group", || {
        server
            .server
            .status()
            .list()
            .iter()
            .any(|c| c.node_id == "gw-early")
    })
    .await;
    server.set(base());
    let cds = client.next().await;
    assert_eq!(
        (cds.type_url.as_str(), sotw_names(&cds)),
        (CDS, vec!["a".into(), "b".into()])
    );
    let lds = client.next().await;
    assert_eq!(
        (lds.type_url.as_str(), sotw_names(&lds)),
        (LDS, vec!["l1".into()])
    );
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_streams() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    client.request(Some(node("gw-end")), CDS, &[], "", "").await;
    client.next().await;
    server.shutdown().await;
    assert!(client.closed().await);
}

#[tokio::test]
async fn first_request_without_node_is_refused() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    client.request(None, CDS, &[], "", "").await;
    assert!(client.closed().await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_client_does_not_block_others() {
    let big = |round: usize| GatewayResources {
        clusters: (0..50)
            .map(|i| {
                let mut cluster = eds_cluster(&format!("c{i}"));
                cluster.alt_stat_name = format!("{round}-{}", "x".repeat(4096));
                cluster
            })
            .collect(),
        ..Default::default()
    };
    let server = TestServer::start(big(0)).await;
    // The stuck client subscribes and never reads a response.
    let stuck = SotwClient::connect(&server.endpoint()).await;
    stuck.request(Some(node("stuck")), CDS, &[], "", "").await;
    let mut live = SotwClient::connect(&server.endpoint()).await;
    live.request(Some(node("live")), CDS, &[], "", "").await;
    let mut response = live.next().await;
    live.ack(&response, &[]).await;
    for round in 1..=40 {
        server.set(big(round));
        response = live.next().await;
        live.ack(&response, &[]).await;
    }
    // The live client saw every update (roughly 8 MB went to the stuck one, which cannot take it).
    use prost::Message;
    let first = envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(
        response.resources[0].value.as_slice(),
    )
    .unwrap();
    assert!(first.alt_stat_name.starts_with("40-"));
    // Shutdown completes although the stuck client never drains its connection.
    server.shutdown().await;
    drop(stuck);
}

#[tokio::test]
async fn unknown_names_get_the_existing_resources_and_appear_when_created() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    // SotW cannot say "does not exist": the response carries the resources that do.
    client
        .request(Some(node("gw-unknown")), EDS, &["a", "ghost"], "", "")
        .await;
    let eds = client.next().await;
    assert_eq!(sotw_names(&eds), ["a"]);
    client.ack(&eds, &["a", "ghost"]).await;
    wait_acked(&server, "gw-unknown", "eds", &eds.version_info).await;

    // The name is remembered: once the resource exists it is pushed.
    server.update(|r| r.endpoints.push(endpoints("ghost", &[1003])));
    let push = client.next().await;
    assert_eq!(sotw_names(&push), ["a", "ghost"]);
    assert_ne!(push.version_info, eds.version_info);
    server.shutdown().await;
}

/// istiod's MCP client (`pkg/adsc` `ConfigInitialRequests`) opens with `core/v1alpha1/MeshConfig`, then asks for
/// every collection of its schemas, some of which admitpilot does not serve: the stream is an MCP subscriber all
/// the same, each type is answered (the unserved ones with none of it, once), and ACKs get no second answer.
#[tokio::test]
async fn istiods_opening_sequence_makes_an_mcp_stream_and_every_type_is_answered() {
    let server = TestServer::start(base()).await;
    let mut client = SotwClient::connect(&server.endpoint()).await;
    let opening = [
        "core/v1alpha1/MeshConfig",
        "networking.istio.io/v1/VirtualService",
        "networking.istio.io/v1/Gateway",
        "networking.x-k8s.io/v1alpha1/XBackendTrafficPolicy",
        "security.istio.io/v1/PeerAuthentication",
    ];
    client
        .request(Some(node("istiod-1")), opening[0], &[], "", "")
        .await;
    for type_url in &opening[1..] {
        client.request(None, type_url, &[], "", "").await;
    }
    let mut answered = Vec::new();
    for _ in 0..opening.len() {
        let response = client.next().await;
        assert!(!response.nonce.is_empty());
        client.ack(&response, &[]).await;
        answered.push(response.type_url);
    }
    answered.sort();
    let mut expected: Vec<String> = opening.iter().map(|t| t.to_string()).collect();
    expected.sort();
    assert_eq!(answered, expected);
    // The ACKs were not answered: the next response is the one to a new request.
    let last = "telemetry.istio.io/v1/Telemetry";
    client.request(None, last, &[], "", "").await;
    assert_eq!(client.next().await.type_url, last);
    let connections = server.server.status().list();
    assert_eq!(connections.len(), 1);
    assert_eq!(connections[0].subscriber, "mcp");
}
