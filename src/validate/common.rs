//! Shared validation primitives (pure): take field values plus a field path, record findings.
//!
//! Every `validate_*` function pushes its errors/warnings into a [`Findings`] at the given path; `check_*` and
//! `is_*` functions only answer (a message or a bool) so callers can combine them. Each rule names the upstream
//! function it mirrors (Istio's `pkg/config/validation`, `agent/validation.go`, `labels`, `visibility`, Kubernetes
//! apimachinery) and, for names, hosts, domains, addresses and headers, gives its error text ([`go_quote`] writes
//! values as Go's `%q` does).
//! [`FieldPath`] builds `spec.http[0].route[1]`-style paths in one reusable buffer, so walking an object does not
//! allocate per field.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::ops::{Deref, DerefMut};

use crate::model::istio::proxy_config::TypeWorkloadSelector;
use crate::model::istio::PolicyTargetReference;
use crate::model::{Findings, Kind, ObjectMeta};

// ---------------------------------------------------------------------------------------------------------------
// Field paths

/// A field path under construction (`spec.http[0].match[1].uri`), grown and shrunk as a validator walks an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(String);

/// A path extended by one segment; derefs to the [`FieldPath`] and removes the segment again when dropped.
#[derive(Debug)]
pub struct Segment<'a> {
    path: &'a mut FieldPath,
    mark: usize,
}

impl FieldPath {
    /// Starts a path at `root` (for example `spec`).
    pub fn new(root: &str) -> Self {
        let mut buf = String::with_capacity(96);
        buf.push_str(root);
        FieldPath(buf)
    }

    /// Returns the path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Appends `.name` (or `name` at the root) until the returned segment is dropped.
    pub fn field(&mut self, name: &str) -> Segment<'_> {
        let mark = self.0.len();
        if !self.0.is_empty() {
            self.0.push('.');
        }
        self.0.push_str(name);
        Segment { path: self, mark }
    }

    /// Appends `[index]` until the returned segment is dropped.
    pub fn index(&mut self, index: usize) -> Segment<'_> {
        let mark = self.0.len();
        // Writing into a String cannot fail.
        let _ = write!(self.0, "[{index}]");
        Segment { path: self, mark }
    }

    /// Returns `path.name` as a new string (for one-off findings).
    pub fn child(&self, name: &str) -> String {
        if self.0.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.0)
        }
    }
}

impl Deref for Segment<'_> {
    type Target = FieldPath;
    fn deref(&self) -> &FieldPath {
        self.path
    }
}

impl DerefMut for Segment<'_> {
    fn deref_mut(&mut self) -> &mut FieldPath {
        self.path
    }
}

impl Drop for Segment<'_> {
    fn drop(&mut self) {
        self.path.0.truncate(self.mark);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Error texts

/// Quotes `s` the way Go's `%q` verb (`strconv.Quote`) does, so an error text that names a value reads exactly as
/// the upstream validator's: quote, backslash and control characters escaped (`\n`, `\t`, `\x01`…), other
/// characters kept when printable, else written as `\u…`/`\U…`. Printable follows Go's `unicode.IsPrint` for
/// assigned characters (see [`is_go_printable`]).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_go_printable(c) => out.push(c),
            c if u32::from(c) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint` for assigned characters: no controls (Cc), format characters (Cf), private use, line
/// or paragraph separators, and no space but U+0020.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(u32::from(c),
            0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f | 0x202a..=0x202e
            | 0x2060..=0x206f | 0xfeff | 0xfff9..=0xfffb | 0xe000..=0xf8ff | 0xf0000..=0x10ffff))
}

// ---------------------------------------------------------------------------------------------------------------
// Host names

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

// ---------------------------------------------------------------------------------------------------------------
// Addresses and ports

/// Tells whether `s` is an IPv4 or IPv6 address (no brackets). Istio's `netutil.IsValidIPAddress` and
/// `ValidateIPAddress` use Go's `netip.ParseAddr`, which also accepts an IPv6 zone (`fe80::1%eth0`); admitpilot
/// refuses zones on purpose, as Envoy's socket addresses cannot carry them. Otherwise the same: dotted decimal
/// without leading zeros, or IPv6 text (embedded IPv4 accepted).
pub fn is_ip(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok()
}

/// Parses `addr/len` CIDR notation as Go's `netip.ParsePrefix` does: the length is decimal without leading
/// zeros and fits the address family.
pub fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = s.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    let leading_zero = len.len() > 1 && len.starts_with('0');
    if len.is_empty() || len.len() > 3 || leading_zero || !len.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let len: u8 = len.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((addr, len))
}

/// Checks an IP address. Mirrors Istio's `ValidateIPAddress` (`agent/validation.go`), with its error text.
pub fn check_ip(s: &str) -> Result<(), String> {
    if is_ip(s) {
        Ok(())
    } else {
        Err(format!("{s} is not a valid IP"))
    }
}

/// Checks an IP address or a CIDR block. Mirrors Istio's `ValidateIPSubnet`, with its error texts: exactly one `/`
/// makes it a CIDR block, anything else is read as an address.
pub fn check_ip_or_cidr(s: &str) -> Result<(), String> {
    if s.matches('/').count() == 1 {
        if parse_cidr(s).is_some() {
            Ok(())
        } else {
            Err(format!("{s} is not a valid CIDR block"))
        }
    } else {
        check_ip(s)
    }
}

/// Records an error at `path` unless `s` is an IP address or CIDR block.
pub fn validate_ip_or_cidr(s: &str, path: &str, out: &mut Findings) {
    if let Err(e) = check_ip_or_cidr(s) {
        out.error(path, e);
    }
}

/// Checks a port number is in 1..=65535. Mirrors Istio's `ValidatePort`, with its error text.
pub fn check_port(port: u32) -> Result<(), String> {
    if (1..=65535).contains(&port) {
        Ok(())
    } else {
        Err(format!("port number {port} must be in the range 1..65535"))
    }
}

/// Records an error at `path` unless `port` is in 1..=65535.
pub fn validate_port(port: u32, path: &str, out: &mut Findings) {
    if let Err(e) = check_port(port) {
        out.error(path, e);
    }
}

/// Records an error at `path` unless `name` is a valid port name (a DNS-1123 label). Mirrors Istio's
/// `ValidatePortName`, with its error text.
pub fn validate_port_name(name: &str, path: &str, out: &mut Findings) {
    if !is_dns1123_label(name) {
        out.error(path, format!("invalid port name: {name}"));
    }
}

/// Checks a Unix domain socket path (the part after `unix://`): absolute and not a directory, or abstract (`@`).
/// Mirrors Istio's `ValidateUnixAddress`, with its error texts.
pub fn check_unix_address(addr: &str) -> Result<(), String> {
    if addr.is_empty() {
        return Err("unix address must not be empty".into());
    }
    if addr.starts_with('@') {
        return Ok(());
    }
    if !addr.starts_with('/') || addr.ends_with('/') {
        return Err(format!("{addr} is not an absolute path to a file"));
    }
    Ok(())
}

/// A port protocol as Istio parses it (case-insensitive); anything else is [`Protocol::Unsupported`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `TCP`.
    Tcp,
    /// `UDP`.
    Udp,
    /// `GRPC`.
    Grpc,
    /// `GRPC-WEB`.
    GrpcWeb,
    /// `HTTP`.
    Http,
    /// `HTTP_PROXY`.
    HttpProxy,
    /// `HTTP2`.
    Http2,
    /// `HTTPS`.
    Https,
    /// `TLS`.
    Tls,
    /// `MONGO`.
    Mongo,
    /// `REDIS`.
    Redis,
    /// `MYSQL`.
    Mysql,
    /// Not a protocol Istio knows (the empty string too).
    Unsupported,
}

