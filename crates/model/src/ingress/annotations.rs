//! Higress's Ingress annotations (pure): takes an Ingress's annotations and yields what they ask for
//! ([`Annotations`]), each invalid value (naming its key and why; Higress's parsers in
//! `pkg/ingress/kube/annotations` fail on the same values), the keys under the two prefixes Higress does not read
//! (typos), and the keys Higress reads that admitpilot does not enforce.
//!
//! A key is read under `nginx.ingress.kubernetes.io/` or `higress.io/`; when both are set, the nginx one wins
//! (Higress's `ParseXxxASAP`). Some keys exist only under `higress.io/` ([`KEYS`]). Higress ignores a value it
//! cannot parse; admitpilot reports it, so that the admission webhook can deny it.

use std::collections::BTreeMap;
use std::net::IpAddr;

/// The ingress-nginx prefix.
pub const NGINX: &str = "nginx.ingress.kubernetes.io/";
/// Higress's own prefix.
pub const HIGRESS: &str = "higress.io/";

/// Under which prefixes Higress reads a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefixes {
    /// Both; the nginx one wins (`ParseXxxASAP`).
    Both,
    /// Only `higress.io/` (`ParseXxxForHigress`).
    Higress,
}

/// Whether admitpilot enforces a key Higress reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Enforced on the gateway.
    Enforced,
    /// Not enforced; the text says why (it becomes a warning).
    Not(&'static str),
}

use Prefixes::{Both, Higress};
use Support::{Enforced, Not};

const FORK_ONLY: &str = "it needs Envoy extensions only Higress's Envoy fork has";
const DOWNSTREAM_TLS: &str =
    "admitpilot does not apply per-host TLS settings from Ingress annotations yet";
const UPSTREAM_TLS: &str =
    "admitpilot does not configure upstream TLS certificates from Ingress annotations yet";

/// Every key Higress's annotation parsers read (`pkg/ingress/kube/annotations/*.go`), with its prefixes and
/// whether admitpilot enforces it.
pub const KEYS: &[(&str, Prefixes, Support)] = &[
    // rewrite.go
    ("rewrite-target", Both, Enforced),
    ("use-regex", Both, Enforced),
    ("full-path-regex", Higress, Enforced),
    ("upstream-vhost", Both, Enforced),
    ("rewrite-path", Higress, Enforced),
    // redirect.go
    ("app-root", Both, Enforced),
    ("temporal-redirect", Both, Enforced),
    ("permanent-redirect", Both, Enforced),
    ("permanent-redirect-code", Both, Enforced),
    ("ssl-redirect", Both, Enforced),
    ("force-ssl-redirect", Both, Enforced),
    // canary.go
    ("canary", Both, Enforced),
    ("canary-by-header", Both, Enforced),
    ("canary-by-header-value", Both, Enforced),
    ("canary-by-header-pattern", Both, Enforced),
    ("canary-by-cookie", Both, Enforced),
    ("canary-weight", Both, Enforced),
    ("canary-weight-total", Both, Enforced),
    // cors.go
    ("enable-cors", Both, Enforced),
    ("cors-allow-origin", Both, Enforced),
    ("cors-allow-methods", Both, Enforced),
    ("cors-allow-headers", Both, Enforced),
    ("cors-expose-headers", Both, Enforced),
    ("cors-allow-credentials", Both, Enforced),
    ("cors-max-age", Both, Enforced),
    // upstreamtls.go
    ("backend-protocol", Both, Enforced),
    ("proxy-ssl-secret", Both, Not(UPSTREAM_TLS)),
    ("proxy-ssl-verify", Both, Not(UPSTREAM_TLS)),
    ("proxy-ssl-name", Both, Not(UPSTREAM_TLS)),
    ("proxy-ssl-server-name", Both, Not(UPSTREAM_TLS)),
    // downstreamtls.go
    ("auth-tls-secret", Both, Not(DOWNSTREAM_TLS)),
    ("ssl-cipher", Both, Not(DOWNSTREAM_TLS)),
    ("tls-min-protocol-version", Both, Not(DOWNSTREAM_TLS)),
    ("tls-max-protocol-version", Both, Not(DOWNSTREAM_TLS)),
    // ip_access_control.go
    ("whitelist-source-range", Both, Enforced),
    // timeout.go
    ("timeout", Higress, Enforced),
    // retry.go
    ("proxy-next-upstream-tries", Both, Enforced),
    ("proxy-next-upstream-timeout", Both, Enforced),
    ("proxy-next-upstream", Both, Enforced),
    // loadbalance.go
    ("load-balance", Both, Enforced),
    ("upstream-hash-by", Both, Enforced),
    ("affinity", Both, Enforced),
    (
        "affinity-mode",
        Both,
        Not("Higress defines it but never reads it"),
    ),
    (
        "affinity-canary-behavior",
        Both,
        Not("Higress defines it but never reads it"),
    ),
    ("session-cookie-name", Both, Enforced),
    ("session-cookie-path", Both, Enforced),
    ("session-cookie-max-age", Both, Enforced),
    ("session-cookie-expires", Both, Enforced),
    ("mcp-sse-stateful-param-name", Both, Not(FORK_ONLY)),
    // local_rate_limit.go
    (
        "route-limit-rpm",
        Higress,
        Not("admitpilot does not build per-route local rate limits yet"),
    ),
    (
        "route-limit-rps",
        Higress,
        Not("admitpilot does not build per-route local rate limits yet"),
    ),
    (
        "route-limit-burst-multiplier",
        Higress,
        Not("admitpilot does not build per-route local rate limits yet"),
    ),
    // default_backend.go (fallback)
    ("default-backend", Both, Enforced),
    ("custom-http-errors", Both, Not(FORK_ONLY)),
    // auth.go
    (
        "auth-type",
        Both,
        Not("Higress 2 no longer supports it (use the basic-auth Wasm plugin)"),
    ),
    (
        "auth-secret",
        Both,
        Not("Higress 2 no longer supports it (use the basic-auth Wasm plugin)"),
    ),
    (
        "auth-secret-type",
        Both,
        Not("Higress defines it but never reads it"),
    ),
    (
        "auth-realm",
        Both,
        Not("Higress defines it but never reads it"),
    ),
    // mirror.go
    ("mirror-target-service", Both, Enforced),
    ("mirror-percentage", Both, Enforced),
    (
        "mirror-target-fqdn",
        Both,
        Not("admitpilot mirrors to Services only (mirror-target-service)"),
    ),
    (
        "mirror-target-fqdn-port",
        Both,
        Not("admitpilot mirrors to Services only (mirror-target-service)"),
    ),
    // destination.go, http2rpc.go, mcp server
    (
        "destination",
        Higress,
        Not("McpBridge destinations are not served from Ingress by admitpilot"),
    ),
    (
        "rpc-destination-name",
        Higress,
        Not("http2rpc from Ingress is not served by admitpilot"),
    ),
    ("ignore-path-case", Both, Enforced),
    // match.go (the header and query keys are matched by prefix, see MATCH_KINDS)
    ("match-method", Higress, Enforced),
    // header_control.go
    ("request-header-control-add", Higress, Enforced),
    ("request-header-control-update", Higress, Enforced),
    ("request-header-control-remove", Higress, Enforced),
    ("response-header-control-add", Higress, Enforced),
    ("response-header-control-update", Higress, Enforced),
    ("response-header-control-remove", Higress, Enforced),
];

