//! End-to-end: a real Envoy 1.40 (SotW `GRPC` and `DELTA_GRPC`) fetches hand-built resources from the
//! in-process xDS server and routes real HTTP to local backends; changes converge, a rejected resource is
//! NACKed and recorded while Envoy keeps serving. Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::xds_harness as harness;

use admitpilot::translate::envoy::any;
use admitpilot::translate::GatewayResources;
use admitpilot::xds::resources::ResourceType;
use envoy::*;
use envoy_types::pb::envoy::config::cluster::v3::{
    circuit_breakers, cluster, CircuitBreakers, Cluster,
};
use envoy_types::pb::envoy::config::core::v3::{transport_socket, TransportSocket};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use envoy_types::pb::google::protobuf::UInt32Value;
use harness::*;

const NODE_ID: &str = "router~127.0.0.1~gw-e2e.default~default.svc.cluster.local";

/// Longest a cluster-only change may take to leave warming: well under Envoy's default `initial_fetch_timeout`
/// (15 s), which is what a cluster waiting for an EDS response that never comes would take.
const NO_WARMING_STALL: std::time::Duration = std::time::Duration::from_secs(5);

/// Changes the first cluster with `change` and waits until Envoy accepted the new CDS and no cluster is warming.
async fn cluster_only_change(
    envoy: &EnvoyProcess,
    server: &TestServer,
    what: &str,
    change: impl FnOnce(&mut Cluster),
) {
    let accepted = envoy.stat("cluster_manager.cds.update_success").await;
    server.update(|r| change(&mut r.clusters[0]));
    let deadline = tokio::time::Instant::now() + NO_WARMING_STALL;
    while envoy.stat("cluster_manager.cds.update_success").await <= accepted
        || envoy.stat("cluster_manager.warming_clusters").await > 0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: the changed cluster is still warming: {:?}",
            envoy.stats("cluster_manager.").await
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    envoy.assert_nothing_rejected(what).await;
}

fn resources(listener_port: u16, eds_port: u16, static_port: u16) -> GatewayResources {
    GatewayResources {
        clusters: vec![eds_cluster("backend"), static_cluster("fixed", static_port)],
        endpoints: vec![endpoints("backend", &[eds_port])],
        listeners: vec![http_listener("http", listener_port, "routes")],
        route_configs: vec![route_config(
            "routes",
            &[("/api", "backend"), ("/fixed", "fixed")],
        )],
        ..Default::default()
    }
}

/// Two backends (`one`, `two`), a test server serving [`resources`] for a listener on `port`, and Envoy connected
/// to it over `api`; `None` (with a message) when Envoy is not installed.
struct Fixture {
    one: Backend,
    two: Backend,
    port: u16,
    server: TestServer,
    envoy: EnvoyProcess,
}

/// A cluster Envoy rejects: a negative connect timeout.
fn rejected_cluster(port: u16) -> Cluster {
    let mut bad = static_cluster("bad", port);
    bad.connect_timeout = Some(envoy_types::pb::google::protobuf::Duration {
        seconds: -1,
        nanos: 0,
    });
    bad
}

async fn start(api: AdsApi, base_id: u32, guarded: bool) -> Option<Fixture> {
    let binary = envoy_binary()?;
    let one = Backend::start("one").await;
    let two = Backend::start("two").await;
    let port = free_port();
    let initial = resources(port, one.port, two.port);
    let server = if guarded {
        TestServer::start_guarded(initial).await
    } else {
        TestServer::start(initial).await
    };
    let envoy = EnvoyProcess::start(
        &binary,
        &bootstrap(api, server.addr.port(), NODE_ID),
        base_id,
    )
    .await;
    Some(Fixture {
        one,
        two,
        port,
        server,
        envoy,
    })
}

