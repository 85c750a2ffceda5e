//! `ReferenceGrant` spec (gateway.networking.k8s.io v1, v1beta1): takes the `spec` JSON, yields which kinds in
//! which namespaces may refer to which objects of the grant's namespace.

use serde::{Deserialize, Serialize};

use super::GROUP;
use crate::{Kind, Snapshot, Spec};

/// The `spec` of a ReferenceGrant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReferenceGrant {
    /// Who may refer.
    pub from: Vec<ReferenceGrantFrom>,
    /// What may be referred to (in the grant's namespace).
    pub to: Vec<ReferenceGrantTo>,
}

/// `ReferenceGrantFrom`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReferenceGrantFrom {
    /// Group of the referring kind.
    pub group: String,
    /// Referring kind.
    pub kind: String,
    /// Namespace of the referring objects.
    pub namespace: String,
}

/// `ReferenceGrantTo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReferenceGrantTo {
    /// Group of the referred kind.
    pub group: String,
    /// Referred kind.
    pub kind: String,
    /// One object's name; every object of the kind when unset.
    pub name: Option<String>,
}

impl ReferenceGrant {
    /// Whether the grant lets a `from_group`/`from_kind` in `from_namespace` refer to the `to_group`/`to_kind`
    /// named `to_name` (Gateway API's ReferenceGrant semantics).
    pub fn allows(
        &self,
        (from_group, from_kind, from_namespace): (&str, &str, &str),
        (to_group, to_kind, to_name): (&str, &str, &str),
    ) -> bool {
        self.from
            .iter()
            .any(|f| f.group == from_group && f.kind == from_kind && f.namespace == from_namespace)
            && self.to.iter().any(|t| {
                t.group == to_group
                    && t.kind == to_kind
                    && t.name
                        .as_deref()
                        .is_none_or(|n| n.is_empty() || n == to_name)
            })
    }
}

/// Whether a ReferenceGrant in `to_namespace` lets a `from_kind` of `from_namespace` refer to the
/// `to_group`/`to_kind` named `to_name`.
pub fn granted(
    snapshot: &Snapshot,
    (from_kind, from_namespace): (&str, &str),
    (to_group, to_kind, to_namespace, to_name): (&str, &str, &str, &str),
) -> bool {
    snapshot
        .of_kind(Kind::ReferenceGrant)
        .filter(|grant| grant.metadata.namespace == to_namespace)
        .any(|grant| match &grant.spec {
            Spec::ReferenceGrant(grant) => grant.allows(
                (GROUP, from_kind, from_namespace),
                (to_group, to_kind, to_name),
            ),
            _ => false,
        })
}
