//! A small, faithful double of the Kubernetes API server for kube-rs clients, served by axum on 127.0.0.1:0.
//!
//! What it does like the real one:
//! * LIST `GET /api/v1/...` and `/apis/{group}/{version}/...` (cluster-wide or `namespaces/{ns}/...`) returns a
//!   `<Kind>List` with `metadata.resourceVersion`; `limit`/`continue` paging; items of built-in kinds carry no
//!   `apiVersion`/`kind` (as real list responses), custom resources do.
//! * Field selectors `metadata.name`, `metadata.namespace` and (Secrets) `type`; anything else is 400.
//! * WATCH (`watch=true`) streams newline-delimited `{"type", "object"}` events from the requested
//!   resourceVersion: the history after it is replayed, then live events follow; `BOOKMARK` events with the latest
//!   resourceVersion are sent when `allowWatchBookmarks=true`; `timeoutSeconds` ends the stream. A
//!   resourceVersion older than the compacted history gets an `ERROR` event with a 410 `Expired` Status.
//! * A resource that is not installed (CRD missing, or a version not served) answers `404 page not found` as
//!   plain text, like the API server's mux.
//! * `POST`/`PATCH` of events.k8s.io/v1 Events are recorded and echoed back (201 / 200).
//! * GET of one object (404 `NotFound` Status when absent), `POST` create (409 `AlreadyExists`) and `PUT`
//!   replace, which is optimistic like the real one: a `metadata.resourceVersion` other than the stored one is
//!   409 `Conflict`. Writes get a new resourceVersion and reach watches.
//!
//! * `POST` TokenReviews (authentication.k8s.io/v1) and SubjectAccessReviews (authorization.k8s.io/v1), answered
//!   like the API server's authenticators and RBAC authorizer: a token is authenticated only while unexpired and
//!   only for a requested audience it was issued for (`status.audiences` holds the intersection), as
//!   `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts`; an access review is allowed when a grant
//!   matches user, verb, resource (and group) and namespace (a cluster-wide grant matches every namespace).
//!
//! Test controls: [`ApiServer::issue_token`], [`ApiServer::grant`] and [`ApiServer::fail_reviews`] (answer reviews
//! with 500) for the review APIs; [`ApiServer::apply`] / [`ApiServer::delete`] change objects (resourceVersion and uid assigned),
//! [`ApiServer::hold_events`] stops delivering live events (they are lost for open watches),
//! [`ApiServer::expire_watches`] compacts the history and ends every open watch with 410 Gone,
//! [`ApiServer::drop_watches`] ends every open watch without an error (a dropped connection),
//! [`ApiServer::stop`] / [`ApiServer::restart`] take it down (connections refused) and bring it back with a
//! compacted history (an outage).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

/// A resource type: API group and plural (all versions share storage, like a CRD's versions).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    /// API group; empty for core.
    pub group: String,
    /// Plural.
    pub plural: String,
}

#[derive(Debug, Clone)]
struct Served {
    kind: String,
    versions: HashSet<String>,
}

#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    resource: Resource,
    kind: &'static str,
    object: Value,
}

#[derive(Debug, Clone, Copy)]
enum Control {
    Drop,
    Gone,
}

#[derive(Default)]
struct Inner {
    rv: u64,
    uid: u64,
    compacted: u64,
    served: HashMap<Resource, Served>,
    objects: BTreeMap<(Resource, String, String), Value>,
    history: Vec<Change>,
    events: Vec<Value>,
    requests: Vec<String>,
    /// Tokens the TokenReview accepts: token -> (namespace, service account, audiences, expiry).
    tokens: HashMap<String, (String, String, Vec<String>, std::time::SystemTime)>,
    /// Grants: (user, verb, group, resource, namespace; "" = every namespace).
    grants: HashSet<(String, String, String, String, String)>,
    /// Reviews answered with 500.
    fail_reviews: bool,
    /// Every token a TokenReview asked about.
    reviewed: Vec<String>,
}

