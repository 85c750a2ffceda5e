//! Go's IP parsers (pure): take an address or prefix text, yield `net/netip`'s `ParseAddr` and `ParsePrefix`
//! verdicts and error texts, transcribed, which Istio's `security.ValidateIPs` prints (see `authorization_policy`),
//! and k8s.io/utils' `ParseIPSloppy` verdict ([`is_ip_sloppy`]), which Kubernetes reads IP fields with (Ingress
//! hosts, the CRDs' `ipv4`/`ipv6` formats).

use super::text::go_quote;

/// What `ParseAddr` found.
pub struct Addr {
    /// IPv6 (including IPv4-mapped and embedded forms).
    pub is6: bool,
    /// Has an IPv6 zone (`%eth0`).
    pub zoned: bool,
}

/// `parseAddrError.Error()`: `ParseAddr("in"): msg`, plus ` (at "rest")` when it names where it stopped.
fn addr_error(input: &str, msg: &str, at: Option<&str>) -> String {
    let mut text = format!("ParseAddr({}): {msg}", go_quote(input));
    if let Some(at) = at.filter(|at| !at.is_empty()) {
        text.push_str(&format!(" (at {})", go_quote(at)));
    }
    text
}

/// `netip.ParseAddr`: the first `.`, `:` or `%` decides IPv4, IPv6 or a zone without an address.
pub fn parse_addr(s: &str) -> Result<Addr, String> {
    for c in s.bytes() {
        match c {
            b'.' => {
                return parse_ipv4(s).map(|()| Addr {
                    is6: false,
                    zoned: false,
                })
            }
            b':' => return parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", None))
}

/// `parseIPv4`: four decimal fields of 0..=255 without leading zeros.
fn parse_ipv4(s: &str) -> Result<(), String> {
    let bytes = s.as_bytes();
    let (mut value, mut fields_done, mut digits) = (0u32, 0, 0);
    for (i, &c) in bytes.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && value == 0 {
                return Err(addr_error(
                    s,
                    "IPv4 field has octet with leading zero",
                    None,
                ));
            }
            value = value * 10 + u32::from(c - b'0');
            digits += 1;
            if value > 255 {
                return Err(addr_error(s, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == bytes.len() - 1 || bytes[i - 1] == b'.' {
                return Err(addr_error(
                    s,
                    "IPv4 field must have at least one digit",
                    s.get(i..),
                ));
            }
            if fields_done == 3 {
                return Err(addr_error(s, "IPv4 address too long", None));
            }
            fields_done += 1;
            value = 0;
            digits = 0;
        } else {
            return Err(addr_error(s, "unexpected character", s.get(i..)));
        }
    }
    if fields_done < 3 {
        return Err(addr_error(s, "IPv4 address too short", None));
    }
    Ok(())
}

/// `parseIPv6`: hex fields of at most 16 bits, one optional `::`, an optional embedded IPv4 in the last 32 bits,
/// an optional non-empty zone.
fn parse_ipv6(input: &str) -> Result<Addr, String> {
    let err = |msg: &str, at: Option<&str>| Err(addr_error(input, msg, at));
    let (mut s, zoned) = match input.split_once('%') {
        Some((_, "")) => return err("zone must be a non-empty string", None),
        Some((addr, _)) => (addr, true),
        None => (input, false),
    };
    let done = Addr { is6: true, zoned };
    let mut ellipsis: Option<usize> = None;
    if let Some(rest) = s.strip_prefix("::") {
        ellipsis = Some(0);
        s = rest;
        if s.is_empty() {
            return Ok(done);
        }
    }
    let mut i = 0;
    while i < 16 {
        let mut off = 0;
        let mut acc: u32 = 0;
        for c in s.bytes() {
            let Some(digit) = char::from(c).to_digit(16) else {
                break;
            };
            acc = (acc << 4) + digit;
            if acc > 0xffff {
                return err("IPv6 field has value >=2^16", Some(s));
            }
            off += 1;
        }
        if off == 0 {
            return err(
                "each colon-separated field must have at least one digit",
                Some(s),
            );
        }
        if s.as_bytes().get(off) == Some(&b'.') {
            if ellipsis.is_none() && i != 12 {
                return err(
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    Some(s),
                );
            }
            if i + 4 > 16 {
                return err(
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    Some(s),
                );
            }
            if let Err(e) = parse_ipv4(s) {
                return err(&e, Some(s));
            }
            s = "";
            i += 4;
            break;
        }
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return err("unexpected character, want colon", Some(s));
        }
        if s.len() == 1 {
            return err("colon must be followed by more characters", Some(s));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return err("multiple :: in address", Some(s));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return err("trailing garbage after address", Some(s));
    }
    match (i < 16, ellipsis) {
        (true, None) => err("address string too short", None),
        (false, Some(_)) => err("the :: must expand to at least one field of zeros", None),
        _ => Ok(done),
    }
}

/// `netip.ParsePrefix`: an address without zone, `/`, and a decimal length (no sign, no leading zero) that fits
/// the family; errors read `netip.ParsePrefix("in"): …`.
pub fn parse_prefix(s: &str) -> Result<(), String> {
    let fail = |msg: &str| Err(format!("netip.ParsePrefix({}): {msg}", go_quote(s)));
    let Some((addr, bits)) = s.rsplit_once('/') else {
        return fail("no '/'");
    };
    let addr = match parse_addr(addr) {
        Ok(addr) => addr,
        Err(e) => return fail(&e),
    };
    if addr.zoned {
        return fail("IPv6 zones cannot be present in a prefix");
    }
    let bad_bits = || fail(&format!("bad bits after slash: {}", go_quote(bits)));
    if bits.len() > 1 && !matches!(bits.as_bytes()[0], b'1'..=b'9') {
        return bad_bits();
    }
    if bits.is_empty() || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return bad_bits();
    }
    // `strconv.Atoi` refuses what overflows an int: bad bits, not out of range.
    let Ok(n) = bits.parse::<i64>() else {
        return bad_bits();
    };
    if n > if addr.is6 { 128 } else { 32 } {
        return fail("prefix length out of range");
    }
    Ok(())
}

/// k8s.io/utils `net.ParseIPSloppy` (Go's `net.ParseIP` of before Go 1.17, kept for stored data) accepts `s`:
/// dotted IPv4 whose fields may have leading zeros (`010.0.0.1`), or IPv6 text (hex fields of any length up to
/// 0xFFFF, at most one `::`, an IPv4 tail read the same sloppy way).
pub fn is_ip_sloppy(s: &str) -> bool {
    /// `dtoi`/`xtoi`: the leading digits of `s` in `radix` and how many there were; `None` without any, or
    /// when the number reaches 0xFFFFFF.
    fn number(s: &[u8], radix: u32) -> Option<(u32, usize)> {
        let mut n = 0u32;
        let mut i = 0;
        while let Some(d) = s.get(i).and_then(|c| char::from(*c).to_digit(radix)) {
            n = n * radix + d;
            if n >= 0xFF_FFFF {
                return None;
            }
            i += 1;
        }
        (i > 0).then_some((n, i))
    }
    /// `parseIPv4`.
    fn ipv4(mut s: &[u8]) -> bool {
        for i in 0..4 {
            if i > 0 {
                match s.split_first() {
                    Some((b'.', rest)) => s = rest,
                    _ => return false,
                }
            }
            match number(s, 10) {
                Some((n, used)) if n <= 0xFF => s = &s[used..],
                _ => return false,
            }
        }
        s.is_empty()
    }
    /// `parseIPv6`.
    fn ipv6(mut s: &[u8]) -> bool {
        let mut ellipsis = false;
        let mut bytes = 0;
        if s.starts_with(b"::") {
            ellipsis = true;
            s = &s[2..];
            if s.is_empty() {
                return true;
            }
        }
        while bytes < 16 {
            let Some((_, used)) = number(s, 16).filter(|(n, _)| *n <= 0xFFFF) else {
                return false;
            };
            if s.get(used) == Some(&b'.') {
                if (!ellipsis && bytes != 12) || bytes + 4 > 16 || !ipv4(s) {
                    return false;
                }
                s = &[];
                bytes += 4;
                break;
            }
            bytes += 2;
            s = &s[used..];
            if s.is_empty() {
                break;
            }
            if s[0] != b':' || s.len() == 1 {
                return false;
            }
            s = &s[1..];
            if s[0] == b':' {
                if ellipsis {
                    return false;
                }
                ellipsis = true;
                s = &s[1..];
                if s.is_empty() {
                    break;
                }
            }
        }
        s.is_empty() && (bytes == 16) != ellipsis
    }
    match s.bytes().find(|c| *c == b'.' || *c == b':') {
        Some(b'.') => ipv4(s.as_bytes()),
        Some(_) => ipv6(s.as_bytes()),
        None => false,
    }
}
