//! VirtualService unreachable rules (pure): takes the HTTP, TLS and TCP routes of a VirtualService, records Istio's
//! warnings for rules an earlier catch-all or an earlier prefix match makes unreachable (a prefix trie keeps the
//! checks bounded).

use ahash::AHashMap;
use ahash::AHashSet;
use std::collections::BTreeMap;
use std::hash::Hash;
use std::hash::Hasher;

use admitpilot_model::istio::virtual_service::HttpMatchRequest;
use admitpilot_model::istio::virtual_service::HttpRoute;
use admitpilot_model::istio::virtual_service::StringMatch;
use admitpilot_model::Findings;

/// The fields of an HTTP match that decide routing (all but its name), for comparing and hashing.
#[allow(clippy::type_complexity)]
fn routing_fields(
    m: &HttpMatchRequest,
) -> (
    (
        &Option<StringMatch>,
        &Option<StringMatch>,
        &Option<StringMatch>,
        &Option<StringMatch>,
        &BTreeMap<String, StringMatch>,
        &Option<u32>,
    ),
    (
        &BTreeMap<String, String>,
        &Vec<String>,
        &BTreeMap<String, StringMatch>,
        &Option<bool>,
    ),
    (&BTreeMap<String, StringMatch>, &String, &String),
) {
    let HttpMatchRequest {
        name: _,
        uri,
        scheme,
        method,
        authority,
        headers,
        port,
        source_labels,
        gateways,
        query_params,
        ignore_uri_case,
        without_headers,
        source_namespace,
        stat_prefix,
    } = m;
    (
        (uri, scheme, method, authority, headers, port),
        (source_labels, gateways, query_params, ignore_uri_case),
        (without_headers, source_namespace, stat_prefix),
    )
}

fn rule_name(route: &HttpRoute, index: usize) -> String {
    if route.name.is_empty() {
        format!("#{index}")
    } else {
        format!("{:?}", route.name)
    }
}

fn match_name(m: &HttpMatchRequest, index: usize) -> String {
    if m.name.is_empty() {
        format!("#{index}")
    } else {
        format!("{:?}", m.name)
    }
}

/// A prefix-URI match reduced to the fields the overlap analysis compares (Istio's heuristic).
pub(super) struct PrefixMatch {
    pub(super) rule: String,
    name: String,
    pub(super) prefix: String,
    port: u32,
    method: String,
    authority: String,
    headers: BTreeMap<String, String>,
    query: BTreeMap<String, String>,
    without: BTreeMap<String, String>,
}

fn exact_or_prefix(sm: Option<&StringMatch>) -> String {
    match sm {
        Some(StringMatch { exact: Some(e), .. }) if !e.is_empty() => format!("exact:{e}"),
        Some(StringMatch {
            prefix: Some(p), ..
        }) if !p.is_empty() => format!("prefix:{p}"),
        _ => String::new(),
    }
}

fn reduce_map(map: &BTreeMap<String, StringMatch>) -> BTreeMap<String, String> {
    map.iter()
        .map(|(k, v)| (k.clone(), exact_or_prefix(Some(v))))
        .collect()
}

pub(super) fn prefix_match(
    route: &HttpRoute,
    rule: usize,
    m: &HttpMatchRequest,
    index: usize,
) -> Option<PrefixMatch> {
    let prefix = m.uri.as_ref()?.prefix.as_ref().filter(|p| !p.is_empty())?;
    let mut method = exact_or_prefix(m.method.as_ref());
    if method.is_empty() {
        method = "exact:GET".into();
    }
    Some(PrefixMatch {
        rule: rule_name(route, rule),
        name: match_name(m, index),
        prefix: prefix.clone(),
        port: m.port.unwrap_or(0),
        method,
        authority: exact_or_prefix(m.authority.as_ref()),
        headers: reduce_map(&m.headers),
        query: reduce_map(&m.query_params),
        without: reduce_map(&m.without_headers),
    })
}

/// Tells whether the earlier match `a` covers the later match `b`.
pub(super) fn covers(a: &PrefixMatch, b: &PrefixMatch) -> bool {
    let loose = |x: &str, y: &str| x == y || x.starts_with(y);
    let maps = |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| {
        x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| loose(v, w)))
    };
    b.prefix.starts_with(&a.prefix)
        && a.port == b.port
        && loose(&a.method, &b.method)
        && loose(&a.authority, &b.authority)
        && maps(&a.headers, &b.headers)
        && maps(&a.query, &b.query)
        && maps(&a.without, &b.without)
}

/// Earlier prefix matches compared with each later one, at most, by the "covered by an earlier prefix" analysis.
const MAX_COVER_CHECKS: usize = 64;

/// An HTTP match compared and hashed without its name (names do not affect routing).
struct Unnamed<'a>(&'a HttpMatchRequest);

impl PartialEq for Unnamed<'_> {
    fn eq(&self, other: &Self) -> bool {
        routing_fields(self.0) == routing_fields(other.0)
    }
}

impl Eq for Unnamed<'_> {}

impl Hash for Unnamed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        routing_fields(self.0).hash(state);
    }
}

/// Prefix matches by URI prefix, byte by byte, so that the matches whose prefix starts a given URI are found in
/// time linear in its length.
#[derive(Default)]
struct PrefixTrie {
    /// Node 0 is the empty prefix.
    nodes: Vec<TrieNode>,
}

#[derive(Default)]
struct TrieNode {
    /// Children by next byte, sorted.
    children: Vec<(u8, usize)>,
    /// Matches whose prefix ends here.
    matches: Vec<usize>,
}