/// Where a matching annotation looks (`match.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchTarget {
    /// A request header (`…-match-header-<name>`).
    Header,
    /// A pseudo header, `:<name>` (`…-match-pseudo-header-<name>`).
    PseudoHeader,
    /// A query parameter (`…-match-query-<name>`).
    Query,
}

/// How a matching annotation compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchKind {
    /// `exact-…`.
    Exact,
    /// `regex-…` (RE2, whole value).
    Regex,
    /// `prefix-…`.
    Prefix,
}

/// One `higress.io/{exact|regex|prefix}-match-{header|pseudo-header|query}-<name>` annotation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MatchRule {
    /// Header, pseudo header or query parameter.
    pub target: MatchTarget,
    /// The name (for a pseudo header, without the colon).
    pub name: String,
    /// How the value compares.
    pub kind: MatchKind,
    /// The value.
    pub value: String,
}

/// A redirect the route answers with instead of proxying (`redirect.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// `temporal-redirect` (302) or `permanent-redirect` (301 or `permanent-redirect-code`): to the URL's scheme,
    /// host and path; an empty path keeps the request's.
    Url {
        /// `http` or `https`.
        scheme: String,
        /// Host (and port) of the URL.
        authority: String,
        /// The path; empty keeps the request's.
        path: String,
        /// The status code.
        code: u32,
    },
    /// `ssl-redirect` / `force-ssl-redirect`: to https, code 308.
    Https,
}

/// Which requests a canary Ingress takes (`canary.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Canary {
    /// A header: `always` (no value or pattern), `always` or the value (a regex), or a value containing the
    /// pattern.
    Header {
        /// The header.
        name: String,
        /// `canary-by-header-value`.
        value: Option<String>,
        /// `canary-by-header-pattern`.
        pattern: Option<String>,
    },
    /// A cookie whose value is `always`.
    Cookie(String),
    /// A share of the main route's requests: `weight` of `total`.
    Weight {
        /// `canary-weight`.
        weight: u32,
        /// `canary-weight-total` (100).
        total: u32,
    },
}

/// `enable-cors` and the `cors-*` keys (`cors.go`), defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cors {
    /// Allowed origins: `*`, exact origins, or `scheme://*.host` wildcards.
    pub allow_origin: Vec<String>,
    /// Allowed methods.
    pub allow_methods: Vec<String>,
    /// Allowed request headers.
    pub allow_headers: Vec<String>,
    /// Headers exposed to the page.
    pub expose_headers: Vec<String>,
    /// Whether credentials are allowed.
    pub allow_credentials: bool,
    /// Preflight cache time, seconds.
    pub max_age: u32,
}

/// `backend-protocol` values other than HTTP (`upstreamtls.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendProtocol {
    /// HTTP/1.1 (the default).
    Http,
    /// HTTP/2 without TLS.
    Http2,
    /// HTTP over TLS.
    Https,
    /// gRPC (HTTP/2 without TLS).
    Grpc,
    /// gRPC over TLS.
    Grpcs,
}

/// `proxy-next-upstream*` (`retry.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Attempts; 0 turns retries off.
    pub attempts: u32,
    /// Per-try timeout, seconds; 0 for none.
    pub per_try_timeout: u32,
    /// Istio `retryOn`: `5xx`, then retriable status codes.
    pub retry_on: String,
}

/// `load-balance`, `upstream-hash-by` and cookie affinity (`loadbalance.go`), in that precedence reversed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadBalance {
    /// Istio's simple load balancers: `ROUND_ROBIN`, `LEAST_CONN`, `RANDOM`, `LEAST_REQUEST`.
    Simple(String),
    /// Consistent hash of a cookie, which the gateway sets when missing.
    Cookie {
        /// `session-cookie-name` (`INGRESSCOOKIE`).
        name: String,
        /// `session-cookie-path` (`/`).
        path: String,
        /// `session-cookie-max-age`, else `session-cookie-expires`, seconds (0: a session cookie).
        ttl: u32,
    },
    /// Consistent hash of the client address (`$remote_addr`).
    SourceIp,
    /// Consistent hash of a request header (`$request_uri` is `:path`, `$host` `:authority`, `$http_x` `x`).
    Header(String),
    /// Consistent hash of a query parameter (`$arg_x`).
    Query(String),
}

/// A Service an annotation names: `[namespace/]name[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    /// Namespace (the Ingress's when not given).
    pub namespace: Option<String>,
    /// Service name.
    pub name: String,
    /// Port; the Service's first port when not given.
    pub port: Option<u32>,
}

