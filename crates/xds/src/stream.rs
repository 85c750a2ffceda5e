//! Stream driver shared by SotW and Delta: takes an inbound request stream, identifies the node from the first
//! request, joins its proxy group and feeds requests and group pushes to a protocol state machine, yielding its
//! pre-encoded responses as the call's response body ([`AdsCall`]), which hyper polls only as fast as the
//! client reads. Also the bookkeeping both protocols share: nonces, ACK/NACK metrics and status.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use hyper::body::Frame;
use prost::Message;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::Stream;
use tonic::{Code, Status};

use super::auth::token::VerifiedIdentity;
use super::auth::{certificate_secrets, Admitted, CallPolicy, SecretGate, SecretNames};
use super::cache::ConfigCache;
use super::connection::{limit_hit, Limit, StreamSlot};
use super::metrics::{Api, XdsMetrics};
use super::node::NodeIdentity;
use super::resources::{Family, GroupConfig, ResourceType};
use super::status::{unix_now, ConnectionHandle, NackStatus, StatusRegistry, Version};
use super::wire::{trailers, RequestBudget, Requests, WireMessage};

/// What an ADS call needs from the server.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub cache: Arc<ConfigCache>,
    pub status: Arc<StatusRegistry>,
    pub metrics: XdsMetrics,
    /// Largest response a stream may send.
    pub max_response_bytes: usize,
    /// The bytes of unfinished requests all streams together may hold.
    pub buffered: RequestBudget,
}

/// Who opened a call: what [`CallPolicy::authenticate`] verified, the token to check again, and the call's slot on
/// its connection.
pub(crate) struct Caller {
    /// The verified identity (none on an open listener).
    pub identity: Option<VerifiedIdentity>,
    /// The bearer token, to check again while the stream is open (never logged).
    pub token: Option<String>,
    /// The call's place under its connection's stream limit.
    pub slot: Option<StreamSlot>,
}

/// Longest NACK error text kept for logs and `/debug/syncz`; the rest is cut.
pub const MAX_NACK_DETAIL_BYTES: usize = 4096;
/// Most rejected resource names kept of one NACK.
pub const MAX_NACKED_NAMES: usize = 64;
/// Most NACKs of one stream recorded per [`NACK_WINDOW`]; more are counted and otherwise ignored.
pub const MAX_NACKS_PER_WINDOW: u32 = 20;
/// The window of [`MAX_NACKS_PER_WINDOW`].
pub const NACK_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// `message` cut to at most `max` bytes on a character boundary, saying how long it was.
fn truncated(message: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if message.len() <= max {
        return message.into();
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes, cut)", &message[..end], message.len()).into()
}

/// A per-stream protocol state machine (SotW or Delta).
pub(crate) trait Protocol: Send + Unpin + 'static {
    type Request: Message + Default + Send + Unpin + 'static;
    const API: Api;

    fn node(request: &Self::Request) -> Option<&Node>;
    fn type_url(request: &Self::Request) -> &str;
    fn new(base: StreamBase) -> Self;
    /// The stream's shared bookkeeping.
    fn base(&self) -> &StreamBase;
    /// Handles one client request for a served type against the group's current configuration.
    fn on_request(
        &mut self,
        kind: ResourceType,
        request: Self::Request,
        config: &GroupConfig,
    ) -> Vec<WireMessage>;
    /// Handles a new group configuration.
    fn on_push(&mut self, config: &GroupConfig) -> Vec<WireMessage>;
    /// The answer to the first request for a type the stream does not serve: an empty response of that type (see
    /// [`StreamBase::first_unserved`]).
    fn unserved(&mut self, type_url: &str) -> Option<WireMessage>;
}

/// Most types one stream is answered for that it does not serve (each once).
pub const MAX_UNSERVED_TYPES: usize = 64;