impl Protocol {
    /// Parses a protocol name, ignoring ASCII case. Mirrors Istio's `protocol.Parse` (`pkg/config/protocol`).
    pub fn parse(s: &str) -> Protocol {
        const NAMES: &[(&str, Protocol)] = &[
            ("tcp", Protocol::Tcp),
            ("udp", Protocol::Udp),
            ("grpc", Protocol::Grpc),
            ("grpc-web", Protocol::GrpcWeb),
            ("http", Protocol::Http),
            ("http_proxy", Protocol::HttpProxy),
            ("http2", Protocol::Http2),
            ("https", Protocol::Https),
            ("tls", Protocol::Tls),
            ("mongo", Protocol::Mongo),
            ("redis", Protocol::Redis),
            ("mysql", Protocol::Mysql),
        ];
        NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(s))
            .map_or(Protocol::Unsupported, |(_, p)| *p)
    }

    /// Tells whether the protocol is HTTP-based (HTTP, HTTP2, HTTP_PROXY, GRPC, GRPC-WEB).
    pub fn is_http(self) -> bool {
        matches!(
            self,
            Protocol::Http
                | Protocol::Http2
                | Protocol::HttpProxy
                | Protocol::Grpc
                | Protocol::GrpcWeb
        )
    }

    /// Tells whether the protocol carries TLS (HTTPS, TLS).
    pub fn is_tls(self) -> bool {
        matches!(self, Protocol::Https | Protocol::Tls)
    }
}

/// Records an error at `path` when a non-empty protocol is not one Istio knows (empty means "sniff"). Mirrors
/// Istio's `ValidateProtocol`, with its error text.
pub fn validate_protocol(protocol: &str, path: &str, out: &mut Findings) {
    if !protocol.is_empty() && Protocol::parse(protocol) == Protocol::Unsupported {
        out.error(path, format!("unsupported protocol: {protocol}"));
    }
}

/// Tells whether `code` is an HTTP status code with a registered meaning (as Go's `http.StatusText` knows them).
pub fn is_known_http_status(code: u16) -> bool {
    matches!(
        code,
        100..=103
            | 200..=208
            | 226
            | 300..=305
            | 307
            | 308
            | 400..=418
            | 421..=426
            | 428
            | 429
            | 431
            | 451
            | 500..=508
            | 510
            | 511
    )
}

// ---------------------------------------------------------------------------------------------------------------
// Durations and percentages

/// Parses a duration as Kubernetes/CEL and protobuf JSON accept it (`1.5s`, `100ms`, `1h30m`, `0`) into
/// nanoseconds; `None` when malformed or out of range.
pub fn parse_duration_nanos(s: &str) -> Option<i128> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(f) => {
                let n = f.bytes().take_while(u8::is_ascii_digit).count();
                f.split_at(n)
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after.len(), |(i, _)| i);
        let (unit, next) = after.split_at(unit_len);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        if int_part.len() > 20 || frac_part.len() > 20 {
            return None;
        }
        let int: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().ok()?
        };
        let mut value = int.checked_mul(scale)?;
        if !frac_part.is_empty() {
            let digits: i128 = frac_part.parse().ok()?;
            let denom = 10i128.checked_pow(u32::try_from(frac_part.len()).ok()?)?;
            value = value.checked_add(digits.checked_mul(scale)? / denom)?;
        }
        total = total.checked_add(value)?;
        rest = next;
    }
    // Go's time.Duration (and protobuf's) cap: about 292 years / 10,000 years; take the stricter one.
    if total > i128::from(i64::MAX) {
        return None;
    }
    Some(if negative { -total } else { total })
}

/// Checks an Istio duration: well-formed, at least 1ms and a whole number of milliseconds.
pub fn check_duration(s: &str) -> Result<(), String> {
    let Some(nanos) = parse_duration_nanos(s) else {
        return Err(format!(
            "{s:?} is not a valid duration (use a number with a unit, such as 1.5s or 100ms)"
        ));
    };
    if nanos < 1_000_000 {
        return Err(format!("duration {s:?} must be at least 1ms"));
    }
    if nanos % 1_000_000 != 0 {
        return Err(format!(
            "duration {s:?} has sub-millisecond precision; only whole milliseconds are supported"
        ));
    }
    Ok(())
}

/// Records an error at `path` unless `s` is a valid Istio duration (≥1ms, millisecond precision).
pub fn validate_duration(s: &str, path: &str, out: &mut Findings) {
    if let Err(e) = check_duration(s) {
        out.error(path, e);
    }
}

