//! Property tests of the name rules in `validate::common` against transcriptions of the upstream rules they mirror
//! (regular expression plus length limit, as written in Kubernetes apimachinery and Istio's `pkg/config/labels`).
//! Names are generated at the edges: lengths around 63 and 253, dots, underscores, slashes, wildcards, upper case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use admitpilot::validate::common::{
    check_fqdn, check_label_key, check_label_value, check_wildcard_domain, is_dns1123_label,
    is_k8s_object_name,
};
use proptest::prelude::*;
use regex::Regex;

/// apimachinery `IsDNS1123Subdomain`: `dns1123SubdomainFmt` and `DNS1123SubdomainMaxLength` (253).
fn upstream_dns1123_subdomain(s: &str) -> bool {
    let re =
        Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").unwrap();
    s.len() <= 253 && re.is_match(s)
}

/// Istio `labels.IsDNS1123Label`: `dns1123LabelFmt` (upper case allowed) and `DNS1123LabelMaxLength` (63).
fn upstream_istio_dns1123_label(s: &str) -> bool {
    let re = Regex::new(r"^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$").unwrap();
    s.len() <= 63 && re.is_match(s)
}

/// Istio `labels.validateTagKey`: `tagRegexp`, then the prefix (≤ 253) and name (≤ 63) lengths.
fn upstream_tag_key(k: &str) -> Result<(), String> {
    let label = r"[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?";
    let re = Regex::new(&format!(
        r"^({label}(?:\.{label})*/)?((?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
    ))
    .unwrap();
    let Some(m) = re.captures(k) else {
        return Err(format!("invalid tag key: {k:?}"));
    };
    if m.get(1).is_some_and(|p| p.as_str().len() - 1 > 253) {
        return Err(format!("invalid tag key: {k:?} (DNS prefix is too long)"));
    }
    if m.get(2).is_some_and(|n| n.as_str().len() > 63) {
        return Err(format!("invalid tag key: {k:?} (name is too long)"));
    }
    Ok(())
}

/// Istio `labelValueRegexp`.
fn upstream_tag_value(v: &str) -> bool {
    Regex::new(r"^((?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
        .unwrap()
        .is_match(v)
}

/// Istio `checkDNS1123Preconditions`.
fn upstream_preconditions(name: &str) -> Result<(), String> {
    if name.len() > 255 {
        return Err(format!("domain name {name:?} too long (max 255)"));
    }
    if name.is_empty() {
        return Err("empty domain name not allowed".into());
    }
    Ok(())
}

/// Istio `validateDNS1123Labels` (the top-level label test is Go's `strconv.Atoi`, 64-bit).
fn upstream_labels(domain: &str) -> Result<(), String> {
    let parts: Vec<&str> = domain.split('.').collect();
    let tld = parts[parts.len() - 1];
    if tld.parse::<i64>().is_ok() {
        return Err(format!(
            "domain name {domain:?} invalid (top level domain {tld:?} cannot be all-numeric)"
        ));
    }
    for (i, label) in parts.iter().enumerate() {
        if i == parts.len() - 1 && label.is_empty() {
            return Ok(());
        }
        if !upstream_istio_dns1123_label(label) {
            return Err(format!(
                "domain name {domain:?} invalid (label {label:?} invalid)"
            ));
        }
    }
    Ok(())
}

/// Istio `ValidateFQDN`.
fn upstream_fqdn(name: &str) -> Result<(), String> {
    upstream_preconditions(name)?;
    upstream_labels(name)
}

/// Istio `ValidateWildcardDomain` (`IsWildcardDNS1123Label`: `\*|(\*|\*-)?` + label, at most 63).
fn upstream_wildcard_domain(name: &str) -> Result<(), String> {
    upstream_preconditions(name)?;
    let wildcard =
        Regex::new(r"^(?:\*|(?:\*|\*-)?[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)$").unwrap();
    let (first, rest) = match name.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (name, None),
    };
    if first.len() > 63 || !wildcard.is_match(first) {
        return Err(format!(
            "domain name {name:?} invalid (label {first:?} invalid)"
        ));
    }
    rest.map_or(Ok(()), upstream_labels)
}

/// Strings of the characters that matter, with lengths clustered at the limits.
fn names() -> impl Strategy<Value = String> {
    let alphabet =
        prop::sample::select(vec!['a', 'z', 'A', '0', '9', '-', '_', '.', '/', '*', '+']);
    let short = prop::collection::vec(alphabet.clone(), 0..12).prop_map(String::from_iter);
    let edge = (
        prop::sample::select(vec![62usize, 63, 64, 65, 66, 252, 253, 254]),
        prop::collection::vec((any::<prop::sample::Index>(), alphabet), 0..3),
    )
        .prop_map(|(len, edits)| {
            let mut chars: Vec<char> = vec!['a'; len];
            for (at, c) in edits {
                let i = at.index(len);
                chars[i] = c;
            }
            String::from_iter(chars)
        });
    let dotted = prop::collection::vec(
        prop::sample::select(vec![1usize, 62, 63, 64, 66, 120]),
        1..4,
    )
    .prop_map(|parts| {
        parts
            .iter()
            .map(|n| "b".repeat(*n))
            .collect::<Vec<_>>()
            .join(".")
    });
    prop_oneof![
        short,
        edge,
        dotted.clone(),
        (dotted, "[a-zA-Z0-9_.-]{0,70}").prop_map(|(p, n)| format!("{p}/{n}"))
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn object_names_match_is_dns1123_subdomain(s in names()) {
        prop_assert_eq!(is_k8s_object_name(&s), upstream_dns1123_subdomain(&s), "{:?}", s);
    }

    #[test]
    fn labels_match_istios_is_dns1123_label(s in names()) {
        prop_assert_eq!(is_dns1123_label(&s), upstream_istio_dns1123_label(&s), "{:?}", s);
    }

    #[test]
    fn label_keys_match_istios_validate_tag_key(s in names()) {
        prop_assert_eq!(check_label_key(&s), upstream_tag_key(&s), "{:?}", s);
    }

    #[test]
    fn label_values_match_istios_label_value_regexp(s in names()) {
        prop_assert_eq!(check_label_value(&s).is_ok(), upstream_tag_value(&s), "{:?}", s);
    }

    #[test]
    fn fqdns_match_istios_validate_fqdn(s in names()) {
        prop_assert_eq!(check_fqdn(&s), upstream_fqdn(&s), "{:?}", s);
    }

    #[test]
    fn wildcard_domains_match_istios_validate_wildcard_domain(s in names()) {
        prop_assert_eq!(check_wildcard_domain(&s), upstream_wildcard_domain(&s), "{:?}", s);
    }
}
