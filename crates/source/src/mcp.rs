//! The MCP source (`serve --mcp-source xds://HOST:PORT`, Istio's `configSources`): takes the address of another
//! MCP-over-xDS server (istiod, Higress, another admitpilot) and yields [`SourceEvent`]s: it subscribes over ADS
//! (state of the world) to every Istio collection admitpilot knows, decodes each `istio.mcp.v1alpha1.Resource`
//! into a Kubernetes document ([`admitpilot_mcp::decode`]) and admits it exactly as a file or a watched object
//! ([`admit`]): an invalid object is excluded, logged and counted, and keeps its last good version.
//!
//! Rules:
//! * The scope counts as synced once every collection has been answered once, or 10 s after connecting with the
//!   collections answered by then (logged: a server need not serve every kind); a response replaces what that
//!   collection held (SotW carries the whole collection), sent to the store as applies and deletes.
//! * A response whose resources are all admitted is ACKed; one with an excluded resource is NACKed with the
//!   excluded objects and their first error in `error_detail` (the valid ones are applied all the same), so the
//!   server's sync status shows what this subscriber did not take.
//! * With `--mcp-source-ca` the connection is TLS, verified against that CA for the address's host; with
//!   `--mcp-source-token-file` each connection sends the file's token as `authorization: Bearer` ([`McpClientAuth`]).
//! * A broken or refused stream is retried with the Kubernetes watchers' backoff; what was received stays in force
//!   meanwhile, and the server's first answer per collection after reconnecting replaces it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::google::rpc::Status as RpcStatus;
use prost::Message;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use super::admit::{admit, Admission, AdmitOptions};
use super::kubernetes::{Backoff, RetryDelay};
use super::last_good::{fallback, held_without_origin, Held, HeldObjects};
use super::state::State;
use super::store::{Closed, ScopedSender};
use super::{Scope, SourceEvent, SourceMetrics};
use admitpilot_mcp::pb::{Resource, RESOURCE_TYPE_URL};
use admitpilot_model::{ConfigObject, Finding, Kind, ObjectKey};

/// Largest response accepted (the xDS server's own response limit).
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;
/// How long connecting may take before it counts as a failed attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 keepalive: a server that stops answering pings within the timeout is reconnected to.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long after connecting the source waits for every collection's first answer before it counts as synced
/// with the ones it has (a server may not serve every kind admitpilot knows).
const SYNC_GRACE: Duration = Duration::from_secs(10);
/// Longest `error_detail` of a NACK.
const MAX_NACK_MESSAGE: usize = 4096;

/// An MCP server to subscribe to, from `xds://HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpAddress {
    /// `HOST:PORT`.
    pub authority: String,
}

impl std::str::FromStr for McpAddress {
    type Err = String;

    /// Parses `xds://HOST:PORT` (plain-text gRPC, as Istio's `configSources` write it).
    fn from_str(text: &str) -> Result<Self, String> {
        let authority = text
            .strip_prefix("xds://")
            .ok_or_else(|| format!("`{text}`: expected xds://HOST:PORT"))?;
        let valid = authority
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
            && !authority.contains('/');
        if !valid {
            return Err(format!("`{text}`: expected xds://HOST:PORT"));
        }
        Ok(McpAddress {
            authority: authority.to_string(),
        })
    }
}

impl McpAddress {
    /// The host part (without brackets for an IPv6 address): the name the server's certificate must carry.
    pub fn host(&self) -> &str {
        let host = self
            .authority
            .rsplit_once(':')
            .map_or(self.authority.as_str(), |(host, _)| host);
        host.trim_start_matches('[').trim_end_matches(']')
    }
}

impl std::fmt::Display for McpAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "xds://{}", self.authority)
    }
}

/// How admitpilot proves itself to the MCP servers it subscribes to (`--mcp-source-ca`,
/// `--mcp-source-token-file`): TLS verified against a CA bundle, and a service-account token sent as
/// `authorization: Bearer`, as an authenticated xDS port (istiod's 15012, admitpilot's own) expects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpClientAuth {
    /// PEM CA bundle that signed the servers' certificates; TLS when set, plaintext otherwise.
    pub ca: Option<PathBuf>,
    /// File holding the token (a projected service-account token), read again on every connection, so a rotated
    /// token is picked up when the server ends the stream at the old one's expiry.
    pub token_file: Option<PathBuf>,
}

