//! Objects a conversion synthesized (pure): takes the Istio objects one call of the Gateway API or Ingress
//! conversion made for a proxy, yields the snapshot with them added. An object equal to the previous call's is the
//! previous call's `Arc`, so the translator's per-object caches (which compare by address) keep working.

use std::collections::HashMap;
use std::sync::Arc;

use admitpilot_model::{ConfigObject, ObjectKey, Snapshot};

/// The objects the previous call synthesized, by key.
#[derive(Debug, Default)]
pub struct Synthesized {
    previous: HashMap<ObjectKey, Arc<ConfigObject>>,
}

impl Synthesized {
    /// The object the previous call synthesized under `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<ConfigObject>> {
        self.previous.get(key)
    }

    /// `snapshot` with `objects` added (each the previous call's `Arc` when equal to it), remembered for the next
    /// call; `None` when there are none, now and before (then `snapshot` is used as it is).
    pub fn merge(
        &mut self,
        snapshot: &Snapshot,
        objects: Vec<Arc<ConfigObject>>,
    ) -> Option<Snapshot> {
        if objects.is_empty() && self.previous.is_empty() {
            return None;
        }
        let mut previous = std::mem::take(&mut self.previous);
        let mut out = snapshot.clone();
        for object in objects {
            let key = object.key();
            let object = match previous.remove(&key) {
                Some(old) if Arc::ptr_eq(&old, &object) || *old == *object => old,
                _ => object,
            };
            self.previous.insert(key.clone(), Arc::clone(&object));
            out.objects.insert(key, object);
        }
        Some(out)
    }
}
