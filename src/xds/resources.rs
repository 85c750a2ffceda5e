//! Encoded xDS resources: takes a [`GatewayResources`] (prost messages) and yields per-type maps of packed `Any`s
//! keyed by resource name, each with a content-hash version, shared by every proxy of one group.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use crate::translate::GatewayResources;

/// The xDS resource types admitpilot serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    /// CDS.
    Cluster,
    /// EDS.
    Endpoint,
    /// SDS.
    Secret,
    /// ECDS.
    ExtensionConfig,
    /// LDS.
    Listener,
    /// RDS.
    Route,
}

impl ResourceType {
    /// Every type in push order: clusters before their endpoints, secrets and extension configs before the
    /// listeners that use them, listeners before their routes, so Envoy never holds a dangling reference.
    pub const PUSH_ORDER: [ResourceType; 6] = [
        ResourceType::Cluster,
        ResourceType::Endpoint,
        ResourceType::Secret,
        ResourceType::ExtensionConfig,
        ResourceType::Listener,
        ResourceType::Route,
    ];

    /// Position in [`Self::PUSH_ORDER`], used to index per-type arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The type URL clients use for this type.
    pub fn type_url(self) -> String {
        match self {
            ResourceType::Cluster => Cluster::type_url(),
            ResourceType::Endpoint => ClusterLoadAssignment::type_url(),
            ResourceType::Secret => Secret::type_url(),
            ResourceType::ExtensionConfig => TypedExtensionConfig::type_url(),
            ResourceType::Listener => Listener::type_url(),
            ResourceType::Route => RouteConfiguration::type_url(),
        }
    }

    /// Looks a type up by its type URL.
    pub fn from_type_url(url: &str) -> Option<Self> {
        Self::PUSH_ORDER
            .into_iter()
            .find(|kind| kind.type_url() == url)
    }

    /// Whether an empty first SotW/Delta request means "everything" (legacy wildcard), as for LDS and CDS.
    pub fn wildcard_by_default(self) -> bool {
        matches!(self, ResourceType::Cluster | ResourceType::Listener)
    }

    /// Short name used in metrics labels, logs and `/debug/syncz`.
    pub fn short_name(self) -> &'static str {
        match self {
            ResourceType::Cluster => "cds",
            ResourceType::Endpoint => "eds",
            ResourceType::Secret => "sds",
            ResourceType::ExtensionConfig => "ecds",
            ResourceType::Listener => "lds",
            ResourceType::Route => "rds",
        }
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// One encoded resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// Resource name.
    pub name: Arc<str>,
    /// Content hash of the encoded bytes (hex).
    pub version: Arc<str>,
    /// The packed resource.
    pub any: Any,
}

/// All resources of one type for one proxy group, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeResources {
    /// Resources by name.
    pub by_name: BTreeMap<Arc<str>, Arc<Encoded>>,
    /// Hash over every (name, version) pair: changes iff any resource of this type changed.
    pub version: String,
}

impl TypeResources {
    fn new(by_name: BTreeMap<Arc<str>, Arc<Encoded>>) -> Self {
        let version = set_version(by_name.values().map(|e| (&*e.name, &*e.version)));
        TypeResources { by_name, version }
    }
}

/// The complete encoded configuration of one proxy group at one snapshot version.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Version of the snapshot this was translated from.
    pub snapshot_version: u64,
    /// When the snapshot was seen by the xDS server (push latency is measured from here).
    pub published: Instant,
    /// Resources per type, indexed by [`ResourceType::index`].
    pub types: [Arc<TypeResources>; 6],
}

impl GroupConfig {
    /// An empty configuration (before any snapshot).
    pub fn empty() -> Self {
        GroupConfig {
            snapshot_version: 0,
            published: Instant::now(),
            types: Default::default(),
        }
    }

    /// The resources of one type.
    pub fn of(&self, kind: ResourceType) -> &TypeResources {
        &self.types[kind.index()]
    }

