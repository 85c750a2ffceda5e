//! Go `encoding/json` decoding semantics, as Higress applies them to `data.higress`: takes a [`Node`] and a
//! target already holding Higress's defaults, fills the target in place and records findings.
//!
//! What is reproduced (Go `encoding/json` behind `sigs.k8s.io/yaml.Unmarshal`):
//! * decoding happens on top of the target: omitted fields keep their value, a struct value is merged field by
//!   field, a list replaces the old list, `null` resets pointers/lists/maps and is a no-op for plain values;
//! * keys match the JSON field name exactly or, failing that, case-insensitively (Unicode simple folding);
//!   unknown keys are ignored (admitpilot adds a warning, with a suggestion when a known key is close);
//! * a YAML number or bool aimed at a string field becomes its text (`port: 11800` → `"11800"`); nothing
//!   converts the other way, and a number must parse as the integer type exactly as Go parses the JSON text
//!   (`3.0` fills an int field, `1.5`, `-1` in a `uint32`, or an overflow do not);
//! * type errors carry Go's message (`json: cannot unmarshal number -1 into Go struct field
//!   Downstream.downstream.idleTimeout of type uint32`). Go stops at the first error; this decoder records
//!   every error and remembers which item each belongs to.
//!
//! YAML 1.1 booleans: Higress parses YAML with go-yaml v2, which reads plain `yes/no/on/off/y/n` (any of their
//! usual capitalisations) as booleans; `serde_yaml_ng` follows YAML 1.2 and reads them as strings, and the two
//! cannot be told apart once quoting is gone. In a bool field admitpilot accepts those words as Higress reads
//! them (unquoted is by far the likelier spelling) and adds a warning asking for `true`/`false`. In a string
//! field the text is kept as written, where Higress would store `"true"`/`"false"` for an unquoted word.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::node::{go_format_g32, go_json_float, Node};
use super::Item;
use crate::Finding;

/// One step of a user-facing field path.
enum Seg {
    Key(String),
    Index(usize),
}

/// Decoding state: the field path, Go's error context, the findings and the items that failed to decode.
pub(crate) struct Cx {
    prefix: &'static str,
    path: Vec<Seg>,
    go_struct: Option<&'static str>,
    go_struct_stack: Vec<Option<&'static str>>,
    go_fields: Vec<&'static str>,
    item: Option<Item>,
    /// Everything found while decoding, in document order (keys sorted as Go decodes them).
    pub(crate) findings: Vec<Finding>,
    /// Items with at least one decode error.
    pub(crate) rejected: BTreeSet<Item>,
}

impl Cx {
    /// Starts at the root of a document whose findings are reported under `prefix` (`data.higress`).
    pub(crate) fn new(prefix: &'static str) -> Self {
        Cx {
            prefix,
            path: Vec::new(),
            go_struct: None,
            go_struct_stack: Vec::new(),
            go_fields: Vec::new(),
            item: None,
            findings: Vec::new(),
            rejected: BTreeSet::new(),
        }
    }

