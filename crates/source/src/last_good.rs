//! Last good versions that outlive the process: takes, from every source scope, the objects it currently serves in
//! a last good version (their newest version is invalid), yields the text persisted for the next start
//! ([`encode`]), and reads such a text back ([`decode`]) into the versions a restarted replica falls back on.
//!
//! Rules:
//! * Only objects that are *currently* invalid are held; an object that turns valid again, or is deleted, leaves
//!   the set. Secrets, Services and EndpointSlices are never persisted (no secret data in a state file or
//!   ConfigMap; the other two come from Kubernetes itself).
//! * The persisted text is JSON: `{"format": 1, "objects": [{"origin": …, "document": …}]}`, each document a
//!   Kubernetes document (`apiVersion`, `kind`, `metadata`, `spec`; higress-config as its ConfigMap) that goes
//!   through the same validation again when it is read back: a version the running admitpilot no longer
//!   accepts is dropped with a warning.
//! * The text is at most [`MAX_STATE_BYTES`] (a ConfigMap holds 1 MiB): past it, objects are left out in key
//!   order and reported ([`Encoded::left_out`]); they are still served, only not persisted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::watch;

use super::admit::{admit, AdmitOptions, Verdict};
use super::Scope;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Spec};

/// Largest persisted text, in bytes (a ConfigMap's data may total 1 MiB; this leaves room for metadata).
pub const MAX_STATE_BYTES: usize = 900 * 1024;
/// Version of the persisted format.
const FORMAT: u64 = 1;

/// One object served in its last good version.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldObject {
    /// Where the object came from: the file of a config folder, empty for Kubernetes.
    pub origin: String,
    /// The last good version.
    pub object: Arc<ConfigObject>,
}

/// Held objects by key.
pub type Held = BTreeMap<ObjectKey, HeldObject>;

/// Returns the persisted last good version of `key` for an object whose newest version is invalid: only when it is
/// the same object (same `uid`, when both are known).
pub fn fallback<'a>(held: &'a Held, key: &ObjectKey, uid: Option<&str>) -> Option<&'a HeldObject> {
    held.get(key)
        .filter(|entry| match (entry.object.metadata.uid.as_deref(), uid) {
            (Some(persisted), Some(current)) => persisted == current,
            _ => true,
        })
}

/// The [`Held`] entries of `keys`, each with the object `lookup` finds for it (keys it finds none for are skipped),
/// for a source whose objects come from no file (Kubernetes, MCP).
pub fn held_without_origin<'a>(
    keys: impl Iterator<Item = &'a ObjectKey>,
    lookup: impl Fn(&ObjectKey) -> Option<&'a Arc<ConfigObject>>,
) -> Held {
    keys.filter_map(|key| {
        let object = lookup(key)?;
        Some((
            key.clone(),
            HeldObject {
                origin: String::new(),
                object: object.clone(),
            },
        ))
    })
    .collect()
}

/// Tells whether objects of `kind` are persisted.
pub fn persisted_kind(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::Secret
            | Kind::ReferencedConfigMap
            | Kind::Namespace
            | Kind::Service
            | Kind::EndpointSlice
    )
}

/// The held objects of every scope, shared by the sources (which set them) and the state writer (which saves them).
#[derive(Debug, Clone)]
pub struct HeldObjects {
    scopes: Arc<Mutex<HashMap<Scope, Held>>>,
    changed: Arc<watch::Sender<u64>>,
}

impl Default for HeldObjects {
    fn default() -> Self {
        HeldObjects {
            scopes: Arc::default(),
            changed: Arc::new(watch::channel(0).0),
        }
    }
}