/// What every protocol state machine keeps about its stream: its status entry (which also names it in logs),
/// metrics and the nonce counter (nonces are decimal numbers, unique per stream).
pub(crate) struct StreamBase {
    pub connection: ConnectionHandle,
    pub metrics: XdsMetrics,
    /// Whose types the stream serves: a gateway's, or MCP collections.
    pub family: Family,
    nonce: u64,
    /// NACKs recorded in the current window, and when it started.
    nacks_in_window: std::cell::Cell<(u32, Instant)>,
    /// The types asked for that the stream does not serve, each answered once (empty).
    unserved: std::collections::BTreeSet<String>,
}

impl StreamBase {
    /// The state of a new stream serving `family`'s types.
    pub fn new(connection: ConnectionHandle, metrics: XdsMetrics, family: Family) -> Self {
        StreamBase {
            connection,
            metrics,
            family,
            nonce: 0,
            nacks_in_window: std::cell::Cell::new((0, Instant::now())),
            unserved: std::collections::BTreeSet::new(),
        }
    }

    /// Whether a request for `type_url`, a type the stream does not serve, is the first: it is answered (empty)
    /// once, as istiod's MCP client needs an answer for every type it asks for (it then counts that type as
    /// synced); its ACK and any later request are not answered again. At most [`MAX_UNSERVED_TYPES`] types.
    pub fn first_unserved(&mut self, type_url: &str) -> bool {
        if self.unserved.len() >= MAX_UNSERVED_TYPES || self.unserved.contains(type_url) {
            return false;
        }
        self.unserved.insert(type_url.to_owned());
        true
    }

    /// The nonce for the next response.
    pub fn next_nonce(&mut self) -> u64 {
        self.nonce += 1;
        self.nonce
    }

    /// Records a response sent: status (version, nonce, resources the client will hold) and metrics.
    pub fn sent(
        &self,
        kind: ResourceType,
        snapshot: u64,
        version: Version,
        nonce: u64,
        held: usize,
    ) {
        self.connection.set_snapshot_version(snapshot);
        self.connection.update(kind, |status| {
            status.sent_version = Some(version);
            status.sent_nonce = Some(nonce);
            status.resources = held;
        });
        self.metrics.pushed(kind);
    }

    /// Records the subscription of one type after a request changed it.
    pub fn subscribed(&self, kind: ResourceType, wildcard: bool, names: usize) {
        self.connection.update(kind, |status| {
            status.wildcard = wildcard;
            status.subscribed = names;
        });
    }

    /// Records an ACK of the response sent at `sent_at` carrying `version`.
    pub fn acked(&self, kind: ResourceType, sent_at: Option<Instant>, version: Version) {
        if let Some(sent_at) = sent_at {
            self.metrics.acked(kind, sent_at.elapsed().as_secs_f64());
        }
        self.connection
            .update(kind, |status| status.acked_version = Some(version));
    }

    /// Records a NACK of `version` (`resources`: the rejected names, when the protocol knows them).
    pub fn nacked(
        &self,
        kind: ResourceType,
        version: Version,
        message: &str,
        resources: Vec<String>,
    ) {
        self.metrics.nacked(kind);
        // A client NACKing again and again costs a counter, not logs or memory.
        let (count, since) = self.nacks_in_window.get();
        let (count, since) = if since.elapsed() >= NACK_WINDOW {
            (1, Instant::now())
        } else {
            (count.saturating_add(1), since)
        };
        self.nacks_in_window.set((count, since));
        if count > MAX_NACKS_PER_WINDOW {
            limit_hit(
                &self.metrics,
                Limit::NackRate,
                format_args!(
                    "ignoring NACKs of {}: more than {MAX_NACKS_PER_WINDOW} within {NACK_WINDOW:?}",
                    self.connection.name()
                ),
            );
            return;
        }
        let message = truncated(message, MAX_NACK_DETAIL_BYTES);
        if message.len() > MAX_NACK_DETAIL_BYTES {
            self.metrics.limit_hit(Limit::NackDetail.as_str());
        }
        let mut resources = resources;
        resources.truncate(MAX_NACKED_NAMES);
        tracing::warn!(
            proxy = %self.connection.name(),
            %kind,
            %version,
            ?resources,
            error = %message,
            "proxy rejected xDS update; it keeps its last accepted configuration"
        );
        let nack = NackStatus {
            version,
            message: message.into_owned(),
            resources,
            at_unix: unix_now(),
        };
        self.connection.update(kind, |status| {
            status.nacks += 1;
            status.last_nack = Some(Box::new(nack));
        });
    }

