//! Property tests of the name rules in `validate::common` against transcriptions of the upstream rules they mirror
//! (regular expression plus length limit, as written in Kubernetes apimachinery and Istio's `pkg/config/labels` and
//! `pkg/config/validation`), texts included: values are quoted as Go's `%q` does (the crate's `go_quote`, unit
//! tested against Go's output in `validate::common`).
//! Names are generated at the edges: lengths around 63, 253 and 255 (with valid labels, so the 255-character limit
//! of `checkDNS1123Preconditions` decides), dots, underscores, slashes, wildcards and upper case inside dotted
//! names, quotes, backslashes, control and non-ASCII characters.
//!
//! apimachinery's `IsQualifiedName` has no transcription here because admitpilot does not use it: label keys follow
//! Istio's `labels.validateTagKey` (`tagRegexp`), which differs from `IsQualifiedName` (its DNS prefix accepts upper
//! case), and is tested as such below.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use admitpilot::validate::common::{
    check_fqdn, check_label_key, check_label_value, check_subset_name, check_wildcard_domain,
    dns1123_label_errors, dns1123_subdomain_errors, go_quote, is_dns1123_label, is_k8s_namespace,
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

/// apimachinery `dns1123LabelFmt` (lowercase only), as a regular expression.
fn upstream_k8s_label_pattern(s: &str) -> bool {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
        .unwrap()
        .is_match(s)
}

/// apimachinery `dns1123SubdomainFmt`, as a regular expression.
fn upstream_k8s_subdomain_pattern(s: &str) -> bool {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .unwrap()
        .is_match(s)
}

/// apimachinery `IsDNS1123Label`, with its texts (`MaxLenError`, "must not contain dots", `RegexError`).
fn upstream_k8s_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !upstream_k8s_label_pattern(s) {
        if upstream_k8s_subdomain_pattern(s) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must \
                 start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
                 validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                    .to_string(),
            );
        }
    }
    errs
}

/// apimachinery `IsDNS1123Subdomain`, with its texts (`MaxLenError`, `RegexError`).
fn upstream_k8s_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !upstream_k8s_subdomain_pattern(s) {
        errs.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
             must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .to_string(),
        );
    }
    errs
}

/// Istio `validateSubsetName` (`pkg/config/validation/validation.go`): `%s`, not `%q`.
fn upstream_subset_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("subset name cannot be empty".into());
    }
    if !upstream_istio_dns1123_label(name) {
        return Err(format!("subset name is invalid: {name}"));
    }
    Ok(())
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
        return Err(format!("invalid tag key: {}", go_quote(k)));
    };
    if m.get(1).is_some_and(|p| p.as_str().len() - 1 > 253) {
        return Err(format!(
            "invalid tag key: {} (DNS prefix is too long)",
            go_quote(k)
        ));
    }
    if m.get(2).is_some_and(|n| n.as_str().len() > 63) {
        return Err(format!(
            "invalid tag key: {} (name is too long)",
            go_quote(k)
        ));
    }
    Ok(())
}

/// Istio `labels.Instance.Validate` (`labelValueRegexp`), with its text.
fn upstream_tag_value(v: &str) -> Result<(), String> {
    if Regex::new(r"^((?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
        .unwrap()
        .is_match(v)
    {
        Ok(())
    } else {
        Err(format!("invalid tag value: {}", go_quote(v)))
    }
}

/// Istio `checkDNS1123Preconditions`.
fn upstream_preconditions(name: &str) -> Result<(), String> {
    if name.len() > 255 {
        return Err(format!("domain name {} too long (max 255)", go_quote(name)));
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
            "domain name {} invalid (top level domain {} cannot be all-numeric)",
            go_quote(domain),
            go_quote(tld)
        ));
    }
    for (i, label) in parts.iter().enumerate() {
        if i == parts.len() - 1 && label.is_empty() {
            return Ok(());
        }
        if !upstream_istio_dns1123_label(label) {
            return Err(format!(
                "domain name {} invalid (label {} invalid)",
                go_quote(domain),
                go_quote(label)
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
            "domain name {} invalid (label {} invalid)",
            go_quote(name),
            go_quote(first)
        ));
    }
    rest.map_or(Ok(()), upstream_labels)
}

/// The characters that matter: label characters at both ends of the alphabet, upper case, the separators, the
/// wildcard, and characters Go's `%q` escapes or keeps (quote, backslash, controls, non-ASCII printable and not).
fn alphabet() -> impl Strategy<Value = char> + Clone {
    prop::sample::select(vec![
        'a', 'z', 'A', 'Z', '0', '9', '-', '_', '.', '/', '*', '+', '"', '\\', '\n', '\u{1}',
        '\u{7f}', 'é', '\u{200b}', '日',
    ])
}