struct Shared {
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Change>,
    control: broadcast::Sender<Control>,
    held: AtomicBool,
    /// Set while stopped: a watch that arrives after the stop's `Control::Drop` was sent ends at once (else it would
    /// hold the graceful shutdown open forever).
    down: AtomicBool,
    bookmark_every: Duration,
}

/// The running double; the server task stops when this is dropped.
pub struct ApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    /// Ends the server (graceful: it stops accepting and closes connections once their response is done).
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Serves the double on `listener` until `stop` fires.
fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = Router::new().fallback(handle).with_state(shared);
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (task, stop)
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ApiServer {
    /// Starts the double on 127.0.0.1:0, sending bookmarks every `bookmark_every`.
    pub async fn start(bookmark_every: Duration) -> ApiServer {
        let (changes, _) = broadcast::channel(4096);
        let (control, _) = broadcast::channel(16);
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                rv: 100,
                ..Inner::default()
            }),
            changes,
            control,
            held: AtomicBool::new(false),
            down: AtomicBool::new(false),
            bookmark_every,
        });
        // A port below the ephemeral range (not port 0), so no other socket of the tests running alongside takes it
        // while the server is down between `stop` and `restart`.
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], crate::envoy::free_port()).into();
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let (task, stop) = serve(listener, shared.clone());
        ApiServer {
            shared,
            addr,
            task,
            stop: Some(stop),
        }
    }

    /// Takes the API server down, as an outage does: it stops accepting, open watches end and their connections
    /// close, so clients get "connection refused" until [`ApiServer::restart`].
    pub async fn stop(&mut self) {
        self.shared.down.store(true, Ordering::SeqCst);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.shared.control.send(Control::Drop);
        (&mut self.task).await.unwrap();
    }

    /// Serves again on the same address after [`ApiServer::stop`]. Like an API server whose watch cache starts
    /// anew while the cluster's other writers (leases, events) moved the resourceVersion on, the history is
    /// compacted past every resourceVersion handed out before: a watch from one of them gets 410 `Expired`.
    pub async fn restart(&mut self) {
        {
            let mut inner = self.shared.inner.lock().unwrap();
            inner.rv += 1;
            inner.compacted = inner.rv;
            inner.history.clear();
        }
        self.shared.down.store(false, Ordering::SeqCst);
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        let (task, stop) = serve(listener, self.shared.clone());
        self.task = task;
        self.stop = Some(stop);
    }

    /// Returns a kube client pointed at the double (plain HTTP, no auth).
    pub fn client(&self) -> kube::Client {
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().unwrap();
        kube::Client::try_from(kube::Config::new(url)).unwrap()
    }

    /// Installs a resource (like creating its CRD) served at `versions`.
    pub fn install(&self, group: &str, plural: &str, kind: &str, versions: &[&str]) {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.served.insert(
            resource(group, plural),
            Served {
                kind: kind.to_string(),
                versions: versions.iter().map(|v| v.to_string()).collect(),
            },
        );
    }

    /// Creates or replaces an object; returns its new resourceVersion.
    pub fn apply(&self, group: &str, plural: &str, object: Value) -> u64 {
        let mut inner = self.shared.inner.lock().unwrap();
        let stored = store(&self.shared, &mut inner, resource(group, plural), object);
        stored["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Returns the stored object, if any.
    pub fn object(&self, group: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let inner = self.shared.inner.lock().unwrap();
        let key = (resource(group, plural), ns.to_string(), name.to_string());
        inner.objects.get(&key).cloned()
    }

    /// Deletes an object (its final state is sent with a new resourceVersion).
    pub fn delete(&self, group: &str, plural: &str, ns: &str, name: &str) {
        let res = resource(group, plural);
        let mut inner = self.shared.inner.lock().unwrap();
        let key = (res.clone(), ns.to_string(), name.to_string());
        let Some(mut object) = inner.objects.remove(&key) else {
            return;
        };
        inner.rv += 1;
        object["metadata"]["resourceVersion"] = json!(inner.rv.to_string());
        record(&self.shared, &mut inner, res, "DELETED", object);
    }

    /// Stops (true) or resumes (false) delivering live events to open watches; held events are lost to them.
    pub fn hold_events(&self, held: bool) {
        self.shared.held.store(held, Ordering::SeqCst);
    }

    /// Compacts the history (older resourceVersions become 410 Gone) and ends every open watch with 410.
    pub fn expire_watches(&self) {
        {
            let mut inner = self.shared.inner.lock().unwrap();
            inner.compacted = inner.rv;
            inner.history.clear();
        }
        let _ = self.shared.control.send(Control::Gone);
    }

    /// Ends every open watch stream cleanly, as a dropped connection would.
    pub fn drop_watches(&self) {
        let _ = self.shared.control.send(Control::Drop);
    }

    /// Issues a token of `namespace`/`service_account` for `audience`, expiring `lifetime` from now (a JWT whose
    /// payload carries `exp`, as projected tokens do; the signature part is random, so tokens differ).
    pub fn issue_token(
        &self,
        namespace: &str,
        service_account: &str,
        audience: &str,
        lifetime: Duration,
    ) -> String {
        use base64::Engine as _;
        let expires = std::time::SystemTime::now() + lifetime;
        let exp = expires
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut inner = self.shared.inner.lock().unwrap();
        inner.uid += 1;
        let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let token = format!(
            "{}.{}.sig{}",
            b64(json!({"alg": "RS256", "kid": "double"})),
            b64(json!({"aud": [audience], "exp": exp,
                "sub": format!("system:serviceaccount:{namespace}:{service_account}")})),
            inner.uid
        );
        inner.tokens.insert(
            token.clone(),
            (
                namespace.into(),
                service_account.into(),
                vec![audience.into()],
                expires,
            ),
        );
        token
    }

    /// Lets `namespace`/`service_account` do `verb` on `resource` of `group` in `in_namespace` ("" for every
    /// namespace), like a RoleBinding (or ClusterRoleBinding) would.
    pub fn grant(
        &self,
        (namespace, service_account): (&str, &str),
        verb: &str,
        group: &str,
        resource: &str,
        in_namespace: &str,
    ) {
        self.shared.inner.lock().unwrap().grants.insert((
            format!("system:serviceaccount:{namespace}:{service_account}"),
            verb.into(),
            group.into(),
            resource.into(),
            in_namespace.into(),
        ));
    }

    /// Answers TokenReviews and SubjectAccessReviews with 500 (true) or normally again (false).
    pub fn fail_reviews(&self, fail: bool) {
        self.shared.inner.lock().unwrap().fail_reviews = fail;
    }

    /// Whether a TokenReview asked about `token`.
    pub fn was_reviewed(&self, token: &str) -> bool {
        self.shared
            .inner
            .lock()
            .unwrap()
            .reviewed
            .iter()
            .any(|t| t == token)
    }

    /// How many requests so far were POSTs to the review resource `plural` (`tokenreviews`,
    /// `subjectaccessreviews`).
    pub fn reviews_of(&self, plural: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                r.starts_with("POST ") && r.split('?').next().unwrap_or_default().ends_with(plural)
            })
            .count()
    }

    /// Returns every Event created or patched so far.
    pub fn events(&self) -> Vec<Value> {
        self.shared.inner.lock().unwrap().events.clone()
    }

    /// Returns "METHOD path?query" of every request so far.
    pub fn requests(&self) -> Vec<String> {
        self.shared.inner.lock().unwrap().requests.clone()
    }

    /// Counts LIST requests (not watches) whose path ends with `plural`.
    pub fn lists_of(&self, plural: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                let path = r.split('?').next().unwrap_or_default();
                r.starts_with("GET ")
                    && path.ends_with(&format!("/{plural}"))
                    && !r.contains("watch=true")
            })
            .count()
    }
}