    /// Records a request answering a nonce this stream is not waiting for.
    pub fn stale(&self, kind: ResourceType, nonce: &str) {
        self.metrics.stale_nonce();
        tracing::debug!(proxy = %self.connection.name(), %kind, %nonce, "ignoring request with a stale or unknown nonce");
    }
}

/// Whether `status` is one the request decoder gives a request it cannot read (malformed, too large or
/// compressed), rather than a transport error.
fn is_bad_request(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::InvalidArgument | Code::ResourceExhausted | Code::Unimplemented
    )
}

/// The family a stream serves, from what its first request asks for: an Envoy type
/// (`type.googleapis.com/envoy.…`) makes it a gateway; an Istio collection, or any other `group/version/Kind`
/// (istiod's MCP client opens with `core/v1alpha1/MeshConfig`), an MCP subscriber.
pub(crate) fn family_of<P: Protocol>(first: &P::Request) -> Family {
    let type_url = P::type_url(first);
    match ResourceType::from_type_url(type_url) {
        Some(kind) => kind.family(),
        None if type_url.starts_with(ENVOY_TYPE_PREFIX) || type_url.is_empty() => Family::Envoy,
        None => Family::Mcp,
    }
}

/// The prefix of every Envoy (protobuf `Any`) type URL.
const ENVOY_TYPE_PREFIX: &str = "type.googleapis.com/";

/// The admission of a stream's first request, in progress.
type Admission = Pin<Box<dyn Future<Output = Result<Admitted, Status>> + Send>>;

/// Starts admitting `first` (its node and family) for a caller verified as `identity`.
fn admit<P: Protocol>(
    policy: &Arc<CallPolicy>,
    identity: Option<VerifiedIdentity>,
    first: &P::Request,
    shared: &Shared,
) -> Admission {
    let policy = Arc::clone(policy);
    let node = P::node(first).cloned();
    let family = family_of::<P>(first);
    let metrics = shared.metrics.clone();
    let names = certificate_names(shared, identity.as_ref(), node.as_ref(), family);
    Box::pin(async move {
        policy
            .admit(identity, (node.as_ref(), family), names, &metrics)
            .await
    })
}

/// The Secrets of a verified gateway's namespace whose certificates its group's config holds (joining the group,
/// which brings its config up to date), worked out only if asked: when the gateway may not get every Secret of its
/// namespace. None for an unverified caller, an MCP subscriber, or a node claiming another namespace than its
/// token's (refused anyway).
fn certificate_names(
    shared: &Shared,
    identity: Option<&VerifiedIdentity>,
    node: Option<&Node>,
    family: Family,
) -> SecretNames {
    let proxy = match (identity, node, family) {
        (Some(identity), Some(node), Family::Envoy) => Some(NodeIdentity::from_node(node).proxy)
            .filter(|proxy| proxy.namespace == identity.namespace),
        _ => None,
    };
    let cache = Arc::clone(&shared.cache);
    Box::new(move || {
        proxy
            .map(|proxy| {
                let config = cache.subscribe(&proxy).borrow().clone();
                certificate_secrets(&config, &proxy.namespace)
            })
            .unwrap_or_default()
    })
}

/// Parses a nonce this server sent (`None` for anything else, which then matches no response).
pub(crate) fn parse_nonce(nonce: &str) -> Option<u64> {
    nonce.parse().ok()
}

