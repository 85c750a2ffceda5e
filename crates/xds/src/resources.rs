//! Encoded xDS resources: takes a [`GatewayResources`] (prost messages) and yields per-type maps of encoded
//! `Any`s (plus the head of their Delta `Resource` wrapper) keyed by resource name, each with a content-hash
//! version. Encoded once per proxy group; every stream of the group sends these same bytes.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use bytes::Bytes;

use envoy_types::pb::envoy::service::discovery::v3::Resource;
use envoy_types::pb::google::protobuf::Any;
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::{Message, Name};

use admitpilot_model::Kind;
use admitpilot_translate::GatewayResources;

/// Who a stream serves, decided by the type URL of its first request: Envoy gateways get the translated
/// resources of their proxy group, MCP subscribers (istiod, Higress, another admitpilot) the validated config
/// objects as Istio collections ([`admitpilot_mcp`]), the same for every subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Envoy's own types (CDS, EDS, SDS, ECDS, LDS, RDS).
    Envoy,
    /// Istio collections over MCP-over-xDS.
    Mcp,
}

impl Family {
    /// The family's types in push order (see [`ResourceType::ENVOY_PUSH_ORDER`]; MCP collections in
    /// [`McpCollection`] order, none depending on another).
    pub fn types(self) -> &'static [ResourceType] {
        static MCP: LazyLock<Vec<ResourceType>> =
            LazyLock::new(|| McpCollection::all().map(ResourceType::Mcp).collect());
        match self {
            Family::Envoy => &ResourceType::ENVOY_PUSH_ORDER,
            Family::Mcp => &MCP,
        }
    }

    /// A default `T` per type of the family, indexed by [`ResourceType::index`].
    pub fn per_type<T: Default>(self) -> Vec<T> {
        self.types().iter().map(|_| T::default()).collect()
    }

    /// Name shown in `/debug/syncz` and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Envoy => "envoy",
            Family::Mcp => "mcp",
        }
    }
}

/// One MCP collection name, by its position in [`admitpilot_mcp::collections`] (every served kind in every API version,
/// so an older istiod asking for `networking.istio.io/v1alpha3/VirtualService` is answered under that name, with the
/// same resources as `networking.istio.io/v1/VirtualService`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct McpCollection(u8);

impl McpCollection {
    /// Every collection name, in a stable order.
    pub fn all() -> impl Iterator<Item = McpCollection> {
        (0..admitpilot_mcp::collections().len())
            .filter_map(|i| u8::try_from(i).ok().map(McpCollection))
    }

    /// Looks a collection up by its name.
    pub fn find(name: &str) -> Option<Self> {
        Self::all().find(|collection| collection.name() == name)
    }

    /// The kind whose objects the collection holds.
    pub fn kind(self) -> Kind {
        admitpilot_mcp::collections()[usize::from(self.0)].0
    }

    /// The collection's name (`group/version/Kind`), its type URL.
    pub fn name(self) -> &'static str {
        &admitpilot_mcp::collections()[usize::from(self.0)].1
    }
}

/// A set of types of one family (each family has fewer than 64, see [`ResourceType::index`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TypeSet(u64);

impl TypeSet {
    /// Adds `kind`.
    pub fn insert(&mut self, kind: ResourceType) {
        self.0 |= 1 << kind.index();
    }

    /// Whether any of `kinds` is in the set.
    pub fn contains_any(self, kinds: &[ResourceType]) -> bool {
        kinds.iter().any(|kind| self.0 & (1 << kind.index()) != 0)
    }
}

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
    /// One Istio collection over MCP.
    Mcp(McpCollection),
}

impl ResourceType {
    /// Envoy's types in push order: clusters before their endpoints, secrets and extension configs before the
    /// listeners that use them, listeners before their routes, so Envoy never holds a dangling reference.
    pub const ENVOY_PUSH_ORDER: [ResourceType; 6] = [
        ResourceType::Cluster,
        ResourceType::Endpoint,
        ResourceType::Secret,
        ResourceType::ExtensionConfig,
        ResourceType::Listener,
        ResourceType::Route,
    ];

    /// The family this type belongs to.
    pub fn family(self) -> Family {
        match self {
            ResourceType::Mcp(_) => Family::Mcp,
            _ => Family::Envoy,
        }
    }

