//! The resource names one stream subscribes to for one type: takes the names a client asked for and yields a
//! sorted, de-duplicated set. When the set is every name the proxy group has (a gateway subscribed to all its
//! clusters), it is the group's own list, so thousands of streams hold one copy instead of one each.

use std::sync::Arc;

use super::resources::TypeResources;

/// A sorted set of subscribed names; cheap to clone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NameSet(Arc<[Arc<str>]>);

impl NameSet {
    /// The set of `names` (any order, duplicates allowed), sharing `all`'s list when it holds the same names.
    pub(crate) fn new(mut names: Vec<Arc<str>>, all: &TypeResources) -> Self {
        names.sort_unstable();
        names.dedup();
        if names.len() == all.names.len() && names.iter().eq(all.names.iter()) {
            NameSet(all.names.clone())
        } else {
            NameSet(names.into())
        }
    }

    /// The member equal to `name`.
    pub(crate) fn find(&self, name: &str) -> Option<&Arc<str>> {
        self.0
            .binary_search_by(|known| (**known).cmp(name))
            .ok()
            .map(|index| &self.0[index])
    }

    /// Whether `name` is a member.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// Number of names.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<str>> {
        self.0.iter()
    }

    /// Whether this set is the very list `all` has (not a copy of it).
    #[cfg(test)]
    pub(crate) fn shares(&self, all: &TypeResources) -> bool {
        Arc::ptr_eq(&self.0, &all.names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(names: &[&str]) -> TypeResources {
        TypeResources {
            names: names.iter().map(|n| Arc::from(*n)).collect(),
            ..Default::default()
        }
    }

    fn set(names: &[&str], all: &TypeResources) -> NameSet {
        NameSet::new(names.iter().map(|n| Arc::from(*n)).collect(), all)
    }

    #[test]
    fn sorts_dedups_and_finds() {
        let group = all(&["x"]);
        let names = set(&["b", "a", "b"], &group);
        assert_eq!(names.len(), 2);
        assert!(names.contains("a") && names.contains("b") && !names.contains("c"));
        assert_eq!(names.iter().map(|n| &**n).collect::<Vec<_>>(), ["a", "b"]);
        assert!(!names.shares(&group));
    }

    #[test]
    fn every_name_of_the_group_shares_its_list() {
        let group = all(&["a", "b", "c"]);
        assert!(set(&["c", "a", "b", "a"], &group).shares(&group));
        assert!(!set(&["a", "b"], &group).shares(&group));
        assert!(!set(&["a", "b", "c", "d"], &group).shares(&group));
    }
}