/// `mirror-target-service` and `mirror-percentage` (`mirror.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// The Service mirrored to.
    pub service: ServiceRef,
    /// Share of requests mirrored; `None` for all.
    pub percentage: Option<u32>,
}

/// Header changes (`header_control.go`): `add` appends, `set` replaces (Higress's `update`), `remove` deletes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderControl {
    /// Headers appended.
    pub add: Vec<(String, String)>,
    /// Headers replaced.
    pub set: Vec<(String, String)>,
    /// Headers removed.
    pub remove: Vec<String>,
}

impl HeaderControl {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.set.is_empty() && self.remove.is_empty()
    }
}

/// What an Ingress's annotations ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations {
    /// `rewrite-target`, with `$n` turned into RE2's `\n`.
    pub rewrite_target: Option<String>,
    /// `use-regex`: paths are regexes matched from the start.
    pub use_regex: bool,
    /// `higress.io/full-path-regex`: paths are regexes matching the whole path.
    pub full_path_regex: bool,
    /// `upstream-vhost`: the Host sent upstream.
    pub upstream_vhost: Option<String>,
    /// `higress.io/rewrite-path`: the matched prefix replaced by this.
    pub rewrite_path: Option<String>,
    /// A redirect instead of proxying.
    pub redirect: Option<Redirect>,
    /// `app-root`: `/` redirects (302) here.
    pub app_root: Option<String>,
    /// The Ingress is a canary of the Ingress with the same host and path.
    pub canary: Option<Canary>,
    /// CORS, when `enable-cors` is true.
    pub cors: Option<Cors>,
    /// `backend-protocol`.
    pub backend_protocol: Option<BackendProtocol>,
    /// `whitelist-source-range`: client CIDRs allowed; `None` allows every client.
    pub whitelist: Option<Vec<String>>,
    /// `higress.io/timeout`, seconds.
    pub timeout: Option<u32>,
    /// Retries.
    pub retry: Option<Retry>,
    /// Load balancing of the backends.
    pub load_balance: Option<LoadBalance>,
    /// Mirroring.
    pub mirror: Option<Mirror>,
    /// Request header changes.
    pub request_headers: HeaderControl,
    /// Response header changes.
    pub response_headers: HeaderControl,
    /// `default-backend`: the Service that answers when a backend Service is missing or has no endpoints.
    pub default_backend: Option<ServiceRef>,
    /// `ignore-path-case`.
    pub ignore_path_case: bool,
    /// `higress.io/match-method`.
    pub match_methods: Vec<String>,
    /// `higress.io/*-match-*` header, pseudo-header and query matches.
    pub matches: Vec<MatchRule>,
}

/// An annotation value that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationError {
    /// The full key.
    pub key: String,
    /// Why, in Higress's words where it has them.
    pub message: String,
}

/// A key under one of the two prefixes admitpilot will not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationWarning {
    /// The full key.
    pub key: String,
    /// What happens to it.
    pub message: String,
}

/// The outcome of reading an Ingress's annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// What they ask for (invalid values left out).
    pub annotations: Annotations,
    /// Invalid values.
    pub errors: Vec<AnnotationError>,
    /// Keys Higress does not read, and keys admitpilot does not enforce.
    pub warnings: Vec<AnnotationWarning>,
}

/// The methods `match-method` accepts (`match.go`).
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

const CORS_DEFAULT_METHODS: &str = "GET, PUT, POST, DELETE, PATCH, OPTIONS";
const CORS_DEFAULT_HEADERS: &str = "DNT,X-CustomHeader,Keep-Alive,User-Agent,X-Requested-With,\
If-Modified-Since,Cache-Control,Content-Type,Authorization";
const CORS_DEFAULT_MAX_AGE: u32 = 1_728_000;

/// Reads annotation values, recording the errors.
struct Reader<'a> {
    /// The values under the two prefixes, by name without prefix: (nginx's, higress's).
    values: BTreeMap<&'a str, (Option<&'a str>, Option<&'a str>)>,
    errors: Vec<AnnotationError>,
}

impl<'a> Reader<'a> {
    fn new(annotations: &'a BTreeMap<String, String>) -> Self {
        let mut values: BTreeMap<&str, (Option<&str>, Option<&str>)> = BTreeMap::new();
        for (key, value) in annotations {
            if let Some(name) = key.strip_prefix(NGINX) {
                values.entry(name).or_default().0 = Some(value);
            } else if let Some(name) = key.strip_prefix(HIGRESS) {
                values.entry(name).or_default().1 = Some(value);
            }
        }
        Reader {
            values,
            errors: Vec::new(),
        }
    }

    /// The values a name is set to under the prefixes it is read with, nginx first, with their prefixes.
    fn values(&self, name: &str) -> [(&'static str, Option<&'a str>); 2] {
        let (nginx, higress) = self.values.get(name).copied().unwrap_or_default();
        let higress_only = KEYS
            .iter()
            .any(|(key, prefixes, _)| *key == name && *prefixes == Higress);
        [(NGINX, nginx.filter(|_| !higress_only)), (HIGRESS, higress)]
    }

    /// Whether the name is set under a prefix it is read with (Higress's `HasASAP`).
    fn has(&self, name: &str) -> bool {
        self.values(name).iter().any(|(_, v)| v.is_some())
    }

    /// Parses every value the name is set to, recording each error; the first that parses wins (nginx first).
    fn read<T>(&mut self, name: &str, parse: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        let mut winner = None;
        for (prefix, raw) in self.values(name) {
            let Some(raw) = raw else {
                continue;
            };
            match parse(raw.trim()) {
                Ok(value) => {
                    if winner.is_none() {
                        winner = Some(value);
                    }
                }
                Err(message) => self.errors.push(AnnotationError {
                    key: format!("{prefix}{name}"),
                    message: format!("invalid annotation value {raw:?}: {message}"),
                }),
            }
        }
        winner
    }

