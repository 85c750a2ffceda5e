//! Host name sets (pure): takes host names, exact or wildcards (`*`, `*.example.com`), and answers "which earlier
//! host overlaps this one" and "which host covers this one" in time proportional to the host's labels, instead of
//! comparing every pair (a VirtualService may list tens of thousands of hosts). Mirrors the pairwise predicates of
//! Istio's `validateVirtualService` host checks for hosts that passed `check_wildcard_domain`.

use ahash::AHashMap;

/// The suffixes of a host (or of a wildcard's part after `*`) that a wildcard could stand for: every suffix that
/// starts at a `.`, then the empty suffix (`*` alone).
fn label_suffixes(body: &str) -> impl Iterator<Item = &str> {
    body.match_indices('.')
        .map(move |(at, _)| &body[at..])
        .chain(std::iter::once(""))
}

/// Hosts inserted in order, each remembered by the index it was inserted with (the first one wins on repeats).
#[derive(Debug, Default)]
pub struct HostIndex<'h> {
    /// Exact hosts.
    exact: AHashMap<&'h str, usize>,
    /// Wildcards, by their part after `*` (`.example.com`, or empty for `*`).
    wildcard: AHashMap<&'h str, usize>,
    /// Every label suffix of every host inserted (of its part after `*` for a wildcard).
    under: AHashMap<&'h str, usize>,
}

impl<'h> HostIndex<'h> {
    /// An index of `hosts`, numbered by position.
    pub fn of(hosts: &'h [String]) -> Self {
        let mut index = HostIndex::default();
        for (at, host) in hosts.iter().enumerate() {
            index.insert(host, at);
        }
        index
    }

    /// Adds `host` as number `at`.
    pub fn insert(&mut self, host: &'h str, at: usize) {
        let body = match host.strip_prefix('*') {
            Some(suffix) => {
                self.wildcard.entry(suffix).or_insert(at);
                suffix
            }
            None => {
                self.exact.entry(host).or_insert(at);
                host
            }
        };
        for suffix in label_suffixes(body) {
            self.under.entry(suffix).or_insert(at);
        }
    }

    /// The first wildcard whose part after `*` is one of `suffixes`.
    fn first_wildcard<'s>(&self, suffixes: impl Iterator<Item = &'s str>) -> Option<usize> {
        suffixes.filter_map(|s| self.wildcard.get(s).copied()).min()
    }

    /// The first inserted host equal to the exact `host`, or a wildcard over it.
    fn equal_or_wildcard_over(&self, host: &str) -> Option<usize> {
        let wildcard = self.first_wildcard(label_suffixes(host));
        [self.exact.get(host).copied(), wildcard]
            .into_iter()
            .flatten()
            .min()
    }

    /// The first inserted host that can match a name `host` matches (equal, or one of them a wildcard over the
    /// other, or two wildcards one of which ends the other).
    pub fn overlapping(&self, host: &str) -> Option<usize> {
        match host.strip_prefix('*') {
            None => self.equal_or_wildcard_over(host),
            Some(suffix) => {
                let broader = self.first_wildcard(label_suffixes(suffix));
                [self.under.get(suffix).copied(), broader]
                    .into_iter()
                    .flatten()
                    .min()
            }
        }
    }

    /// The first inserted host that matches every name `host` matches.
    pub fn covering(&self, host: &str) -> Option<usize> {
        match host.strip_prefix('*') {
            None => self.equal_or_wildcard_over(host),
            Some(suffix) => self.first_wildcard(label_suffixes(suffix)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The pairwise definitions the index replaces.
    fn overlap(a: &str, b: &str) -> bool {
        match (a.strip_prefix('*'), b.strip_prefix('*')) {
            (Some(sa), Some(sb)) => sa.ends_with(sb) || sb.ends_with(sa),
            (Some(sa), None) => b.ends_with(sa),
            (None, Some(sb)) => a.ends_with(sb),
            (None, None) => a == b,
        }
    }

    fn subset(a: &str, b: &str) -> bool {
        match (a.strip_prefix('*'), b.strip_prefix('*')) {
            (Some(sa), Some(sb)) => sa.ends_with(sb),
            (Some(_), None) => false,
            (None, Some(sb)) => a.ends_with(sb),
            (None, None) => a == b,
        }
    }

    fn host() -> impl Strategy<Value = String> {
        let label = prop::sample::select(vec!["a", "b", "ab"]);
        (
            any::<bool>(),
            prop::collection::vec(label, 0..4),
            any::<bool>(),
        )
            .prop_map(|(wild, labels, star)| {
                let name = labels.join(".");
                match (wild, name.is_empty()) {
                    (true, true) => "*".to_string(),
                    (true, false) => format!("*.{name}"),
                    (false, true) => if star { "b" } else { "a" }.to_string(),
                    (false, false) => name,
                }
            })
    }

    proptest! {
        #[test]
        fn answers_as_the_pairwise_rules(hosts in prop::collection::vec(host(), 1..12), probe in host()) {
            let mut index = HostIndex::default();
            for (at, h) in hosts.iter().enumerate() {
                let pairwise = hosts[..at].iter().position(|earlier| overlap(earlier, h));
                prop_assert_eq!(index.overlapping(h), pairwise, "{:?} in {:?}", h, &hosts[..at]);
                index.insert(h, at);
            }
            let pairwise = hosts.iter().position(|h| subset(&probe, h));
            prop_assert_eq!(HostIndex::of(&hosts).covering(&probe), pairwise);
        }
    }

    #[test]
    fn wildcards() {
        let hosts: Vec<String> = ["a.example.com", "*.example.com", "*", "b.other"]
            .map(String::from)
            .to_vec();
        let mut index = HostIndex::default();
        index.insert(&hosts[0], 0);
        assert_eq!(index.overlapping(&hosts[1]), Some(0));
        assert_eq!(index.overlapping("example.com"), None);
        index.insert(&hosts[1], 1);
        assert_eq!(index.overlapping("*.com"), Some(0));
        assert_eq!(index.covering("x.example.com"), Some(1));
        assert_eq!(index.covering("*.a.example.com"), Some(1));
        assert_eq!(index.covering("*.com"), None);
        assert_eq!(HostIndex::of(&hosts).covering("b.other"), Some(2));
    }
}
