//! Host name sets (pure): takes host names, exact or wildcards (`*`, `*.example.com`, `*foo.example.com`), and
//! answers "which hosts overlap another" and "which host covers this one" in O(n log n) for n hosts, instead of
//! comparing every pair (a VirtualService may list tens of thousands of hosts). A wildcard `*S` stands for every
//! name ending with `S`, as in Istio's host checks (`validateVirtualService`, the analyzers' host matching).
//!
//! Hosts are compared by their reversed text (the part after `*` for a wildcard): `*S` covers a host exactly when
//! reversed `S` starts the host's reversed text, so the hosts a wildcard covers sit right after it in sorted order.

use ahash::AHashMap;

/// The text a host is compared by: reversed, in lower case (DNS names are case-insensitive), without the `*` of a
/// wildcard.
fn key(host: &str) -> (Vec<u8>, bool) {
    let (body, wildcard) = match host.strip_prefix('*') {
        Some(suffix) => (suffix, true),
        None => (host, false),
    };
    (
        body.bytes().rev().map(|b| b.to_ascii_lowercase()).collect(),
        wildcard,
    )
}

/// Pairs `(a, b)` of positions in `hosts`, `a < b`, of hosts that can match a common name: each host that
/// overlaps another is in one pair at least (not every overlapping pair is listed). Sorted by `b`.
pub fn overlapping_pairs(hosts: &[String]) -> Vec<(usize, usize)> {
    let mut entries: Vec<(Vec<u8>, bool, usize)> = hosts
        .iter()
        .enumerate()
        .map(|(at, host)| {
            let (key, wildcard) = key(host);
            (key, wildcard, at)
        })
        .collect();
    // Wildcards before exact hosts of the same text, so that they are on the stack when those come.
    entries.sort_by(|a, b| (&a.0, !a.1, a.2).cmp(&(&b.0, !b.1, b.2)));
    let mut pairs = Vec::new();
    // Wildcards whose text starts the current entry's, shortest first.
    let mut open: Vec<usize> = Vec::new();
    for (at, (text, wildcard, host)) in entries.iter().enumerate() {
        while open
            .last()
            .is_some_and(|&w| !text.starts_with(&entries[w].0))
        {
            open.pop();
        }
        let same_exact = at
            .checked_sub(1)
            .filter(|&prev| !entries[prev].1 && !wildcard && entries[prev].0 == *text);
        if let Some(partner) = open.last().copied().or(same_exact) {
            let other = entries[partner].2;
            pairs.push((other.min(*host), other.max(*host)));
        }
        if *wildcard {
            open.push(at);
        }
    }
    pairs.sort_by_key(|&(a, b)| (b, a));
    pairs
}

/// An index of hosts, each remembered by its position, answering covering and overlap questions.
#[derive(Debug, Default)]
pub struct HostIndex {
    /// Exact hosts by their [`key`] text.
    exact: AHashMap<Vec<u8>, usize>,
    /// Wildcards by reversed text, sorted, with the nearest shorter one whose text starts theirs and the lowest
    /// position along that chain.
    wildcards: Vec<(Vec<u8>, usize)>,
    parent: Vec<Option<usize>>,
    lowest: Vec<usize>,
    /// Every host's reversed text, sorted, with its position.
    all: Vec<(Vec<u8>, usize)>,
}