impl McpClientAuth {
    /// Refuses a token without TLS: a bearer token in plaintext is anyone's on the path.
    pub fn check(&self) -> Result<(), String> {
        if self.token_file.is_some() && self.ca.is_none() {
            return Err("--mcp-source-token-file needs --mcp-source-ca: a service-account token is never sent \
                        in plaintext"
                .into());
        }
        Ok(())
    }

    /// The channel to `address`, over TLS when a CA is set.
    async fn connect(&self, address: &McpAddress) -> Result<Channel, tonic::Status> {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{}", address.authority))
            .map_err(|error| tonic::Status::invalid_argument(error.to_string()))?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT);
        if let Some(ca) = &self.ca {
            let pem = read_bounded(ca).await?;
            let tls = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(pem))
                .domain_name(address.host());
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|error| tonic::Status::invalid_argument(format!("TLS: {error}")))?;
        }
        endpoint
            .connect()
            .await
            .map_err(|error| tonic::Status::unavailable(format!("connect: {error}")))
    }

    /// The `authorization` metadata of this connection's calls, from the token file as it is now.
    async fn authorization(&self) -> Result<Option<MetadataValue<Ascii>>, tonic::Status> {
        let Some(file) = &self.token_file else {
            return Ok(None);
        };
        let token = String::from_utf8(read_bounded(file).await?).map_err(|_| {
            tonic::Status::failed_precondition(format!("{}: the token is not text", file.display()))
        })?;
        MetadataValue::try_from(format!("Bearer {}", token.trim()))
            .map(Some)
            .map_err(|_| {
                tonic::Status::failed_precondition(format!(
                    "{}: the token has characters a header cannot carry",
                    file.display()
                ))
            })
    }
}

/// Largest CA bundle or token file read.
const MAX_CREDENTIAL_FILE: u64 = 1024 * 1024;

/// Reads a credential file of at most [`MAX_CREDENTIAL_FILE`] bytes (its content is never logged).
async fn read_bounded(path: &Path) -> Result<Vec<u8>, tonic::Status> {
    let unreadable = |error: std::io::Error| {
        tonic::Status::failed_precondition(format!("{}: {error}", path.display()))
    };
    let size = tokio::fs::metadata(path).await.map_err(unreadable)?.len();
    if size > MAX_CREDENTIAL_FILE {
        return Err(tonic::Status::failed_precondition(format!(
            "{}: {size} bytes, more than {MAX_CREDENTIAL_FILE}",
            path.display()
        )));
    }
    tokio::fs::read(path).await.map_err(unreadable)
}

/// The store scope of one MCP source.
pub fn scope(address: &McpAddress) -> Scope {
    Scope::new(address.to_string())
}

/// Runs one MCP source until the task is aborted.
pub fn spawn(
    address: McpAddress,
    auth: McpClientAuth,
    options: AdmitOptions,
    sender: ScopedSender,
    metrics: SourceMetrics,
    state: State,
    held: HeldObjects,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut source = Subscription {
            scope: scope(&address),
            persisted: state.loaded().await,
            collections: HashMap::new(),
            held_keys: HashSet::new(),
            synced: false,
            options,
            metrics,
            held,
        };
        let mut retry = RetryDelay::new(Backoff::default());
        loop {
            match source.follow(&address, &auth, &sender).await {
                Ok(Ended::StoreClosed) => return,
                Ok(Ended::ByServer) => {
                    let delay = retry.take();
                    tracing::warn!(source = %address, retry_in = ?delay, "MCP stream ended by the server; reconnecting");
                    retry.wait(delay).await;
                }
                Err(error) => {
                    let delay = retry.take();
                    tracing::warn!(source = %address, %error, retry_in = ?delay, "MCP stream failed; retrying");
                    retry.wait(delay).await;
                }
            }
        }
    })
}

/// Why [`Subscription::follow`] returned without an error.
enum Ended {
    /// The store is gone (shutdown).
    StoreClosed,
    /// The server closed the stream.
    ByServer,
}

/// What one MCP source holds.
struct Subscription {
    scope: Scope,
    /// Last good versions an earlier run persisted (for objects invalid since before this start).
    persisted: Arc<Held>,
    /// The objects in force per collection, by key.
    collections: HashMap<Kind, HashMap<ObjectKey, Arc<ConfigObject>>>,
    /// Keys served in a last good version because their newest version is invalid.
    held_keys: HashSet<ObjectKey>,
    /// Every collection has been answered once and the scope was resynced.
    synced: bool,
    options: AdmitOptions,
    metrics: SourceMetrics,
    held: HeldObjects,
}

