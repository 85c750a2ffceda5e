//! Delta ADS protocol tests against an in-process server with hand-built resources.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::xds_harness as harness;

use std::collections::HashMap;

use admitpilot::translate::GatewayResources;
use admitpilot::xds::resources::ResourceType;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
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

fn subscribe(node_id: Option<&str>, type_url: &str, names: &[&str]) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node: node_id.map(node),
        type_url: type_url.into(),
        resource_names_subscribe: names.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn wildcard_push_sends_only_changes_and_removals() {
    let server = TestServer::start(base()).await;
    let mut client = DeltaClient::connect(&server.endpoint()).await;
    client.send(subscribe(Some("d-1"), CDS, &[])).await;
    let first = client.next().await;
    assert_eq!(delta_names(&first), ["a", "b"]);
    assert!(first.removed_resources.is_empty());
    client.ack(&first).await;
    wait_acked(&server, "d-1", "cds", &first.system_version_info).await;

    server.update(|r| {
        r.clusters[0].connect_timeout = Some(envoy_types::pb::google::protobuf::Duration {
            seconds: 5,
            nanos: 0,
        });
        r.clusters.retain(|c| c.name != "b");
        r.clusters.push(eds_cluster("c"));
    });
    let push = client.next().await;
    assert_eq!(delta_names(&push), ["a", "c"]);
    assert_eq!(push.removed_resources, ["b"]);
    client.ack(&push).await;

    // A snapshot that changes nothing for this group sends nothing: the next response is the LDS answer.
    server.update(|_| {});
    client.send(subscribe(None, LDS, &[])).await;
    let lds = client.next().await;
    assert_eq!(lds.type_url, LDS);
    assert_eq!(delta_names(&lds), ["l1"]);
    let status = server.server.status().list();
    assert_eq!(status[0].api, "delta");
    assert_eq!(status[0].types["cds"].resources, 2);
    server.shutdown().await;
}

#[tokio::test]
async fn explicit_subscribe_and_unsubscribe() {
    let server = TestServer::start(base()).await;
    let mut client = DeltaClient::connect(&server.endpoint()).await;
    client.send(subscribe(Some("d-2"), EDS, &["a"])).await;
    let first = client.next().await;
    assert_eq!(delta_names(&first), ["a"]);
    client.ack(&first).await;

    client.send(subscribe(None, EDS, &["b", "missing"])).await;
    let second = client.next().await;
    assert_eq!(delta_names(&second), ["b"]);
    client.ack(&second).await;

    client
        .send(DeltaDiscoveryRequest {
            type_url: EDS.into(),
            resource_names_unsubscribe: vec!["a".into()],
            ..Default::default()
        })
        .await;
    wait_until("the unsubscription is applied", || {
        server.server.status().list()[0].types["eds"].subscribed == 2
    })
    .await;
    // Unsubscribed resources are not pushed any more; subscribed ones are.
    server.update(|r| {
        r.endpoints = vec![endpoints("a", &[2001]), endpoints("b", &[2002])];
    });
    let push = client.next().await;
    assert_eq!(delta_names(&push), ["b"]);
    assert!(push.removed_resources.is_empty());

    // Removing a subscribed resource reports it removed.
    client.ack(&push).await;
    server.update(|r| r.endpoints.retain(|e| e.cluster_name != "b"));
    let removed = client.next().await;
    assert!(removed.resources.is_empty());
    assert_eq!(removed.removed_resources, ["b"]);
    server.shutdown().await;
}

