//! The MCP source (`--mcp-source`) against a scripted MCP-over-xDS server (tonic, envoy-types' ADS service on
//! 127.0.0.1) that serves hand-made `istio.mcp.v1alpha1.Resource`s, valid and invalid, and records every ACK and
//! NACK: invalid objects never reach the snapshot, are NACKed with the object and field named, and an object that
//! turns invalid keeps its last good version; a fixed object, a removed object and a restarted server are
//! followed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admitpilot::model::decode::{decode, DecodeOptions, Decoded};
use admitpilot::model::{Kind, ObjectKey};
use admitpilot::source::mcp::McpAddress;
use admitpilot::source::{self, SourceConfig, SourceMetrics, StoreConfig};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

const VS: &str = "networking.istio.io/v1/VirtualService";

/// What the scripted server serves: resources per collection.
type Content = HashMap<String, Vec<Any>>;

/// The scripted server: serves the latest [`Content`] to every stream, pushing each change, and keeps every
/// request that answers a response.
#[derive(Clone)]
struct Scripted {
    content: watch::Receiver<Arc<Content>>,
    answers: Arc<Mutex<Vec<DiscoveryRequest>>>,
    /// Streams opened so far.
    streams: Arc<AtomicUsize>,
    /// Bumped to break every open stream (as a server restart does).
    generation: watch::Receiver<u64>,
    /// A collection the server never answers (one it does not serve).
    unanswered: Option<&'static str>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Scripted {
    type StreamAggregatedResourcesStream = ReceiverStream<Result<DiscoveryResponse, tonic::Status>>;
    type DeltaAggregatedResourcesStream =
        ReceiverStream<Result<DeltaDiscoveryResponse, tonic::Status>>;

    async fn stream_aggregated_resources(
        &self,
        request: tonic::Request<tonic::Streaming<DiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::StreamAggregatedResourcesStream>, tonic::Status> {
        let mut requests = request.into_inner();
        let mut content = self.content.clone();
        let answers = self.answers.clone();
        let mut generation = self.generation.clone();
        let unanswered = self.unanswered;
        generation.mark_unchanged();
        self.streams.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut subscribed: Vec<String> = Vec::new();
            let mut nonce = 0u64;
            loop {
                let send: Vec<String> = tokio::select! {
                    request = requests.message() => match request {
                        Ok(Some(request)) if Some(request.type_url.as_str()) == unanswered => Vec::new(),
                        Ok(Some(request)) if request.response_nonce.is_empty() => {
                            subscribed.push(request.type_url.clone());
                            vec![request.type_url]
                        }
                        Ok(Some(request)) => {
                            answers.lock().unwrap().push(request);
                            Vec::new()
                        }
                        _ => return,
                    },
                    changed = content.changed() => match changed {
                        Ok(()) => subscribed.clone(),
                        Err(_) => return,
                    },
                    _ = generation.changed() => {
                        let _ = tx.send(Err(tonic::Status::unavailable("server restarting"))).await;
                        return;
                    }
                };
                let current = content.borrow_and_update().clone();
                for type_url in send {
                    nonce += 1;
                    let response = DiscoveryResponse {
                        version_info: format!("v{nonce}"),
                        nonce: nonce.to_string(),
                        resources: current.get(&type_url).cloned().unwrap_or_default(),
                        type_url,
                        ..Default::default()
                    };
                    if tx.send(Ok(response)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(rx)))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: tonic::Request<tonic::Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::DeltaAggregatedResourcesStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("SotW only"))
    }
}

/// Encodes a VirtualService `default/<name>` for `host` as an MCP resource; with `valid` false it asks for a
/// negative number of retries, which validation refuses (the document still decodes).
fn resource(name: &str, host: &str, valid: bool) -> Any {
    let attempts = if valid { 3 } else { -1 };
    let doc = serde_json::json!({
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "hosts": [host],
            "http": [{"route": [{"destination": {"host": "web"}}], "retries": {"attempts": attempts}}],
        },
    });
    let Decoded::Object { object, .. } = decode(&doc, &DecodeOptions::default()) else {
        panic!("test document does not decode")
    };
    let resource = admitpilot::mcp::encode(&object).unwrap();
    Any {
        type_url: admitpilot::mcp::pb::RESOURCE_TYPE_URL.into(),
        value: resource.encode_to_vec(),
    }
}

fn content(resources: Vec<Any>) -> Arc<Content> {
    Arc::new([(VS.to_string(), resources)].into_iter().collect())
}

/// Starts the scripted server on 127.0.0.1; returns its port and its task.
async fn serve(script: Scripted) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(AggregatedDiscoveryServiceServer::new(script))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    (port, task)
}