/// Stores an object (new resourceVersion; uid and creationTimestamp kept from the old one, or assigned) and
/// records the change for watches; returns the stored object.
fn store(shared: &Shared, inner: &mut Inner, res: Resource, mut object: Value) -> Value {
    inner.rv += 1;
    let rv = inner.rv;
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let key = (res.clone(), ns, name);
    let kind = if let Some(old) = inner.objects.get(&key) {
        object["metadata"]["uid"] = old["metadata"]["uid"].clone();
        object["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
        "MODIFIED"
    } else {
        inner.uid += 1;
        object["metadata"]["uid"] = json!(format!("uid-{}", inner.uid));
        object["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        "ADDED"
    };
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
    object["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply"}]);
    inner.objects.insert(key, object.clone());
    record(shared, inner, res, kind, object.clone());
    object
}

fn record(
    shared: &Shared,
    inner: &mut Inner,
    resource: Resource,
    kind: &'static str,
    object: Value,
) {
    let change = Change {
        rv: inner.rv,
        resource,
        kind,
        object,
    };
    inner.history.push(change.clone());
    if !shared.held.load(Ordering::SeqCst) {
        // No receivers is fine.
        let _ = shared.changes.send(change);
    }
}

fn resource(group: &str, plural: &str) -> Resource {
    Resource {
        group: group.to_string(),
        plural: plural.to_string(),
    }
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [("content-type", "text/plain; charset=utf-8")],
        "404 page not found\n",
    )
        .into_response()
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()});
    (code, axum::Json(body)).into_response()
}