    fn string(&mut self, name: &str) -> Option<String> {
        self.read(name, |v| {
            let text = v.lines().map(str::trim).collect::<Vec<_>>().join("\n");
            if text.is_empty() {
                Err("it is empty".into())
            } else {
                Ok(text)
            }
        })
    }

    fn bool(&mut self, name: &str) -> Option<bool> {
        self.read(name, |v| {
            crate::parse_go_bool(v).ok_or_else(|| "not a boolean (true or false)".to_string())
        })
    }

    fn uint(&mut self, name: &str, max: u32) -> Option<u32> {
        self.read(name, |v| match v.parse::<i64>() {
            Ok(n) if (0..=i64::from(max)).contains(&n) => {
                u32::try_from(n).map_err(|e| e.to_string())
            }
            Ok(_) => Err(format!("must be between 0 and {max}")),
            Err(_) => Err("not an integer".into()),
        })
    }
}

/// An absolute `http` or `https` URL split into scheme, authority and path (Higress's `isValidURL`).
fn parse_url(v: &str) -> Result<(String, String, String), String> {
    let (scheme, rest) = v
        .split_once("://")
        .ok_or_else(|| "only http and https are valid protocols (no scheme given)".to_string())?;
    if !matches!(scheme, "http" | "https") {
        return Err(format!(
            "only http and https are valid protocols ({scheme})"
        ));
    }
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    if authority.is_empty() || authority.contains(char::is_whitespace) {
        return Err("the URL has no valid host".into());
    }
    Ok((scheme.into(), authority.into(), path.into()))
}

/// `[namespace/]name[:port]` (Higress's `util.ParseServiceInfo`).
fn parse_service(v: &str, with_port: bool) -> Result<ServiceRef, String> {
    let (rest, port) = match v.rsplit_once(':') {
        Some((rest, port)) if with_port => {
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("port {port:?} is not a number from 1 to 65535"))?;
            (rest, Some(u32::from(port)))
        }
        _ => (v, None),
    };
    let (namespace, name) = match rest.split_once('/') {
        Some((ns, name)) => (Some(ns.to_string()), name),
        None => (None, rest),
    };
    let label = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    if !label(name) || namespace.as_deref().is_some_and(|ns| !label(ns)) {
        return Err(format!(
            "expected [namespace/]service{}, with DNS labels as names",
            if with_port { "[:port]" } else { "" }
        ));
    }
    Ok(ServiceRef {
        namespace,
        name: name.into(),
        port,
    })
}

/// A CIDR or address (`AddrStrToCidrRange`); an address becomes a /32 or /128.
fn parse_cidr(v: &str) -> Result<String, String> {
    let (address, bits) = match v.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (v, None),
    };
    let ip: IpAddr = address
        .parse()
        .map_err(|_| format!("{v:?} is not an IP address or CIDR"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let bits = match bits {
        Some(b) => b
            .parse::<u8>()
            .ok()
            .filter(|b| *b <= max)
            .ok_or_else(|| format!("{v:?} has an invalid prefix length"))?,
        None => max,
    };
    Ok(format!("{ip}/{bits}"))
}

/// A comma-separated list, trimmed; any `*` makes it `["*"]` (`cors.go`).
fn list(v: &str) -> Vec<String> {
    let items: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if items.iter().any(|i| i == "*") {
        vec!["*".into()]
    } else {
        items
    }
}

/// `name value` lines (`header_control.go`): split at the first whitespace, quotes around either stripped.
fn header_lines(v: &str) -> Result<Vec<(String, String)>, String> {
    let unquote = |s: &str| {
        let s = s.trim();
        s.strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
            .unwrap_or(s)
            .to_string()
    };
    v.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| match line.split_once(char::is_whitespace) {
            Some((name, value)) if !value.trim().is_empty() => {
                let name = unquote(name);
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                    return Err(format!("{name:?} is not a header name"));
                }
                Ok((name.to_ascii_lowercase(), unquote(value)))
            }
            _ => Err(format!(
                "Header format {line} is invalid. (one \"name value\" per line)"
            )),
        })
        .collect()
}

/// `proxy-next-upstream`'s tokens as Istio `retryOn` (`retry.go`); `None` for `off`.
fn retry_on(v: &str) -> Result<Option<String>, String> {
    let tokens: Vec<&str> = if v.contains(',') {
        v.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect()
    } else {
        v.split_whitespace().collect()
    };
    let mut conditions: Vec<String> = Vec::new();
    let mut push = |c: String| {
        if !conditions.contains(&c) {
            conditions.push(c);
        }
    };
    for token in tokens {
        match token {
            "off" => return Ok(None),
            "error" | "timeout" | "invalid_header" => push("5xx".into()),
            "non_idempotent" => {}
            _ => match token.strip_prefix("http_").map(str::parse::<u16>) {
                Some(Ok(code)) if (100..600).contains(&code) => push(code.to_string()),
                _ => {
                    return Err(format!(
                        "{token:?} is not one of error, timeout, invalid_header, http_<code>, non_idempotent, off"
                    ))
                }
            },
        }
    }
    Ok(Some(conditions.join(",")))
}

/// `upstream-hash-by` (`loadbalance.go`).
fn hash_by(v: &str) -> Result<LoadBalance, String> {
    match v {
        "$remote_addr" => Ok(LoadBalance::SourceIp),
        "$request_uri" => Ok(LoadBalance::Header(":path".into())),
        "$host" => Ok(LoadBalance::Header(":authority".into())),
        _ => {
            if let Some(h) = v.strip_prefix("$http_").filter(|h| !h.is_empty()) {
                Ok(LoadBalance::Header(h.to_ascii_lowercase()))
            } else if let Some(q) = v.strip_prefix("$arg_").filter(|q| !q.is_empty()) {
                Ok(LoadBalance::Query(q.into()))
            } else {
                Err(
                    "must be $remote_addr, $request_uri, $host, $http_<header> or $arg_<parameter>"
                        .into(),
                )
            }
        }
    }
}