    /// Position in its family's [`Family::types`], used to index per-type arrays (below 64, so a `u64` holds a
    /// set of types).
    pub fn index(self) -> usize {
        match self {
            ResourceType::Cluster => 0,
            ResourceType::Endpoint => 1,
            ResourceType::Secret => 2,
            ResourceType::ExtensionConfig => 3,
            ResourceType::Listener => 4,
            ResourceType::Route => 5,
            ResourceType::Mcp(collection) => usize::from(collection.0),
        }
    }

    /// The type URL clients use for this type (an MCP collection's name, such as
    /// `networking.istio.io/v1alpha3/VirtualService`).
    pub fn type_url(self) -> &'static str {
        match self {
            ResourceType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            ResourceType::Endpoint => {
                "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
            }
            ResourceType::Secret => {
                "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
            }
            ResourceType::ExtensionConfig => {
                "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
            }
            ResourceType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            ResourceType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            ResourceType::Mcp(collection) => collection.name(),
        }
    }

    /// Looks a type up by its type URL.
    pub fn from_type_url(url: &str) -> Option<Self> {
        Self::ENVOY_PUSH_ORDER
            .into_iter()
            .find(|kind| kind.type_url() == url)
            .or_else(|| McpCollection::find(url).map(ResourceType::Mcp))
    }

    /// The types whose resources this type's resources name and Envoy resolves when it loads them: a listener's
    /// filters use clusters (tracers, gRPC services), secrets and extension configs; routes name clusters;
    /// clusters use secrets. A rejection that a missing dependency caused can pass once one of these changes.
    pub fn depends_on(self) -> &'static [ResourceType] {
        match self {
            ResourceType::Cluster => &[ResourceType::Secret],
            ResourceType::Endpoint | ResourceType::Route | ResourceType::ExtensionConfig => {
                &[ResourceType::Cluster]
            }
            ResourceType::Secret | ResourceType::Mcp(_) => &[],
            ResourceType::Listener => &[
                ResourceType::Cluster,
                ResourceType::Secret,
                ResourceType::ExtensionConfig,
            ],
        }
    }

    /// Whether an empty first SotW/Delta request means "everything" (legacy wildcard), as for LDS and CDS, and
    /// for every MCP collection (a subscriber asks for a whole collection).
    pub fn wildcard_by_default(self) -> bool {
        matches!(
            self,
            ResourceType::Cluster | ResourceType::Listener | ResourceType::Mcp(_)
        )
    }

    /// Short name used in metrics labels, logs and `/debug/syncz` (an MCP collection's full name).
    pub fn short_name(self) -> &'static str {
        match self {
            ResourceType::Cluster => "cds",
            ResourceType::Endpoint => "eds",
            ResourceType::Secret => "sds",
            ResourceType::ExtensionConfig => "ecds",
            ResourceType::Listener => "lds",
            ResourceType::Route => "rds",
            ResourceType::Mcp(_) => self.type_url(),
        }
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// One encoded resource, shared by every stream of its proxy group.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// Resource name.
    pub name: Arc<str>,
    /// Content hash of the encoded resource.
    pub hash: u64,
    /// [`Encoded::hash`] as 16 hex digits (the Delta resource version).
    pub version: Arc<str>,
    /// Hash of (name, version): what a set of resources hashes over.
    pub key: u64,
    /// The packed resource: an encoded `google.protobuf.Any`.
    pub any: Bytes,
    /// The fields of a Delta `Resource` wrapper that precede [`Encoded::any`]: version, name and the key
    /// and length of the `resource` field.
    pub delta_head: Bytes,
}

impl Encoded {
    /// Encodes one resource named `name` whose `Any` carries `value` as `type_url`.
    pub(crate) fn new(name: &str, type_url: String, value: Vec<u8>) -> Self {
        let hash = fnv1a(&value);
        let version = format!("{hash:016x}");
        let any = Any { type_url, value }.encode_to_vec();
        let head = Resource {
            name: name.to_string(),
            version: version.clone(),
            ..Default::default()
        };
        let mut delta_head = Vec::with_capacity(head.encoded_len() + 16);
        head.encode_raw(&mut delta_head);
        encode_key(
            RESOURCE_PAYLOAD_TAG,
            WireType::LengthDelimited,
            &mut delta_head,
        );
        encode_varint(any.len() as u64, &mut delta_head);
        let key = fnv1a_extend(
            fnv1a_extend(fnv1a(name.as_bytes()), &[0]),
            &hash.to_le_bytes(),
        );
        Encoded {
            name: Arc::from(name),
            hash,
            version: Arc::from(version),
            key,
            any: Bytes::from(any),
            delta_head: Bytes::from(delta_head),
        }
    }
}