#[tokio::test]
async fn nack_is_tracked_per_resource_and_not_resent() {
    let server = TestServer::start(base()).await;
    let mut client = DeltaClient::connect(&server.endpoint()).await;
    client.send(subscribe(Some("d-3"), CDS, &[])).await;
    let first = client.next().await;
    client.ack(&first).await;
    wait_acked(&server, "d-3", "cds", &first.system_version_info).await;

    server.update(|r| r.clusters.push(eds_cluster("bad")));
    let push = client.next().await;
    assert_eq!(delta_names(&push), ["bad"]);
    client
        .send(DeltaDiscoveryRequest {
            type_url: CDS.into(),
            response_nonce: push.nonce.clone(),
            error_detail: Some(RpcStatus {
                code: 3,
                message: "bad cluster".into(),
                details: vec![],
            }),
            ..Default::default()
        })
        .await;
    // Same content again: nothing resent (the LDS answer comes first).
    server.update(|_| {});
    client.send(subscribe(None, LDS, &[])).await;
    assert_eq!(client.next().await.type_url, LDS);
    assert_eq!(server.metrics.nack_count(ResourceType::Cluster), 1);
    let status = server.server.status().list();
    let nack = status[0].types["cds"].last_nack.clone().unwrap();
    assert_eq!(status[0].types["cds"].nacks, 1);
    assert_eq!(nack.resources, ["bad"]);
    assert_eq!(nack.message, "bad cluster");

    // A changed version of the rejected resource is sent.
    server.update(|r| {
        r.clusters.last_mut().unwrap().connect_timeout =
            Some(envoy_types::pb::google::protobuf::Duration {
                seconds: 2,
                nanos: 0,
            });
    });
    let fixed = client.next().await;
    assert_eq!(delta_names(&fixed), ["bad"]);
    server.shutdown().await;
}

#[tokio::test]
async fn reconnect_with_initial_resource_versions() {
    let server = TestServer::start(base()).await;
    let mut client = DeltaClient::connect(&server.endpoint()).await;
    client.send(subscribe(Some("d-4"), CDS, &[])).await;
    let first = client.next().await;
    let versions: HashMap<String, String> = first
        .resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect();
    drop(client);

    // While disconnected, "b" changes.
    server.update(|r| {
        r.clusters[1].connect_timeout = Some(envoy_types::pb::google::protobuf::Duration {
            seconds: 9,
            nanos: 0,
        });
    });
    let mut again = DeltaClient::connect(&server.endpoint()).await;
    let mut initial = versions.clone();
    initial.insert("gone".into(), "0123".into());
    again
        .send(DeltaDiscoveryRequest {
            node: Some(node("d-4")),
            type_url: CDS.into(),
            initial_resource_versions: initial,
            ..Default::default()
        })
        .await;
    let response = again.next().await;
    assert_eq!(
        delta_names(&response),
        ["b"],
        "a is unchanged, so not resent"
    );
    assert_eq!(response.removed_resources, ["gone"]);
    assert_ne!(response.resources[0].version, versions["b"]);

    // A reconnect that already holds everything gets an empty answer (initial fetch completes).
    let mut third = DeltaClient::connect(&server.endpoint()).await;
    let current: HashMap<String, String> = [
        ("a".to_string(), versions["a"].clone()),
        ("b".to_string(), response.resources[0].version.clone()),
    ]
    .into_iter()
    .collect();
    third
        .send(DeltaDiscoveryRequest {
            node: Some(node("d-4")),
            type_url: CDS.into(),
            initial_resource_versions: current,
            ..Default::default()
        })
        .await;
    let empty = third.next().await;
    assert!(empty.resources.is_empty() && empty.removed_resources.is_empty());
    server.shutdown().await;
}