impl HeldObjects {
    /// Replaces what `scope` holds; wakes the writer when that changed anything.
    pub fn set(&self, scope: &Scope, held: Held) {
        let mut scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        if scopes
            .get(scope)
            .map_or(held.is_empty(), |old| *old == held)
        {
            return;
        }
        scopes.insert(scope.clone(), held);
        drop(scopes);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Returns what every scope holds (the first scope in name order wins a key held twice).
    pub fn all(&self) -> Held {
        let scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<&Scope> = scopes.keys().collect();
        names.sort();
        let mut all = Held::new();
        for name in names {
            for (key, held) in &scopes[name] {
                all.entry(key.clone()).or_insert_with(|| held.clone());
            }
        }
        all
    }

    /// Returns a receiver that sees a new value whenever the held set changed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// The persisted text and what did not fit in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// The JSON text.
    pub text: String,
    /// Objects left out because the text would have grown past the limit.
    pub left_out: Vec<ObjectKey>,
}

/// Encodes the held objects of persisted kinds, in key order, into at most `limit` bytes.
pub fn encode(held: &Held, limit: usize) -> Encoded {
    let mut text = format!("{{\"format\":{FORMAT},\"objects\":[");
    let closing = "]}";
    let mut left_out = Vec::new();
    let mut first = true;
    for (key, entry) in held.iter().filter(|(key, _)| persisted_kind(key.kind)) {
        let item = json!({"origin": entry.origin, "document": document(&entry.object)}).to_string();
        let separator = usize::from(!first);
        if text.len() + separator + item.len() + closing.len() > limit {
            left_out.push(key.clone());
            continue;
        }
        if !first {
            text.push(',');
        }
        text.push_str(&item);
        first = false;
    }
    text.push_str(closing);
    Encoded { text, left_out }
}

/// Rebuilds the Kubernetes document of an object (higress-config as its ConfigMap).
fn document(object: &ConfigObject) -> Value {
    let mut document = json!({
        "apiVersion": object.api_version,
        "kind": object.kind().info().kind,
        "metadata": object.metadata,
    });
    document["spec"] = match &object.spec {
        Spec::HigressConfig(config) => {
            document["data"] = json!({
                "higress": json!(config).to_string(),
                "mesh": config.mesh.to_mesh_yaml(),
            });
            return document;
        }
        spec => json!(spec),
    };
    document
}

/// Errors reading a persisted text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not JSON, or not the expected shape.
    #[error("not a persisted last-good state: {0}")]
    Shape(String),
    /// Written by a newer admitpilot.
    #[error("persisted format {0} is not known (this admitpilot reads format {FORMAT})")]
    Format(u64),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads a persisted text back; each object is validated again. Returns the held objects and, for each entry
/// dropped, why.
pub fn decode(text: &str, options: &AdmitOptions) -> Result<(Held, Vec<String>), Error> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Shape(e.to_string()))?;
    match value["format"].as_u64() {
        Some(FORMAT) => {}
        Some(other) => return Err(Error::Format(other)),
        None => return Err(Error::Shape("no `format`".into())),
    }
    let Some(objects) = value["objects"].as_array() else {
        return Err(Error::Shape("no `objects` list".into()));
    };
    let mut held = Held::new();
    let mut dropped = Vec::new();
    for (index, entry) in objects.iter().enumerate() {
        let origin = entry["origin"].as_str().unwrap_or_default().to_string();
        match admit(entry["document"].clone(), options, &|_| None) {
            Verdict::Accept {
                object, rejected, ..
            } if rejected.is_empty() && persisted_kind(object.kind()) => {
                held.insert(
                    object.key(),
                    HeldObject {
                        origin,
                        object: Arc::from(object),
                    },
                );
            }
            Verdict::Reject { key, errors, .. } => {
                let name = key.map_or_else(|| format!("objects[{index}]"), |k| k.to_string());
                let first = errors.first().map(ToString::to_string).unwrap_or_default();
                dropped.push(format!("{name}: no longer valid: {first}"));
            }
            _ => dropped.push(format!("objects[{index}]: not a persisted kind")),
        }
    }
    Ok((held, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::document::parse_documents;

    fn options() -> AdmitOptions {
        AdmitOptions {
            decode: Default::default(),
            default_namespace: "default".into(),
        }
    }

    fn held(yaml: &str) -> Held {
        parse_documents(yaml)
            .into_iter()
            .map(|d| match admit(d.value.unwrap(), &options(), &|_| None) {
                Verdict::Accept { object, .. } => (
                    object.key(),
                    HeldObject {
                        origin: "a.yaml".into(),
                        object: Arc::from(object),
                    },
                ),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    const OBJECTS: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: api, namespace: shop, uid: u-1, resourceVersion: "7", labels: {app: shop}}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /api}}]
    retries: {attempts: 3, perTryTimeout: 2s}
    route: [{destination: {host: cart.shop.svc.cluster.local, port: {number: 80}}, weight: 100}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: cart, namespace: shop}
spec:
  host: cart.shop.svc.cluster.local
  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST}
    connectionPool: {http: {http1MaxPendingRequests: 10}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: higress-config, namespace: higress-system}