/// Field number of `resource` (the payload) in `envoy.service.discovery.v3.Resource`.
const RESOURCE_PAYLOAD_TAG: u32 = 2;

/// All resources of one type for one proxy group, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeResources {
    /// Resources by name.
    pub by_name: BTreeMap<Arc<str>, Arc<Encoded>>,
    /// Hash over every (name, version) pair: changes iff any resource of this type changed.
    pub version: u64,
    /// Every name, sorted: the subscription of a stream that asks for all of them shares this list.
    pub names: Arc<[Arc<str>]>,
    /// Content hash of every resource, by name: what a Delta stream that holds all of them shares.
    pub hashes: Arc<BTreeMap<Arc<str>, u64>>,
}

impl TypeResources {
    /// The set of these resources, with its version and shared name lists.
    pub(crate) fn new(by_name: BTreeMap<Arc<str>, Arc<Encoded>>) -> Self {
        let version = set_version(by_name.values().map(|e| &**e));
        let names = by_name.keys().cloned().collect();
        let hashes = Arc::new(
            by_name
                .iter()
                .map(|(name, entry)| (name.clone(), entry.hash))
                .collect(),
        );
        TypeResources {
            by_name,
            version,
            names,
            hashes,
        }
    }

    /// The shared name `Arc` of a resource of this type, if it exists (so streams can share names).
    pub fn shared_name(&self, name: &str) -> Option<Arc<str>> {
        self.by_name.get_key_value(name).map(|(key, _)| key.clone())
    }
}

/// The complete encoded configuration of one proxy group at one snapshot version.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Version of the snapshot this was translated from.
    pub snapshot_version: u64,
    /// When the snapshot was seen by the xDS server (push latency is measured from here).
    pub published: Instant,
    /// Whose types these are.
    pub family: Family,
    /// Resources per type of [`GroupConfig::family`], indexed by [`ResourceType::index`].
    pub types: Vec<Arc<TypeResources>>,
}

impl GroupConfig {
    /// An empty configuration of Envoy's types (before any snapshot).
    pub fn empty() -> Self {
        Self::empty_of(Family::Envoy)
    }

    /// An empty configuration of `family`'s types (before any snapshot).
    pub fn empty_of(family: Family) -> Self {
        GroupConfig {
            snapshot_version: 0,
            published: Instant::now(),
            family,
            types: family.per_type(),
        }
    }

    /// Whether this configuration comes from a snapshot of synced sources. Version 0 is the empty placeholder
    /// the store holds until every source has synced (its first published snapshot is version 1).
    pub fn is_loaded(&self) -> bool {
        self.snapshot_version > 0
    }

    /// The resources of one type (none for a type of another family).
    pub fn of(&self, kind: ResourceType) -> &TypeResources {
        static NONE: LazyLock<TypeResources> = LazyLock::new(TypeResources::default);
        match self.types.get(kind.index()) {
            Some(resources) if kind.family() == self.family => resources,
            _ => &NONE,
        }
    }

    /// Encodes translated resources, reusing entries (and whole types) of `previous` whose content is unchanged.
    pub fn encode(
        resources: &GatewayResources,
        snapshot_version: u64,
        published: Instant,
        previous: Option<&GroupConfig>,
    ) -> Self {
        let prev = |kind: ResourceType| {
            previous
                .filter(|p| p.family == Family::Envoy)
                .and_then(|p| p.types.get(kind.index()))
        };
        let types = vec![
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
            family: Family::Envoy,
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
        let name = name_of(item).as_str();
        let reused = previous
            .and_then(|p| p.by_name.get(name))
            .filter(|old| old.hash == fnv1a(&bytes))
            .cloned();
        let entry = reused.unwrap_or_else(|| Arc::new(Encoded::new(name, T::type_url(), bytes)));
        by_name.insert(entry.name.clone(), entry);
    }
    let fresh = TypeResources::new(by_name);
    match previous {
        Some(old) if old.version == fresh.version => old.clone(),
        _ => Arc::new(fresh),
    }
}

/// Version of a set of resources, in the order given (callers pass name order).
pub fn set_version<'a>(entries: impl Iterator<Item = &'a Encoded>) -> u64 {
    entries.fold(FNV_OFFSET, |hash, entry| {
        fnv1a_extend(hash, &entry.key.to_le_bytes())
    })
}

