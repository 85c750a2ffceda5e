//! Snapshots: an immutable, versioned set of valid objects that translation reads.
//!
//! The object map is persistent ([`imbl::OrdMap`], a B-tree whose nodes are shared between versions): cloning
//! it is O(1) and changing one object in a clone copies only the O(log n) nodes on that object's path. The store
//! therefore publishes a new snapshot in time proportional to the change, not to the number of objects held, and
//! consecutive snapshots share memory for everything that did not change.

use std::sync::Arc;

use super::{ConfigObject, Kind, ObjectKey, Spec};
use crate::higress_config::HigressConfig;
use crate::mesh_config::{MeshConfig, MeshSettings};

/// Objects by key, in key order (kind, namespace, name); cheap to clone, shares unchanged nodes with its clones.
pub type ObjectMap = imbl::OrdMap<ObjectKey, Arc<ConfigObject>>;

/// All valid objects at one moment, with a version that only grows. Cheap to clone (the map is shared).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Monotonically increasing version; 0 is the empty snapshot before the first load.
    pub version: u64,
    /// Objects by key, in key order (kind, namespace, name).
    pub objects: ObjectMap,
}

impl Snapshot {
    /// Iterates over the objects of one kind, in namespace/name order.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Arc<ConfigObject>> + '_ {
        let start = ObjectKey::new(kind, "", "");
        self.objects
            .range(start..)
            .take_while(move |(key, _)| key.kind == kind)
            .map(|(_, object)| object)
    }

    /// Returns the object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<ConfigObject>> {
        self.objects.get(key)
    }

    /// Returns the effective higress-config (the first one held; the store keeps at most one).
    pub fn higress_config(&self) -> Option<&HigressConfig> {
        self.of_kind(Kind::HigressConfig)
            .find_map(|object| match &object.spec {
                Spec::HigressConfig(config) => Some(config.as_ref()),
                _ => None,
            })
    }

    /// The mesh settings every gateway runs with (`rootNamespace`, `pathNormalization`), from one place: Istio's
    /// mesh config (the `istio` ConfigMap) when there is one; else, in a Higress install, Higress's mesh config
    /// (the `mesh` key of higress-config, where Higress's chart sets `rootNamespace` to its own namespace); else
    /// Istio's defaults.
    pub fn mesh_settings(&self) -> &MeshSettings {
        static DEFAULTS: MeshSettings = MeshSettings {
            root_namespace: None,
            path_normalization: crate::mesh_config::PathNormalization::Default,
        };
        match (self.mesh_config(), self.higress_config()) {
            (Some(mesh), _) => &mesh.settings,
            (None, Some(higress)) => &higress.mesh,
            (None, None) => &DEFAULTS,
        }
    }

    /// Returns Istio's mesh config (the `istio` ConfigMap; the sources hold at most one).
    pub fn mesh_config(&self) -> Option<&MeshConfig> {
        self.of_kind(Kind::MeshConfig)
            .find_map(|object| match &object.spec {
                Spec::MeshConfig(config) => Some(config.as_ref()),
                _ => None,
            })
    }
}

/// A version-1 snapshot of every document of `yaml` (for tests, and the `test-util` feature; panics on a document
/// that does not decode).
#[cfg(any(test, feature = "test-util"))]
pub fn snapshot_from_yaml(yaml: &str) -> Snapshot {
    use crate::decode::{decode, DecodeOptions, Decoded};
    let objects = crate::document::parse_documents(yaml)
        .into_iter()
        .map(|doc| {
            let value = doc.value.expect("a YAML document");
            let Decoded::Object { object, .. } = decode(&value, &DecodeOptions::default()) else {
                panic!("{value} does not decode");
            };
            (object.key(), Arc::new(object))
        })
        .collect();
    Snapshot {
        version: 1,
        objects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectMeta;

    fn object(kind_spec: Spec, ns: &str, name: &str) -> Arc<ConfigObject> {
        Arc::new(ConfigObject {
            api_version: "networking.istio.io/v1".into(),
            metadata: ObjectMeta {
                name: name.into(),
                namespace: ns.into(),
                ..ObjectMeta::default()
            },
            spec: kind_spec,
        })
    }

    #[test]
    fn of_kind_yields_one_kind_in_key_order() {
        let objects = [
            object(Spec::VirtualService(Default::default()), "b", "x"),
            object(Spec::Gateway(Default::default()), "a", "gw"),
            object(Spec::VirtualService(Default::default()), "a", "y"),
        ];
        let snapshot = Snapshot {
            version: 1,
            objects: objects.iter().map(|o| (o.key(), o.clone())).collect(),
        };
        let names: Vec<(&str, &str)> = snapshot
            .of_kind(Kind::VirtualService)
            .map(|o| (o.metadata.namespace.as_str(), o.metadata.name.as_str()))
            .collect();
        assert_eq!(names, [("a", "y"), ("b", "x")]);
        assert!(snapshot
            .get(&ObjectKey::new(Kind::Gateway, "a", "gw"))
            .is_some());
        assert_eq!(snapshot.of_kind(Kind::DestinationRule).count(), 0);
    }

    #[test]
    fn a_changed_clone_leaves_the_original_untouched() {
        let first = Snapshot {
            version: 1,
            objects: (0..1000)
                .map(|i| {
                    let o = object(
                        Spec::VirtualService(Default::default()),
                        "ns",
                        &format!("vs{i}"),
                    );
                    (o.key(), o)
                })
                .collect(),
        };
        let mut second = first.clone();
        second.version = 2;
        second
            .objects
            .remove(&ObjectKey::new(Kind::VirtualService, "ns", "vs7"));
        assert_eq!((first.objects.len(), second.objects.len()), (1000, 999));
        assert!(first
            .get(&ObjectKey::new(Kind::VirtualService, "ns", "vs7"))
            .is_some());
    }
}