/// A gateway that reconnects to a process whose sources have not synced yet is answered only once the first
/// snapshot is loaded: an answer from the empty placeholder would remove everything it holds.
#[tokio::test]
async fn reconnect_before_the_first_load_is_answered_after_it() {
    let server = TestServer::start_unloaded().await;
    let mut client = DeltaClient::connect(&server.endpoint()).await;
    client
        .send(DeltaDiscoveryRequest {
            node: Some(node("d-9")),
            type_url: CDS.into(),
            initial_resource_versions: [("a".to_string(), "0123".to_string())].into(),
            ..Default::default()
        })
        .await;
    wait_until("the stream has joined its group", || {
        server
            .server
            .status()
            .list()
            .iter()
            .any(|c| c.node_id == "d-9")
    })
    .await;
    server.set(base());
    let first = client.next().await;
    assert_eq!(first.system_version_info, "1");
    assert_eq!(delta_names(&first), ["a", "b"]);
    assert!(first.removed_resources.is_empty(), "{first:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn stale_nonce_answer_is_ignored() {
    let server = TestServer::start(base()).await;
    let mut client = DeltaClient::connect(&server.endpoint()).await;
    client.send(subscribe(Some("d-5"), CDS, &[])).await;
    let first = client.next().await;
    client
        .send(DeltaDiscoveryRequest {
            type_url: CDS.into(),
            response_nonce: "999".into(),
            error_detail: Some(RpcStatus {
                code: 3,
                message: "late".into(),
                details: vec![],
            }),
            ..Default::default()
        })
        .await;
    client.ack(&first).await;
    wait_acked(&server, "d-5", "cds", &first.system_version_info).await;
    assert_eq!(server.metrics.nack_count(ResourceType::Cluster), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_subscribed_resources_are_reported_removed_once() {
    let server = TestServer::start(base()).await;
    let mut client = DeltaClient::connect(&server.endpoint()).await;
    // RDS: the known name is sent, the unknown one is listed as removed (does not exist).
    client
        .send(subscribe(Some("d-6"), RDS, &["r1", "nope"]))
        .await;
    let rds = client.next().await;
    assert_eq!(delta_names(&rds), ["r1"]);
    assert_eq!(rds.removed_resources, ["nope"]);
    client.ack(&rds).await;

    // Only unknown names (EDS, SDS, ECDS): a response with nothing but removed_resources.
    for (type_url, name) in [
        (EDS, "ghost"),
        (ResourceType::Secret.type_url(), "missing-cert"),
        (ResourceType::ExtensionConfig.type_url(), "missing-filter"),
    ] {
        client.send(subscribe(None, type_url, &[name])).await;
        let answer = client.next().await;
        assert_eq!(answer.type_url, type_url);
        assert!(answer.resources.is_empty());
        assert_eq!(answer.removed_resources, [name]);
        client.ack(&answer).await;
    }

    // Reported once: when "nope" appears it is sent, and nothing else is repeated.
    server.update(|r| r.route_configs.push(route_config("nope", &[("/n", "a")])));
    let appeared = client.next().await;
    assert_eq!(appeared.type_url, RDS);
    assert_eq!(delta_names(&appeared), ["nope"]);
    assert!(appeared.removed_resources.is_empty());
    client.ack(&appeared).await;

    // And removed again when it goes away.
    server.update(|r| r.route_configs.retain(|c| c.name != "nope"));
    let gone = client.next().await;
    assert_eq!(gone.type_url, RDS);
    assert!(gone.resources.is_empty());
    assert_eq!(gone.removed_resources, ["nope"]);
    let status = server.server.status().list();
    assert_eq!(status[0].types["rds"].resources, 1);
    assert_eq!(status[0].types["rds"].subscribed, 2);
    server.shutdown().await;
}

/// The wire shape of a request whose field 1 (`node`, a message in `DeltaDiscoveryRequest`) is a number: a
/// message the server cannot decode.
#[derive(Clone, PartialEq, prost::Message)]
struct NotARequest {
    #[prost(uint64, tag = "1")]
    node: u64,
}

/// Sends `requests` on a Delta stream and returns the status that ends it.
async fn status_ending<T: prost::Message + Send + Sync + 'static>(
    server: &TestServer,
    requests: Vec<T>,
) -> tonic::Status {
    let channel = tonic::transport::Endpoint::from_shared(server.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources",
    );
    let codec = tonic_prost::ProstCodec::<T, DeltaDiscoveryResponse>::default();
    let requests = tonic::Request::new(tokio_stream::iter(requests));
    let mut responses = match grpc.streaming(requests, path, codec).await {
        Ok(response) => response.into_inner(),
        Err(status) => return status,
    };
    loop {
        match responses.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended with OK"),
            Err(status) => return status,
        }
    }
}

#[tokio::test]
async fn unreadable_requests_end_the_stream_with_a_status_that_says_why() {
    let server = TestServer::start(base()).await;
    let status = status_ending(&server, vec![NotARequest { node: 7 }]).await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("malformed xDS request"),
        "{status:?}"
    );
    let status = status_ending(&server, vec![subscribe(None, CDS, &[])]).await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("must carry a node"), "{status:?}");
    server.shutdown().await;
}
