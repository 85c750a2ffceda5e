//! Durations and percentages (pure): takes duration strings and percentages, yields their parsed value or Istio's
//! verdicts.

use super::path::FieldPath;
use crate::model::Findings;

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
