//! The translator's caches (pure): what each cached part of a [`super::Translator`]'s output was built from, so a
//! call can tell whether the part is still good: the objects of some kinds ([`Inputs`], compared by address), the
//! routes of one VirtualService in one scope ([`CachedRoutes`]) and what the clusters were built from
//! ([`ClusterInputs`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::authn::JwksUpstream;
use super::route::{HttpRoutes, Scope};
use super::types::ClusterRef;
use crate::model::{ConfigObject, Kind, Snapshot};

/// Cached routes of one VirtualService in one scope (gateway and port).
#[derive(Debug)]
pub(super) struct CachedRoutes {
    /// The VirtualService; also pins it so its address is not reused while cached.
    pub(super) object: Arc<ConfigObject>,
    pub(super) gateway_namespace: String,
    pub(super) gateway_name: String,
    pub(super) port: u32,
    /// Delegates consulted, as found (`None` when missing).
    pub(super) delegates: Vec<Option<Arc<ConfigObject>>>,
    /// The translated routes.
    pub(super) routes: Arc<HttpRoutes>,
    /// Clusters the routes name that no service defines (each gets an empty EDS cluster).
    pub(super) undefined: Vec<ClusterRef>,
    /// Number of the last call that used the entry; entries not used by a call are evicted after it.
    pub(super) call: u64,
}

impl CachedRoutes {
    /// Whether the entry holds `object`'s routes in `scope`.
    pub(super) fn is_for(&self, object: &Arc<ConfigObject>, scope: &Scope<'_>) -> bool {
        Arc::ptr_eq(&self.object, object)
            && self.port == scope.port
            && self.gateway_namespace == scope.gateway_namespace
            && self.gateway_name == scope.gateway_name
    }

    /// Whether the entry was built from `delegates` (the same objects, by address, or the same ones missing).
    pub(super) fn has_delegates(&self, delegates: &[Option<Arc<ConfigObject>>]) -> bool {
        self.delegates.len() == delegates.len()
            && self
                .delegates
                .iter()
                .zip(delegates)
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                })
    }
}

/// The objects of some kinds a cached part was built from, compared by address. They are held, so an
/// address cannot be reused by another object while cached.
#[derive(Debug, Default)]
pub(super) struct Inputs(Vec<Arc<ConfigObject>>);

impl Inputs {
    /// Takes the snapshot's objects of `kinds`; returns whether they differ from the held ones.
    pub(super) fn update(&mut self, snapshot: &Snapshot, kinds: &[Kind]) -> bool {
        let mut current = kinds.iter().flat_map(|kind| snapshot.of_kind(*kind));
        let mut held = self.0.iter();
        let same = loop {
            match (held.next(), current.next()) {
                (Some(a), Some(b)) if Arc::ptr_eq(a, b) => {}
                (None, None) => break true,
                _ => break false,
            }
        };
        if !same {
            self.0 = kinds
                .iter()
                .flat_map(|kind| snapshot.of_kind(*kind))
                .cloned()
                .collect();
        }
        !same
    }
}

/// What the clusters of the last output were built from, besides the registry and policies.
#[derive(Debug)]
pub(super) struct ClusterInputs {
    /// Referenced clusters no service defines.
    pub(super) extra: BTreeSet<ClusterRef>,
    /// Servers the JWT filter fetches keys from.
    pub(super) jwks: Vec<JwksUpstream>,
    /// Credentials the clusters' upstream TLS names.
    pub(super) credentials: BTreeSet<String>,
}
