//! Istio's peer-identity matches (pure): takes an AuthorizationPolicy source value (a principal, namespace, service
//! account or trust domain, in `from.source` or a `when` condition), gives the match on the peer's SPIFFE URI that
//! Istio's generator builds for it. The translator builds its RBAC matchers from these; validation refuses a value
//! whose regex Envoy's RE2 would refuse, whatever else the config holds (the effect check sees it only where the
//! policy takes effect at that moment).

use super::re2::{re2_program_size_bound, ENVOY_RE2_PROGRAM_LIMIT};

const SPIFFE: &str = "spiffe://";

/// How a peer identity is matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityMatch {
    /// A regex (RE2 syntax).
    Regex(String),
    /// A prefix of the SPIFFE URI.
    Prefix(String),
    /// The whole SPIFFE URI.
    Exact(String),
}

impl IdentityMatch {
    /// Why Envoy would refuse this match, if it would (an RE2 program over its size limit).
    pub fn envoy_refusal(&self) -> Option<String> {
        let IdentityMatch::Regex(re) = self else {
            return None;
        };
        let size = re2_program_size_bound(re)?;
        (size > ENVOY_RE2_PROGRAM_LIMIT).then(|| {
            format!(
                "becomes the regex {re:?}, whose RE2 program size is at least {size}: Envoy refuses more than \
                 {ENVOY_RE2_PROGRAM_LIMIT} (runtime re2.max_program_size.error_level); shorten the value"
            )
        })
    }
}

/// A principal, as `spiffe://<value>`: `*` is any identity, `*x` a suffix, `x*` a prefix, anything else exact.
/// Mirrors `srcPrincipalGenerator` (`matcher.StringMatcherWithPrefix`).
pub fn principal(value: &str) -> IdentityMatch {
    if value == "*" {
        IdentityMatch::Regex(".+".into())
    } else if let Some(suffix) = value.strip_prefix('*') {
        IdentityMatch::Regex(format!("{SPIFFE}.*{}", quote_meta(suffix)))
    } else if let Some(prefix) = value.strip_suffix('*') {
        IdentityMatch::Prefix(format!("{SPIFFE}{prefix}"))
    } else {
        IdentityMatch::Exact(format!("{SPIFFE}{value}"))
    }
}

/// A source namespace: the identity's `/ns/<namespace>/` part, each `*` in the value matching anything. Mirrors
/// `srcNamespaceGenerator`.
pub fn namespace(value: &str) -> IdentityMatch {
    let parts: Vec<String> = value.split('*').map(quote_meta).collect();
    IdentityMatch::Regex(format!(".*/ns/{}/.*", parts.join(".*")))
}

/// A service account, `<namespace>/<name>` or `<name>` in `policy_namespace`: the identity's `/ns/<namespace>/`, then
/// optional segments, then `sa/<name>`, at the end or before more segments. Mirrors `serviceAccountRegex`.
pub fn service_account(policy_namespace: &str, value: &str) -> IdentityMatch {
    let (ns, name) = value.split_once('/').unwrap_or((policy_namespace, value));
    IdentityMatch::Regex(format!(
        "spiffe://.+/ns/{}/(.+/|)sa/{}(/.+)?",
        quote_meta(ns),
        quote_meta(name)
    ))
}

/// A trust domain: `*` any, a value without `*` exactly that domain, one with `*` that part matching within the
/// domain. Mirrors `srcTrustDomainGenerator`.
pub fn trust_domain(value: &str) -> IdentityMatch {
    if value == "*" {
        IdentityMatch::Prefix(SPIFFE.into())
    } else if let Some((before, after)) = value.split_once('*') {
        IdentityMatch::Regex(format!(
            "{SPIFFE}{}[^/]*{}/.*",
            quote_meta(before),
            quote_meta(after)
        ))
    } else {
        IdentityMatch::Prefix(format!("{SPIFFE}{value}/"))
    }
}

/// Go's `regexp.QuoteMeta`: a backslash before each of `\.+*?()|[]{}^$`.
pub fn quote_meta(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_istios() {
        let regex = |m: IdentityMatch| match m {
            IdentityMatch::Regex(re) => re,
            other => panic!("not a regex: {other:?}"),
        };
        assert_eq!(regex(principal("*")), ".+");
        assert_eq!(regex(principal("*/sa/bar")), "spiffe://.*/sa/bar");
        assert_eq!(
            principal("td/ns/a*"),
            IdentityMatch::Prefix("spiffe://td/ns/a".into())
        );
        assert_eq!(regex(namespace("team-*.x")), r".*/ns/team-.*\.x/.*");
        assert_eq!(
            regex(service_account("shop", "reader")),
            "spiffe://.+/ns/shop/(.+/|)sa/reader(/.+)?"
        );
        assert_eq!(
            regex(service_account("shop", "other/r.x")),
            r"spiffe://.+/ns/other/(.+/|)sa/r\.x(/.+)?"
        );
        assert_eq!(regex(trust_domain("*.a.com")), r"spiffe://[^/]*\.a\.com/.*");
        assert_eq!(trust_domain("*"), IdentityMatch::Prefix("spiffe://".into()));
        assert_eq!(
            quote_meta(r"a.b+c*d?e(f)g|h[i]j{k}l^m$n\o-p"),
            r"a\.b\+c\*d\?e\(f\)g\|h\[i\]j\{k\}l\^m\$n\\o-p"
        );
    }

    /// Found by the generator (seed 20261126, g9471): a long principal suffix Envoy refused to load.
    #[test]
    fn a_value_whose_regex_envoy_refuses_is_named() {
        let long = format!("*{}", "a".repeat(91));
        let why = principal(&long).envoy_refusal().expect("refused");
        assert!(why.contains("Envoy refuses more than 100"), "{why}");
        assert_eq!(principal("*/sa/bar").envoy_refusal(), None);
        assert_eq!(
            principal(&format!("{}*", "a".repeat(500))).envoy_refusal(),
            None
        );
    }
}