/// Valid labels joined by dots, `total` characters long: 63-character labels, then the remainder (split so no
/// label is empty or longer than 63).
fn dotted_of_length(total: usize) -> String {
    let mut parts = Vec::new();
    let mut left = total;
    while left > 64 {
        parts.push("b".repeat(63));
        left -= 64;
    }
    if left == 64 {
        parts.push("b".repeat(62));
        parts.push("c".to_string());
    } else if left > 0 {
        parts.push("c".repeat(left));
    }
    parts.join(".")
}

/// Overwrites up to three characters of `base` with characters
/// of [`alphabet`], and may add a `*.` in front or a trailing dot.
fn edited(base: impl Strategy<Value = String> + 'static) -> BoxedStrategy<String> {
    (
        base,
        prop::collection::vec((any::<prop::sample::Index>(), alphabet()), 0..3),
        prop::sample::select(vec!["", "", "", "*.", "*"]),
        prop::sample::select(vec!["", "", "", "."]),
    )
        .prop_map(|(base, edits, prefix, suffix)| {
            let mut chars: Vec<char> = base.chars().collect();
            for (at, c) in edits {
                if !chars.is_empty() {
                    let i = at.index(chars.len());
                    chars[i] = c;
                }
            }
            format!("{prefix}{}{suffix}", String::from_iter(chars))
        })
        .boxed()
}

/// Strings of the characters that matter, with lengths clustered at the limits.
fn names() -> impl Strategy<Value = String> {
    let short = prop::collection::vec(alphabet(), 0..12).prop_map(String::from_iter);
    let edge = edited(
        prop::sample::select(vec![62usize, 63, 64, 65, 66, 252, 253, 254])
            .prop_map(|len| "a".repeat(len)),
    );
    // Up to 6 parts, so valid dotted names run past 255.
    let dotted = edited(
        prop::collection::vec(
            prop::sample::select(vec![1usize, 2, 61, 62, 63, 64, 66, 120]),
            1..7,
        )
        .prop_map(|parts| {
            parts
                .iter()
                .map(|n| "b".repeat(*n))
                .collect::<Vec<_>>()
                .join(".")
        }),
    );
    // Valid labels at exactly the domain and subdomain limits (253, 255) and just past them.
    let at_limit = edited(
        prop::sample::select(vec![252usize, 253, 254, 255, 256, 257]).prop_map(dotted_of_length),
    );
    let key_name = prop::collection::vec(alphabet(), 0..70).prop_map(String::from_iter);
    prop_oneof![
        short,
        edge,
        dotted.clone(),
        at_limit.clone(),
        (prop_oneof![dotted, at_limit], key_name).prop_map(|(p, n)| format!("{p}/{n}"))
    ]
}

/// The generators reach the 255/256 edge with valid labels: `checkDNS1123Preconditions` alone decides.
#[test]
fn the_domain_length_limit_is_reached_with_valid_labels() {
    for total in [255, 256] {
        let name = dotted_of_length(total);
        assert_eq!(name.len(), total);
        assert!(upstream_labels(&name).is_ok(), "{name}");
    }
    assert!(check_fqdn(&dotted_of_length(255)).is_ok());
    let long = dotted_of_length(256);
    assert_eq!(
        check_fqdn(&long).unwrap_err(),
        format!("domain name \"{long}\" too long (max 255)")
    );
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
        prop_assert_eq!(check_label_value(&s), upstream_tag_value(&s), "{:?}", s);
    }

    #[test]
    fn namespaces_match_apimachinery_is_dns1123_label(s in names()) {
        prop_assert_eq!(is_k8s_namespace(&s), upstream_k8s_label_errors(&s).is_empty(), "{:?}", s);
        prop_assert_eq!(dns1123_label_errors(&s), upstream_k8s_label_errors(&s), "{:?}", s);
    }

    #[test]
    fn object_name_texts_match_apimachinery_is_dns1123_subdomain(s in names()) {
        prop_assert_eq!(dns1123_subdomain_errors(&s), upstream_k8s_subdomain_errors(&s), "{:?}", s);
    }

    #[test]
    fn subset_names_match_istios_validate_subset_name(s in names()) {
        prop_assert_eq!(check_subset_name(&s), upstream_subset_name(&s), "{:?}", s);
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
