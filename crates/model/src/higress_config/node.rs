//! YAML → JSON-shaped tree, the way `sigs.k8s.io/yaml` prepares `data.higress` for Go's `encoding/json`:
//! takes a parsed [`serde_yaml_ng::Value`] and yields a [`Node`] whose map keys are strings, sorted by byte
//! order (Go's `json.Marshal` sorts map keys, so that is the order Higress decodes them in).
//!
//! Scalars keep their YAML type (int, float, bool, string) because the decoder needs it: a number or bool is
//! coerced to a string only when the Go field is a string, and error messages quote numbers the way Go's JSON
//! encoder prints them. Values JSON cannot carry (infinite or NaN floats, null or composite map keys) become
//! [`Node::Invalid`] with the message Go would give.

use serde_yaml_ng::Value as Yaml;

/// One value of the JSON-shaped tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// `null` (also an empty document).
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer, wide enough for both `i64` and `u64` YAML integers.
    Int(i128),
    /// A finite float.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping with string keys, sorted by key bytes, duplicates removed (last wins).
    Map(Vec<(String, Node)>),
    /// A value Go's YAML-to-JSON conversion rejects; holds Go's message.
    Invalid(String),
}

impl Node {
    /// Converts a parsed YAML value (merge keys already applied).
    pub(crate) fn from_yaml(value: &Yaml) -> Node {
        match value {
            Yaml::Null => Node::Null,
            Yaml::Bool(b) => Node::Bool(*b),
            Yaml::Number(n) => number(n),
            Yaml::String(s) => Node::Str(s.clone()),
            Yaml::Sequence(items) => Node::Seq(items.iter().map(Node::from_yaml).collect()),
            Yaml::Mapping(map) => {
                // String's ordering is byte order, the order Go's json.Marshal writes map keys in.
                let mut entries = std::collections::BTreeMap::new();
                for (key, value) in map {
                    let Some(key) = key_string(key) else {
                        return Node::Invalid(format!(
                            "Unsupported map key of type: {}",
                            yaml_type_name(key)
                        ));
                    };
                    entries.insert(key, Node::from_yaml(value));
                }
                Node::Map(entries.into_iter().collect())
            }
            Yaml::Tagged(tagged) => Node::from_yaml(&tagged.value),
        }
    }

    /// How Go's `encoding/json` names this value in an `UnmarshalTypeError` when the target is not a number.
    pub(crate) fn go_kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "bool",
            Node::Int(_) | Node::Float(_) => "number",
            Node::Str(_) | Node::Invalid(_) => "string",
            Node::Seq(_) => "array",
            Node::Map(_) => "object",
        }
    }
}

fn number(n: &serde_yaml_ng::Number) -> Node {
    if let Some(u) = n.as_u64() {
        Node::Int(i128::from(u))
    } else if let Some(i) = n.as_i64() {
        Node::Int(i128::from(i))
    } else {
        let f = n.as_f64().unwrap_or(f64::NAN);
        if f.is_finite() {
            Node::Float(f)
        } else {
            Node::Invalid(format!("json: unsupported value: {}", go_non_finite(f)))
        }
    }
}

fn go_non_finite(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "+Inf"
    } else {
        "-Inf"
    }
}

/// Map keys become strings as `sigs.k8s.io/yaml` converts them; `None` for keys it rejects.
fn key_string(key: &Yaml) -> Option<String> {
    match key {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Bool(b) => Some(b.to_string()),
        Yaml::Number(n) => match number(n) {
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) => Some(go_format_g32(f)),
            _ => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Some(
                    match go_non_finite(f) {
                        "NaN" => ".nan",
                        "+Inf" => ".inf",
                        _ => "-.inf",
                    }
                    .to_string(),
                )
            }
        },
        Yaml::Tagged(tagged) => key_string(&tagged.value),
        Yaml::Null | Yaml::Sequence(_) | Yaml::Mapping(_) => None,
    }
}

fn yaml_type_name(value: &Yaml) -> &'static str {
    match value {
        Yaml::Null => "<nil>",
        Yaml::Sequence(_) => "[]interface {}",
        Yaml::Mapping(_) => "map[interface {}]interface {}",
        _ => "unknown",
    }
}

/// Formats a float as Go's `strconv.FormatFloat(f, 'g', -1, 32)`: the shortest `float32` digits, in exponent
/// form when the decimal exponent is below -4 or at least 6 (`1.234567e+06`). This is how `sigs.k8s.io/yaml`
/// turns a YAML float into the text of a string field.
pub(crate) fn go_format_g32(f: f64) -> String {
    #[allow(clippy::cast_possible_truncation)]
    let single = f as f32;
    // Beyond float32's range Go formats the infinity the conversion gives (`1e300` → `+Inf`), not digits.
    if !single.is_finite() {
        return go_non_finite(f64::from(single)).to_string();
    }
    let (digits, exp, negative) = shortest_digits(&format!("{single:e}"));
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.unsigned_abs())
    } else {
        format!("{sign}{}", place_point(&digits, exp))
    }
}

