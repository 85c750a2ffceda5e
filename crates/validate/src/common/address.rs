//! Addresses and ports (pure): takes IPs, CIDRs, ports, port names, unix addresses, protocols and HTTP status codes,
//! yields Istio's verdicts and texts.

use std::net::IpAddr;

use super::host::is_dns1123_label;
use admitpilot_model::Findings;

/// Prefix of Unix domain socket bind addresses.
pub const UNIX_PREFIX: &str = "unix://";

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