data:
  higress: |
    tracing: {enable: true, sampling: 50, timeout: 500, zipkin: {service: zipkin.default.svc.cluster.local, port: "9411"}}
    gzip: {enable: true, minContentLength: 2048, contentType: [text/html]}
    downstream: {idleTimeout: 60, maxRequestHeadersKb: 80, http2: {maxConcurrentStreams: 50}}
    upstream: {idleTimeout: 20, connectionBufferLimits: 65536}
    addXRealIpHeader: true
"#;

    #[test]
    fn held_objects_survive_encoding_and_validation_again() {
        let held = held(OBJECTS);
        let encoded = encode(&held, MAX_STATE_BYTES);
        assert!(encoded.left_out.is_empty());
        let (back, dropped) = decode(&encoded.text, &options()).unwrap();
        assert_eq!(dropped, Vec::<String>::new());
        assert_eq!(back, held);
    }

    #[test]
    fn past_the_limit_objects_are_left_out_in_key_order() {
        let held = held(OBJECTS);
        let whole = encode(&held, MAX_STATE_BYTES).text.len();
        let encoded = encode(&held, whole - 1);
        assert_eq!(encoded.left_out.len(), 1);
        assert!(encoded.text.len() < whole);
        let (back, _) = decode(&encoded.text, &options()).unwrap();
        assert_eq!(back.len(), held.len() - 1);
        assert!(!back.contains_key(&encoded.left_out[0]));
        assert_eq!(encode(&held, 10).left_out.len(), held.len());
    }

    #[test]
    fn versions_no_longer_valid_and_unknown_formats_are_reported() {
        let text = r#"{"format":1,"objects":[{"origin":"","document":{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"api","namespace":"shop"},"spec":{"http":12}}}]}"#;
        let (back, dropped) = decode(text, &options()).unwrap();
        assert!(back.is_empty());
        assert!(
            dropped[0].starts_with("VirtualService shop/api: no longer valid"),
            "{dropped:?}"
        );
        assert!(matches!(
            decode(r#"{"format":2,"objects":[]}"#, &options()),
            Err(Error::Format(2))
        ));
        assert!(matches!(decode("[]", &options()), Err(Error::Shape(_))));
    }

    #[test]
    fn secrets_are_never_persisted() {
        let secret = held("apiVersion: v1\nkind: Secret\nmetadata: {name: tls, namespace: shop}\ntype: kubernetes.io/tls\nstringData: {tls.crt: a, tls.key: b}\n");
        let encoded = encode(&secret, MAX_STATE_BYTES);
        assert!(!encoded.text.contains("tls.key"), "{}", encoded.text);
        assert_eq!(encoded.text, r#"{"format":1,"objects":[]}"#);
    }

    #[test]
    fn the_writer_is_woken_only_by_real_changes() {
        let objects = HeldObjects::default();
        let mut changed = objects.subscribe();
        let scope = Scope::new("s");
        objects.set(&scope, Held::new());
        assert!(!changed.has_changed().unwrap());
        let held = held(OBJECTS);
        objects.set(&scope, held.clone());
        assert!(changed.has_changed().unwrap());
        changed.mark_unchanged();
        objects.set(&scope, held.clone());
        assert!(!changed.has_changed().unwrap());
        assert_eq!(objects.all(), held);
    }
}