    fn path_string(&self) -> String {
        let mut out = self.prefix.to_string();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    fn enter(&mut self, go_struct: &'static str, field: &'static str) {
        if self.path.is_empty() {
            self.item = Item::of_field(field);
        }
        self.go_struct_stack.push(self.go_struct);
        self.go_struct = Some(go_struct);
        self.go_fields.push(field);
        self.path.push(Seg::Key(field.to_string()));
    }

    fn leave(&mut self) {
        self.path.pop();
        self.go_fields.pop();
        self.go_struct = self.go_struct_stack.pop().flatten();
        if self.path.is_empty() {
            self.item = None;
        }
    }

    fn push(&mut self, seg: Seg) {
        self.path.push(seg);
    }

    fn pop(&mut self) {
        self.path.pop();
    }

    /// Records an error at the current path; the current item (every item at the root) is rejected.
    pub(crate) fn error(&mut self, message: impl Into<String>) {
        match self.item {
            Some(item) => {
                self.rejected.insert(item);
            }
            None => self.rejected.extend(Item::ALL),
        }
        self.findings
            .push(Finding::error(self.path_string(), message.into()));
    }

    /// Records a warning at the current path.
    pub(crate) fn warning(&mut self, message: impl Into<String>) {
        self.findings
            .push(Finding::warning(self.path_string(), message.into()));
    }

    /// Records Go's `UnmarshalTypeError` for a value described as `value` (`string`, `number -1`, …).
    fn type_error(&mut self, value: &str, go_type: &str) {
        let message = match self.go_struct {
            Some(go_struct) => format!(
                "json: cannot unmarshal {value} into Go struct field {go_struct}.{} of type {go_type}",
                self.go_fields.join(".")
            ),
            None => format!("json: cannot unmarshal {value} into Go value of type {go_type}"),
        };
        self.error(message);
    }

    /// Records why `node` cannot go into a field of Go type `go_type`.
    fn mismatch(&mut self, node: &Node, go_type: &str) {
        match node {
            Node::Invalid(message) => self.error(message.clone()),
            other => self.type_error(other.go_kind(), go_type),
        }
    }

    /// Warns about a key no field matches and reports values JSON cannot carry inside it.
    fn unknown(&mut self, key: &str, value: &Node, known: &[&str]) {
        self.push(Seg::Key(key.to_string()));
        let message = match suggest(key, known) {
            Some(close) => {
                format!("unknown field `{key}` is ignored by Higress; did you mean `{close}`?")
            }
            None => format!("unknown field `{key}` is ignored by Higress"),
        };
        self.warning(message);
        self.report_invalid(value);
        self.pop();
    }

    fn report_invalid(&mut self, node: &Node) {
        match node {
            Node::Invalid(message) => self.error(message.clone()),
            Node::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.push(Seg::Index(i));
                    self.report_invalid(item);
                    self.pop();
                }
            }
            Node::Map(entries) => {
                for (key, value) in entries {
                    self.push(Seg::Key(key.clone()));
                    self.report_invalid(value);
                    self.pop();
                }
            }
            _ => {}
        }
    }
}

/// A value Go's `encoding/json` can decode into.
pub(crate) trait GoDecode {
    /// Decodes `node` into `self` in place.
    fn decode(&mut self, node: &Node, cx: &mut Cx);
}

/// A Go struct: its type name, JSON field names and field access by JSON name.
pub(crate) trait GoStruct: GoDecode + Sized {
    /// The Go type name (`Gzip`).
    const GO_NAME: &'static str;
    /// JSON field names, in Go declaration order.
    const FIELDS: &'static [&'static str];
    /// Go's zero value (what a nil pointer is allocated as), not Higress's defaults.
    fn zero() -> Self;
    /// The field whose JSON name is `name`.
    fn field_mut(&mut self, name: &str) -> Option<&mut dyn GoDecode>;
}

/// A type that can be a list element (`[]string`, `[]*MatchRule`).
pub(crate) trait GoElem: GoDecode + Sized {
    /// Go's type string of a slice of this element.
    fn slice_type() -> String;
    /// A fresh element for `node`, or `None` (after recording why) when the element cannot exist.
    fn new_elem(node: &Node, cx: &mut Cx) -> Option<Self>;
}

