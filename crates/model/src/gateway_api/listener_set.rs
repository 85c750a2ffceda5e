//! `ListenerSet` spec (gateway.networking.k8s.io v1): takes the defaulted `spec` JSON, yields the parent Gateway
//! and the listeners the set adds to it; and, given a snapshot, which ListenerSets a Gateway takes
//! ([`attached`]: its `allowedListeners` admits their namespace, oldest first, then by namespace/name, the spec's
//! precedence after the Gateway's own listeners).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::attachment::namespace_labels;
use super::gateway::{Gateway, Listener};
use super::GROUP;
use crate::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

/// The `spec` of a ListenerSet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerSet {
    /// The Gateway the listeners join.
    pub parent_ref: ListenerSetParent,
    /// Listeners.
    pub listeners: Vec<Listener>,
}

/// `ParentGatewayReference`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerSetParent {
    /// Group (defaulted to `gateway.networking.k8s.io`).
    pub group: Option<String>,
    /// Kind (defaulted to `Gateway`).
    pub kind: Option<String>,
    /// Name.
    pub name: String,
    /// Namespace; the ListenerSet's when unset.
    pub namespace: Option<String>,
}

impl ListenerSet {
    /// The key of the Gateway the set (in `set_namespace`) names as its parent (its namespace by default).
    pub fn gateway_key(&self, set_namespace: &str) -> ObjectKey {
        let parent = &self.parent_ref;
        let namespace = parent
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(set_namespace);
        ObjectKey::new(Kind::KubernetesGateway, namespace, parent.name.clone())
    }

    /// Whether the set names the Gateway `object` as its parent.
    pub fn names(&self, set_namespace: &str, object: &ConfigObject) -> bool {
        let parent = &self.parent_ref;
        parent.group.as_deref().unwrap_or(GROUP) == GROUP
            && parent.kind.as_deref().unwrap_or("Gateway") == "Gateway"
            && self.gateway_key(set_namespace) == object.key()
    }
}

/// Whether `gateway` (in `gateway_namespace`) admits ListenerSets of `set_namespace` (`allowedListeners`; by default
/// none).
pub fn admitted(
    snapshot: &Snapshot,
    gateway: &Gateway,
    gateway_namespace: &str,
    set_namespace: &str,
) -> bool {
    let namespaces = gateway
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    match namespaces.and_then(|n| n.from.as_deref()).unwrap_or("None") {
        "All" => true,
        "Same" => set_namespace == gateway_namespace,
        "Selector" => namespaces
            .and_then(|n| n.selector.as_ref())
            .is_some_and(|s| s.matches(&namespace_labels(snapshot, set_namespace))),
        _ => false,
    }
}

/// The ListenerSets naming the Gateway `object`, each with whether the Gateway admits it, in the spec's order
/// (oldest first, then `namespace/name`).
pub fn naming<'a>(
    snapshot: &'a Snapshot,
    object: &ConfigObject,
    gateway: &Gateway,
) -> Vec<(&'a Arc<ConfigObject>, &'a ListenerSet, bool)> {
    let mut sets: Vec<(&Arc<ConfigObject>, &ListenerSet, bool)> = snapshot
        .of_kind(Kind::ListenerSet)
        .filter_map(|set| match &set.spec {
            Spec::ListenerSet(spec) if spec.names(&set.metadata.namespace, object) => {
                let admitted = admitted(
                    snapshot,
                    gateway,
                    &object.metadata.namespace,
                    &set.metadata.namespace,
                );
                Some((set, spec, admitted))
            }
            _ => None,
        })
        .collect();
    sets.sort_by(|(a, _, _), (b, _, _)| super::oldest_first(a, b));
    sets
}

/// The ListenerSets the Gateway `object` takes ([`naming`] it and admitted), in the spec's order.
pub fn attached<'a>(
    snapshot: &'a Snapshot,
    object: &ConfigObject,
    gateway: &Gateway,
) -> Vec<(&'a Arc<ConfigObject>, &'a ListenerSet)> {
    naming(snapshot, object, gateway)
        .into_iter()
        .filter(|(_, _, admitted)| *admitted)
        .map(|(set, spec, _)| (set, spec))
        .collect()
}