/// Whether the annotations make the Ingress a canary (`canary: true` under either prefix), without reading the rest.
pub fn is_canary(annotations: &BTreeMap<String, String>) -> bool {
    [NGINX, HIGRESS].iter().any(|p| {
        annotations
            .get(&format!("{p}canary"))
            .and_then(|v| crate::parse_go_bool(v.trim()))
            == Some(true)
    })
}

/// Reads the annotations of one Ingress.
pub fn parse(annotations: &BTreeMap<String, String>) -> Parsed {
    let mut r = Reader::new(annotations);
    let mut out = Annotations {
        use_regex: r.bool("use-regex").unwrap_or(false),
        full_path_regex: r.bool("full-path-regex").unwrap_or(false),
        upstream_vhost: r.string("upstream-vhost"),
        rewrite_path: r.string("rewrite-path"),
        ignore_path_case: r.bool("ignore-path-case").unwrap_or(false),
        timeout: r.uint("timeout", 86_400 * 365),
        ..Annotations::default()
    };
    // rewrite.go convertToRE2: `$1` becomes `\1`.
    out.rewrite_target = r.string("rewrite-target").map(|t| {
        if t.as_bytes()
            .windows(2)
            .any(|w| w[0] == b'$' && w[1].is_ascii_digit())
        {
            t.replace('$', "\\")
        } else {
            t
        }
    });
    out.redirect = redirect(&mut r);
    out.app_root = r.read("app-root", |v| {
        if v.starts_with('/') {
            Ok(v.to_string())
        } else {
            Err("must be a path starting with /".into())
        }
    });
    out.canary = canary(&mut r);
    out.cors = cors(&mut r);
    out.backend_protocol = r.read("backend-protocol", |v| {
        match v.to_ascii_uppercase().as_str() {
            "HTTP" => Ok(BackendProtocol::Http),
            "HTTP2" => Ok(BackendProtocol::Http2),
            "HTTPS" => Ok(BackendProtocol::Https),
            "GRPC" => Ok(BackendProtocol::Grpc),
            "GRPCS" => Ok(BackendProtocol::Grpcs),
            _ => Err("Higress supports HTTP, HTTP2, HTTPS, GRPC and GRPCS".into()),
        }
    });
    out.whitelist = r
        .read("whitelist-source-range", |v| {
            // `*` allows every client only alone (Higress skips entries it cannot read, so `10.0.0.0/8,*` still
            // restricts to 10.0.0.0/8).
            let ranges = v
                .split(',')
                .map(str::trim)
                .filter(|i| !i.is_empty() && *i != "*")
                .map(parse_cidr)
                .collect::<Result<Vec<_>, _>>()?;
            Ok((!ranges.is_empty()).then_some(ranges))
        })
        .flatten();
    out.retry = retry(&mut r);
    out.load_balance = load_balance(&mut r);
    out.mirror = r
        .read("mirror-target-service", |v| parse_service(v, true))
        .map(|service| Mirror {
            service,
            percentage: None,
        });
    let percentage = r.uint("mirror-percentage", 100);
    if let Some(mirror) = &mut out.mirror {
        mirror.percentage = percentage.filter(|p| *p < 100);
    }
    out.request_headers = header_control(&mut r, "request");
    out.response_headers = header_control(&mut r, "response");
    out.default_backend = r.read("default-backend", |v| parse_service(v, false));
    out.match_methods = r
        .read("match-method", |v| {
            let mut methods: Vec<String> = Vec::new();
            for m in v.split_whitespace().map(str::to_ascii_uppercase) {
                if !METHODS.contains(&m.as_str()) {
                    return Err(format!("{m} is not one of {}", METHODS.join(" ")));
                }
                if !methods.contains(&m) {
                    methods.push(m);
                }
            }
            Ok(methods)
        })
        .unwrap_or_default();
    out.matches = match_rules(annotations, &mut r.errors);
    let warnings = warnings(annotations);
    Parsed {
        annotations: out,
        errors: r.errors,
        warnings,
    }
}

/// The redirect the keys of `redirect.go` ask for: a temporal, else a permanent URL, else https.
fn redirect(r: &mut Reader<'_>) -> Option<Redirect> {
    let url = |code: u32| {
        move |v: &str| {
            parse_url(v).map(|(scheme, authority, path)| Redirect::Url {
                scheme,
                authority,
                path,
                code,
            })
        }
    };
    let code = r
        .read("permanent-redirect-code", |v| match v.parse::<u32>() {
            Ok(c @ (301 | 302 | 303 | 307 | 308)) => Ok(c),
            _ => Err("must be 301, 302, 303, 307 or 308".into()),
        })
        .unwrap_or(301);
    let temporal = r.read("temporal-redirect", url(302));
    let permanent = r.read("permanent-redirect", url(code));
    let https = r.bool("ssl-redirect") == Some(true) || r.bool("force-ssl-redirect") == Some(true);
    temporal.or(permanent).or(https.then_some(Redirect::Https))
}

/// The canary the keys of `canary.go` describe, `None` unless `canary` is true.
fn canary(r: &mut Reader<'_>) -> Option<Canary> {
    let on = r.bool("canary") == Some(true);
    let header = r.string("canary-by-header");
    let value = r.string("canary-by-header-value");
    let pattern = r.string("canary-by-header-pattern");
    let cookie = r.string("canary-by-cookie");
    let weight = r.uint("canary-weight", u32::MAX / 2);
    let total = r
        .read("canary-weight-total", |v| match v.parse::<u32>() {
            Ok(t) if t > 0 => Ok(t),
            _ => Err("must be a positive integer".into()),
        })
        .unwrap_or(100);
    if !on {
        return None;
    }
    if let Some(w) = weight.filter(|w| *w > total) {
        r.errors.push(AnnotationError {
            key: format!("{NGINX}canary-weight"),
            message: format!(
                "invalid annotation value: the weight {w} is above canary-weight-total ({total})"
            ),
        });
    }
    match (header, cookie) {
        (Some(name), _) => Some(Canary::Header {
            name: name.to_ascii_lowercase(),
            value,
            pattern,
        }),
        (None, Some(cookie)) => Some(Canary::Cookie(cookie)),
        (None, None) => Some(Canary::Weight {
            weight: weight.unwrap_or(0).min(total),
            total,
        }),
    }
}

