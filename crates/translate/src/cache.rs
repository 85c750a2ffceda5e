//! The translator's caches (pure): what each cached part of a [`super::Translator`]'s output was built from, so a
//! call can tell whether the part is still good: the objects of some kinds ([`Inputs`], compared by address), the
//! VirtualServices of the last call ([`VirtualServices`], which tells the ones that changed) and what the clusters
//! were built from ([`ClusterInputs`]). The routes of each VirtualService are kept in `super::route_table`.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::authn::JwksUpstream;
use super::types::ClusterRef;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot};

/// The VirtualServices of the last call's snapshot, in key order and compared by address, to tell which changed.
/// They are held, so an address cannot be reused by another object while held.
#[derive(Debug, Default)]
pub(super) struct VirtualServices(Vec<Arc<ConfigObject>>);

/// One difference between the held VirtualServices and a snapshot's, at a position of the held list.
enum Edit {
    Insert(usize, Arc<ConfigObject>),
    Replace(usize, Arc<ConfigObject>),
    Remove(usize),
}

impl VirtualServices {
    /// Takes the snapshot's VirtualServices; returns the keys of those added, changed or removed since the last call,
    /// or `None` when more than `limit` did. Costs a pointer comparison per unchanged VirtualService.
    pub(super) fn update(&mut self, snapshot: &Snapshot, limit: usize) -> Option<Vec<ObjectKey>> {
        let mut current = snapshot.of_kind(Kind::VirtualService).peekable();
        let mut edits = Vec::new();
        let mut at = 0;
        loop {
            if edits.len() > limit {
                self.0 = snapshot.of_kind(Kind::VirtualService).cloned().collect();
                return None;
            }
            let edit = match (self.0.get(at), current.peek()) {
                (None, None) => break,
                (Some(held), Some(now)) if Arc::ptr_eq(held, now) => {
                    at += 1;
                    current.next();
                    continue;
                }
                (Some(_), None) => Edit::Remove(at),
                (None, Some(now)) => Edit::Insert(at, Arc::clone(now)),
                (Some(held), Some(now)) => match name_order(held, now) {
                    Ordering::Less => Edit::Remove(at),
                    Ordering::Greater => Edit::Insert(at, Arc::clone(now)),
                    Ordering::Equal => Edit::Replace(at, Arc::clone(now)),
                },
            };
            match edit {
                Edit::Insert(..) => {
                    current.next();
                }
                Edit::Replace(..) => {
                    at += 1;
                    current.next();
                }
                Edit::Remove(_) => at += 1,
            }
            edits.push(edit);
        }
        let keys = edits
            .iter()
            .filter_map(|edit| match edit {
                Edit::Insert(_, object) | Edit::Replace(_, object) => Some(object.key()),
                Edit::Remove(at) => self.0.get(*at).map(|object| object.key()),
            })
            .collect();
        // Positions are those of the held list before any edit; applied from the last, the earlier ones stay valid.
        for edit in edits.into_iter().rev() {
            match edit {
                Edit::Insert(at, object) => self.0.insert(at, object),
                Edit::Replace(at, object) => self.0[at] = object,
                Edit::Remove(at) => {
                    self.0.remove(at);
                }
            }
        }
        Some(keys)
    }
}

/// Orders two objects of one kind by key (namespace, then name) without building the keys.
fn name_order(a: &ConfigObject, b: &ConfigObject) -> Ordering {
    (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
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
