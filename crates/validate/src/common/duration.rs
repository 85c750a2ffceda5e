//! Durations and percentages (pure): takes duration strings and percentages, yields their parsed value or Istio's
//! verdicts.

use super::path::FieldPath;
pub use admitpilot_model::duration::parse_duration_nanos;
use admitpilot_model::Findings;

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