/// CORS with Higress's defaults, `None` unless `enable-cors` is true (`cors.go`).
fn cors(r: &mut Reader<'_>) -> Option<Cors> {
    let enabled = r.bool("enable-cors") == Some(true);
    let origin = r.read("cors-allow-origin", |v| {
        let items = list(v);
        for item in &items {
            if item != "*" {
                parse_url(item).map_err(|e| format!("origin {item:?}: {e}"))?;
            }
        }
        Ok(items)
    });
    let methods = r.string("cors-allow-methods").map(|v| list(&v));
    let headers = r.string("cors-allow-headers").map(|v| list(&v));
    let expose = r.string("cors-expose-headers").map(|v| list(&v));
    let credentials = r.bool("cors-allow-credentials");
    let max_age = r.uint("cors-max-age", u32::MAX / 2);
    enabled.then(|| Cors {
        allow_origin: origin.unwrap_or_else(|| vec!["*".into()]),
        allow_methods: methods.unwrap_or_else(|| list(CORS_DEFAULT_METHODS)),
        allow_headers: headers.unwrap_or_else(|| list(CORS_DEFAULT_HEADERS)),
        expose_headers: expose.unwrap_or_default(),
        allow_credentials: credentials.unwrap_or(true),
        max_age: max_age.unwrap_or(CORS_DEFAULT_MAX_AGE),
    })
}

/// Retries, when any `proxy-next-upstream*` key is set (`retry.go`).
fn retry(r: &mut Reader<'_>) -> Option<Retry> {
    let any = [
        "proxy-next-upstream-tries",
        "proxy-next-upstream-timeout",
        "proxy-next-upstream",
    ]
    .iter()
    .any(|k| r.has(k));
    let tries = r.uint("proxy-next-upstream-tries", 100);
    let per_try_timeout = r.uint("proxy-next-upstream-timeout", 86_400);
    let on = r.read("proxy-next-upstream", retry_on);
    any.then(|| match on {
        Some(None) => Retry {
            attempts: 0,
            per_try_timeout: 0,
            retry_on: String::new(),
        },
        on => Retry {
            attempts: tries.unwrap_or(3),
            per_try_timeout: per_try_timeout.unwrap_or(0),
            retry_on: on
                .flatten()
                .filter(|o| !o.is_empty())
                .unwrap_or_else(|| "5xx".into()),
        },
    })
}

/// Cookie affinity, else `upstream-hash-by`, else `load-balance` (`loadbalance.go`).
fn load_balance(r: &mut Reader<'_>) -> Option<LoadBalance> {
    let cookie = r.has("affinity") || r.has("session-cookie-name") || r.has("session-cookie-path");
    // Only checked: `affinity` (cookie) is implied by the cookie keys too.
    r.read("affinity", |v| {
        if v == "cookie" {
            Ok(())
        } else {
            Err("the only affinity is cookie".into())
        }
    });
    let name = r.string("session-cookie-name");
    let path = r.read("session-cookie-path", |v| {
        if v.starts_with('/') {
            Ok(v.to_string())
        } else {
            Err("must be a path starting with /".into())
        }
    });
    let max_age = r.uint("session-cookie-max-age", u32::MAX / 2);
    let expires = r.uint("session-cookie-expires", u32::MAX / 2);
    let hash = r.read("upstream-hash-by", hash_by);
    // Higress maps any other value to Istio's UNSPECIFIED (the default balancer): warned, never refused
    // ([`load_balance_warning`]).
    let simple = r
        .read("load-balance", |v| Ok(simple_load_balancer(v)))
        .flatten();
    if cookie {
        return Some(LoadBalance::Cookie {
            name: name.unwrap_or_else(|| "INGRESSCOOKIE".into()),
            path: path.unwrap_or_else(|| "/".into()),
            ttl: max_age.or(expires).unwrap_or(0),
        });
    }
    hash.or(simple.map(LoadBalance::Simple))
}

/// The Istio simple balancer a `load-balance` value names (upper-cased, as Higress looks it up), if any.
fn simple_load_balancer(value: &str) -> Option<String> {
    let upper = value.trim().to_ascii_uppercase();
    matches!(
        upper.as_str(),
        "ROUND_ROBIN" | "LEAST_CONN" | "RANDOM" | "LEAST_REQUEST"
    )
    .then_some(upper)
}

/// The warning for a `load-balance` value that names no Istio simple balancer: Higress's `loadbalance.go` looks the
/// upper-cased value up in `LoadBalancerSettings_SimpleLB_value` and gets UNSPECIFIED (the default balancer) for
/// anything else, such as its own `mcp-sse` (stateful MCP SSE sessions, which Higress's Envoy build serves).
fn load_balance_warning(key: &str, value: &str) -> Option<AnnotationWarning> {
    if simple_load_balancer(value).is_some() {
        return None;
    }
    let message = if value.trim().eq_ignore_ascii_case("mcp-sse") {
        format!(
            "{key}: mcp-sse (Higress's stateful balancing of MCP SSE sessions) is not enforced on gateways by \
             admitpilot: the default balancer is used"
        )
    } else {
        format!(
            "{key}: {value:?} is not round_robin, least_conn, random or least_request; as in Higress, the default \
             balancer is used"
        )
    };
    Some(AnnotationWarning {
        key: key.to_string(),
        message,
    })
}