/// The parsed request path.
struct Target {
    group: String,
    version: String,
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, plural, name) = match rest {
        [plural] => (None, *plural, None),
        ["namespaces", ns, plural] => (Some(ns.to_string()), *plural, None),
        ["namespaces", ns, plural, name] => (Some(ns.to_string()), *plural, Some(name.to_string())),
        _ => return None,
    };
    Some(Target {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        plural: plural.to_string(),
        name,
    })
}

fn query(req: &Request) -> HashMap<String, String> {
    req.uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("20");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b' '));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A parsed field selector: (field, value) pairs, all must match.
fn field_selector(text: Option<&String>) -> Result<Vec<(String, String)>, String> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(|term| {
            let (field, value) = term
                .split_once("==")
                .or_else(|| term.split_once('='))
                .ok_or_else(|| format!("invalid selector: {term}"))?;
            match field {
                "metadata.name" | "metadata.namespace" | "type" => {
                    Ok((field.to_string(), value.to_string()))
                }
                other => Err(format!("field label not supported: {other}")),
            }
        })
        .collect()
}

fn matches(object: &Value, namespace: Option<&str>, selector: &[(String, String)]) -> bool {
    if let Some(ns) = namespace {
        if object["metadata"]["namespace"].as_str() != Some(ns) {
            return false;
        }
    }
    selector.iter().all(|(field, value)| {
        let actual = match field.as_str() {
            "metadata.name" => &object["metadata"]["name"],
            "metadata.namespace" => &object["metadata"]["namespace"],
            _ => &object["type"],
        };
        actual.as_str() == Some(value.as_str())
    })
}