impl HostIndex {
    /// An index of `hosts` with their positions.
    pub fn new<'h>(hosts: impl IntoIterator<Item = (&'h str, usize)>) -> Self {
        let mut index = HostIndex::default();
        for (host, at) in hosts {
            let (text, wildcard) = key(host);
            if wildcard {
                index.wildcards.push((text.clone(), at));
            } else {
                let first = index.exact.entry(text.clone()).or_insert(at);
                *first = (*first).min(at);
            }
            index.all.push((text, at));
        }
        index.wildcards.sort();
        index
            .wildcards
            .dedup_by(|later, earlier| later.0 == earlier.0);
        index.all.sort();
        let mut open: Vec<usize> = Vec::new();
        for (at, (text, host)) in index.wildcards.iter().enumerate() {
            while open
                .last()
                .is_some_and(|&w| !text.starts_with(&index.wildcards[w].0))
            {
                open.pop();
            }
            let parent = open.last().copied();
            index.parent.push(parent);
            let lowest = parent.map_or(*host, |p| index.lowest[p].min(*host));
            index.lowest.push(lowest);
            open.push(at);
        }
        index
    }

    /// An index of `hosts`, numbered by position.
    pub fn of(hosts: &[String]) -> Self {
        Self::new(hosts.iter().enumerate().map(|(at, h)| (h.as_str(), at)))
    }

    /// The lowest position of a wildcard whose reversed text starts `text`.
    fn wildcard_over(&self, text: &[u8]) -> Option<usize> {
        let below = self
            .wildcards
            .partition_point(|(w, _)| w.as_slice() <= text);
        let mut at = below.checked_sub(1)?;
        let nearest = &self.wildcards[at].0;
        let common = nearest.iter().zip(text).take_while(|(a, b)| a == b).count();
        // Every wildcard starting `text` starts `nearest` too, so it is on `nearest`'s chain.
        loop {
            if self.wildcards[at].0.len() <= common {
                return Some(self.lowest[at]);
            }
            at = self.parent[at]?;
        }
    }

    /// The lowest position of a host that matches every name `host` matches (itself, or a wildcard over it).
    pub fn covering(&self, host: &str) -> Option<usize> {
        let (text, wildcard) = key(host);
        let exact = (!wildcard)
            .then(|| self.exact.get(&text).copied())
            .flatten();
        [exact, self.wildcard_over(&text)]
            .into_iter()
            .flatten()
            .min()
    }

    /// A position of a host that can match a name `host` matches: one covering it, or, for a wildcard, one it
    /// covers.
    pub fn overlapping(&self, host: &str) -> Option<usize> {
        if let Some(at) = self.covering(host) {
            return Some(at);
        }
        let (text, wildcard) = key(host);
        if !wildcard {
            return None;
        }
        let from = self
            .all
            .partition_point(|(t, _)| t.as_slice() < text.as_slice());
        self.all
            .get(from)
            .filter(|(t, _)| t.starts_with(&text))
            .map(|(_, at)| *at)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

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
        let label = prop::sample::select(vec!["a", "b", "ab", "ba"]);
        (
            prop::sample::select(vec!["", "*", "*.", "*a"]),
            prop::collection::vec(label, 1..4),
        )
            .prop_map(|(wild, labels)| match wild {
                "*" if labels.len() == 1 => "*".to_string(),
                _ => format!("{wild}{}", labels.join(".")),
            })
    }

    proptest! {
        #[test]
        fn answers_as_the_pairwise_rules(hosts in prop::collection::vec(host(), 1..14), probe in host()) {
            let pairwise: BTreeSet<usize> = (0..hosts.len())
                .flat_map(|a| (a + 1..hosts.len()).map(move |b| (a, b)))
                .filter(|&(a, b)| overlap(&hosts[a], &hosts[b]))
                .flat_map(|(a, b)| [a, b])
                .collect();
            let pairs = overlapping_pairs(&hosts);
            for &(a, b) in &pairs {
                prop_assert!(a < b && overlap(&hosts[a], &hosts[b]), "{:?} {:?}", hosts[a], hosts[b]);
            }
            let found: BTreeSet<usize> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
            prop_assert_eq!(found, pairwise);

            let index = HostIndex::of(&hosts);
            let covering = hosts.iter().position(|h| subset(&probe, h));
            prop_assert_eq!(index.covering(&probe), covering, "{:?} in {:?}", probe, hosts);
            let overlapping = index.overlapping(&probe);
            prop_assert_eq!(overlapping.is_some(), hosts.iter().any(|h| overlap(&probe, h)));
            if let Some(at) = overlapping {
                prop_assert!(overlap(&probe, &hosts[at]));
            }
        }
    }

    #[test]
    fn wildcards() {
        let hosts: Vec<String> = ["a.example.com", "*.example.com", "*", "b.other", "*le.com"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            overlapping_pairs(&hosts),
            vec![(0, 1), (2, 3), (1, 4), (2, 4)]
        );
        let index = HostIndex::of(&hosts[..2]);
        assert_eq!(index.covering("x.example.com"), Some(1));
        assert_eq!(index.covering("*.a.example.com"), Some(1));
        assert_eq!(index.covering("*.com"), None);
        assert_eq!(index.overlapping("*.com"), Some(1));
        assert_eq!(HostIndex::of(&hosts).covering("b.other"), Some(2));
        assert_eq!(HostIndex::of(&hosts).covering("example.com"), Some(2));
        assert_eq!(
            index.covering("A.Example.COM"),
            Some(0),
            "DNS names are case-insensitive"
        );
    }
}
