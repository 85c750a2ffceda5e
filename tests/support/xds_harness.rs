//! Test harness for the xDS tests: starts an in-process `XdsServer` on 127.0.0.1:0 whose translation returns
//! hand-built resources the test can change, plus builders for those resources and a small ADS client.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admitpilot::model::Snapshot;
use admitpilot::translate::{GatewayResources, Proxy};
use admitpilot::xds::{TlsFiles, TranslateFn, XdsMetrics, XdsServer};
use envoy_types::pb::envoy::config::cluster::v3::{cluster, Cluster};
use envoy_types::pb::envoy::config::core::v3::Address;
use envoy_types::pb::envoy::config::core::v3::{
    address, config_source, socket_address, AggregatedConfigSource, ApiVersion, ConfigSource,
    Locality, Node, SocketAddress,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    lb_endpoint, ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{
    filter, ApiListener, Filter, FilterChain, Listener,
};
use envoy_types::pb::envoy::config::route::v3::{
    route, route_action, route_match, Route, RouteAction, RouteConfiguration, RouteMatch,
    VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager, http_filter, HttpConnectionManager, HttpFilter, Rds,
};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};
use envoy_types::util::pack_any;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// How long a test waits for any single expected event.
pub const WAIT: Duration = Duration::from_secs(20);

/// A running in-process xDS server whose resources the test controls.
pub struct TestServer {
    pub addr: SocketAddr,
    pub server: XdsServer,
    pub metrics: XdsMetrics,
    pub registry: Arc<Mutex<Registry>>,
    resources: Arc<Mutex<GatewayResources>>,
    snapshots: watch::Sender<Arc<Snapshot>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server on 127.0.0.1:0 serving `initial` to every proxy.
    /// Everything is sent as set, even what Envoy rejects (see [`TestServer::start_guarded`]).
    pub async fn start(initial: GatewayResources) -> TestServer {
        Self::start_serving(initial, false, None, 1).await
    }

    /// A server still on the empty version-0 snapshot a process holds before its sources have synced; the
    /// first [`TestServer::set`] loads it.
    pub async fn start_unloaded() -> TestServer {
        Self::start_serving(GatewayResources::default(), false, None, 0).await
    }

    /// Like [`TestServer::start`], but resources Envoy would reject are held back, as in production.
    pub async fn start_guarded(initial: GatewayResources) -> TestServer {
        Self::start_serving(initial, true, None, 1).await
    }

    /// Starts a server serving `initial` over TLS.
    pub async fn start_tls(initial: GatewayResources, tls: TlsFiles) -> TestServer {
        Self::start_serving(initial, false, Some(tls), 1).await
    }