/// Shapes a stored object for a response at `api_version`.
fn present(object: &Value, api_version: &str, kind: &str, in_list: bool, builtin: bool) -> Value {
    let mut object = object.clone();
    if let Some(fields) = object.as_object_mut() {
        if in_list && builtin {
            fields.remove("apiVersion");
            fields.remove("kind");
        } else {
            fields.insert("apiVersion".into(), json!(api_version));
            fields.insert("kind".into(), json!(kind));
        }
    }
    object
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let line = format!(
        "{} {}",
        req.method(),
        req.uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
    );
    shared.inner.lock().unwrap().requests.push(line);
    let Some(target) = parse_path(req.uri().path()) else {
        return not_found();
    };
    if target.group == "events.k8s.io" && target.plural == "events" {
        return record_event(&shared, req).await;
    }
    if req.method() == Method::POST
        && matches!(
            (target.group.as_str(), target.plural.as_str()),
            ("authentication.k8s.io", "tokenreviews")
                | ("authorization.k8s.io", "subjectaccessreviews")
        )
    {
        return review(&shared, req, &target.plural).await;
    }
    let res = resource(&target.group, &target.plural);
    let kind = {
        let inner = shared.inner.lock().unwrap();
        match inner.served.get(&res) {
            Some(served) if served.versions.contains(&target.version) => served.kind.clone(),
            _ => return not_found(),
        }
    };
    if target.name.is_some() || req.method() != Method::GET {
        return object_request(&shared, req, target, res, kind).await;
    }
    let params = query(&req);
    let selector = match field_selector(params.get("fieldSelector")) {
        Ok(selector) => selector,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", &message),
    };
    if params.get("labelSelector").is_some_and(|s| !s.is_empty()) {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "label selectors are not supported by this double",
        );
    }
    let api_version = if target.group.is_empty() {
        target.version.clone()
    } else {
        format!("{}/{}", target.group, target.version)
    };
    let builtin = target.group.is_empty() || target.group.ends_with(".k8s.io");
    let watch = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    let ctx = Ctx {
        res,
        kind,
        api_version,
        namespace: target.namespace,
        selector,
        builtin,
    };
    if watch {
        watch_response(shared, ctx, &params)
    } else {
        list_response(&shared, &ctx, &params)
    }
}

struct Ctx {
    res: Resource,
    kind: String,
    api_version: String,
    namespace: Option<String>,
    selector: Vec<(String, String)>,
    builtin: bool,
}

fn list_response(shared: &Shared, ctx: &Ctx, params: &HashMap<String, String>) -> Response {
    let inner = shared.inner.lock().unwrap();
    let all: Vec<Value> = inner
        .objects
        .iter()
        .filter(|((res, _, _), object)| {
            *res == ctx.res && matches(object, ctx.namespace.as_deref(), &ctx.selector)
        })
        .map(|(_, object)| present(object, &ctx.api_version, &ctx.kind, true, ctx.builtin))
        .collect();
    let (list_rv, offset) = match params.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let Some((rv, offset)) = token.split_once(':') else {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "invalid continue token",
                );
            };
            let rv: u64 = rv.parse().unwrap_or(0);
            if rv < inner.compacted {
                return status(
                    StatusCode::GONE,
                    "Expired",
                    "the continue token has expired",
                );
            }
            (rv, offset.parse::<usize>().unwrap_or(0))
        }
        None => (inner.rv, 0),
    };
    let limit = params
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let end = offset.saturating_add(limit).min(all.len());
    let items: Vec<Value> = all[offset.min(all.len())..end].to_vec();
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if end < all.len() {
        metadata["continue"] = json!(format!("{list_rv}:{end}"));
    }
    axum::Json(json!({
        "kind": format!("{}List", ctx.kind),
        "apiVersion": ctx.api_version,
        "metadata": metadata,
        "items": items,
    }))
    .into_response()
}

fn event_line(kind: &str, object: Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    line.push(b'\n');
    Bytes::from(line)
}

fn gone_line(rv: u64, compacted: u64) -> Bytes {
    event_line(
        "ERROR",
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("too old resource version: {rv} ({compacted})"), "reason": "Expired", "code": 410}),
    )
}