/// A stream that has received its first request: the protocol state and the group it follows.
struct Joined<P: Protocol> {
    state: P,
    /// The group's configuration as this stream may see it ([`SecretGate::view`]).
    config: Arc<GroupConfig>,
    /// The group's latest configuration, whatever the stream may see of it (a re-check asks about the Secrets of
    /// `namespace` it holds), and the stream's namespace.
    full: (Arc<GroupConfig>, String),
    /// What the stream's identity may not receive.
    gate: SecretGate,
    group: WatchStream<Arc<GroupConfig>>,
    /// A request held (and no further one read) until the group's first configuration is loaded: answering
    /// from the empty placeholder would tell a reconnecting gateway to remove everything it serves.
    waiting: Option<P::Request>,
}

impl<P: Protocol> Drop for Joined<P> {
    fn drop(&mut self) {
        let base = self.state.base();
        base.metrics.stream_closed(P::API);
        tracing::info!(proxy = %base.connection.name(), api = P::API.as_str(), "xDS stream closed");
    }
}

/// One ADS call, run by its own response body: each time hyper's connection task polls the body for data, it
/// reads the client's requests, follows the proxy group's configuration and yields the protocol's responses,
/// then the gRPC trailers. There is no task or channel per stream. A client that stops reading stops the
/// polling, so its stream does no work until it reads again and then answers with the latest configuration
/// only; other streams are not affected.
pub(crate) struct AdsCall<P: Protocol> {
    inbound: Requests<P::Request>,
    shared: Shared,
    /// Who may call, and which secrets they get.
    policy: Arc<CallPolicy>,
    /// The caller's verified identity, until the first request is admitted.
    identity: Option<VerifiedIdentity>,
    /// The caller's token, to check again ([`CallPolicy::recheck`]).
    token: Option<String>,
    /// The call's place under its connection's stream limit, held while the call lives.
    _slot: Option<StreamSlot>,
    /// The first request's node and the stream's family, kept for the re-checks.
    admitted_for: Option<(Option<Node>, Family)>,
    /// When the next re-check is due.
    recheck_at: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A re-check in progress.
    rechecking: Option<Admission>,
    /// The admission of the first request in progress, and that request.
    admitting: Option<(Admission, P::Request)>,
    /// What the call was admitted to; taken when the stream joins its group.
    admitted: Option<Admitted>,
    /// What the joined stream was admitted to, to compare each re-check with.
    granted: Option<Admitted>,
    /// Ends the call when its token expires.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    joined: Option<Joined<P>>,
    /// Responses not yet handed to hyper, in order.
    queued: VecDeque<WireMessage>,
    /// The rest of the response being sent.
    current: std::vec::IntoIter<Bytes>,
    /// The trailers have been sent (or are being sent): nothing follows.
    finished: bool,
}

impl<P: Protocol> AdsCall<P> {
    /// A call of `caller` (verified or, on an open listener, not) under `policy`, reading `inbound`.
    pub(crate) fn new(
        inbound: Requests<P::Request>,
        shared: Shared,
        policy: Arc<CallPolicy>,
        caller: Caller,
    ) -> Self {
        AdsCall {
            inbound,
            shared,
            policy,
            identity: caller.identity,
            token: caller.token,
            _slot: caller.slot,
            admitted_for: None,
            recheck_at: None,
            rechecking: None,
            admitting: None,
            admitted: None,
            granted: None,
            deadline: None,
            joined: None,
            queued: VecDeque::new(),
            current: Vec::new().into_iter(),
            finished: false,
        }
    }

