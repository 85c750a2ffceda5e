//! Go durations (pure): takes a duration string as Go's `time.ParseDuration` reads it (Kubernetes, CEL, Istio and
//! Gateway API all use that syntax), yields nanoseconds. The one parser validation, translation and the MCP
//! encoder share.

/// Parses a duration as Go's `time.ParseDuration` does, which is what Kubernetes/CEL's `duration()` and Istio
/// accept (`1.5s`, `100ms`, `1h30m`, `0`, a sign), into nanoseconds; `None` when malformed or beyond Go's
/// `time.Duration` range.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration_nanos("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration_nanos("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_duration_nanos("100ms"), Some(100_000_000));
        assert_eq!(parse_duration_nanos("10us"), Some(10_000));
        assert_eq!(parse_duration_nanos("10\u{b5}s"), Some(10_000));
        assert_eq!(parse_duration_nanos("10\u{3bc}s"), Some(10_000));
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
            " 1s",
            "99999999999999999999999h",
        ] {
            assert_eq!(parse_duration_nanos(bad), None, "{bad}");
        }
    }
}