fn watch_response(shared: Arc<Shared>, ctx: Ctx, params: &HashMap<String, String>) -> Response {
    let start: u64 = params
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0);
    let bookmarks = params
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    // Subscribe before reading the history so nothing falls between the two.
    let mut live = shared.changes.subscribe();
    let mut control = shared.control.subscribe();
    if shared.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let (initial, mut last) = {
        let inner = shared.inner.lock().unwrap();
        if start != 0 && start < inner.compacted {
            (vec![gone_line(start, inner.compacted)], u64::MAX)
        } else if start == 0 {
            let lines = inner
                .objects
                .iter()
                .filter(|((res, _, _), o)| {
                    *res == ctx.res && matches(o, ctx.namespace.as_deref(), &ctx.selector)
                })
                .map(|(_, o)| {
                    event_line(
                        "ADDED",
                        present(o, &ctx.api_version, &ctx.kind, false, ctx.builtin),
                    )
                })
                .collect();
            (lines, inner.rv)
        } else {
            let lines = inner
                .history
                .iter()
                .filter(|c| c.rv > start && c.resource == ctx.res)
                .filter(|c| matches(&c.object, ctx.namespace.as_deref(), &ctx.selector))
                .map(|c| {
                    event_line(
                        c.kind,
                        present(&c.object, &ctx.api_version, &ctx.kind, false, ctx.builtin),
                    )
                })
                .collect();
            (lines, inner.rv.max(start))
        }
    };
    tokio::spawn(async move {
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        if last == u64::MAX {
            return;
        }
        let mut ticker = tokio::time::interval(shared.bookmark_every);
        ticker.tick().await;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        loop {
            let line = tokio::select! {
                change = live.recv() => match change {
                    Ok(change) if change.rv > last => {
                        last = change.rv;
                        if change.resource != ctx.res
                            || !matches(&change.object, ctx.namespace.as_deref(), &ctx.selector)
                        {
                            continue;
                        }
                        event_line(change.kind, present(&change.object, &ctx.api_version, &ctx.kind, false, ctx.builtin))
                    }
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let compacted = shared.inner.lock().unwrap().compacted;
                        let _ = tx.send(gone_line(last, compacted)).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    event_line("BOOKMARK", json!({"kind": ctx.kind, "apiVersion": ctx.api_version,
                        "metadata": {"resourceVersion": last.to_string()}}))
                }
                signal = control.recv() => match signal {
                    Ok(Control::Gone) => {
                        let compacted = shared.inner.lock().unwrap().compacted;
                        let _ = tx.send(gone_line(last, compacted)).await;
                        return;
                    }
                    _ => return,
                },
                () = &mut deadline => return,
            };
            if tx.send(line).await.is_err() {
                return;
            }
        }
    });
    let body = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from_stream(body))
        .unwrap()
}

/// GET, PUT (replace) or POST (create) of one object.
async fn object_request(
    shared: &Shared,
    req: Request,
    target: Target,
    res: Resource,
    kind: String,
) -> Response {
    let api_version = if target.group.is_empty() {
        target.version.clone()
    } else {
        format!("{}/{}", target.group, target.version)
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let method = req.method().clone();
    let body = match axum::body::to_bytes(req.into_body(), 4 << 20).await {
        Ok(bytes) if bytes.is_empty() => Value::Null,
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => value,
            Err(_) => return status(StatusCode::BAD_REQUEST, "BadRequest", "body is not JSON"),
        },
        Err(_) => return status(StatusCode::BAD_REQUEST, "BadRequest", "unreadable body"),
    };
    let name = target
        .name
        .clone()
        .or_else(|| body["metadata"]["name"].as_str().map(String::from))
        .unwrap_or_default();
    let key = (res.clone(), namespace.clone(), name.clone());
    let mut inner = shared.inner.lock().unwrap();
    let existing = inner.objects.get(&key).cloned();
    let stored = match (method, target.name.is_some(), existing) {
        (Method::GET, true, Some(object)) => object,
        (Method::GET, true, None) | (Method::PUT, true, None) => {
            return status(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("{} \"{name}\" not found", res.plural),
            )
        }
        (Method::PUT, true, Some(old)) => {
            let sent = &body["metadata"]["resourceVersion"];
            if !sent.is_null() && *sent != old["metadata"]["resourceVersion"] {
                return status(
                    StatusCode::CONFLICT,
                    "Conflict",
                    "the object has been modified; please apply your changes to the latest version",
                );
            }
            store(shared, &mut inner, res, with_namespace(body, &namespace))
        }
        (Method::POST, false, Some(_)) => {
            return status(
                StatusCode::CONFLICT,
                "AlreadyExists",
                &format!("{} \"{name}\" already exists", res.plural),
            )
        }
        (Method::POST, false, None) => {
            store(shared, &mut inner, res, with_namespace(body, &namespace))
        }
        _ => {
            return status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "this double serves GET, PUT and POST of one object, LIST and WATCH",
            )
        }
    };
    axum::Json(present(&stored, &api_version, &kind, false, false)).into_response()
}

