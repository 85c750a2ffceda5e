//! Labels and selectors (pure): takes label keys, values and workload selectors, yields apimachinery's and Istio's
//! verdicts and texts.

use std::collections::BTreeMap;

use super::host::DNS1123_LABEL_MAX;
use super::text::go_quote;
use admitpilot_model::Findings;

/// Whether `s` is non-empty, starts and ends with an ASCII letter or digit, and has only letters, digits and
/// `inner` characters between (the shape of the regular expressions below, with no length limit).
pub(super) fn is_alnum_bounded(s: &str, inner: &[u8]) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || inner.contains(c))
}

/// Longest DNS prefix of a label key (Istio's `dnsNamePrefixMaxLength`).
const LABEL_PREFIX_MAX: usize = 253;

/// Checks a label key as Istio's `labels.validateTagKey` (`pkg/config/labels/instance.go`) does, with its error
/// texts (the key written as Go's `%q`, [`go_quote`]): an
/// optional prefix of dot-separated `[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?` parts (no limit per part, at most 253
/// characters in all) and `/`, then a qualified name `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` of at most 63.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| p.split('.').all(|part| is_alnum_bounded(part, b"-")));
    if !prefix_ok || !is_alnum_bounded(name, b"-_.") {
        return Err(format!("invalid tag key: {}", go_quote(key)));
    }
    if prefix.is_some_and(|p| p.len() > LABEL_PREFIX_MAX) {
        return Err(format!(
            "invalid tag key: {} (DNS prefix is too long)",
            go_quote(key)
        ));
    }
    if name.len() > DNS1123_LABEL_MAX {
        return Err(format!(
            "invalid tag key: {} (name is too long)",
            go_quote(key)
        ));
    }
    Ok(())
}

/// Checks a label value as Istio's `labels.Instance.Validate` does (`labelValueRegexp`), with its text (the value
/// written as Go's `%q`): empty, or a qualified name of any length (the 63-character limit of Kubernetes labels is not Istio's rule here).
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_alnum_bounded(value, b"-_.") {
        Ok(())
    } else {
        Err(format!("invalid tag value: {}", go_quote(value)))
    }
}

/// Validates every key and value of a label map found at `path`.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &str, out: &mut Findings) {
    for (k, v) in labels {
        if let Err(e) = check_label_key(k) {
            out.error(path, e);
        }
        if let Err(e) = check_label_value(v) {
            out.error(path, e);
        }
    }
}

/// Validates a workload selector's labels: no empty key, no `*` in keys or values; an empty selector is a warning.
/// Mirrors Istio's `ValidateAlphaWorkloadSelector` / `validateWorkloadSelector`, with their texts.
pub fn validate_workload_selector(
    labels: &BTreeMap<String, String>,
    path: &str,
    out: &mut Findings,
) {
    for (k, v) in labels {
        if k.is_empty() {
            let pair = go_quote(&format!("{k}={v}"));
            out.error(
                path,
                format!("empty key is not supported in selector: {pair}"),
            );
        }
        if k.contains('*') || v.contains('*') {
            let pair = go_quote(&format!("{k}={v}"));
            out.error(
                path,
                format!("wildcard is not supported in selector: {pair}"),
            );
        }
    }
    if labels.is_empty() {
        out.warning(path, "workload selector specified without labels");
    }
}