    async fn start_serving(
        initial: GatewayResources,
        guarded: bool,
        tls: Option<TlsFiles>,
        first_version: u64,
    ) -> TestServer {
        let resources = Arc::new(Mutex::new(initial));
        let source = resources.clone();
        let translate =
            TranslateFn::stateless(move |_: &Snapshot, _: &Proxy| source.lock().unwrap().clone());
        let translate = if guarded {
            translate
        } else {
            translate.unguarded()
        };
        let (snapshots, receiver) = watch::channel(Arc::new(Snapshot {
            version: first_version,
            ..Snapshot::default()
        }));
        let mut registry = Registry::with_prefix("admitpilot");
        let metrics = XdsMetrics::register(&mut registry);
        let server = XdsServer::new(receiver, translate, metrics.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = server.clone();
        let task = tokio::spawn(async move {
            serving
                .serve(listener, tls.as_ref(), async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        TestServer {
            addr,
            server,
            metrics,
            registry: Arc::new(Mutex::new(registry)),
            resources,
            snapshots,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Replaces the resources and publishes a new snapshot version.
    pub fn set(&self, resources: GatewayResources) {
        *self.resources.lock().unwrap() = resources;
        self.snapshots.send_modify(|snapshot| {
            *snapshot = Arc::new(Snapshot {
                version: snapshot.version + 1,
                objects: Default::default(),
            })
        });
    }

    /// Changes the resources in place and publishes a new snapshot version.
    pub fn update(&self, change: impl FnOnce(&mut GatewayResources)) {
        let mut next = self.resources.lock().unwrap().clone();
        change(&mut next);
        self.set(next);
    }

    /// Stops the server and waits for it to finish (streams end).
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

pub fn node(id: &str) -> Node {
    Node {
        id: id.into(),
        cluster: "test".into(),
        ..Default::default()
    }
}

fn ads_source() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

fn socket(host: &str, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: host.into(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}

/// A cluster whose endpoints come over ADS (EDS).
pub fn eds_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        connect_timeout: Some(PbDuration {
            seconds: 1,
            nanos: 0,
        }),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: Some(ads_source()),
            service_name: String::new(),
        }),
        ..Default::default()
    }
}

/// A STATIC cluster with one endpoint on 127.0.0.1.
pub fn static_cluster(name: &str, port: u16) -> Cluster {
    Cluster {
        name: name.into(),
        connect_timeout: Some(PbDuration {
            seconds: 1,
            nanos: 0,
        }),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        load_assignment: Some(endpoints(name, &[port])),
        ..Default::default()
    }
}

/// Endpoints (one locality, weight 1) on 127.0.0.1 for `cluster`.
pub fn endpoints(cluster: &str, ports: &[u16]) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![LocalityLbEndpoints {
            locality: Some(Locality {
                region: "local".into(),
                ..Default::default()
            }),
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            lb_endpoints: ports
                .iter()
                .map(|port| LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket("127.0.0.1", *port)),
                        ..Default::default()
                    })),
                    load_balancing_weight: Some(UInt32Value { value: 1 }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn router_filter() -> HttpFilter {
    HttpFilter {
        name: "envoy.filters.http.router".into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(
            Router::default(),
        ))),
        ..Default::default()
    }
}

/// An HTTP listener on 127.0.0.1:`port` whose routes come from RDS `route_name`.
pub fn http_listener(name: &str, port: u16, route_name: &str) -> Listener {
    let hcm = HttpConnectionManager {
        stat_prefix: name.into(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads_source()),
            route_config_name: route_name.into(),
        })),
        http_filters: vec![router_filter()],
        ..Default::default()
    };
    Listener {
        name: name.into(),
        address: Some(socket("127.0.0.1", port)),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(pack_any(hcm))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A gRPC-client API listener (`xds:///name`) with an inline route to `cluster`.
pub fn api_listener(name: &str, cluster: &str) -> Listener {
    let hcm = HttpConnectionManager {
        stat_prefix: name.into(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(
            route_config(&format!("{name}-routes"), &[("", cluster)]),
        )),
        http_filters: vec![router_filter()],
        ..Default::default()
    };
    Listener {
        name: name.into(),
        api_listener: Some(ApiListener {
            api_listener: Some(pack_any(hcm)),
        }),
        ..Default::default()
    }
}

/// A route configuration with one catch-all virtual host routing each path prefix to a cluster.
pub fn route_config(name: &str, routes: &[(&str, &str)]) -> RouteConfiguration {
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: format!("{name}-vh"),
            domains: vec!["*".into()],
            routes: routes
                .iter()
                .map(|(prefix, cluster)| Route {
                    r#match: Some(RouteMatch {
                        path_specifier: Some(route_match::PathSpecifier::Prefix(
                            (*prefix).to_string(),
                        )),
                        ..Default::default()
                    }),
                    action: Some(route::Action::Route(RouteAction {
                        cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(
                            (*cluster).to_string(),
                        )),
                        ..Default::default()
                    })),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// One bidirectional ADS stream: requests of type `Req` out, responses of type `Resp` in.
pub struct AdsClient<Req, Resp> {
    tx: mpsc::Sender<Req>,
    rx: tonic::Streaming<Resp>,
}

/// A SotW ADS stream.
pub type SotwClient = AdsClient<DiscoveryRequest, DiscoveryResponse>;
/// A Delta ADS stream.
pub type DeltaClient = AdsClient<DeltaDiscoveryRequest, DeltaDiscoveryResponse>;

/// An ADS client on a new connection to `endpoint`, accepting responses of any size.
async fn ads_client(endpoint: &str) -> AggregatedDiscoveryServiceClient<Channel> {
    AggregatedDiscoveryServiceClient::connect(endpoint.to_string())
        .await
        .unwrap()
        .max_decoding_message_size(usize::MAX)
}

impl<Req, Resp> AdsClient<Req, Resp> {
    pub async fn send(&self, request: Req) {
        self.tx.send(request).await.unwrap();
    }

    /// The next response (panics after [`WAIT`] or when the stream ends).
    pub async fn next(&mut self) -> Resp {
        tokio::time::timeout(WAIT, self.rx.message())
            .await
            .expect("timed out waiting for a response")
            .unwrap()
            .expect("stream ended")
    }

    /// The next response, without a deadline (`None` when the stream ends).
    pub async fn recv(&mut self) -> Option<Resp> {
        self.rx.message().await.ok().flatten()
    }

    /// Waits for the server to end the stream.
    pub async fn closed(&mut self) -> bool {
        matches!(
            tokio::time::timeout(WAIT, self.rx.message()).await,
            Ok(Ok(None)) | Ok(Err(_))
        )
    }
}

impl SotwClient {
    pub async fn connect(endpoint: &str) -> SotwClient {
        let (tx, requests) = mpsc::channel(16);
        let rx = ads_client(endpoint)
            .await
            .stream_aggregated_resources(ReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        AdsClient { tx, rx }
    }

    /// Sends a request for `type_url` with `names`, answering `nonce`/`version`.
    pub async fn request(
        &self,
        node: Option<Node>,
        type_url: &str,
        names: &[&str],
        version: &str,
        nonce: &str,
    ) {
        self.send(DiscoveryRequest {
            node,
            type_url: type_url.into(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            version_info: version.into(),
            response_nonce: nonce.into(),
            ..Default::default()
        })
        .await;
    }

    /// ACKs a response.
    pub async fn ack(&self, response: &DiscoveryResponse, names: &[&str]) {
        self.request(
            None,
            &response.type_url,
            names,
            &response.version_info,
            &response.nonce,
        )
        .await;
    }
}

impl DeltaClient {
    pub async fn connect(endpoint: &str) -> DeltaClient {
        let (tx, requests) = mpsc::channel(16);
        let rx = ads_client(endpoint)
            .await
            .delta_aggregated_resources(ReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        AdsClient { tx, rx }
    }

    /// ACKs a response.
    pub async fn ack(&self, response: &DeltaDiscoveryResponse) {
        self.send(DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        })
        .await;
    }
}

/// Names of the resources in a SotW response (decoded by type).
pub fn sotw_names(response: &DiscoveryResponse) -> Vec<String> {
    use prost::Message;
    response
        .resources
        .iter()
        .map(|any| match any.type_url.as_str() {
            CDS => Cluster::decode(any.value.as_slice()).unwrap().name,
            EDS => {
                ClusterLoadAssignment::decode(any.value.as_slice())
                    .unwrap()
                    .cluster_name
            }
            LDS => Listener::decode(any.value.as_slice()).unwrap().name,
            RDS => {
                RouteConfiguration::decode(any.value.as_slice())
                    .unwrap()
                    .name
            }
            other => panic!("unexpected type {other}"),
        })
        .collect()
}

/// Names of the resources in a Delta response.
pub fn delta_names(response: &DeltaDiscoveryResponse) -> Vec<String> {
    response.resources.iter().map(|r| r.name.clone()).collect()
}

/// Polls `condition` until it holds (panics after [`WAIT`]).
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the server has recorded an ACK of `version` for type `short` (`cds`, `eds`, …) from `node_id`.
pub async fn wait_acked(server: &TestServer, node_id: &str, short: &str, version: &str) {
    wait_until(&format!("{node_id} ACKed {short} {version}"), || {
        server.server.status().list().iter().any(|c| {
            c.node_id == node_id
                && c.types
                    .get(short)
                    .and_then(|t| t.acked_version)
                    .map(|v| v.to_string())
                    == Some(version.to_string())
        })
    })
    .await;
}