/// Decodes a JSON object into a struct, field by field, as Go does.
pub(crate) fn decode_struct<T: GoStruct>(target: &mut T, node: &Node, cx: &mut Cx) {
    let entries = match node {
        Node::Null => return,
        Node::Map(entries) => entries,
        other => return cx.mismatch(other, &format!("configmap.{}", T::GO_NAME)),
    };
    let mut seen: Vec<(&'static str, &str)> = Vec::new();
    for (key, value) in entries {
        let Some((name, exact)) = lookup(T::FIELDS, key) else {
            cx.unknown(key, value, T::FIELDS);
            continue;
        };
        cx.enter(T::GO_NAME, name);
        if !exact {
            cx.warning(format!(
                "key `{key}` matches `{name}` only case-insensitively (Higress accepts it); write `{name}`"
            ));
        }
        if let Some((_, earlier)) = seen.iter().find(|(n, _)| *n == name) {
            cx.warning(format!(
                "keys `{earlier}` and `{key}` both set `{name}`; Higress applies them in byte order, `{key}` last"
            ));
        }
        seen.push((name, key));
        if let Some(field) = target.field_mut(name) {
            field.decode(value, cx);
        }
        cx.leave();
    }
}

/// Finds the field a key decodes into: exact match first, then Go's case-insensitive match.
fn lookup(fields: &[&'static str], key: &str) -> Option<(&'static str, bool)> {
    if let Some(name) = fields.iter().find(|f| **f == key) {
        return Some((name, true));
    }
    let folded = fold(key);
    fields
        .iter()
        .find(|f| fold(f) == folded)
        .map(|name| (*name, false))
}

/// Case folding close to Go's `bytes.EqualFold` (simple Unicode folding: `K` (Kelvin) ~ `k`, `ſ` ~ `s`).
fn fold(text: &str) -> String {
    text.chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// The known key closest to `key`, if it is close enough to be a typo (`gizp` → `gzip`).
pub(crate) fn suggest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let key_folded = fold(key);
    known
        .iter()
        .map(|k| (osa_distance(&key_folded, &fold(k)), *k))
        .filter(|(d, _)| *d <= 2 && *d < key_folded.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Optimal-string-alignment edit distance: insertions, deletions, substitutions and adjacent swaps cost 1.
pub(crate) fn osa_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// The JSON text Go's decoder would see for a number node.
fn number_literal(node: &Node) -> Option<String> {
    match node {
        Node::Int(i) => Some(i.to_string()),
        Node::Float(f) => Some(go_json_float(*f)),
        _ => None,
    }
}

/// Decodes an integer of Go type `go_type` whose range is `T`'s; `unsigned` parses as Go's `ParseUint`.
fn decode_integer<T: TryFrom<i128>>(
    target: &mut T,
    node: &Node,
    cx: &mut Cx,
    go_type: &str,
    unsigned: bool,
) {
    if matches!(node, Node::Null) {
        return;
    }
    let Some(literal) = number_literal(node) else {
        return cx.mismatch(node, go_type);
    };
    let parsed = if unsigned {
        literal.parse::<u64>().ok().map(i128::from)
    } else {
        literal.parse::<i64>().ok().map(i128::from)
    };
    match parsed.and_then(|n| T::try_from(n).ok()) {
        Some(value) => *target = value,
        None => cx.type_error(&format!("number {literal}"), go_type),
    }
}

macro_rules! go_integer {
    ($ty:ty, $go:literal, $unsigned:literal) => {
        impl GoDecode for $ty {
            fn decode(&mut self, node: &Node, cx: &mut Cx) {
                decode_integer(self, node, cx, $go, $unsigned);
            }
        }
    };
}

go_integer!(i32, "int32", false);
go_integer!(u32, "uint32", true);
go_integer!(i64, "int64", false);

impl GoDecode for f64 {
    fn decode(&mut self, node: &Node, cx: &mut Cx) {
        match node {
            Node::Null => {}
            // Every finite YAML number parses as a float64 (i128 → f64 rounds like Go's ParseFloat).
            #[allow(clippy::cast_precision_loss)]
            Node::Int(i) => *self = *i as f64,
            Node::Float(f) => *self = *f,
            other => cx.mismatch(other, "float64"),
        }
    }
}

/// The YAML 1.1 boolean spellings go-yaml v2 accepts beyond YAML 1.2's `true`/`false`.
fn yaml11_bool(text: &str) -> Option<bool> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

impl GoDecode for bool {
    fn decode(&mut self, node: &Node, cx: &mut Cx) {
        match node {
            Node::Null => {}
            Node::Bool(b) => *self = *b,
            Node::Str(text) => match yaml11_bool(text) {
                Some(b) => {
                    *self = b;
                    cx.warning(format!(
                        "`{text}` is read as {b} (a YAML 1.1 boolean, as Higress reads it unquoted); write `{b}`"
                    ));
                }
                None => cx.mismatch(node, "bool"),
            },
            other => cx.mismatch(other, "bool"),
        }
    }
}

impl GoDecode for String {
    fn decode(&mut self, node: &Node, cx: &mut Cx) {
        match node {
            Node::Null => {}
            Node::Str(s) => s.clone_into(self),
            Node::Int(i) => *self = i.to_string(),
            Node::Float(f) => *self = go_format_g32(*f),
            Node::Bool(b) => *self = b.to_string(),
            other => cx.mismatch(other, "string"),
        }
    }
}

impl GoElem for String {
    fn slice_type() -> String {
        "[]string".into()
    }
    fn new_elem(_node: &Node, _cx: &mut Cx) -> Option<Self> {
        Some(String::new())
    }
}

impl<T: GoElem> GoDecode for Vec<T> {
    fn decode(&mut self, node: &Node, cx: &mut Cx) {
        match node {
            Node::Null => self.clear(),
            Node::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    cx.push(Seg::Index(i));
                    if let Some(mut elem) = T::new_elem(item, cx) {
                        elem.decode(item, cx);
                        out.push(elem);
                    }
                    cx.pop();
                }
                *self = out;
            }
            other => cx.mismatch(other, &T::slice_type()),
        }
    }
}

impl<T: GoStruct> GoDecode for Option<T> {
    fn decode(&mut self, node: &Node, cx: &mut Cx) {
        match node {
            Node::Null => *self = None,
            other => self.get_or_insert_with(T::zero).decode(other, cx),
        }
    }
}

/// `map[string]interface{}`: objects merge into the map; values are kept as Go would re-encode them.
impl GoDecode for Map<String, Value> {
    fn decode(&mut self, node: &Node, cx: &mut Cx) {
        match node {
            Node::Null => self.clear(),
            Node::Map(entries) => {
                for (key, value) in entries {
                    cx.push(Seg::Key(key.clone()));
                    if let Some(json) = any_value(value, cx) {
                        self.insert(key.clone(), json);
                    }
                    cx.pop();
                }
            }
            other => cx.mismatch(other, "map[string]interface {}"),
        }
    }
}

/// Decodes into `interface{}` and back to JSON: numbers become float64 first, as in Go.
fn any_value(node: &Node, cx: &mut Cx) -> Option<Value> {
    Some(match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        #[allow(clippy::cast_precision_loss)]
        Node::Int(i) => float_json(*i as f64),
        Node::Float(f) => float_json(*f),
        Node::Str(s) => Value::String(s.clone()),
        Node::Seq(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                cx.push(Seg::Index(i));
                out.extend(any_value(item, cx));
                cx.pop();
            }
            Value::Array(out)
        }
        Node::Map(entries) => {
            let mut out = Map::new();
            for (key, value) in entries {
                cx.push(Seg::Key(key.clone()));
                if let Some(json) = any_value(value, cx) {
                    out.insert(key.clone(), json);
                }
                cx.pop();
            }
            Value::Object(out)
        }
        Node::Invalid(message) => {
            cx.error(message.clone());
            return None;
        }
    })
}