fn with_namespace(mut object: Value, namespace: &str) -> Value {
    if !namespace.is_empty() {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object
}

async fn record_event(shared: &Shared, req: Request) -> Response {
    let method = req.method().clone();
    let bytes = match axum::body::to_bytes(req.into_body(), 1 << 20).await {
        Ok(bytes) => bytes,
        Err(_) => return status(StatusCode::BAD_REQUEST, "BadRequest", "unreadable body"),
    };
    let Ok(mut event) = serde_json::from_slice::<Value>(&bytes) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "body is not JSON");
    };
    let mut inner = shared.inner.lock().unwrap();
    inner.rv += 1;
    event["metadata"]["resourceVersion"] = json!(inner.rv.to_string());
    inner.events.push(event.clone());
    let code = if method == Method::POST {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (code, axum::Json(event)).into_response()
}

/// Answers a TokenReview or SubjectAccessReview from the issued tokens and grants.
async fn review(shared: &Shared, req: Request, plural: &str) -> Response {
    let bytes = match axum::body::to_bytes(req.into_body(), 1 << 20).await {
        Ok(bytes) => bytes,
        Err(_) => return status(StatusCode::BAD_REQUEST, "BadRequest", "unreadable body"),
    };
    let Ok(mut review) = serde_json::from_slice::<Value>(&bytes) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "body is not JSON");
    };
    let mut inner = shared.inner.lock().unwrap();
    if plural == "tokenreviews" {
        let token = review["spec"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        inner.reviewed.push(token);
    }
    if inner.fail_reviews {
        return status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "injected review failure",
        );
    }
    let spec = review["spec"].clone();
    review["status"] = if plural == "tokenreviews" {
        let token = spec["token"].as_str().unwrap_or_default();
        let wanted: Vec<String> = spec["audiences"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        match inner.tokens.get(token) {
            Some((_, _, _, expires)) if *expires <= std::time::SystemTime::now() => {
                json!({"authenticated": false, "error": "[invalid bearer token, service account token has expired]"})
            }
            Some((ns, sa, audiences, _)) => {
                let both: Vec<&String> = wanted.iter().filter(|w| audiences.contains(w)).collect();
                if both.is_empty() {
                    json!({"authenticated": false, "error": "[invalid bearer token, token audiences is invalid for the target audiences]"})
                } else {
                    json!({"authenticated": true, "audiences": both, "user": {
                        "username": format!("system:serviceaccount:{ns}:{sa}"),
                        "uid": "sa-uid",
                        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
                        "extra": {"authentication.kubernetes.io/pod-name": [format!("{sa}-pod")]}}})
                }
            }
            None => json!({"authenticated": false, "error": "[invalid bearer token]"}),
        }
    } else {
        let attributes = &spec["resourceAttributes"];
        let field = |name: &str| attributes[name].as_str().unwrap_or_default().to_string();
        let user = spec["user"].as_str().unwrap_or_default().to_string();
        let allowed = ["", field("namespace").as_str()].iter().any(|ns| {
            inner.grants.contains(&(
                user.clone(),
                field("verb"),
                field("group"),
                field("resource"),
                ns.to_string(),
            ))
        });
        json!({"allowed": allowed, "reason": if allowed { "granted by the double" } else { "" }})
    };
    (StatusCode::CREATED, axum::Json(review)).into_response()
}
