//! The MCP feed: takes snapshots and yields the one [`GroupConfig`] every MCP subscriber follows (istiod's or
//! Higress's `configSources`, another admitpilot's `--mcp-source`): a type per Istio collection
//! ([`admitpilot_mcp::SERVED`]), each resource an encoded `istio.mcp.v1alpha1.Resource` named `namespace/name`
//! ([`admitpilot_mcp::encode`]). Snapshots hold only valid objects or their last good versions, so a subscriber never
//! sees what the webhook would deny. An object is encoded again only when the snapshot holds a new version of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use prost::Message;
use tokio::sync::watch;

use super::resources::{Encoded, Family, GroupConfig, ResourceType, TypeResources};
use admitpilot_mcp::pb::RESOURCE_TYPE_URL;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot};

/// The MCP configuration and what it reuses between snapshots.
pub(crate) struct McpFeed {
    sender: watch::Sender<Arc<GroupConfig>>,
    /// Each served object's encoding, with the object it was made from.
    encoded: HashMap<ObjectKey, (Arc<ConfigObject>, Arc<Encoded>)>,
    /// When the feed first held each object that has no `creationTimestamp` of its own (folder mode): the time
    /// its MCP resource carries, kept while the object exists, so it is stable across its changes (istiod orders
    /// conflicting config by creation time) and never 1970-01-01.
    first_seen: HashMap<ObjectKey, String>,
}

impl McpFeed {
    /// A feed holding nothing yet (version 0: subscribers wait for the first snapshot).
    pub(crate) fn new() -> Self {
        McpFeed {
            sender: watch::channel(Arc::new(GroupConfig::empty_of(Family::Mcp))).0,
            encoded: HashMap::new(),
            first_seen: HashMap::new(),
        }
    }

    /// A receiver of the feed's configurations.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<GroupConfig>> {
        self.sender.subscribe()
    }

    /// Whether any stream follows the feed.
    pub(crate) fn is_followed(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Brings the feed to `snapshot`; returns whether its content changed (and subscribers were woken).
    pub(crate) fn refresh(&mut self, snapshot: &Snapshot, published: Instant) -> bool {
        let previous = self.sender.borrow().clone();
        if previous.snapshot_version == snapshot.version && previous.is_loaded() {
            return false;
        }
        let mut encoded = HashMap::with_capacity(self.encoded.len());
        let mut first_seen = HashMap::new();
        let now = seconds_now();
        let mut of_kind: HashMap<Kind, Arc<TypeResources>> = HashMap::new();
        let types = Family::Mcp
            .types()
            .iter()
            .map(|&kind| {
                let ResourceType::Mcp(collection) = kind else {
                    return Arc::default();
                };
                let resources = of_kind.entry(collection.kind()).or_insert_with(|| {
                    let mut by_name = BTreeMap::new();
                    for object in snapshot.of_kind(collection.kind()) {
                        let key = object.key();
                        let created = object.metadata.creation_timestamp.is_none().then(|| {
                            let time = self.first_seen.remove(&key).unwrap_or_else(|| now.clone());
                            first_seen.insert(key.clone(), time.clone());
                            time
                        });
                        let entry = match self.encoded.remove(&key) {
                            Some((old, entry)) if Arc::ptr_eq(&old, object) => Some(entry),
                            _ => encode(object, created).map(Arc::new),
                        };
                        if let Some(entry) = entry {
                            by_name.insert(entry.name.clone(), entry.clone());
                            encoded.insert(key, (object.clone(), entry));
                        }
                    }
                    Arc::new(TypeResources::new(by_name))
                });
                // An unchanged collection keeps its `Arc`, so streams compare it cheaply.
                match previous.types.get(kind.index()) {
                    Some(old) if previous.is_loaded() && old.version == resources.version => {
                        old.clone()
                    }
                    _ => resources.clone(),
                }
            })
            .collect();
        self.encoded = encoded;
        self.first_seen = first_seen;
        let config = GroupConfig {
            snapshot_version: snapshot.version,
            published,
            family: Family::Mcp,
            types,
        };
        if previous.is_loaded() && config.same_content(&previous) {
            // Record the version without waking anyone.
            self.sender.send_if_modified(|current| {
                *current = Arc::new(config);
                false
            });
            return false;
        }
        self.sender.send_replace(Arc::new(config));
        true
    }
}

/// The time now, in whole seconds, as Kubernetes writes `creationTimestamp`.
fn seconds_now() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

/// Encodes one object as its MCP resource, with `created` as its creation time when it has none; an object
/// that cannot be encoded is logged and left out.
fn encode(object: &ConfigObject, created: Option<String>) -> Option<Encoded> {
    let dated;
    let object = match created {
        Some(time) => {
            let mut copy = object.clone();
            copy.metadata.creation_timestamp = Some(time);
            dated = copy;
            &dated
        }
        None => object,
    };
    match admitpilot_mcp::encode(object) {
        Ok(resource) => {
            let name = resource
                .metadata
                .as_ref()
                .map(|metadata| metadata.name.clone())
                .unwrap_or_default();
            Some(Encoded::new(
                &name,
                RESOURCE_TYPE_URL.to_string(),
                resource.encode_to_vec(),
            ))
        }
        Err(error) => {
            tracing::error!(object = %object.key(), %error,
                "cannot encode the object for MCP subscribers; it is left out of the MCP feed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::{ObjectMeta, Spec};
    use envoy_types::pb::google::protobuf::Any;

    fn snapshot(version: u64, hosts: &[&str]) -> Snapshot {
        let spec = admitpilot_model::istio::VirtualService {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..Default::default()
        };
        let object = ConfigObject {
            api_version: "networking.istio.io/v1".into(),
            metadata: ObjectMeta {
                name: "vs".into(),
                namespace: "default".into(),
                ..ObjectMeta::default()
            },
            spec: Spec::VirtualService(spec),
        };
        Snapshot {
            version,
            objects: [(object.key(), Arc::new(object))].into_iter().collect(),
        }
    }

    fn create_time(feed: &McpFeed) -> i64 {
        let config = feed.subscribe().borrow().clone();
        let kind = ResourceType::from_type_url("networking.istio.io/v1/VirtualService")
            .expect("a collection");
        let entry = config
            .of(kind)
            .by_name
            .values()
            .next()
            .cloned()
            .expect("the object");
        let any = Any::decode(entry.any.as_ref()).expect("an Any");
        let resource =
            admitpilot_mcp::pb::Resource::decode(any.value.as_slice()).expect("a resource");
        resource
            .metadata
            .and_then(|m| m.create_time)
            .map_or(0, |t| t.seconds)
    }

    /// Folder objects have no creation time: the feed gives each the time it first held it, kept across changes.
    #[test]
    fn objects_without_a_creation_time_get_the_time_first_seen_and_keep_it() {
        let mut feed = McpFeed::new();
        feed.refresh(&snapshot(1, &["a.example"]), Instant::now());
        let first = create_time(&feed);
        assert!(first > 1_700_000_000, "{first}");
        feed.refresh(&snapshot(2, &["b.example"]), Instant::now());
        assert_eq!(create_time(&feed), first);
    }
}