    /// Runs the periodic re-check of a joined stream: starts one when due, and yields the status that ends the
    /// stream when its token or its access is no longer what it was admitted with.
    fn poll_recheck(&mut self, cx: &mut Context<'_>) -> Option<Status> {
        if self.finished {
            return None;
        }
        if self.rechecking.is_none() {
            let due = self.recheck_at.as_mut()?.as_mut().poll(cx).is_ready();
            if !due {
                return None;
            }
            let (node, family) = self.admitted_for.clone()?;
            let policy = Arc::clone(&self.policy);
            let token = self.token.clone();
            let metrics = self.shared.metrics.clone();
            let full = self
                .joined
                .as_ref()
                .filter(|_| family == Family::Envoy)
                .map(|joined| joined.full.clone());
            let names: SecretNames = Box::new(move || {
                full.map(|(config, namespace)| certificate_secrets(&config, &namespace))
                    .unwrap_or_default()
            });
            self.rechecking = Some(Box::pin(async move {
                policy
                    .recheck(token.as_deref(), (node.as_ref(), family), names, &metrics)
                    .await
            }));
        }
        let check = self.rechecking.as_mut()?;
        let Poll::Ready(result) = check.as_mut().poll(cx) else {
            return None;
        };
        self.rechecking = None;
        let proxy = self
            .joined
            .as_ref()
            .map(|j| j.state.base().connection.name())
            .unwrap_or_default();
        let now = match result {
            Ok(now) => now,
            Err(status) => {
                tracing::warn!(proxy, %status, "ending xDS stream: its authorization no longer holds");
                return Some(status);
            }
        };
        if self
            .granted
            .as_ref()
            .is_some_and(|granted| !granted.grants_same(&now))
        {
            tracing::warn!(
                proxy,
                "ending xDS stream: what its identity may read changed; it reconnects and gets \
                                   what it may read now"
            );
            return Some(Status::permission_denied(
                "the authorization of this stream changed since it was opened; reconnect",
            ));
        }
        if let (Some(timer), Some(every)) = (&mut self.recheck_at, self.policy.recheck_interval()) {
            timer.as_mut().reset(tokio::time::Instant::now() + every);
            // Poll the timer once so it wakes this call.
            let _ = timer.as_mut().poll(cx);
        }
        None
    }

    /// Ends the call with `status`.
    fn finish(&mut self, status: &Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.finished = true;
        self.queued.clear();
        Poll::Ready(Some(Ok(trailers(status))))
    }

    /// Handles one request; the first one identifies the node and joins its proxy group. Until the group's
    /// configuration is loaded the request is held instead.
    fn on_request(&mut self, request: P::Request) -> Result<(), Status> {
        let joined = match &mut self.joined {
            Some(joined) => joined,
            None => {
                let joined = self.join(&request)?;
                self.joined.insert(joined)
            }
        };
        if !joined.config.is_loaded() {
            tracing::debug!(proxy = %joined.state.base().connection.name(), "holding the request until the first configuration is loaded");
            joined.waiting = Some(request);
            return Ok(());
        }
        Self::answer(joined, request, &mut self.queued);
        Ok(())
    }

    /// Queues the protocol's responses to `request`.
    fn answer(joined: &mut Joined<P>, request: P::Request, queued: &mut VecDeque<WireMessage>) {
        let kind = ResourceType::from_type_url(P::type_url(&request))
            .filter(|kind| kind.family() == joined.state.base().family);
        let Some(kind) = kind else {
            let type_url = P::type_url(&request);
            match joined.state.unserved(type_url) {
                Some(empty) => {
                    tracing::debug!(proxy = %joined.state.base().connection.name(), %type_url, "answering a request for an unserved type: none of it");
                    queued.push_back(empty);
                }
                None => {
                    tracing::debug!(proxy = %joined.state.base().connection.name(), %type_url, "ignoring a request for an unserved type already answered");
                }
            }
            return;
        };
        queued.extend(joined.state.on_request(kind, request, &joined.config));
    }