    /// Encodes translated resources, reusing entries (and whole types) of `previous` whose content is unchanged.
    pub fn encode(
        resources: &GatewayResources,
        snapshot_version: u64,
        published: Instant,
        previous: Option<&GroupConfig>,
    ) -> Self {
        let prev = |kind: ResourceType| previous.map(|p| &p.types[kind.index()]);
        let types = [
            encode_type(
                &resources.clusters,
                |r| &r.name,
                prev(ResourceType::Cluster),
            ),
            encode_type(
                &resources.endpoints,
                |r| &r.cluster_name,
                prev(ResourceType::Endpoint),
            ),
            encode_type(&resources.secrets, |r| &r.name, prev(ResourceType::Secret)),
            encode_type(
                &resources.extension_configs,
                |r| &r.name,
                prev(ResourceType::ExtensionConfig),
            ),
            encode_type(
                &resources.listeners,
                |r| &r.name,
                prev(ResourceType::Listener),
            ),
            encode_type(
                &resources.route_configs,
                |r| &r.name,
                prev(ResourceType::Route),
            ),
        ];
        GroupConfig {
            snapshot_version,
            published,
            types,
        }
    }

    /// Whether every type has the same content as in `other`.
    pub fn same_content(&self, other: &GroupConfig) -> bool {
        self.types
            .iter()
            .zip(other.types.iter())
            .all(|(a, b)| a.version == b.version)
    }
}

fn encode_type<T: Message + Name + Clone>(
    items: &[T],
    name_of: impl Fn(&T) -> &String,
    previous: Option<&Arc<TypeResources>>,
) -> Arc<TypeResources> {
    let mut by_name = BTreeMap::new();
    for item in items {
        let bytes = item.encode_to_vec();
        let version = format!("{:016x}", fnv1a(&bytes));
        let name = name_of(item).as_str();
        let reused = previous
            .and_then(|p| p.by_name.get(name))
            .filter(|old| *old.version == *version)
            .cloned();
        let entry = reused.unwrap_or_else(|| {
            Arc::new(Encoded {
                name: Arc::from(name),
                version: Arc::from(version.as_str()),
                any: Any {
                    type_url: T::type_url(),
                    value: bytes,
                },
            })
        });
        by_name.insert(entry.name.clone(), entry);
    }
    let fresh = TypeResources::new(by_name);
    match previous {
        Some(old) if old.version == fresh.version => old.clone(),
        _ => Arc::new(fresh),
    }
}

/// Version of a set of (name, version) pairs, in the order given (callers pass name order).
pub fn set_version<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut hash = FNV_OFFSET;
    for (name, version) in entries {
        hash = fnv1a_extend(hash, name.as_bytes());
        hash = fnv1a_extend(hash, &[0]);
        hash = fnv1a_extend(hash, version.as_bytes());
        hash = fnv1a_extend(hash, &[0]);
    }
    format!("{hash:016x}")
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64-bit: stable across runs and builds, so versions survive a control-plane restart.
fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV_OFFSET, bytes)
}

fn fnv1a_extend(mut hash: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, timeout_secs: i64) -> Cluster {
        Cluster {
            name: name.into(),
            connect_timeout: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: timeout_secs,
                nanos: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn type_urls_round_trip() {
        for kind in ResourceType::PUSH_ORDER {
            assert_eq!(ResourceType::from_type_url(&kind.type_url()), Some(kind));
        }
        assert_eq!(
            ResourceType::Cluster.type_url(),
            "type.googleapis.com/envoy.config.cluster.v3.Cluster"
        );
        assert_eq!(ResourceType::from_type_url("type.googleapis.com/x.Y"), None);
    }

    #[test]
    fn versions_are_content_hashes_and_unchanged_entries_are_reused() {
        let first = GatewayResources {
            clusters: vec![cluster("a", 1), cluster("b", 1)],
            ..Default::default()
        };
        let one = GroupConfig::encode(&first, 1, Instant::now(), None);
        let again = GroupConfig::encode(&first, 2, Instant::now(), Some(&one));
        assert!(one.same_content(&again));
        assert!(Arc::ptr_eq(&one.types[0], &again.types[0]));

        let second = GatewayResources {
            clusters: vec![cluster("a", 1), cluster("b", 2)],
            ..Default::default()
        };
        let two = GroupConfig::encode(&second, 3, Instant::now(), Some(&one));
        assert!(!one.same_content(&two));
        let cds_one = one.of(ResourceType::Cluster);
        let cds_two = two.of(ResourceType::Cluster);
        assert!(Arc::ptr_eq(&cds_one.by_name["a"], &cds_two.by_name["a"]));
        assert_ne!(cds_one.by_name["b"].version, cds_two.by_name["b"].version);
        assert_eq!(cds_two.by_name["b"].version.len(), 16);
    }
}