impl Subscription {
    /// Connects, subscribes to every collection and applies responses until the stream ends.
    async fn follow(
        &mut self,
        address: &McpAddress,
        auth: &McpClientAuth,
        sender: &ScopedSender,
    ) -> Result<Ended, tonic::Status> {
        let channel = auth.connect(address).await?;
        let authorization = auth.authorization().await?;
        let mut client = AggregatedDiscoveryServiceClient::with_interceptor(
            channel,
            move |mut request: tonic::Request<()>| {
                if let Some(value) = &authorization {
                    request
                        .metadata_mut()
                        .insert("authorization", value.clone());
                }
                Ok(request)
            },
        )
        .max_decoding_message_size(MAX_RESPONSE_BYTES);
        let (requests, outbound) = mpsc::channel(admitpilot_mcp::SERVED.len() * 2);
        for (i, kind) in admitpilot_mcp::SERVED.iter().enumerate() {
            let request = DiscoveryRequest {
                node: (i == 0).then(node),
                type_url: collection(*kind).to_string(),
                ..Default::default()
            };
            // The channel has room for every initial request.
            let _ = requests.try_send(request);
        }
        let mut responses = client
            .stream_aggregated_resources(ReceiverStream::new(outbound))
            .await?
            .into_inner();
        tracing::info!(source = %address, "MCP stream open");
        let mut answered: HashSet<Kind> = HashSet::new();
        // A server that never answers some collection (one it does not serve) must not keep the source unsynced.
        let sync_by = tokio::time::Instant::now() + SYNC_GRACE;
        loop {
            let next = if self.synced {
                responses.next().await
            } else {
                match tokio::time::timeout_at(sync_by, responses.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        let missing: Vec<&str> = admitpilot_mcp::SERVED
                            .iter()
                            .filter(|kind| !answered.contains(kind))
                            .map(|kind| collection(*kind))
                            .collect();
                        tracing::warn!(source = %address, ?missing, grace = ?SYNC_GRACE,
                            "MCP server did not answer every collection; counting the source as synced without them");
                        if self.resync(sender).is_err() {
                            return Ok(Ended::StoreClosed);
                        }
                        continue;
                    }
                }
            };
            let Some(response) = next else { break };
            let response = response?;
            let Some(kind) = admitpilot_mcp::kind_of(&response.type_url) else {
                tracing::debug!(source = %address, type_url = %response.type_url, "ignoring a response for an unknown collection");
                continue;
            };
            let errors = self.apply(
                kind,
                &response,
                sender,
                answered.contains(&kind) || self.synced,
            );
            let errors = match errors {
                Ok(errors) => errors,
                Err(Closed) => return Ok(Ended::StoreClosed),
            };
            answered.insert(kind);
            if !self.synced && answered.len() == admitpilot_mcp::SERVED.len() {
                if self.resync(sender).is_err() {
                    return Ok(Ended::StoreClosed);
                }
                tracing::info!(source = %address, "MCP source synced");
            }
            self.report_held();
            if requests.send(answer(&response, &errors)).await.is_err() {
                break;
            }
        }
        Ok(Ended::ByServer)
    }

    /// Sends everything in force as the scope's content and counts the scope as synced.
    fn resync(&mut self, sender: &ScopedSender) -> Result<(), Closed> {
        self.synced = true;
        let all = self
            .collections
            .values()
            .flat_map(|objects| objects.values().cloned())
            .collect();
        sender.send(SourceEvent::Resync(all))
    }

    /// Admits every resource of `response` (the whole of collection `kind`) and replaces what the collection
    /// held; sends applies and deletes once `live` (before that, the first resync sends everything). Returns the
    /// errors of excluded resources.
    fn apply(
        &mut self,
        kind: Kind,
        response: &DiscoveryResponse,
        sender: &ScopedSender,
        live: bool,
    ) -> Result<Vec<String>, Closed> {
        let previous = self.collections.remove(&kind).unwrap_or_default();
        let mut current = HashMap::with_capacity(response.resources.len());
        let mut errors = Vec::new();
        for any in &response.resources {
            let outcome = self.admit_one(kind, any, &previous);
            if let Some(object) = outcome.in_force {
                current.insert(object.key(), object);
            }
            errors.extend(outcome.error);
        }
        if live {
            for (key, object) in &current {
                if previous
                    .get(key)
                    .is_none_or(|old| !Arc::ptr_eq(old, object))
                {
                    sender.send(SourceEvent::Apply(object.clone()))?;
                }
            }
            for key in previous.keys().filter(|key| !current.contains_key(*key)) {
                sender.send(SourceEvent::Delete(key.clone()))?;
            }
        }
        self.held_keys
            .retain(|key| key.kind != kind || current.contains_key(key));
        self.collections.insert(kind, current);
        Ok(errors)
    }

    /// Decodes and admits one resource of collection `kind`.
    fn admit_one(
        &mut self,
        kind: Kind,
        any: &Any,
        previous: &HashMap<ObjectKey, Arc<ConfigObject>>,
    ) -> Outcome {
        let document = if any.type_url == RESOURCE_TYPE_URL {
            Resource::decode(any.value.as_slice())
                .map_err(|error| format!("undecodable {RESOURCE_TYPE_URL}: {error}"))
                .and_then(|resource| {
                    admitpilot_mcp::decode(kind, &resource).map_err(|error| error.to_string())
                })
        } else {
            Err(format!(
                "resource of type {} where {RESOURCE_TYPE_URL} was expected",
                any.type_url
            ))
        };
        let document = match document {
            Ok(document) => document,
            Err(error) => {
                self.metrics.parse_error("mcp");
                tracing::error!(scope = %self.scope, %kind, %error, "undecodable MCP resource excluded");
                return Outcome::excluded(None, format!("{kind}: {error}"));
            }
        };
        let persisted = &self.persisted;
        let last_good = |key: &ObjectKey| {
            previous
                .get(key)
                .cloned()
                .or_else(|| fallback(persisted, key, None).map(|held| held.object.clone()))
        };
        let verdict = admit(document, &self.options, &last_good);
        let log_warning = |key: &ObjectKey, warning: &Finding| {
            tracing::debug!(object = %key, field = %warning.field, warning = %warning.message, "config warning");
        };
        match verdict.settle(&self.metrics, log_warning) {
            Admission::Serve {
                key,
                object,
                rejected,
            } => {
                // An unchanged object keeps its `Arc`, so the store and the xDS caches see no change.
                let object = match previous.get(&key) {
                    Some(old) if **old == *object => old.clone(),
                    _ => Arc::from(object),
                };
                if rejected.is_empty() {
                    self.held_keys.remove(&key);
                    return Outcome::served(object);
                }
                // Only parts were left out (higress-config items): report them, serve the rest.
                log_excluded(&self.scope, &key, &rejected);
                self.held_keys.insert(key.clone());
                Outcome::excluded(Some(object), excluded(&key, &rejected))
            }
            Admission::Refuse { key: None, errors } => {
                for error in &errors {
                    tracing::error!(scope = %self.scope, %kind, field = %error.field, error = %error.message, "invalid object excluded");
                }
                Outcome::excluded(None, format!("{kind}: {}", first_error(&errors)))
            }
            Admission::Refuse {
                key: Some(key),
                errors,
            } => {
                log_excluded(&self.scope, &key, &errors);
                let in_force = last_good(&key);
                if in_force.is_some() {
                    tracing::warn!(object = %key, "keeping the last good version of the invalid object");
                    self.held_keys.insert(key.clone());
                } else {
                    self.held_keys.remove(&key);
                }
                Outcome::excluded(in_force, excluded(&key, &errors))
            }
            Admission::Ignore => Outcome {
                in_force: None,
                error: None,
            },
        }
    }

    /// Reports the objects served in a last good version (persisted with `--state-dir`).
    fn report_held(&self) {
        let held = held_without_origin(self.held_keys.iter(), |key| {
            self.collections.get(&key.kind)?.get(key)
        });
        self.held.set(&self.scope, held);
    }
}