impl PrefixTrie {
    fn child(&self, node: usize, byte: u8) -> Option<usize> {
        let children = &self.nodes[node].children;
        children
            .binary_search_by_key(&byte, |(b, _)| *b)
            .ok()
            .map(|at| children[at].1)
    }

    fn insert(&mut self, prefix: &str, item: usize) {
        if self.nodes.is_empty() {
            self.nodes.push(TrieNode::default());
        }
        let mut node = 0;
        for byte in prefix.bytes() {
            node = match self.nodes[node]
                .children
                .binary_search_by_key(&byte, |(b, _)| *b)
            {
                Ok(at) => self.nodes[node].children[at].1,
                Err(at) => {
                    let next = self.nodes.len();
                    self.nodes.push(TrieNode::default());
                    self.nodes[node].children.insert(at, (byte, next));
                    next
                }
            };
        }
        self.nodes[node].matches.push(item);
    }

    /// The matches whose prefix is a proper prefix of `prefix`, shortest prefix first.
    fn shorter_prefixes<'t>(&'t self, prefix: &'t str) -> impl Iterator<Item = usize> + 't {
        let mut node = (!self.nodes.is_empty()).then_some(0);
        let last = prefix.len().saturating_sub(1);
        prefix.bytes().take(last).flat_map(move |byte| {
            node = node.and_then(|n| self.child(n, byte));
            node.map(|n| self.nodes[n].matches.as_slice())
                .unwrap_or_default()
                .iter()
                .copied()
        })
    }
}

pub(super) fn warn_unreachable_http(routes: &[HttpRoute], path: &str, out: &mut Findings) {
    let mut seen: AHashMap<Unnamed<'_>, usize> = AHashMap::default();
    let mut catch_all: Option<usize> = None;
    let mut prefixes = Vec::new();
    for (r, route) in routes.iter().enumerate() {
        if crate::deadline::expired() {
            break;
        }
        if route.matches.is_empty() {
            if catch_all.is_some() {
                out.warning(
                    path,
                    format!(
                        "rule {} is never used: only the last rule may have no matches",
                        rule_name(route, r)
                    ),
                );
            }
            catch_all = Some(r);
            continue;
        }
        let mut duplicates = 0;
        for (m, mr) in route.matches.iter().enumerate() {
            if catch_all.is_some() {
                out.warning(
                    path,
                    format!(
                        "rule {} is never used: an earlier rule has no matches",
                        rule_name(route, r)
                    ),
                );
                continue;
            }
            if let Some(first) = seen.get(&Unnamed(mr)) {
                out.warning(
                    path,
                    format!(
                        "rule {} match {} is never used: rule {} has the same match",
                        rule_name(route, r),
                        match_name(mr, m),
                        rule_name(&routes[*first], *first)
                    ),
                );
                duplicates += 1;
                continue;
            }
            seen.insert(Unnamed(mr), r);
            prefixes.extend(prefix_match(route, r, mr, m));
        }
        if duplicates == route.matches.len() {
            out.warning(
                path,
                format!(
                    "rule {} is never used: earlier rules take all its matches",
                    rule_name(route, r)
                ),
            );
        }
    }
    warn_covered_prefixes(&prefixes, path, out);
}

/// Warns about each prefix match that an earlier match with a shorter prefix covers (Istio's heuristic), naming
/// the first such match found; each match is compared with at most [`MAX_COVER_CHECKS`] earlier ones.
pub(super) fn warn_covered_prefixes(prefixes: &[PrefixMatch], path: &str, out: &mut Findings) {
    let mut trie = PrefixTrie::default();
    let mut truncated = false;
    for (i, b) in prefixes.iter().enumerate() {
        if crate::deadline::expired() {
            break;
        }
        let (covering, more) = {
            let mut candidates = trie.shorter_prefixes(&b.prefix);
            let covering = candidates
                .by_ref()
                .take(MAX_COVER_CHECKS)
                .map(|at| &prefixes[at])
                .find(|a| covers(a, b));
            (covering, candidates.next().is_some())
        };
        match covering {
            Some(a) => out.warning(
                path,
                format!(
                    "rule {} match {} (prefix {:?}) is never used: match {} (prefix {:?}) of rule {} covers it",
                    b.rule, b.name, b.prefix, a.name, a.prefix, a.rule
                ),
            ),
            None => truncated |= more,
        }
        trie.insert(&b.prefix, i);
    }
    if truncated {
        out.warning(
            path,
            format!(
                "some matches were compared with only {MAX_COVER_CHECKS} earlier matches of shorter prefixes: a \
                 match those cover may be never used without a warning"
            ),
        );
    }
}

pub(super) fn warn_unreachable_l4<'a, M: Eq + Hash + 'a>(
    routes: impl Iterator<Item = &'a [M]>,
    path: &str,
    out: &mut Findings,
) {
    let mut seen: AHashSet<&M> = AHashSet::default();
    let mut catch_all = false;
    for (r, matches) in routes.enumerate() {
        if matches.is_empty() {
            if catch_all {
                out.warning(
                    path,
                    format!("rule #{r} is never used: only the last rule may have no matches"),
                );
            }
            catch_all = true;
            continue;
        }
        let mut duplicates = 0;
        for (m, mr) in matches.iter().enumerate() {
            if catch_all {
                out.warning(
                    path,
                    format!("rule #{r} is never used: an earlier rule has no matches"),
                );
                continue;
            }
            if seen.contains(mr) {
                out.warning(
                    path,
                    format!(
                        "rule #{r} match #{m} is never used: an earlier rule has the same match"
                    ),
                );
                duplicates += 1;
            } else {
                seen.insert(mr);
            }
        }
        if duplicates == matches.len() {
            out.warning(
                path,
                format!("rule #{r} is never used: earlier rules take all its matches"),
            );
        }
    }
}