/// A float64 as Go's encoder writes it, read back as JSON (`3.0` → `3`).
fn float_json(f: f64) -> Value {
    serde_json::from_str(&go_json_float(f)).unwrap_or(Value::Null)
}

/// Declares a Go-shaped struct: the Rust struct (serialized with its JSON names) plus its decoding tables. Fields
/// in an optional `extra { … }` block after it are not part of the Go struct: never decoded from or serialized to
/// its JSON, zero in [`GoStruct::zero`].
macro_rules! go_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $go:literal {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty => $json:literal,
            )*
        }
        $(extra {
            $(
                $(#[$emeta:meta])*
                pub $efield:ident : $ety:ty,
            )*
        })?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                #[serde(rename = $json)]
                pub $field: $ty,
            )*
            $($(
                $(#[$emeta])*
                #[serde(skip)]
                pub $efield: $ety,
            )*)?
        }

        impl $crate::higress_config::gojson::GoStruct for $name {
            const GO_NAME: &'static str = $go;
            const FIELDS: &'static [&'static str] = &[$($json),*];
            fn zero() -> Self {
                Self { $($field: Default::default(),)* $($($efield: Default::default(),)*)? }
            }
            fn field_mut(
                &mut self,
                name: &str,
            ) -> Option<&mut dyn $crate::higress_config::gojson::GoDecode> {
                match name {
                    $($json => Some(&mut self.$field),)*
                    _ => None,
                }
            }
        }

        impl $crate::higress_config::gojson::GoDecode for $name {
            fn decode(
                &mut self,
                node: &$crate::higress_config::node::Node,
                cx: &mut $crate::higress_config::gojson::Cx,
            ) {
                $crate::higress_config::gojson::decode_struct(self, node, cx);
            }
        }

        impl $crate::higress_config::gojson::GoElem for $name {
            fn slice_type() -> String {
                format!("[]*configmap.{}", $go)
            }
            fn new_elem(
                node: &$crate::higress_config::node::Node,
                cx: &mut $crate::higress_config::gojson::Cx,
            ) -> Option<Self> {
                if matches!(node, $crate::higress_config::node::Node::Null) {
                    cx.error("list entry is null (Higress stores a nil pointer and crashes on it)");
                    return None;
                }
                Some(<Self as $crate::higress_config::gojson::GoStruct>::zero())
            }
        }
    };
}