/// The `<direction>-header-control-{add,update,remove}` keys (`header_control.go`).
fn header_control(r: &mut Reader<'_>, direction: &str) -> HeaderControl {
    HeaderControl {
        add: r
            .read(&format!("{direction}-header-control-add"), header_lines)
            .unwrap_or_default(),
        set: r
            .read(&format!("{direction}-header-control-update"), header_lines)
            .unwrap_or_default(),
        remove: r
            .string(&format!("{direction}-header-control-remove"))
            .map(|v| {
                list(&v)
                    .into_iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The `higress.io/{exact|regex|prefix}-match-{header|pseudo-header|query}-<name>` annotations (`match.go`).
fn match_rules(
    annotations: &BTreeMap<String, String>,
    errors: &mut Vec<AnnotationError>,
) -> Vec<MatchRule> {
    let mut out = Vec::new();
    for (key, value) in annotations {
        let Some(rest) = key.strip_prefix(HIGRESS) else {
            continue;
        };
        let Some((kind, rest)) = match_kind(rest) else {
            continue;
        };
        let (target, name) = if let Some(name) = rest.strip_prefix("match-pseudo-header-") {
            (MatchTarget::PseudoHeader, name)
        } else if let Some(name) = rest.strip_prefix("match-header-") {
            (MatchTarget::Header, name)
        } else if let Some(name) = rest.strip_prefix("match-query-") {
            (MatchTarget::Query, name)
        } else {
            continue;
        };
        if name.is_empty() {
            errors.push(AnnotationError {
                key: key.clone(),
                message: "invalid annotation name: no header or parameter name after the prefix"
                    .into(),
            });
            continue;
        }
        let name = match target {
            MatchTarget::Query => name.to_string(),
            _ => name.to_ascii_lowercase(),
        };
        out.push(MatchRule {
            target,
            name,
            kind,
            value: value.trim().to_string(),
        });
    }
    out
}

/// The comparison a match key starts with, and the rest of the key.
fn match_kind(rest: &str) -> Option<(MatchKind, &str)> {
    if let Some(r) = rest.strip_prefix("exact-") {
        Some((MatchKind::Exact, r))
    } else if let Some(r) = rest.strip_prefix("regex-") {
        Some((MatchKind::Regex, r))
    } else {
        rest.strip_prefix("prefix-").map(|r| (MatchKind::Prefix, r))
    }
}

/// Whether `key` (without prefix) is a match annotation name.
fn is_match_key(rest: &str) -> bool {
    match_kind(rest).is_some_and(|(_, r)| {
        ["match-pseudo-header-", "match-header-", "match-query-"]
            .iter()
            .any(|p| r.starts_with(p))
    })
}

/// Warnings for the keys under the two prefixes: unknown keys (with the closest known one) and keys admitpilot
/// does not enforce.
fn warnings(annotations: &BTreeMap<String, String>) -> Vec<AnnotationWarning> {
    let mut out = Vec::new();
    for key in annotations.keys() {
        let (prefix, rest) = if let Some(rest) = key.strip_prefix(NGINX) {
            (NGINX, rest)
        } else if let Some(rest) = key.strip_prefix(HIGRESS) {
            (HIGRESS, rest)
        } else {
            continue;
        };
        if prefix == HIGRESS && is_match_key(rest) {
            continue;
        }
        let known = KEYS
            .iter()
            .find(|(name, prefixes, _)| *name == rest && (prefix == HIGRESS || *prefixes == Both));
        match known {
            Some(("load-balance", _, Enforced)) => {
                out.extend(load_balance_warning(key, &annotations[key]));
            }
            Some((_, _, Enforced)) => {}
            Some((_, _, Not(why))) => out.push(AnnotationWarning {
                key: key.clone(),
                message: format!("{key} is not enforced on gateways by admitpilot: {why}"),
            }),
            None => {
                let only_higress = KEYS
                    .iter()
                    .any(|(name, prefixes, _)| *name == rest && *prefixes == Higress);
                let message = if only_higress {
                    format!("Higress reads {rest} only as {HIGRESS}{rest}; this key is ignored")
                } else {
                    match closest(rest) {
                        Some(near) => format!(
                            "unknown annotation: Higress does not read {key} (did you mean {prefix}{near}?); it is ignored"
                        ),
                        None => format!("unknown annotation: Higress does not read {key}; it is ignored"),
                    }
                };
                out.push(AnnotationWarning {
                    key: key.clone(),
                    message,
                });
            }
        }
    }
    out
}

/// The known key nearest `name` by edit distance, when it is near enough to be a typo.
fn closest(name: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|(key, _, _)| (edit_distance(name, key), *key))
        .filter(|(d, key)| *d <= 2.max(key.len() / 5))
        .min()
        .map(|(_, key)| key)
}

/// Levenshtein distance (names are short: at most a few dozen bytes each).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() > 128 {
        return a.len();
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(pairs: &[(&str, &str)]) -> Parsed {
        parse(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Higress's own `mcp-sse` (and any value naming no Istio balancer) is accepted with a warning, never denied.
    #[test]
    fn load_balance_values_higress_accepts_are_never_errors() {
        let p = parsed(&[("higress.io/load-balance", "mcp-sse")]);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert!(
            p.warnings.iter().any(|w| w.message.contains("mcp-sse")),
            "{:?}",
            p.warnings
        );
        let p = parsed(&[("nginx.ingress.kubernetes.io/load-balance", "ewma")]);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        let p = parsed(&[("nginx.ingress.kubernetes.io/load-balance", "least_conn")]);
        assert!(p.errors.is_empty() && p.warnings.is_empty(), "{p:?}");
    }

    #[test]
    fn nginx_wins_over_higress_and_both_are_checked() {
        let p = parsed(&[
            ("nginx.ingress.kubernetes.io/upstream-vhost", "a.example"),
            ("higress.io/upstream-vhost", "b.example"),
        ]);
        assert_eq!(p.annotations.upstream_vhost.as_deref(), Some("a.example"));
        let p = parsed(&[
            ("nginx.ingress.kubernetes.io/canary", "true"),
            ("nginx.ingress.kubernetes.io/canary-weight", "abc"),
        ]);
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].key, "nginx.ingress.kubernetes.io/canary-weight");
        assert!(p.errors[0].message.contains("\"abc\": not an integer"));
    }

    #[test]
    fn rewrite_target_becomes_re2() {
        let p = parsed(&[("nginx.ingress.kubernetes.io/rewrite-target", "/$1/x")]);
        assert_eq!(p.annotations.rewrite_target.as_deref(), Some("/\\1/x"));
    }

    #[test]
    fn redirects_take_higress_precedence() {
        let p = parsed(&[
            (
                "nginx.ingress.kubernetes.io/temporal-redirect",
                "http://bar.com",
            ),
            (
                "nginx.ingress.kubernetes.io/permanent-redirect",
                "http://baz.com/x",
            ),
        ]);
        assert_eq!(
            p.annotations.redirect,
            Some(Redirect::Url {
                scheme: "http".into(),
                authority: "bar.com".into(),
                path: String::new(),
                code: 302
            })
        );
        let p = parsed(&[("nginx.ingress.kubernetes.io/permanent-redirect", "ftp://x")]);
        assert!(p.errors[0].message.contains("only http and https"));
    }

    #[test]
    fn canary_kinds() {
        let p = parsed(&[
            ("nginx.ingress.kubernetes.io/canary", "true"),
            ("nginx.ingress.kubernetes.io/canary-by-header", "X-Canary"),
            ("nginx.ingress.kubernetes.io/canary-weight", "30"),
        ]);
        assert!(
            matches!(p.annotations.canary, Some(Canary::Header { ref name, .. }) if name == "x-canary")
        );
        let p = parsed(&[
            ("higress.io/canary", "true"),
            ("higress.io/canary-weight", "30"),
            ("higress.io/canary-weight-total", "50"),
        ]);
        assert_eq!(
            p.annotations.canary,
            Some(Canary::Weight {
                weight: 30,
                total: 50
            })
        );
        let p = parsed(&[("nginx.ingress.kubernetes.io/canary-weight", "30")]);
        assert_eq!(p.annotations.canary, None);
    }

    #[test]
    fn retries_and_load_balancing() {
        let p = parsed(&[(
            "nginx.ingress.kubernetes.io/proxy-next-upstream",
            "error http_503 http_502",
        )]);
        assert_eq!(
            p.annotations.retry.as_ref().map(|r| r.retry_on.as_str()),
            Some("5xx,503,502")
        );
        let p = parsed(&[("nginx.ingress.kubernetes.io/proxy-next-upstream", "bogus")]);
        assert_eq!(p.errors.len(), 1);
        let p = parsed(&[
            (
                "nginx.ingress.kubernetes.io/upstream-hash-by",
                "$http_x_user",
            ),
            ("nginx.ingress.kubernetes.io/load-balance", "least_conn"),
        ]);
        assert_eq!(
            p.annotations.load_balance,
            Some(LoadBalance::Header("x_user".into()))
        );
        let p = parsed(&[("nginx.ingress.kubernetes.io/affinity", "cookie")]);
        assert!(
            matches!(p.annotations.load_balance, Some(LoadBalance::Cookie { ref name, .. }) if name == "INGRESSCOOKIE")
        );
    }

    #[test]
    fn headers_whitelist_and_matches() {
        let p = parsed(&[
            (
                "higress.io/request-header-control-add",
                "stage test\n\"x-test\" 'higress; test=true'",
            ),
            ("higress.io/response-header-control-remove", "a, B"),
            (
                "nginx.ingress.kubernetes.io/whitelist-source-range",
                "10.0.0.0/8, 1.1.1.1",
            ),
            ("higress.io/exact-match-header-abc", "123"),
            ("higress.io/match-method", "post PUT"),
        ]);
        let a = &p.annotations;
        assert_eq!(
            a.request_headers.add[1],
            ("x-test".into(), "higress; test=true".into())
        );
        assert_eq!(a.response_headers.remove, ["a", "b"]);
        assert_eq!(
            a.whitelist.as_deref(),
            Some(&["10.0.0.0/8".to_string(), "1.1.1.1/32".to_string()][..])
        );
        assert_eq!(a.matches.len(), 1);
        assert_eq!(a.match_methods, ["POST", "PUT"]);
        let mixed = parsed(&[(
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "10.0.0.0/8, *",
        )]);
        assert_eq!(
            mixed.annotations.whitelist,
            Some(vec!["10.0.0.0/8".to_string()]),
            "* alone allows all"
        );
        let all = parsed(&[("nginx.ingress.kubernetes.io/whitelist-source-range", "*")]);
        assert_eq!(all.annotations.whitelist, None);
        assert!(p.errors.is_empty() && p.warnings.is_empty(), "{p:?}");
    }

    /// The README's annotation table names every key Higress reads.
    #[test]
    fn the_readme_lists_every_key() {
        let readme = include_str!("../../../../README.md");
        let section = readme
            .split("## Ingress with Higress's annotations")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .unwrap_or_default();
        for (key, _, support) in KEYS {
            let row = section
                .lines()
                .find(|l| l.starts_with('|') && l.contains(&format!("`{key}`")));
            let Some(row) = row else {
                panic!("README's Ingress annotation table lacks {key}");
            };
            let enforced = *support == Enforced;
            assert_eq!(row.contains("| supported |"), enforced, "{key}: {row}");
        }
    }

    #[test]
    fn unknown_keys_are_warned_with_the_nearest_name() {
        let p = parsed(&[
            ("nginx.ingress.kubernetes.io/canary-wieght", "10"),
            ("nginx.ingress.kubernetes.io/timeout", "10"),
            ("nginx.ingress.kubernetes.io/custom-http-errors", "404"),
            ("kubernetes.io/ingress.class", "higress"),
        ]);
        let messages: Vec<&str> = p.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].contains("did you mean nginx.ingress.kubernetes.io/canary-weight?"));
        assert!(messages[1].contains("is not enforced on gateways by admitpilot"));
        assert!(messages[2].contains("only as higress.io/timeout"));
    }
}
