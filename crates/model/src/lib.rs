//! The config model (pure): kinds, keys, typed specs of Istio/Higress/Gateway API CRDs and higress-config, and
//! snapshots.
//! Takes JSON values (already parsed from YAML or an AdmissionReview) and yields typed [`ConfigObject`]s.

pub mod decode;
pub mod document;
pub mod duration;
pub mod finding;
pub mod gateway_api;
pub mod higress;
pub mod higress_config;
pub mod ingress;
pub mod istio;
pub mod jwks;
pub mod kind;
pub mod mesh_config;
pub mod object;
pub mod peer_identity;
pub mod re2;
pub mod refusal;
pub mod service;
pub mod snapshot;
pub mod value_de;

pub use finding::{Finding, Findings, Severity};
pub use kind::{Kind, KindInfo};
pub use object::{ConfigObject, ObjectKey, ObjectMeta, Spec};
pub use snapshot::Snapshot;

/// A boolean as Go's `strconv.ParseBool` reads it (Istio reads boolean annotations with it): `1`, `t`, `T`,
/// `TRUE`, `true`, `True` are true, `0`, `f`, `F`, `FALSE`, `false`, `False` false, anything else `None`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}