async fn run(api: AdsApi, base_id: u32) {
    let Some(Fixture {
        one,
        two,
        port,
        server,
        envoy,
    }) = start(api, base_id, false).await
    else {
        return;
    };
    let http = client();
    let base = format!("http://127.0.0.1:{port}");

    // Initial config: EDS and STATIC clusters, RDS routes, 404 for unmatched paths.
    wait_for_response(&http, &format!("{base}/api/x"), 200, "one").await;
    wait_for_response(&http, &format!("{base}/fixed"), 200, "two").await;
    assert_eq!(get(&http, &format!("{base}/nope")).await.unwrap().0, 404);
    assert_eq!(envoy.stat("control_plane.connected_state").await, 1);
    envoy.assert_nothing_rejected("initial config").await;
    let status = server.server.status().list();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].node_id, NODE_ID);
    assert_eq!(status[0].namespace, "default");
    assert_eq!(status[0].labels["app"], "e2e");

    // Cluster-only changes (load balancing, circuit breakers, upstream TLS on and off again) on an EDS cluster
    // whose endpoints stay the same: Envoy keeps an updated cluster warming until EDS for it arrives, so the
    // server must send the endpoints again. Each is applied long before the default 15 s initial_fetch_timeout
    // that a missing EDS response would cost (BENCHMARKS.md has the latencies).
    cluster_only_change(&envoy, &server, "load balancing", |c| {
        c.lb_policy = cluster::LbPolicy::LeastRequest as i32;
    })
    .await;
    cluster_only_change(&envoy, &server, "circuit breakers", |c| {
        c.circuit_breakers = Some(CircuitBreakers {
            thresholds: vec![circuit_breakers::Thresholds {
                max_connections: Some(UInt32Value { value: 64 }),
                max_pending_requests: Some(UInt32Value { value: 32 }),
                ..Default::default()
            }],
            ..Default::default()
        });
    })
    .await;
    assert_eq!(
        get(&http, &format!("{base}/api/x")).await.unwrap(),
        (200, "one".into())
    );
    cluster_only_change(&envoy, &server, "upstream TLS on", |c| {
        c.transport_socket = Some(TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(
                UpstreamTlsContext {
                    sni: "backend.example.com".into(),
                    ..Default::default()
                },
            ))),
        });
    })
    .await;
    // The backend speaks plain HTTP: with TLS on, requests through the cluster fail; off again, they pass.
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while get(&http, &format!("{base}/api/x"))
        .await
        .map(|(status, _)| status)
        != Some(503)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "TLS to a plain backend never failed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    cluster_only_change(&envoy, &server, "upstream TLS off", |c| {
        c.transport_socket = None;
    })
    .await;
    wait_for_response(&http, &format!("{base}/api/x"), 200, "one").await;

    // Endpoint change (EDS) and a new route (RDS) converge.
    server.update(|r| {
        r.endpoints = vec![endpoints("backend", &[two.port])];
        r.route_configs = vec![route_config(
            "routes",
            &[("/api", "backend"), ("/fixed", "fixed"), ("/v2", "backend")],
        )];
    });
    wait_for_response(&http, &format!("{base}/api/x"), 200, "two").await;
    wait_for_response(&http, &format!("{base}/v2"), 200, "two").await;
    // A new listener (LDS) with its own routes (RDS) and cluster (CDS + EDS) converges too.
    let second_port = free_port();
    server.update(|r| {
        r.clusters.push(eds_cluster("third"));
        r.endpoints.push(endpoints("third", &[one.port]));
        r.listeners
            .push(http_listener("http2", second_port, "routes2"));
        r.route_configs
            .push(route_config("routes2", &[("/", "third")]));
    });
    wait_for_response(
        &http,
        &format!("http://127.0.0.1:{second_port}/any"),
        200,
        "one",
    )
    .await;
    envoy.assert_nothing_rejected("changes converged").await;

    // A cluster Envoy rejects (negative connect timeout): NACK recorded, Envoy keeps serving.
    server.update(|r| {
        r.clusters.push(rejected_cluster(one.port));
    });
    wait_until("the server recorded Envoy's NACK", || {
        server.metrics.nack_count(ResourceType::Cluster) >= 1
    })
    .await;
    let rejected_at_nack = envoy.stat("cluster_manager.cds.update_rejected").await;
    assert!(rejected_at_nack >= 1);
    let status = server.server.status().list();
    let nack = status[0].types["cds"].last_nack.clone().unwrap();
    assert!(nack.message.contains("duration"), "{}", nack.message);
    assert_eq!(
        get(&http, &format!("{base}/api/x")).await.unwrap(),
        (200, "two".into())
    );

    // Fixing it converges, without further rejections.
    let accepted = envoy.stat("cluster_manager.cds.update_success").await;
    server.update(|r| r.clusters.retain(|c| c.name != "bad"));
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while envoy.stat("cluster_manager.cds.update_success").await <= accepted {
        assert!(
            tokio::time::Instant::now() < deadline,
            "fixed CDS never accepted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        envoy.stat("cluster_manager.cds.update_rejected").await,
        rejected_at_nack
    );
    assert_eq!(server.metrics.nack_count(ResourceType::Cluster), 1);
    wait_for_response(&http, &format!("{base}/fixed"), 200, "two").await;
    assert_eq!(envoy.deprecated_fields(), Vec::<String>::new());
    drop(envoy);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_sotw_routes_traffic_and_survives_nack() {
    run(AdsApi::Sotw, 40_100 + std::process::id() % 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_delta_routes_traffic_and_survives_nack() {
    run(AdsApi::Delta, 41_100 + std::process::id() % 1000).await;
}

/// The production guard: the same cluster Envoy rejects above is held back by the server instead of being sent,
/// while the rest of the same change (a new route to a good cluster) reaches Envoy; nothing is rejected.
async fn guarded(api: AdsApi, base_id: u32) {
    let Some(Fixture {
        one,
        two: _two,
        port,
        server,
        envoy,
    }) = start(api, base_id, true).await
    else {
        return;
    };
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/api/x"), 200, "one").await;

    server.update(|r| {
        r.clusters.push(rejected_cluster(one.port));
        r.route_configs = vec![route_config(
            "routes",
            &[("/api", "backend"), ("/fixed", "fixed"), ("/v2", "fixed")],
        )];
    });
    wait_for_response(&http, &format!("{base}/v2"), 200, "two").await;
    assert_eq!(server.metrics.held_back_count(), 1);
    assert_eq!(server.metrics.nack_count(ResourceType::Cluster), 0);
    envoy
        .assert_nothing_rejected("a cluster Envoy would reject was held back")
        .await;
    drop(envoy);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_sotw_is_never_sent_what_it_would_reject() {
    guarded(AdsApi::Sotw, 48_100 + std::process::id() % 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_delta_is_never_sent_what_it_would_reject() {
    guarded(AdsApi::Delta, 49_100 + std::process::id() % 1000).await;
}

mod config_dir {
    //! The whole pipeline: a config folder (Gateway, ServiceEntry, VirtualService) → source → translate → xDS →
    //! real Envoy; file edits converge, an invalid edit keeps the last good routing, and a restarted xDS server
    //! is reconnected to while Envoy keeps serving.

    use super::*;
    use std::sync::Arc;

    use support::pipeline::{api_config_dir, virtual_service, write};

    use admitpilot::xds::{TranslateFn, XdsServer};

    async fn start_xds(
        listener: tokio::net::TcpListener,
        snapshots: tokio::sync::watch::Receiver<Arc<admitpilot::model::Snapshot>>,
    ) -> (
        XdsServer,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ) {
        let translate = TranslateFn::caching(admitpilot::translate::Options::default());
        support::pipeline::start_xds(listener, snapshots, translate).await
    }

    async fn run(api: AdsApi, base_id: u32) {
        let Some(binary) = envoy_binary() else {
            return;
        };
        let one = Backend::start("one").await;
        let port = free_port();
        let dir = api_config_dir(port, one.port);
        let sources = support::pipeline::folder_sources(dir.path());
        // A port below the ephemeral range (not port 0), so no other socket of the tests running alongside takes it
        // while the server is down for its restart below.
        let xds_addr: std::net::SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let listener = tokio::net::TcpListener::bind(xds_addr).await.unwrap();
        let (_server, stop, task) = start_xds(listener, sources.snapshots.clone()).await;
        let yaml =
            bootstrap(api, xds_addr.port(), NODE_ID).replace("app: e2e", "istio: ingressgateway");
        let envoy = EnvoyProcess::start(&binary, &yaml, base_id).await;
        let http = client();
        let base = format!("http://127.0.0.1:{port}");

        wait_for_response(&http, &format!("{base}/api/x"), 200, "one").await;
        assert_eq!(get(&http, &format!("{base}/nope")).await.unwrap().0, 404);

        // Editing the VirtualService moves the route.
        write(
            dir.path(),
            "api.yaml",
            &virtual_service("api", "/new", one.port),
        );
        wait_for_response(&http, &format!("{base}/new/x"), 200, "one").await;
        wait_for_response(&http, &format!("{base}/api/x"), 404, "").await;

        // An invalid edit keeps the last good VirtualService; a later valid file still applies.
        write(
            dir.path(),
            "api.yaml",
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: api, namespace: default}\nspec:\n  hosts: [\"*\"]\n  gateways: [gw]\n  http: 12\n",
        );
        write(
            dir.path(),
            "other.yaml",
            &virtual_service("other", "/other", one.port),
        );
        wait_for_response(&http, &format!("{base}/other"), 200, "one").await;
        assert_eq!(
            get(&http, &format!("{base}/new/x")).await.unwrap(),
            (200, "one".to_string())
        );
        envoy
            .assert_nothing_rejected("invalid edit kept the last good config")
            .await;

        // Restart the xDS server on the same address: Envoy keeps serving meanwhile and reconnects.
        let _ = stop.send(());
        tokio::time::timeout(CONVERGE, task).await.unwrap().unwrap();
        assert_eq!(
            get(&http, &format!("{base}/new/x")).await.unwrap(),
            (200, "one".to_string())
        );
        let listener = tokio::net::TcpListener::bind(xds_addr).await.unwrap();
        let (server, stop, task) = start_xds(listener, sources.snapshots.clone()).await;
        wait_until("Envoy reconnected to the restarted server", || {
            !server.status().list().is_empty()
        })
        .await;
        write(
            dir.path(),
            "later.yaml",
            &virtual_service("later", "/later", one.port),
        );
        wait_for_response(&http, &format!("{base}/later"), 200, "one").await;
        assert_eq!(
            get(&http, &format!("{base}/new/x")).await.unwrap(),
            (200, "one".to_string())
        );
        envoy
            .assert_nothing_rejected("after the xDS server restart")
            .await;
        drop(envoy);
        let _ = stop.send(());
        tokio::time::timeout(CONVERGE, task).await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn envoy_sotw_follows_a_config_folder() {
        run(AdsApi::Sotw, 42_100 + std::process::id() % 1000).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn envoy_delta_follows_a_config_folder() {
        run(AdsApi::Delta, 43_100 + std::process::id() % 1000).await;
    }
}