    fn join(&mut self, first: &P::Request) -> Result<Joined<P>, Status> {
        let node = P::node(first).ok_or_else(|| {
            Status::invalid_argument("the first xDS request on a stream must carry a node")
        })?;
        let identity = NodeIdentity::from_node(node);
        let family = family_of::<P>(first);
        let admitted = self
            .admitted
            .take()
            .ok_or_else(|| Status::internal("the stream was not admitted"))?;
        self.admitted_for = Some((Some(node.clone()), family));
        if let Some(every) = self.policy.recheck_interval() {
            self.recheck_at = Some(Box::pin(tokio::time::sleep(every)));
        }
        let connection = self.shared.status.open(&identity, P::API, family);
        self.shared.metrics.stream_opened(P::API);
        let verified = admitted.identity.as_ref().map(ToString::to_string);
        tracing::info!(
            proxy = %connection.name(),
            namespace = %identity.proxy.namespace,
            identity = verified.as_deref().unwrap_or("-"),
            api = P::API.as_str(),
            family = family.as_str(),
            "xDS stream opened"
        );
        let group = match family {
            Family::Envoy => self.shared.cache.subscribe(&identity.proxy),
            Family::Mcp => self.shared.cache.subscribe_mcp(),
        };
        let mut gate = SecretGate::admitted(&admitted);
        self.granted = Some(admitted.clone());
        let full = group.borrow().clone();
        let config = gate.view(full.clone(), || connection.name(), &self.shared.metrics);
        Ok(Joined {
            state: P::new(StreamBase::new(
                connection,
                self.shared.metrics.clone(),
                family,
            )),
            config,
            full: (full, identity.proxy.namespace.clone()),
            gate,
            group: WatchStream::from_changes(group),
            waiting: None,
        })
    }
}