/// Formats a float as Go's `encoding/json` encoder does (shortest `float64` digits; exponent form below 1e-6
/// and from 1e21 on, as `1e+21` / `1e-7`). Go's decoder parses integer fields from this text, so `3.0` fills an
/// int field while `1.5` and `1e+21` are rejected with this text in the message.
pub(crate) fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (digits, exp, negative) = shortest_digits(&format!("{f:e}"));
        let sign = if negative { "-" } else { "" };
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        if exp < 0 {
            format!("{sign}{mantissa}e-{}", exp.unsigned_abs())
        } else {
            format!("{sign}{mantissa}e+{exp:02}")
        }
    } else {
        f.to_string()
    }
}

/// Splits Rust's `{:e}` output (`-1.25e-3`) into its digit string (`125`), decimal exponent and sign.
fn shortest_digits(exp_form: &str) -> (String, i32, bool) {
    let (negative, body) = match exp_form.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, exp_form),
    };
    let (mantissa, exp) = body.split_once('e').unwrap_or((body, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0), negative)
}

/// Writes `digits` (d.ddd × 10^exp) in plain decimal notation.
fn place_point(digits: &str, exp: i32) -> String {
    let len = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    if exp < 0 {
        let zeros = "0".repeat(exp.unsigned_abs() as usize - 1);
        format!("0.{zeros}{digits}")
    } else if exp + 1 >= len {
        let zeros = "0".repeat((exp + 1 - len) as usize);
        format!("{digits}{zeros}")
    } else {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        let mut value: Yaml = serde_yaml_ng::from_str(text).unwrap();
        value.apply_merge().unwrap();
        Node::from_yaml(&value)
    }

    #[test]
    fn formats_floats_like_go_g32() {
        assert_eq!(go_format_g32(11800.0), "11800");
        assert_eq!(go_format_g32(1.5), "1.5");
        assert_eq!(go_format_g32(0.1), "0.1");
        assert_eq!(go_format_g32(1234567.0), "1.234567e+06");
        assert_eq!(go_format_g32(0.0001), "0.0001");
        assert_eq!(go_format_g32(0.00001), "1e-05");
        assert_eq!(go_format_g32(0.0), "0");
        assert_eq!(go_format_g32(-2.5), "-2.5");
        // float32 edges: past its range Go's conversion gives ±Inf; below its smallest value, (signed) zero.
        assert_eq!(go_format_g32(1e300), "+Inf");
        assert_eq!(go_format_g32(-1e300), "-Inf");
        assert_eq!(go_format_g32(f64::from(f32::MAX)), "3.4028235e+38");
        assert_eq!(go_format_g32(3.5e38), "+Inf");
        assert_eq!(go_format_g32(1e-50), "0");
        assert_eq!(go_format_g32(-1e-50), "-0");
        assert_eq!(go_format_g32(f64::NAN), "NaN");
    }

    #[test]
    fn formats_floats_like_go_json() {
        assert_eq!(go_json_float(3.0), "3");
        assert_eq!(go_json_float(1.5), "1.5");
        assert_eq!(go_json_float(-0.0), "-0");
        assert_eq!(go_json_float(1e21), "1e+21");
        assert_eq!(go_json_float(1e-7), "1e-7");
        assert_eq!(go_json_float(1.5e-10), "1.5e-10");
        assert_eq!(go_json_float(1e20), "100000000000000000000");
    }

    #[test]
    fn sorts_keys_and_stringifies_them() {
        let node = parse("b: 1\nA: 2\n3: x\ntrue: y\n");
        let Node::Map(entries) = node else {
            panic!("not a map")
        };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["3", "A", "b", "true"]);
    }

    #[test]
    fn keeps_scalar_types_and_rejects_what_json_cannot_hold() {
        assert_eq!(parse("1.0"), Node::Float(1.0));
        assert_eq!(
            parse("18446744073709551615"),
            Node::Int(18446744073709551615)
        );
        assert_eq!(parse("-5"), Node::Int(-5));
        assert_eq!(
            parse(".inf"),
            Node::Invalid("json: unsupported value: +Inf".into())
        );
        assert!(matches!(parse("? [a]\n: 1\n"), Node::Invalid(_)));
    }

    #[test]
    fn applies_merge_keys() {
        let node = parse("base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n");
        let Node::Map(entries) = node else {
            panic!("not a map")
        };
        assert_eq!(
            entries[1].1,
            Node::Map(vec![("x".into(), Node::Int(1)), ("y".into(), Node::Int(2))])
        );
    }
}