/// A version as sent to clients: 16 hex digits.
pub fn version_string(version: u64) -> String {
    format!("{version:016x}")
}

/// Parses a version sent by [`version_string`] (or [`Encoded::version`]); anything else is `None`.
pub fn parse_version(text: &str) -> Option<u64> {
    if text.len() != 16 {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
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

/// A group configuration with these clusters and one listener, `http` (for the protocol tests).
#[cfg(test)]
pub(crate) fn clusters_and_listener(clusters: &[&str]) -> GroupConfig {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    let resources = GatewayResources {
        clusters: clusters
            .iter()
            .map(|name| Cluster {
                name: name.to_string(),
                ..Default::default()
            })
            .collect(),
        listeners: vec![Listener {
            name: "http".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    GroupConfig::encode(&resources, 1, Instant::now(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;

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
        for kind in ResourceType::ENVOY_PUSH_ORDER {
            assert_eq!(ResourceType::from_type_url(kind.type_url()), Some(kind));
        }
        let expected = [
            Cluster::type_url(),
            ClusterLoadAssignment::type_url(),
            Secret::type_url(),
            TypedExtensionConfig::type_url(),
            Listener::type_url(),
            RouteConfiguration::type_url(),
        ];
        for (kind, url) in ResourceType::ENVOY_PUSH_ORDER.into_iter().zip(expected) {
            assert_eq!(kind.type_url(), url);
        }
        assert_eq!(
            ResourceType::Cluster.type_url(),
            "type.googleapis.com/envoy.config.cluster.v3.Cluster"
        );
        assert_eq!(ResourceType::from_type_url("type.googleapis.com/x.Y"), None);
    }

    #[test]
    fn mcp_collections_are_every_served_kind_in_every_version() {
        let names: Vec<&str> = McpCollection::all().map(McpCollection::name).collect();
        assert!(names.len() < 64, "type sets are u64 bit sets");
        assert!(names.contains(&"networking.istio.io/v1/VirtualService"));
        assert!(names.contains(&"networking.istio.io/v1alpha3/VirtualService"));
        assert!(names.contains(&"networking.higress.io/v1/McpBridge"));
        for kind in admitpilot_mcp::SERVED.iter() {
            let newest = admitpilot_mcp::collection(*kind).unwrap();
            let Some(ResourceType::Mcp(collection)) = ResourceType::from_type_url(newest) else {
                panic!("{newest} is not served");
            };
            assert_eq!((collection.kind(), collection.name()), (*kind, newest));
        }
        for (index, kind) in Family::Mcp.types().iter().enumerate() {
            assert_eq!(kind.index(), index);
            assert_eq!(ResourceType::from_type_url(kind.type_url()), Some(*kind));
        }
        assert_eq!(
            ResourceType::from_type_url("networking.istio.io/v2/VirtualService"),
            None
        );
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
        assert_eq!(
            parse_version(&cds_two.by_name["b"].version),
            Some(cds_two.by_name["b"].hash)
        );
        assert_eq!(version_string(cds_two.version).len(), 16);
    }

    #[test]
    fn delta_head_and_any_form_a_resource() {
        let resources = GatewayResources {
            clusters: vec![cluster("a", 1)],
            ..Default::default()
        };
        let config = GroupConfig::encode(&resources, 1, Instant::now(), None);
        let entry = &config.of(ResourceType::Cluster).by_name["a"];
        let mut bytes = entry.delta_head.to_vec();
        bytes.extend_from_slice(&entry.any);
        let resource = Resource::decode(bytes.as_slice()).unwrap();
        assert_eq!(resource.name, "a");
        assert_eq!(resource.version, *entry.version);
        let any = resource.resource.unwrap();
        assert_eq!(any.type_url, ResourceType::Cluster.type_url());
        assert_eq!(any.value, cluster("a", 1).encode_to_vec());
    }
}