impl<P: Protocol> hyper::body::Body for AdsCall<P> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if let Some(deadline) = &mut this.deadline {
            if !this.finished && deadline.as_mut().poll(cx).is_ready() {
                this.deadline = None;
                let status = Status::unauthenticated(
                    "the service-account token of this stream expired; reconnect with the rotated token",
                );
                tracing::info!(%status, "ending xDS stream");
                return this.finish(&status);
            }
        }
        if let Some(status) = this.poll_recheck(cx) {
            return this.finish(&status);
        }
        if let Some((admission, _)) = &mut this.admitting {
            match admission.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(status)) => {
                    this.admitting = None;
                    return this.finish(&status);
                }
                Poll::Ready(Ok(admitted)) => {
                    let first = this.admitting.take().map(|(_, first)| first);
                    this.deadline = admitted
                        .deadline
                        .map(|at| Box::pin(tokio::time::sleep_until(at.into())));
                    this.admitted = Some(admitted);
                    if let Some(first) = first {
                        if let Err(status) = this.on_request(first) {
                            return this.finish(&status);
                        }
                    }
                    // Poll the deadline once so its timer wakes this call.
                    return Pin::new(this).poll_frame(cx);
                }
            }
        }
        loop {
            if let Some(chunk) = this.current.next() {
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
            if this.finished {
                return Poll::Ready(None);
            }
            if let Some(message) = this.queued.pop_front() {
                let len = message.len();
                if len > this.shared.max_response_bytes {
                    let status = Status::resource_exhausted(format!(
                        "xDS response of {len} bytes exceeds the limit of {} bytes",
                        this.shared.max_response_bytes
                    ));
                    tracing::error!(%status, "ending xDS stream");
                    return this.finish(&status);
                }
                this.current = message.into_chunks().into_iter();
                continue;
            }
            // Nothing left to send: look for work. Shutdown closes the group's channel, which ends the call.
            let holding = this.joined.as_ref().is_some_and(|j| j.waiting.is_some());
            match if holding {
                Poll::Pending
            } else {
                Pin::new(&mut this.inbound).poll_next(cx)
            } {
                Poll::Ready(Some(Ok(request))) => {
                    if this.joined.is_none() && this.admitted.is_none() {
                        // The first request: decide what the caller may do before anything is served.
                        let admission =
                            admit::<P>(&this.policy, this.identity.take(), &request, &this.shared);
                        this.admitting = Some((admission, request));
                        return Pin::new(this).poll_frame(cx);
                    }
                    if let Err(status) = this.on_request(request) {
                        return this.finish(&status);
                    }
                    continue;
                }
                Poll::Ready(Some(Err(status))) => {
                    // A request the server cannot read, or a broken transport: the call ends, and its
                    // status tells the client why.
                    let proxy = this
                        .joined
                        .as_ref()
                        .map(|j| j.state.base().connection.name());
                    let proxy = proxy.as_deref().unwrap_or("-");
                    if is_bad_request(&status) {
                        tracing::warn!(proxy, %status, "ending xDS stream: unreadable request");
                    } else {
                        tracing::debug!(proxy, %status, "xDS stream ended with a transport error");
                    }
                    return this.finish(&status);
                }
                Poll::Ready(None) => return this.finish(&Status::ok("")),
                Poll::Pending => {}
            }
            let Some(joined) = &mut this.joined else {
                return Poll::Pending;
            };
            match Pin::new(&mut joined.group).poll_next(cx) {
                Poll::Ready(Some(config)) => {
                    let connection = &joined.state.base().connection;
                    joined.full.0 = Arc::clone(&config);
                    joined.config =
                        joined
                            .gate
                            .view(config, || connection.name(), &this.shared.metrics);
                    match joined.waiting.take() {
                        Some(request) if joined.config.is_loaded() => {
                            Self::answer(joined, request, &mut this.queued);
                        }
                        waiting @ Some(_) => joined.waiting = waiting,
                        None => this.queued.extend(joined.state.on_push(&joined.config)),
                    }
                }
                Poll::Ready(None) => return this.finish(&Status::ok("")),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_translate::Proxy;

    #[test]
    fn long_nack_texts_are_cut_on_a_character_boundary() {
        let text = "é".repeat(3000);
        let cut = truncated(&text, MAX_NACK_DETAIL_BYTES);
        assert!(cut.len() < MAX_NACK_DETAIL_BYTES + 32, "{}", cut.len());
        assert!(cut.ends_with("(6000 bytes, cut)"), "{cut}");
        assert_eq!(truncated("short", 10), "short");
    }

    /// A client NACKing one response again and again, with huge texts, leaves one cut text in the status and
    /// counters for the rest.
    #[test]
    fn repeated_huge_nacks_keep_one_cut_text_and_count_the_rest() {
        let registry = Arc::new(StatusRegistry::default());
        let metrics = XdsMetrics::default();
        let identity = NodeIdentity {
            id: "gw-1".into(),
            proxy: Proxy::default(),
        };
        let connection = registry.open(&identity, Api::Sotw, Family::Envoy);
        let base = StreamBase::new(connection, metrics.clone(), Family::Envoy);
        let huge = "x".repeat(1 << 20);
        let names: Vec<String> = (0..1000).map(|i| format!("cluster-{i}")).collect();
        let extra = 5;
        for _ in 0..MAX_NACKS_PER_WINDOW + extra {
            base.nacked(
                ResourceType::Cluster,
                Version::Snapshot(1),
                &huge,
                names.clone(),
            );
        }
        assert_eq!(metrics.limit_count("nack_rate"), u64::from(extra));
        assert_eq!(
            metrics.limit_count("nack_detail"),
            u64::from(MAX_NACKS_PER_WINDOW)
        );
        assert_eq!(
            metrics.nack_count(ResourceType::Cluster),
            u64::from(MAX_NACKS_PER_WINDOW + extra)
        );
        let shown = serde_json::to_string(&registry.list()).unwrap_or_default();
        assert!(
            shown.len() < 16 * 1024,
            "syncz grew to {} bytes",
            shown.len()
        );
    }
}
