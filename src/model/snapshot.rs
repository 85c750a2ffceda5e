//! Snapshots: an immutable, versioned set of valid objects that translation reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ConfigObject, Kind, ObjectKey, Spec};
use crate::model::higress_config::HigressConfig;

/// All valid objects at one moment, with a version that only grows. Cheap to clone (objects are shared).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Monotonically increasing version; 0 is the empty snapshot before the first load.
    pub version: u64,
    /// Objects by key, in key order (kind, namespace, name).
    pub objects: BTreeMap<ObjectKey, Arc<ConfigObject>>,
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
}
