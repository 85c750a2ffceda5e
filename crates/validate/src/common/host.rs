//! Host names (pure): takes DNS labels, FQDNs, wildcard domains, subset names and `namespace/host` entries, yields
//! Istio's and apimachinery's verdicts and texts.

use super::address::is_ip;
use super::labels::is_alnum_bounded;
use super::text::go_quote;
use admitpilot_model::Findings;

/// Longest DNS-1123 label.
pub const DNS1123_LABEL_MAX: usize = 63;
/// Longest domain name.
pub const DOMAIN_MAX: usize = 255;

/// Tells whether `s` is a DNS-1123 label: 1–63 ASCII letters, digits or `-`, starting and ending alphanumeric
/// (upper case accepted). Mirrors Istio's `labels.IsDNS1123Label` (`pkg/config/labels`).
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= DNS1123_LABEL_MAX && is_alnum_bounded(s, b"-")
}

/// Tells whether `s` is a label that may start a wildcard domain: `*`, `*label`, `*-label` or a plain label.
/// Mirrors Istio's `labels.IsWildcardDNS1123Label`.
pub fn is_wildcard_dns1123_label(s: &str) -> bool {
    if s.len() > DNS1123_LABEL_MAX {
        return false;
    }
    match s.strip_prefix('*') {
        None => is_dns1123_label(s),
        Some("") => true,
        Some(rest) => is_dns1123_label(rest.strip_prefix('-').unwrap_or(rest)),
    }
}

/// Istio's `checkDNS1123Preconditions`, with its error texts.
fn check_domain_length(name: &str) -> Result<(), String> {
    if name.len() > DOMAIN_MAX {
        return Err(format!(
            "domain name {} too long (max {DOMAIN_MAX})",
            go_quote(name)
        ));
    }
    if name.is_empty() {
        return Err("empty domain name not allowed".into());
    }
    Ok(())
}

/// Checks the labels of a dotted name as Istio's `validateDNS1123Labels` does, with its error texts: the
/// top-level label may not be a number (Go's `strconv.Atoi` succeeds on it: optional sign, digits, within 64
/// bits); each label is a DNS-1123 label, except that the last may be empty (trailing dot).
pub fn check_dns1123_labels(domain: &str) -> Result<(), String> {
    let tld = domain.rsplit('.').next().unwrap_or(domain);
    if tld.parse::<i64>().is_ok() {
        return Err(format!(
            "domain name {} invalid (top level domain {} cannot be all-numeric)",
            go_quote(domain),
            go_quote(tld)
        ));
    }
    let count = domain.split('.').count();
    for (i, label) in domain.split('.').enumerate() {
        if i == count - 1 && label.is_empty() {
            break;
        }
        if !is_dns1123_label(label) {
            return Err(format!(
                "domain name {} invalid (label {} invalid)",
                go_quote(domain),
                go_quote(label)
            ));
        }
    }
    Ok(())
}

/// Checks a fully qualified domain name (1–255 characters, DNS-1123 labels, optional trailing dot). Mirrors
/// Istio's `ValidateFQDN`.
pub fn check_fqdn(name: &str) -> Result<(), String> {
    check_domain_length(name)?;
    check_dns1123_labels(name)
}

/// Checks a domain that may start with a wildcard label (`*`, `*.example.com`, `*foo.example.com`); wildcards
/// anywhere but the first label are rejected. Mirrors Istio's `ValidateWildcardDomain`, with its error texts.
pub fn check_wildcard_domain(name: &str) -> Result<(), String> {
    check_domain_length(name)?;
    let (first, rest) = match name.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (name, None),
    };
    if !is_wildcard_dns1123_label(first) {
        return Err(format!(
            "domain name {} invalid (label {} invalid)",
            go_quote(name),
            go_quote(first)
        ));
    }
    match rest {
        Some(rest) => check_dns1123_labels(rest),
        None => Ok(()),
    }
}

/// Checks a subset name as Istio's `validateSubsetName` does, with its texts: not empty, a DNS-1123 label.
pub fn check_subset_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("subset name cannot be empty".into());
    }
    if !is_dns1123_label(name) {
        return Err(format!("subset name is invalid: {name}"));
    }
    Ok(())
}