/// Validates an optional duration field `field` under `parent`; the path is only built when there is an error.
pub fn validate_duration_field(
    value: Option<&String>,
    parent: &FieldPath,
    field: &str,
    out: &mut Findings,
) {
    if let Some(Err(e)) = value.map(|v| check_duration(v)) {
        out.error(parent.child(field), e);
    }
}

/// Records an error at `path` unless the integer percentage is within 0..=100.
pub fn validate_percent(value: i64, path: &str, out: &mut Findings) {
    if !(0..=100).contains(&value) {
        out.error(
            path,
            format!("percentage {value} is outside the range 0..100"),
        );
    }
}

/// Records an error at `path` unless the fractional percentage is 0 or within [0.0001, 100].
pub fn validate_fractional_percent(value: f64, path: &str, out: &mut Findings) {
    if !(0.0..=100.0).contains(&value) || (value > 0.0 && value < 0.0001) {
        out.error(
            path,
            format!("percentage {value} must be 0 or within [0.0001, 100]"),
        );
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Regular expressions

pub use super::regex::check_regex;

/// Records an error at `path` unless `re` is a valid, non-empty RE2-style regex that Envoy takes.
pub fn validate_regex(re: &str, path: &str, out: &mut Findings) {
    if re.is_empty() {
        out.error(path, "regex must not be empty");
    } else if let Err(e) = check_regex(re) {
        out.error(path, e);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Labels and selectors

/// Whether `s` is non-empty, starts and ends with an ASCII letter or digit, and has only letters, digits and
/// `inner` characters between (the shape of the regular expressions below, with no length limit).
fn is_alnum_bounded(s: &str, inner: &[u8]) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || inner.contains(c))
}

/// Longest DNS prefix of a label key (Istio's `dnsNamePrefixMaxLength`).
const LABEL_PREFIX_MAX: usize = 253;

/// Checks a label key as Istio's `labels.validateTagKey` (`pkg/config/labels`) does, with its error texts: an
/// optional prefix of dot-separated `[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?` parts (no limit per part, at most 253
/// characters in all) and `/`, then a qualified name `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` of at most 63.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| p.split('.').all(|part| is_alnum_bounded(part, b"-")));
    if !prefix_ok || !is_alnum_bounded(name, b"-_.") {
        return Err(format!("invalid tag key: {key:?}"));
    }
    if prefix.is_some_and(|p| p.len() > LABEL_PREFIX_MAX) {
        return Err(format!("invalid tag key: {key:?} (DNS prefix is too long)"));
    }
    if name.len() > DNS1123_LABEL_MAX {
        return Err(format!("invalid tag key: {key:?} (name is too long)"));
    }
    Ok(())
}

/// Checks a label value as Istio's `labels.Instance.Validate` does (`labelValueRegexp`): empty, or a qualified
/// name of any length (the 63-character limit of Kubernetes labels is not Istio's rule here).
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_alnum_bounded(value, b"-_.") {
        Ok(())
    } else {
        Err(format!("invalid tag value: {value:?}"))
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

// ---------------------------------------------------------------------------------------------------------------
// exportTo

/// Which kind an `exportTo` list belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportToContext {
    /// VirtualService or DestinationRule without workload selector.
    Plain,
    /// ServiceEntry: `~` (visible to no one) is allowed, alone.
    ServiceEntry,
    /// DestinationRule with a workload selector: only the own namespace.
    DestinationRuleWithSelector,
}

/// Validates an `exportTo` list: `.`, `*`, `~` (ServiceEntry only) or DNS labels; no duplicates (`.` equals the
/// own namespace); `*` and `~` alone; a DestinationRule with selector only to its own namespace. Mirrors Istio's
/// `validateExportTo` and `visibility.Instance.Validate`, with their error texts.
pub fn validate_export_to(
    namespace: &str,
    export_to: &[String],
    context: ExportToContext,
    path: &str,
    out: &mut Findings,
) {
    if export_to.is_empty() {
        return;
    }
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for entry in export_to {
        let key = if entry == "." {
            namespace
        } else {
            entry.as_str()
        };
        if seen.contains(key) {
            if key != entry {
                out.error(
                    path,
                    format!("duplicate entries in exportTo: . and current namespace {namespace}"),
                );
            } else {
                out.error(
                    path,
                    format!("duplicate entries in exportTo for entry {entry}"),
                );
            }
            continue;
        }
        let error = match key {
            "~" if context == ExportToContext::ServiceEntry => None,
            "." | "*" => None,
            "~" => Some("exportTo ~ (none) is not allowed for Istio configuration objects"),
            _ if is_dns1123_label(key) => None,
            _ => Some("only .,*, or a valid DNS 1123 label is allowed as exportTo entry"),
        };
        match error {
            Some(error) => out.error(path, error),
            None => {
                seen.insert(key);
            }
        }
    }
    if context == ExportToContext::DestinationRuleWithSelector && !seen.is_empty() {
        if !seen.contains(namespace) {
            out.error(
                path,
                "destination rule with workload selector cannot have exportTo beyond current namespace",
            );
        } else if seen.len() > 1 {
            out.error(
                path,
                "destination rule with workload selector cannot have multiple entries in exportTo",
            );
        }
    }
    if seen.contains("*") && export_to.len() > 1 {
        out.error(
            path,
            "cannot have both public (*) and non-public exportTo values for a resource",
        );
    }
    if seen.contains("~") && export_to.len() > 1 {
        out.error(
            path,
            "cannot export service entry to no one (~) and someone",
        );
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Policy targets

/// The group/kinds a policy `targetRef` may point at (core Service, ServiceEntry, Gateway API Gateway/GatewayClass).
pub const ALLOWED_TARGET_KINDS: &[(&str, &str)] = &[
    ("", "Service"),
    ("networking.istio.io", "ServiceEntry"),
    ("gateway.networking.k8s.io", "Gateway"),
    ("gateway.networking.k8s.io", "GatewayClass"),
];

/// Validates one policy target reference: name required, no namespace, and an allowed group/kind. Mirrors Istio's
/// `validatePolicyTargetReference`; its first two texts are Istio's, the third names the kinds in words where
/// Istio prints its Go list of group/version/kinds.
pub fn validate_target_ref(
    group: &str,
    kind: &str,
    name: &str,
    namespace: &str,
    path: &str,
    out: &mut Findings,
) {
    if name.is_empty() {
        out.error(path, "targetRef name must be set");
    }
    if !namespace.is_empty() {
        out.error(
            path,
            "targetRef namespace must not be set; cross namespace referencing is not supported",
        );
    }
    let group_norm = if group == "core" { "" } else { group };
    if !ALLOWED_TARGET_KINDS
        .iter()
        .any(|(g, k)| *g == group_norm && *k == kind)
    {
        out.error(
            path,
            format!(
                "targetRef must point at a Service, ServiceEntry, Gateway or GatewayClass, not {group}/{kind}"
            ),
        );
    }
}

/// Records an error at `path` when more than one of workload selector, `targetRef` and `targetRefs` is set.
/// Mirrors Istio's `validateOneOfSelectorType`, with its text.
pub fn validate_one_selector_kind(
    has_selector: bool,
    has_target_ref: bool,
    has_target_refs: bool,
    path: &str,
    out: &mut Findings,
) {
    let set =
        usize::from(has_selector) + usize::from(has_target_ref) + usize::from(has_target_refs);
    if set > 1 {
        out.error(
            path,
            "only one of targetRefs or workloadSelector can be set",
        );
    }
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP headers

/// Tells whether `name` is an RFC 7230 token (the characters allowed in a header name): Istio's
/// `validHeaderNameRegex` (`^[tchars]+$`).
pub fn is_header_token(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// HTTP/2 pseudo-headers that may be matched on.
pub const PSEUDO_HEADERS: &[&str] = &[":method", ":scheme", ":authority", ":path", ":status"];

/// Tells whether `name` is a JWT-claim routing header (`@request.auth.claims.a.b` or `@request.auth.claims[a][b]`,
/// the prefix in any case). Mirrors Istio's `jwt.ToRoutingClaim(name).Match` (`pkg/jwt/routing.go`).
pub fn is_jwt_claim_route(name: &str) -> bool {
    const PREFIX: &str = "@request.auth.claims";
    let Some(head) = name.get(..PREFIX.len()) else {
        return false;
    };
    if !head.eq_ignore_ascii_case(PREFIX) {
        return false;
    }
    let rest = &name[PREFIX.len()..];
    (rest.starts_with('.') && rest.len() > 1)
        || (rest.starts_with('[') && rest.ends_with(']') && rest.len() > 2)
}

/// Records Istio's header-name errors at `path`: empty, or not accepted by `valid` (the texts every Istio
/// `Validate*HeaderName` function shares).
fn validate_header_name_with(
    name: &str,
    valid: impl Fn(&str) -> bool,
    path: &str,
    out: &mut Findings,
) {
    if name.is_empty() {
        out.error(path, "header name cannot be empty");
    } else if !valid(name) {
        out.error(
            path,
            format!("header name {name} is not a valid header name"),
        );
    }
}

/// Validates a header name used in a match: a token, a pseudo-header, or a JWT-claim route. Mirrors Istio's
/// `ValidateHTTPHeaderNameOrJwtClaimRoute`, with its error texts.
pub fn validate_match_header_name(name: &str, path: &str, out: &mut Findings) {
    let valid =
        |n: &str| is_jwt_claim_route(n) || PSEUDO_HEADERS.contains(&n) || is_header_token(n);
    validate_header_name_with(name, valid, path, out);
}

/// Validates a header name in a CORS policy: `*` or a token. Mirrors Istio's `ValidateCORSHTTPHeaderName`.
pub fn validate_cors_header_name(name: &str, path: &str, out: &mut Findings) {
    validate_header_name_with(name, |n| n == "*" || is_header_token(n), path, out);
}

/// Validates a header name under Istio's strict rule (letters, digits, `-`, `_`), used for claim-to-header
/// output. Mirrors Istio's `ValidateStrictHTTPHeaderName` (`validStrictHeaderNameRegex`).
pub fn validate_strict_header_name(name: &str, path: &str, out: &mut Findings) {
    let valid = |n: &str| {
        n.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    };
    validate_header_name_with(name, valid, path, out);
}

/// Validates a header name for an HTTP probe (letters, digits, `-`; as Kubernetes). Mirrors Istio's
/// `ValidateProbeHeaderName` (`validProbeHeaderNameRegex`).
pub fn validate_probe_header_name(name: &str, path: &str, out: &mut Findings) {
    let valid = |n: &str| n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-');
    validate_header_name_with(name, valid, path, out);
}

/// Tells whether a header is internal to the proxy (a `:` pseudo-header or `host`). Istio's `isInternalHeader`.
pub fn is_internal_header(name: &str) -> bool {
    name.starts_with(':') || name.eq_ignore_ascii_case("host")
}

/// Tells whether a header is the authority (`:authority` or `host`). Istio's `isAuthorityHeader`.
pub fn is_authority_header(name: &str) -> bool {
    name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")
}

/// Validates a header name that is set or added on requests: pseudo-headers are refused except the authority.
/// Mirrors Istio's `ValidateHTTPHeaderWithAuthorityOperationName`, with its error texts.
pub fn validate_request_header_set_name(name: &str, path: &str, out: &mut Findings) {
    if name.is_empty() {
        out.error(path, "header name cannot be empty");
    } else if is_internal_header(name) && !is_authority_header(name) {
        out.error(path, reserved_header_error(name));
    }
}

/// Validates a header name that is removed from requests or changed on responses: no pseudo-headers, no `host`.
/// Mirrors Istio's `ValidateHTTPHeaderOperationName`, with its error texts.
pub fn validate_header_operation_name(name: &str, path: &str, out: &mut Findings) {
    if name.is_empty() {
        out.error(path, "header name cannot be empty");
    } else if name.eq_ignore_ascii_case("host") {
        out.error(
            path,
            format!("invalid header {}: cannot set Host header", go_quote(name)),
        );
    } else if name.starts_with(':') {
        out.error(path, reserved_header_error(name));
    }
}

/// Istio's text for a header operation on a `:` pseudo-header.
fn reserved_header_error(name: &str) -> String {
    format!(
        "invalid header {}: header cannot have \":\" prefix",
        go_quote(name)
    )
}

/// Checks a header value as Envoy's header formatter reads it: no control characters other than tab, `%` either
/// doubled or opening a `%VAR%` / `%VAR(args)%` expression that is closed.
pub fn check_header_value(value: &str) -> Result<(), String> {
    if value.bytes().any(|c| (c < 0x20 && c != b'\t') || c == 0x7f) {
        return Err(format!(
            "header value {value:?} contains control characters"
        ));
    }
    #[derive(PartialEq)]
    enum St {
        Literal,
        VarName,
        ExpectArray,
        ExpectString,
        InString,
        ExpectDelimOrEnd,
        ExpectArgsEnd,
        ExpectVarEnd,
    }
    let b = value.as_bytes();
    let mut st = St::Literal;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match st {
            St::Literal => {
                if c == b'%' {
                    match b.get(i + 1) {
                        None => {
                            return Err(format!(
                                "header value {value:?} ends with an unescaped % (write %% for a literal %)"
                            ))
                        }
                        Some(b'%') => i += 1,
                        Some(_) => st = St::VarName,
                    }
                }
            }
            St::VarName => {
                if c == b'%' {
                    st = St::Literal;
                } else if c == b'(' {
                    st = St::ExpectArray;
                }
            }
            St::ExpectArray => {
                if c == b'[' {
                    st = St::ExpectString;
                } else if c != b' ' {
                    st = St::InString;
                }
            }
            St::ExpectDelimOrEnd => match c {
                b',' => st = St::ExpectString,
                b']' => st = St::ExpectArgsEnd,
                b' ' => {}
                _ => return Err(format!("header value {value:?}: expected ',' or ']'")),
            },
            St::ExpectString => {
                if c == b'"' {
                    st = St::InString;
                } else if c != b' ' {
                    return Err(format!("header value {value:?}: expected '\"'"));
                }
            }
            St::InString => match c {
                b'\\' => {
                    if i + 1 >= b.len() {
                        return Err(format!(
                            "header value {value:?}: unterminated backslash escape"
                        ));
                    }
                    i += 1;
                }
                b')' => st = St::ExpectVarEnd,
                b'"' => st = St::ExpectDelimOrEnd,
                _ => {}
            },
            St::ExpectArgsEnd => {
                if c == b')' {
                    st = St::ExpectVarEnd;
                } else if c != b' ' {
                    return Err(format!("header value {value:?}: expected ')'"));
                }
            }
            St::ExpectVarEnd => {
                if c == b'%' {
                    st = St::Literal;
                } else if c != b' ' {
                    return Err(format!("header value {value:?}: expected closing '%'"));
                }
            }
        }
        i += 1;
    }
    if st != St::Literal {
        return Err(format!(
            "header value {value:?} has an unterminated %VARIABLE% expression"
        ));
    }
    Ok(())
}

/// Records an error at `path` unless `value` is a valid Envoy header value.
pub fn validate_header_value(value: &str, path: &str, out: &mut Findings) {
    if let Err(e) = check_header_value(value) {
        out.error(path, e);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Metadata

/// Annotation that turns an AuthorizationPolicy into a dry run.
pub const DRY_RUN_ANNOTATION: &str = "istio.io/dry-run";
/// Annotation that makes the webhook reject the object (used to probe that validation works).
pub const ALWAYS_REJECT_ANNOTATION: &str = "internal.istio.io/webhook-always-reject";
/// Internal annotations users may not set (they would escalate privileges).
pub const INTERNAL_ANNOTATIONS: &[&str] = &[
    "internal.istio.io/parent-namespace",
    "internal.istio.io/parents",
];

/// Checks metadata rules every Istio kind shares (Istio's `validateMetadata`): `istio.io/dry-run` only on
/// AuthorizationPolicy with a boolean value (the policy validator checks the action), the always-reject
/// annotation rejects, and internal annotations are refused. ConfigMaps and Kubernetes kinds are skipped.
pub fn validate_metadata(kind: Kind, meta: &ObjectMeta, out: &mut Findings) {
    if matches!(
        kind,
        Kind::HigressConfig | Kind::MeshConfig | Kind::Service | Kind::EndpointSlice | Kind::Secret
    ) {
        return;
    }
    if !meta.name.is_empty() && !is_k8s_object_name(&meta.name) {
        out.error(
            "metadata.name",
            format!(
                "name {:?} must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.'; at most 253 characters)",
                meta.name
            ),
        );
    }
    if !meta.namespace.is_empty() && !is_k8s_namespace(&meta.namespace) {
        out.error(
            "metadata.namespace",
            format!(
                "namespace {:?} must be a lowercase RFC 1123 label",
                meta.namespace
            ),
        );
    }
    if let Some(value) = meta.annotations.get(DRY_RUN_ANNOTATION) {
        let path = format!("metadata.annotations.{DRY_RUN_ANNOTATION}");
        if kind != Kind::AuthorizationPolicy {
            out.error(
                path,
                format!("annotation {DRY_RUN_ANNOTATION} is only supported on AuthorizationPolicy; remove it"),
            );
        } else if !is_go_bool(value) {
            out.error(
                path,
                format!("annotation {DRY_RUN_ANNOTATION} must be a boolean, got {value:?}"),
            );
        }
    }
    if meta.annotations.contains_key(ALWAYS_REJECT_ANNOTATION) {
        out.error(
            format!("metadata.annotations.{ALWAYS_REJECT_ANNOTATION}"),
            format!("annotation {ALWAYS_REJECT_ANNOTATION} is set: the object is always rejected"),
        );
    }
    for internal in INTERNAL_ANNOTATIONS {
        if meta.annotations.contains_key(*internal) {
            out.error(
                format!("metadata.annotations.{internal}"),
                format!("annotation {internal} is internal and may not be set by users"),
            );
        }
    }
}

/// Tells whether `s` is a valid Kubernetes object name: a lowercase RFC 1123 subdomain of 1–253 characters.
/// Mirrors apimachinery's `IsDNS1123Subdomain`: dot-separated parts of `[a-z0-9-]`, each starting and ending
/// alphanumeric, with **no** 63-character limit per part (that limit belongs to `IsDNS1123Label`).
pub fn is_k8s_object_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty()
                && alnum(&b[0])
                && alnum(&b[b.len() - 1])
                && b.iter().all(|c| alnum(c) || *c == b'-')
        })
}

/// Tells whether `s` is a lowercase RFC 1123 label (Kubernetes namespace names). Mirrors apimachinery's
/// `IsDNS1123Label` (at most 63 characters of `[a-z0-9-]`, starting and ending alphanumeric).
pub fn is_k8s_namespace(s: &str) -> bool {
    is_dns1123_label(s) && !s.bytes().any(|c| c.is_ascii_uppercase())
}

/// Tells whether `s` is a boolean as Go's strconv.ParseBool reads it.
pub fn is_go_bool(s: &str) -> bool {
    matches!(
        s,
        "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false" | "False"
    )
}

// ---------------------------------------------------------------------------------------------------------------
// Policy attachment (security, telemetry and extensions kinds; section owned by istio-sec)

/// Most `targetRefs` entries a policy may list (the CRD's `maxItems`).
pub const MAX_TARGET_REFS: usize = 16;

/// Validates how a policy attaches to workloads: at most one of `selector`, `targetRef` and `targetRefs`, the
/// selector's labels ([`validate_workload_selector`], plus the CRD's 63-character value limit), and every
/// target reference ([`validate_target_ref`]). Paths are under `spec`.
pub fn validate_policy_attachment(
    selector: Option<&TypeWorkloadSelector>,
    target_ref: Option<&PolicyTargetReference>,
    target_refs: &[PolicyTargetReference],
    out: &mut Findings,
) {
    validate_one_selector_kind(
        selector.is_some(),
        target_ref.is_some(),
        !target_refs.is_empty(),
        "spec",
        out,
    );
    if let Some(selector) = selector {
        let path = "spec.selector.matchLabels";
        validate_workload_selector(&selector.match_labels, path, out);
        for (key, value) in &selector.match_labels {
            if value.len() > DNS1123_LABEL_MAX {
                out.error(
                    format!("{path}.{key}"),
                    "selector label value is longer than 63 characters",
                );
            }
        }
    }
    if let Some(r) = target_ref {
        validate_policy_target_ref(r, "spec.targetRef", out);
    }
    if target_refs.len() > MAX_TARGET_REFS {
        out.error(
            "spec.targetRefs",
            format!(
                "at most {MAX_TARGET_REFS} targetRefs may be listed, found {}",
                target_refs.len()
            ),
        );
    }
    for (i, r) in target_refs.iter().enumerate() {
        validate_policy_target_ref(r, &format!("spec.targetRefs[{i}]"), out);
    }
}

fn validate_policy_target_ref(r: &PolicyTargetReference, path: &str, out: &mut Findings) {
    validate_target_ref(&r.group, &r.kind, &r.name, &r.namespace, path, out);
    if r.name.len() > 253 {
        out.error(path, "targetRef name is longer than 253 characters");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(f: impl FnOnce(&mut Findings)) -> Vec<String> {
        let mut out = Findings::default();
        f(&mut out);
        out.0
            .iter()
            .filter(|f| f.is_error())
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect()
    }

    #[test]
    fn empty_regex() {
        let errs = errors_of(|o| validate_regex("", "spec.x", o));
        assert_eq!(errs, vec!["spec.x: regex must not be empty".to_string()]);
    }

    #[test]
    fn field_paths_grow_and_shrink() {
        let mut p = FieldPath::new("spec");
        {
            let mut http = p.field("http");
            let mut first = http.index(0);
            let route = first.field("route");
            assert_eq!(route.as_str(), "spec.http[0].route");
        }
        assert_eq!(p.as_str(), "spec");
        assert_eq!(p.child("hosts"), "spec.hosts");
        assert_eq!(FieldPath::new("").field("a").as_str(), "a");
    }

    #[test]
    fn dns_labels() {
        // Object names: subdomains without a per-part limit (apimachinery IsDNS1123Subdomain).
        assert!(is_k8s_object_name(&"a".repeat(66)));
        assert!(is_k8s_object_name(&"a".repeat(253)));
        assert!(!is_k8s_object_name(&"a".repeat(254)));
        assert!(is_k8s_object_name("a.b-c.0"));
        for bad in ["", "A", "a.", ".a", "a..b", "-a", "a-", "a_b", "a.-b"] {
            assert!(!is_k8s_object_name(bad), "{bad:?}");
        }
        assert!(is_dns1123_label("foo-1"));
        assert!(is_dns1123_label("Foo"));
        assert!(!is_dns1123_label("-foo"));
        assert!(!is_dns1123_label("foo-"));
        assert!(!is_dns1123_label(""));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_wildcard_dns1123_label("*"));
        assert!(is_wildcard_dns1123_label("*foo"));
        assert!(is_wildcard_dns1123_label("*-foo"));
        assert!(!is_wildcard_dns1123_label("f*o"));
    }

    #[test]
    fn fqdns() {
        assert!(check_fqdn("istio.io").is_ok());
        assert!(check_fqdn("istio.io.").is_ok());
        assert!(check_fqdn("reviews").is_ok());
        assert!(check_fqdn("1.2.3.4").is_err()); // all-numeric TLD
        assert!(check_fqdn("").is_err());
        assert!(check_fqdn("a..b").is_err());
        assert!(check_fqdn(&format!("{}.com", "a.".repeat(130))).is_err());
        assert!(check_fqdn("*.istio.io").is_err());
    }

    #[test]
    fn subset_names_use_istios_texts() {
        assert_eq!(check_subset_name("v1"), Ok(()));
        assert_eq!(
            check_subset_name("").unwrap_err(),
            "subset name cannot be empty"
        );
        assert_eq!(
            check_subset_name("2.0.0").unwrap_err(),
            "subset name is invalid: 2.0.0"
        );
    }

    #[test]
    fn wildcard_domains() {
        // `*.` passes as in Istio's ValidateWildcardDomain: the empty rest counts as a trailing dot.
        for ok in [
            "*",
            "*.istio.io",
            "*istio.io",
            "istio.io",
            "*.bar.com.",
            "*.",
        ] {
            assert!(check_wildcard_domain(ok).is_ok(), "{ok}");
        }
        for bad in ["", "istio.*.io", "foo.*", "**.com", "a b.com"] {
            assert!(check_wildcard_domain(bad).is_err(), "{bad}");
        }
        // Istio's texts, and Go's Atoi for the all-numeric top-level label (a sign counts, 64 bits at most).
        assert_eq!(
            check_wildcard_domain("a.*.io").unwrap_err(),
            r#"domain name "*.io" invalid (label "*" invalid)"#
        );
        assert_eq!(
            check_fqdn("a.+5").unwrap_err(),
            r#"domain name "a.+5" invalid (top level domain "+5" cannot be all-numeric)"#
        );
        assert!(check_fqdn("a.99999999999999999999").is_ok());
        assert_eq!(check_fqdn("").unwrap_err(), "empty domain name not allowed");
        assert!(check_partial_wildcard("*.com").is_ok());
        assert!(check_partial_wildcard("*").is_ok());
        assert!(check_partial_wildcard("*foo.com").is_err());
    }

    #[test]
    fn values_are_quoted_as_go_quotes_them() {
        assert_eq!(go_quote("a.b"), r#""a.b""#);
        assert_eq!(go_quote("say \"hi\"\\"), r#""say \"hi\"\\""#);
        assert_eq!(
            go_quote("\n\t\r\u{7}\u{8}\u{b}\u{c}"),
            r#""\n\t\r\a\b\v\f""#
        );
        assert_eq!(go_quote("\u{1}\u{7f}"), r#""\x01\x7f""#);
        assert_eq!(go_quote("héllo 日本"), r#""héllo 日本""#);
        assert_eq!(go_quote("\u{a0}\u{200b}\u{85}"), r#""\u00a0\u200b\u0085""#);
        assert_eq!(go_quote("\u{f0000}"), r#""\U000f0000""#);
    }

    #[test]
    fn cidr_prefix_lengths_follow_go() {
        assert!(check_ip_or_cidr("10.0.0.0/8").is_ok());
        assert!(check_ip_or_cidr("10.0.0.0/0").is_ok());
        assert_eq!(
            check_ip_or_cidr("10.0.0.0/08"),
            Err("10.0.0.0/08 is not a valid CIDR block".into())
        );
        assert_eq!(
            check_ip_or_cidr("10.0.0.0/8/8"),
            Err("10.0.0.0/8/8 is not a valid IP".into())
        );
        assert!(check_ip_or_cidr("::1/129").is_err());
    }

    #[test]
    fn namespace_slash_hosts() {
        let sidecar = |h: &str| {
            errors_of(|o| validate_namespace_slash_host(h, NsHostContext::Sidecar, "h", o))
        };
        let gateway = |h: &str| {
            errors_of(|o| validate_namespace_slash_host(h, NsHostContext::Gateway, "h", o))
        };
        assert!(sidecar("*/*").is_empty());
        assert!(sidecar("./foo.com").is_empty());
        // A sidecar's namespace may be `~`-prefixed to exclude it (Istio strips the `~` before checking).
        assert!(sidecar("~/*.foo.com").is_empty());
        assert!(sidecar("~ns/*.foo.com").is_empty());
        assert!(sidecar("~*/*.foo.com").is_empty());
        assert_eq!(
            sidecar("~Bad_ns/*.foo.com"),
            [r#"h: invalid namespace value "~Bad_ns" in sidecar"#]
        );
        assert_eq!(
            gateway("~/*.foo.com"),
            [r#"h: invalid namespace value "~" in gateway"#]
        );
        assert!(!sidecar("foo.com").is_empty());
        assert!(!sidecar("ns/foo").is_empty()); // short name
        assert!(!sidecar("ns/*foo.com").is_empty()); // partial wildcard
        assert!(!sidecar("Bad_ns/foo.com").is_empty());
        assert!(gateway("foo.com").is_empty());
        assert!(gateway("1.2.3.4").is_empty());
        assert!(gateway("*").is_empty());
        assert!(!gateway("~/foo.com").is_empty());
        assert!(errors_of(|o| validate_namespace_slash_host(
            "~/foo.com",
            NsHostContext::GatewayApi,
            "h",
            o
        ))
        .is_empty());
        assert!(!gateway("ns/").is_empty());
    }

    #[test]
    fn addresses() {
        assert!(check_ip_or_cidr("10.0.0.0/8").is_ok());
        assert!(check_ip_or_cidr("2001:db8::/32").is_ok());
        assert!(check_ip_or_cidr("1.2.3.4").is_ok());
        assert!(check_ip_or_cidr("1.2.3.4/33").is_err());
        assert!(check_ip_or_cidr("1.2.3/8").is_err());
        assert!(check_ip_or_cidr("foo").is_err());
        assert!(check_ip_or_cidr("1.2.3.4/").is_err());
        assert!(check_port(1).is_ok() && check_port(65535).is_ok());
        assert!(check_port(0).is_err() && check_port(65536).is_err());
        assert!(check_unix_address("/var/run/x.sock").is_ok());
        assert!(check_unix_address("@abstract").is_ok());
        assert!(check_unix_address("relative").is_err());
        assert!(check_unix_address("/dir/").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_nanos("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration_nanos("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_duration_nanos("100ms"), Some(100_000_000));
        assert_eq!(parse_duration_nanos("0"), Some(0));
        assert_eq!(parse_duration_nanos(".5s"), Some(500_000_000));
        assert_eq!(parse_duration_nanos("-1s"), Some(-1_000_000_000));
        for bad in [
            "",
            "1",
            "s",
            "1x",
            "1.s.",
            "1e3s",
            "99999999999999999999999h",
        ] {
            assert_eq!(parse_duration_nanos(bad), None, "{bad}");
        }
        assert!(check_duration("1ms").is_ok());
        assert!(check_duration("3m").is_ok());
        assert!(check_duration("0s").is_err());
        assert!(check_duration("0.5ms").is_err());
        assert!(check_duration("1.0001s").is_err());
        assert!(check_duration("-5s").is_err());
    }

    #[test]
    fn percentages() {
        assert!(errors_of(|o| validate_percent(100, "p", o)).is_empty());
        assert_eq!(errors_of(|o| validate_percent(101, "p", o)).len(), 1);
        assert!(errors_of(|o| validate_fractional_percent(0.0, "p", o)).is_empty());
        assert!(errors_of(|o| validate_fractional_percent(0.0001, "p", o)).is_empty());
        assert_eq!(
            errors_of(|o| validate_fractional_percent(0.00001, "p", o)).len(),
            1
        );
        assert_eq!(
            errors_of(|o| validate_fractional_percent(100.5, "p", o)).len(),
            1
        );
    }

    #[test]
    fn labels() {
        assert!(check_label_key("app").is_ok());
        assert!(check_label_key("app.kubernetes.io/name").is_ok());
        assert!(check_label_key("a_b.c-d").is_ok());
        assert!(check_label_key("").is_err());
        assert!(check_label_key("/app").is_err());
        assert!(check_label_key("-app").is_err());
        assert!(check_label_key(&"a".repeat(64)).is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("v1.2_3").is_ok());
        assert!(check_label_value("bad value").is_err());
        let mut out = Findings::default();
        validate_workload_selector(&BTreeMap::new(), "sel", &mut out);
        assert!(!out.has_errors());
        assert_eq!(out.0.len(), 1);
        let sel: BTreeMap<String, String> = [("app".to_string(), "*".to_string())].into();
        assert_eq!(
            errors_of(|o| validate_workload_selector(&sel, "sel", o)).len(),
            1
        );
    }

    #[test]
    fn export_to() {
        let v = |list: &[&str], ctx| {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            errors_of(|o| validate_export_to("ns1", &list, ctx, "e", o))
        };
        use ExportToContext::*;
        assert!(v(&[".", "ns2"], Plain).is_empty());
        assert!(v(&["*"], Plain).is_empty());
        assert!(v(&["~"], ServiceEntry).is_empty());
        assert!(!v(&["~"], Plain).is_empty());
        assert!(!v(&[".", "ns1"], Plain).is_empty());
        assert!(!v(&["ns2", "ns2"], Plain).is_empty());
        assert!(!v(&["*", "ns2"], Plain).is_empty());
        assert!(!v(&["~", "ns2"], ServiceEntry).is_empty());
        assert!(!v(&["Bad_NS"], Plain).is_empty());
        assert!(v(&["."], DestinationRuleWithSelector).is_empty());
        assert!(!v(&["*"], DestinationRuleWithSelector).is_empty());
        assert!(!v(&[".", "ns2"], DestinationRuleWithSelector).is_empty());
    }

    #[test]
    fn target_refs() {
        let v = |g: &str, k: &str, n: &str, ns: &str| {
            errors_of(|o| validate_target_ref(g, k, n, ns, "t", o)).len()
        };
        assert_eq!(v("", "Service", "a", ""), 0);
        assert_eq!(v("gateway.networking.k8s.io", "Gateway", "a", ""), 0);
        assert_eq!(v("networking.istio.io", "ServiceEntry", "a", ""), 0);
        assert_eq!(v("", "Pod", "a", ""), 1);
        assert_eq!(v("", "Service", "", "other"), 2);
        assert_eq!(
            errors_of(|o| validate_one_selector_kind(true, false, true, "s", o)).len(),
            1
        );
    }

    #[test]
    fn headers() {
        assert!(is_header_token("x-foo_bar"));
        assert!(!is_header_token("x foo"));
        assert!(is_jwt_claim_route("@request.auth.claims.group"));
        assert!(is_jwt_claim_route("@request.auth.claims[a][b]"));
        assert!(!is_jwt_claim_route("@request.auth.claims"));
        assert!(errors_of(|o| validate_match_header_name(":authority", "h", o)).is_empty());
        assert!(!errors_of(|o| validate_match_header_name("a b", "h", o)).is_empty());
        assert!(errors_of(|o| validate_request_header_set_name("host", "h", o)).is_empty());
        assert!(!errors_of(|o| validate_request_header_set_name(":path", "h", o)).is_empty());
        assert!(!errors_of(|o| validate_header_operation_name("Host", "h", o)).is_empty());
        for ok in [
            "foo",
            "%HOSTNAME%",
            "100%%",
            "a %REQ(x-y)% b",
            "%DYNAMIC_METADATA([\"a\", \"b\"])%",
        ] {
            assert!(check_header_value(ok).is_ok(), "{ok}");
        }
        for bad in ["abc%", "%START_TIME%%", "%VAR(", "a\nb"] {
            assert!(check_header_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_rules() {
        let meta = |pairs: &[(&str, &str)]| ObjectMeta {
            name: "x".into(),
            annotations: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ObjectMeta::default()
        };
        let run = |kind, m: &ObjectMeta| errors_of(|o| validate_metadata(kind, m, o)).len();
        assert_eq!(run(Kind::VirtualService, &meta(&[])), 0);
        assert_eq!(
            run(Kind::VirtualService, &meta(&[(DRY_RUN_ANNOTATION, "true")])),
            1
        );
        assert_eq!(
            run(
                Kind::AuthorizationPolicy,
                &meta(&[(DRY_RUN_ANNOTATION, "true")])
            ),
            0
        );
        assert_eq!(
            run(
                Kind::AuthorizationPolicy,
                &meta(&[(DRY_RUN_ANNOTATION, "maybe")])
            ),
            1
        );
        assert_eq!(
            run(Kind::Gateway, &meta(&[(ALWAYS_REJECT_ANNOTATION, "")])),
            1
        );
        assert_eq!(
            run(Kind::Sidecar, &meta(&[("internal.istio.io/parents", "x")])),
            1
        );
        assert_eq!(
            run(Kind::Service, &meta(&[(ALWAYS_REJECT_ANNOTATION, "")])),
            0
        );
    }
}