/// The MCP source following the server on `port`.
fn subscribe(port: u16) -> source::Sources {
    let config = SourceConfig {
        mcp_sources: vec![format!("xds://127.0.0.1:{port}")
            .parse::<McpAddress>()
            .unwrap()],
        store: StoreConfig {
            debounce: Duration::from_millis(5),
            debounce_max: Duration::from_millis(50),
        },
        ..SourceConfig::default()
    };
    source::start(config, SourceMetrics::default()).unwrap()
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Kind::VirtualService, "default", name)
}

fn hosts_of(snapshot: &admitpilot::model::Snapshot, name: &str) -> Option<Vec<String>> {
    let object = snapshot.get(&key(name))?;
    match &object.spec {
        admitpilot::model::Spec::VirtualService(vs) => Some(vs.hosts.clone()),
        _ => None,
    }
}

/// Waits until the server has recorded an answer satisfying `check`.
async fn wait_for_answer(
    answers: &Mutex<Vec<DiscoveryRequest>>,
    what: &str,
    check: impl Fn(&DiscoveryRequest) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if answers.lock().unwrap().iter().any(&check) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not among {:?}",
            answers.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn nack_naming(request: &DiscoveryRequest, text: &str) -> bool {
    request.type_url == VS
        && request
            .error_detail
            .as_ref()
            .is_some_and(|detail| detail.message.contains(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_are_nacked_and_keep_their_last_good_version() {
    let (publish, content_rx) = watch::channel(content(vec![
        resource("good", "good.example.com", true),
        resource("bad", "bad.example.com", false),
    ]));
    let (restart, generation) = watch::channel(0u64);
    let script = Scripted {
        content: content_rx,
        answers: Arc::default(),
        streams: Arc::default(),
        generation,
        unanswered: None,
    };
    let answers = script.answers.clone();
    let streams = script.streams.clone();
    let (port, server) = serve(script).await;
    let sources = subscribe(port);
    let mut snapshots = sources.snapshots.clone();

    // The valid object is served, the invalid one is not, and the response is NACKed naming it and its field.
    let snapshot = support::wait_for(&mut snapshots, |s| s.get(&key("good")).is_some()).await;
    assert!(snapshot.get(&key("bad")).is_none());
    wait_for_answer(&answers, "NACK naming the invalid object", |r| {
        nack_naming(
            r,
            "VirtualService default/bad: spec.http[0].retries.attempts",
        )
    })
    .await;
    // Every other collection was answered and ACKed.
    wait_for_answer(&answers, "ACK of another collection", |r| {
        r.type_url == "networking.istio.io/v1/Gateway" && r.error_detail.is_none()
    })
    .await;

    // The served object turns invalid: its last good version stays.
    let version = snapshots.borrow().version;
    publish.send_replace(content(vec![resource("good", "broken.example.com", false)]));
    wait_for_answer(
        &answers,
        "NACK naming the object that turned invalid",
        |r| {
            nack_naming(
                r,
                "VirtualService default/good: spec.http[0].retries.attempts",
            )
        },
    )
    .await;
    let snapshot = snapshots.borrow().clone();
    assert!(snapshot.version >= version);
    assert_eq!(
        hosts_of(&snapshot, "good"),
        Some(vec!["good.example.com".to_string()])
    );

    // Fixed: the new version is served and ACKed.
    publish.send_replace(content(vec![resource("good", "fixed.example.com", true)]));
    support::wait_for(&mut snapshots, |s| {
        hosts_of(s, "good") == Some(vec!["fixed.example.com".to_string()])
    })
    .await;

    // The stream breaks (a server restart): the source connects again and follows what it is served next.
    restart.send_replace(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while streams.load(Ordering::SeqCst) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the source never connected again"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    publish.send_replace(content(vec![resource("other", "other.example.com", true)]));
    support::wait_for(&mut snapshots, |s| {
        s.get(&key("good")).is_none() && hosts_of(s, "other").is_some()
    })
    .await;
    assert_eq!(streams.load(Ordering::SeqCst), 2);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_the_server_never_answers_does_not_keep_the_source_unsynced() {
    let (_publish, content) =
        watch::channel(content(vec![resource("good", "good.example.com", true)]));
    let (_restart, generation) = watch::channel(0u64);
    let script = Scripted {
        content,
        answers: Arc::default(),
        streams: Arc::default(),
        generation,
        unanswered: Some("networking.istio.io/v1/Gateway"),
    };
    let (port, server) = serve(script).await;
    let sources = subscribe(port);
    let mut synced = sources.synced.clone();
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(30), synced.wait_for(|synced| *synced))
        .await
        .expect("the source never synced")
        .unwrap();
    // Not before the grace period: every other collection was answered at once.
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    let mut snapshots = sources.snapshots.clone();
    support::wait_for(&mut snapshots, |s| s.get(&key("good")).is_some()).await;
    server.abort();
}