pub(crate) use go_struct;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_swaps_once() {
        assert_eq!(osa_distance("gizp", "gzip"), 1);
        assert_eq!(osa_distance("", "abc"), 3);
        assert_eq!(osa_distance("enabled", "enable"), 1);
        assert_eq!(osa_distance("tracing", "tracing"), 0);
    }

    #[test]
    fn suggests_only_close_keys() {
        let known = ["tracing", "gzip", "downstream"];
        assert_eq!(suggest("gizp", &known), Some("gzip"));
        assert_eq!(suggest("Tracng", &known), Some("tracing"));
        assert_eq!(suggest("completely", &known), None);
        assert_eq!(suggest("x", &known), None);
    }

    #[test]
    fn folds_like_go() {
        assert_eq!(lookup(&["gzip"], "GZip"), Some(("gzip", false)));
        assert_eq!(lookup(&["gzip"], "gzip"), Some(("gzip", true)));
        assert_eq!(lookup(&["sampling"], "ſampling"), Some(("sampling", false)));
        assert_eq!(lookup(&["gzip"], "gzipp"), None);
    }

    #[test]
    fn integers_parse_like_go() {
        let mut cx = Cx::new("x");
        let mut v: u32 = 7;
        v.decode(&Node::Float(3.0), &mut cx);
        assert_eq!(v, 3);
        v.decode(&Node::Null, &mut cx);
        assert_eq!(v, 3);
        assert!(cx.findings.is_empty());
        v.decode(&Node::Int(-1), &mut cx);
        v.decode(&Node::Float(1.5), &mut cx);
        v.decode(&Node::Int(1 << 32), &mut cx);
        v.decode(&Node::Str("1".into()), &mut cx);
        let messages: Vec<&str> = cx.findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "json: cannot unmarshal number -1 into Go value of type uint32",
                "json: cannot unmarshal number 1.5 into Go value of type uint32",
                "json: cannot unmarshal number 4294967296 into Go value of type uint32",
                "json: cannot unmarshal string into Go value of type uint32",
            ]
        );
        assert_eq!(v, 3);
    }

    #[test]
    fn strings_take_numbers_and_bools() {
        let mut cx = Cx::new("x");
        let mut s = String::new();
        s.decode(&Node::Int(11800), &mut cx);
        assert_eq!(s, "11800");
        s.decode(&Node::Float(1.5), &mut cx);
        assert_eq!(s, "1.5");
        s.decode(&Node::Bool(true), &mut cx);
        assert_eq!(s, "true");
        s.decode(&Node::Seq(vec![]), &mut cx);
        assert_eq!(
            cx.findings[0].message,
            "json: cannot unmarshal array into Go value of type string"
        );
    }

    #[test]
    fn yaml11_bools_are_accepted_with_a_warning() {
        let mut cx = Cx::new("x");
        let mut b = false;
        b.decode(&Node::Str("on".into()), &mut cx);
        assert!(b);
        assert!(!cx.findings[0].is_error());
        b.decode(&Node::Str("true".into()), &mut cx);
        assert!(cx.findings[1].is_error());
    }
}