/// Checks that a host is not a partial wildcard: `*` alone or a `*.` prefix is fine, `*foo.com` or `a*.com` is not.
/// Mirrors Istio's `ValidatePartialWildCard`, with its error text.
pub fn check_partial_wildcard(host: &str) -> Result<(), String> {
    if host.contains('*') && host.len() != 1 && !host.starts_with("*.") {
        return Err(format!("partial wildcard {} not allowed", go_quote(host)));
    }
    Ok(())
}

/// Records an error at `path` unless `name` is a valid FQDN.
pub fn validate_fqdn(name: &str, path: &str, out: &mut Findings) {
    if let Err(e) = check_fqdn(name) {
        out.error(path, e);
    }
}

/// Records an error at `path` unless `name` is a valid (possibly wildcard) domain.
pub fn validate_wildcard_domain(name: &str, path: &str, out: &mut Findings) {
    if let Err(e) = check_wildcard_domain(name) {
        out.error(path, e);
    }
}

/// Which kind a `namespace/host` entry belongs to; the namespace part follows different rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsHostContext {
    /// Sidecar egress hosts: `ns/host` required; ns is `*`, `.`, a DNS label, optionally `~`-prefixed.
    Sidecar,
    /// Gateway server hosts: a bare host is accepted; ns is `*`, `.` or a DNS label; IPs are accepted as hosts.
    Gateway,
    /// A Gateway translated from the Kubernetes Gateway API: like `Gateway`, plus `~` as namespace.
    GatewayApi,
}

/// Validates a `namespace/dnsName` host entry of a Sidecar egress listener or a Gateway server. Mirrors Istio's
/// `ValidateNamespaceSlashWildcardHostname`, with its error texts: the namespace is `*`, `.` or a DNS-1123 label;
/// a sidecar's may be `~`-prefixed (`~ns` excludes it), a gateway's may be `~` only with Gateway API semantics.
pub fn validate_namespace_slash_host(
    host: &str,
    context: NsHostContext,
    path: &str,
    out: &mut Findings,
) {
    let is_gateway = context != NsHostContext::Sidecar;
    let Some((ns, name)) = host.split_once('/') else {
        if is_gateway {
            validate_ns_host_name_part(host, true, path, out);
        } else {
            out.error(path, "host must be of form namespace/dnsName");
        }
        return;
    };
    if ns.is_empty() || name.is_empty() {
        out.error(
            path,
            "config namespace and dnsName in host entry cannot be empty",
        );
    }
    let (valid, owner) = match context {
        NsHostContext::Sidecar => {
            let bare = ns.strip_prefix('~').unwrap_or(ns);
            (
                bare.is_empty() || bare == "*" || bare == "." || is_dns1123_label(bare),
                "sidecar",
            )
        }
        NsHostContext::Gateway | NsHostContext::GatewayApi => {
            let tilde = ns == "~" && context == NsHostContext::GatewayApi;
            (
                ns == "*" || ns == "." || tilde || is_dns1123_label(ns),
                "gateway",
            )
        }
    };
    if !valid {
        out.error(
            path,
            format!("invalid namespace value {} in {owner}", go_quote(ns)),
        );
    }
    validate_ns_host_name_part(name, is_gateway, path, out);
}

/// Istio's `validateSidecarOrGatewayHostnamePart`, with its error texts.
fn validate_ns_host_name_part(name: &str, is_gateway: bool, path: &str, out: &mut Findings) {
    if name != "*" && !name.contains('.') {
        out.error(path, "short names (non FQDN) are not allowed");
    }
    if let Err(e) = check_wildcard_domain(name) {
        // Istio records the domain error once for sidecars and once more when the name is not an IP (the same
        // text twice); gateways accept IPs. It is recorded once here.
        if !is_gateway || !is_ip(name) {
            out.error(path, e);
        }
    }
    if let Err(e) = check_partial_wildcard(name) {
        out.error(path, e);
    }
}