/// What admitting one resource leaves: the version in force for its key, and why the newest was excluded.
struct Outcome {
    in_force: Option<Arc<ConfigObject>>,
    error: Option<String>,
}

impl Outcome {
    fn served(object: Arc<ConfigObject>) -> Self {
        Outcome {
            in_force: Some(object),
            error: None,
        }
    }

    fn excluded(in_force: Option<Arc<ConfigObject>>, error: String) -> Self {
        Outcome {
            in_force,
            error: Some(error),
        }
    }
}

/// The type URL (collection name) of a served kind.
fn collection(kind: Kind) -> &'static str {
    admitpilot_mcp::collection(kind).unwrap_or_default()
}

/// The node this subscriber sends: admitpilot, so the server's sync status names it.
fn node() -> Node {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "local".to_string());
    Node {
        id: format!("admitpilot-mcp-source~{host}"),
        user_agent_name: "admitpilot".to_string(),
        ..Default::default()
    }
}

/// The ACK of `response`, or its NACK naming the excluded resources.
fn answer(response: &DiscoveryResponse, errors: &[String]) -> DiscoveryRequest {
    let error_detail = (!errors.is_empty()).then(|| {
        let mut message = format!(
            "{} of {} resources excluded: {}",
            errors.len(),
            response.resources.len(),
            errors.join("; ")
        );
        if message.len() > MAX_NACK_MESSAGE {
            let mut end = MAX_NACK_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        RpcStatus {
            code: tonic::Code::InvalidArgument as i32,
            message,
            ..Default::default()
        }
    });
    DiscoveryRequest {
        version_info: response.version_info.clone(),
        response_nonce: response.nonce.clone(),
        type_url: response.type_url.clone(),
        error_detail,
        ..Default::default()
    }
}

/// The first error of an excluded object, as `field: message`.
fn first_error(errors: &[Finding]) -> String {
    errors.first().map_or_else(
        || "invalid".to_string(),
        |error| format!("{}: {}", error.field, error.message),
    )
}

/// One excluded object's NACK entry.
fn excluded(key: &ObjectKey, errors: &[Finding]) -> String {
    format!("{key}: {}", first_error(errors))
}

/// Logs each error of an excluded object (or part).
fn log_excluded(scope: &Scope, key: &ObjectKey, errors: &[Finding]) {
    for error in errors {
        tracing::error!(%scope, object = %key, field = %error.field, error = %error.message, "invalid object excluded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_xds_addresses() {
        let address: McpAddress = "xds://127.0.0.1:15010".parse().unwrap();
        assert_eq!(address.authority, "127.0.0.1:15010");
        assert_eq!(address.to_string(), "xds://127.0.0.1:15010");
        assert!("xds://higress-controller.higress-system:15051"
            .parse::<McpAddress>()
            .is_ok());
        for bad in [
            "127.0.0.1:15010",
            "http://a:1",
            "xds://a",
            "xds://:1",
            "xds://a:99999",
            "xds://a:1/x",
        ] {
            let error = bad.parse::<McpAddress>().unwrap_err();
            assert!(error.contains("expected xds://HOST:PORT"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_certificate_name_is_the_addresss_host() {
        let host = |text: &str| text.parse::<McpAddress>().unwrap().host().to_string();
        assert_eq!(
            host("xds://admitpilot.higress-system.svc:15012"),
            "admitpilot.higress-system.svc"
        );
        assert_eq!(host("xds://127.0.0.1:15012"), "127.0.0.1");
        assert_eq!(host("xds://[::1]:15012"), "::1");
    }

    #[test]
    fn a_token_is_never_sent_in_plaintext() {
        let token_only = McpClientAuth {
            ca: None,
            token_file: Some("/var/run/secrets/tokens/xds".into()),
        };
        assert!(token_only
            .check()
            .unwrap_err()
            .contains("needs --mcp-source-ca"));
        let both = McpClientAuth {
            ca: Some("/etc/admitpilot/mcp-ca.pem".into()),
            ..token_only
        };
        assert!(both.check().is_ok());
        assert!(McpClientAuth::default().check().is_ok());
    }

    #[test]
    fn a_nack_names_the_excluded_objects_and_stays_bounded() {
        let response = DiscoveryResponse {
            version_info: "v1".into(),
            nonce: "7".into(),
            type_url: "networking.istio.io/v1alpha3/VirtualService".into(),
            resources: vec![Any::default(); 3],
            ..Default::default()
        };
        let ack = answer(&response, &[]);
        assert_eq!(
            (ack.version_info.as_str(), ack.response_nonce.as_str()),
            ("v1", "7")
        );
        assert!(ack.error_detail.is_none());
        let nack = answer(
            &response,
            &["VirtualService default/a: spec.hosts: required".into()],
        );
        let detail = nack.error_detail.unwrap();
        assert_eq!(
            detail.message,
            "1 of 3 resources excluded: VirtualService default/a: spec.hosts: required"
        );
        let long = vec!["é".repeat(5000)];
        let detail = answer(&response, &long).error_detail.unwrap();
        assert!(detail.message.len() <= MAX_NACK_MESSAGE + '…'.len_utf8());
    }
}
