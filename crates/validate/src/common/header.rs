//! HTTP headers (pure): takes header names and values of matches, CORS, operations and probes, yields Istio's
//! verdicts and texts.

use super::text::go_quote;
use admitpilot_model::Findings;

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
