//! `ListenerSet` spec (gateway.networking.k8s.io v1): takes the defaulted `spec` JSON, yields the parent Gateway
//! and the listeners the set adds to it.

use serde::{Deserialize, Serialize};

use super::gateway::Listener;

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
