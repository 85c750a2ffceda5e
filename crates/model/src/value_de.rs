//! A serde deserializer over a parsed `serde_json::Value` that keeps going past type errors: takes a value, a field
//! path prefix and a target type, and yields the typed value plus a finding for every field that did not fit (with
//! its path, e.g. `spec.http[0].timeout`) and, on request, a warning for every unknown field.
//!
//! Where the JSON type does not fit what the target asks for (a number where a string is expected, an out-of-range
//! integer, an unknown enum variant, a list where an object is expected), the error is recorded and the target gets
//! a zero stand-in (`""`, `0`, `false`, an empty list or object, the first enum variant), so decoding goes on and
//! reports every such error of the document in one pass. The messages are serde's own (`invalid type: integer `5`,
//! expected a string`), as `serde_json` words them. An error the stand-ins cannot get past (a target type's own
//! check) ends decoding; it is reported too.
//!
//! On a document without errors this is a plain typed decode with path bookkeeping on the stack: nothing is
//! allocated for paths unless a finding is made.

use std::cell::RefCell;
use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, Expected, IntoDeserializer, MapAccess,
    SeqAccess, Unexpected, VariantAccess, Visitor,
};
use serde_json::{Map, Number, Value};

use super::Finding;

/// How a value is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// Report each unknown object field as a warning (`unknown field (ignored)`).
    pub warn_unknown: bool,
    /// Treat an object field set to `null` as absent, as the API server prunes such fields from CRD objects.
    pub skip_null_fields: bool,
    /// Decode a `null` where a bool, number, string, list, map or struct is expected as its zero value, without an
    /// error, as Go's `encoding/json` decodes the API server's built-in types (a `null` list item is a zero item).
    pub null_is_zero: bool,
}

/// The result of decoding one value.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// Decoded without errors (warnings may have been recorded).
    Clean(T),
    /// Errors were recorded; the value holds zero stand-ins where fields did not fit. Good for running further
    /// checks on the rest of the value, never for use as the real thing.
    Patched(T),
    /// Decoding stopped at an error that no stand-in gets past; the errors are recorded.
    Failed,
}

/// Decodes `value` as `T`, pushing warnings (unknown fields, when asked for) and then errors onto `findings`, each at
/// `prefix` joined with the field path inside `value`.
pub fn deserialize<T: DeserializeOwned>(
    value: &Value,
    prefix: &str,
    options: Options,
    findings: &mut Vec<Finding>,
) -> Outcome<T> {
    let ctx = Ctx {
        prefix,
        options,
        errors: RefCell::new(Vec::new()),
        warnings: RefCell::new(Vec::new()),
    };
    let result = T::deserialize(De {
        value,
        path: Path::Root,
        ctx: &ctx,
    });
    let warnings = ctx.warnings.into_inner();
    let mut errors = ctx.errors.into_inner();
    let outcome = match result {
        Ok(decoded) if errors.is_empty() => Outcome::Clean(decoded),
        Ok(decoded) => Outcome::Patched(decoded),
        Err(error) => {
            if !error.reported {
                errors.push(Finding::error(
                    error.path.unwrap_or_else(|| prefix.to_string()),
                    error.message,
                ));
            }
            Outcome::Failed
        }
    };
    findings.extend(warnings);
    findings.extend(errors);
    outcome
}

/// An error that ends decoding.
#[derive(Debug)]
pub struct Error {
    message: String,
    /// Where it happened, set by the innermost deserializer that saw it.
    path: Option<String>,
    /// Already recorded as a finding (decoding gave up after a stand-in did not fit).
    reported: bool,
}

impl Error {
    fn abandoned() -> Self {
        Error {
            message: String::new(),
            path: None,
            reported: true,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<M: fmt::Display>(message: M) -> Self {
        Error {
            message: message.to_string(),
            path: None,
            reported: false,
        }
    }
}

/// Shared state of one decode: where findings go.
struct Ctx<'p> {
    prefix: &'p str,
    options: Options,
    errors: RefCell<Vec<Finding>>,
    warnings: RefCell<Vec<Finding>>,
}

/// The field path of the value being decoded, as a chain of borrowed segments on the stack.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root,
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    /// Renders the path after `prefix`: `spec` + `http`, `0`, `timeout` → `spec.http[0].timeout`.
    fn render(&self, prefix: &str) -> String {
        fn write(path: &Path<'_>, prefix: &str, out: &mut String) {
            match *path {
                Path::Root => out.push_str(prefix),
                Path::Key(parent, key) => {
                    write(parent, prefix, out);
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(key);
                }
                Path::Index(parent, index) => {
                    write(parent, prefix, out);
                    out.push('[');
                    out.push_str(&index.to_string());
                    out.push(']');
                }
            }
        }
        let mut out = String::new();
        write(self, prefix, &mut out);
        out
    }
}

/// Deserializer for one value at one path.
#[derive(Clone, Copy)]
struct De<'p, 'de> {
    value: &'de Value,
    path: Path<'p>,
    ctx: &'p Ctx<'p>,
}

type Result<T> = std::result::Result<T, Error>;

impl<'de> De<'_, 'de> {
    /// Records an error at this value's path.
    fn record(&self, error: Error) {
        let finding = Finding::error(self.path.render(self.ctx.prefix), error.message);
        self.ctx.errors.borrow_mut().push(finding);
    }

    /// Records that the value's JSON type does not fit what `expected` asks for.
    fn record_type(&self, expected: &dyn Expected) {
        self.record(de::Error::invalid_type(unexpected(self.value), expected));
    }

    /// Gives an error without a location this value's path.
    fn locate<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|mut error| {
            if error.path.is_none() && !error.reported {
                error.path = Some(self.path.render(self.ctx.prefix));
            }
            error
        })
    }

    fn visit_array<V: Visitor<'de>>(self, items: &'de [Value], visitor: V) -> Result<V::Value> {
        let mut seq = Seq {
            items: items.iter(),
            index: 0,
            path: self.path,
            ctx: self.ctx,
        };
        let value = visitor.visit_seq(&mut seq)?;
        if seq.items.len() == 0 {
            Ok(value)
        } else {
            Err(de::Error::invalid_length(
                items.len(),
                &"fewer elements in array",
            ))
        }
    }

    fn visit_object<V: Visitor<'de>>(
        self,
        fields: &'de Map<String, Value>,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_map(Fields {
            iter: fields.iter(),
            pending: None,
            path: self.path,
            ctx: self.ctx,
        })
    }

    /// An unsigned integer of at most `max`; anything else is recorded and decodes as 0.
    fn unsigned<V: Visitor<'de>>(self, max: u64, visitor: V) -> Result<V::Value> {
        match fit_unsigned(self.value, max, &visitor) {
            Ok(u) => self.locate(visitor.visit_u64(u)),
            Err(error) => {
                if !self.zero_for_null() {
                    self.record(error);
                }
                self.locate(visitor.visit_u64(0))
            }
        }
    }

    /// A signed integer in `min..=max`; anything else is recorded and decodes as 0.
    fn signed<V: Visitor<'de>>(self, min: i64, max: i64, visitor: V) -> Result<V::Value> {
        match fit_signed(self.value, min, max, &visitor) {
            Ok(i) => self.locate(visitor.visit_i64(i)),
            Err(error) => {
                if !self.zero_for_null() {
                    self.record(error);
                }
                self.locate(visitor.visit_i64(0))
            }
        }
    }

    /// Whether this value is a `null` the options decode as the zero value, silently.
    fn zero_for_null(&self) -> bool {
        self.value.is_null() && self.ctx.options.null_is_zero
    }

    /// Records a type mismatch, unless it is a `null` the options decode as the zero value.
    fn mismatch<'v, V: Visitor<'v>>(&self, visitor: &V) {
        if !self.zero_for_null() {
            self.record_type(visitor);
        }
    }

    fn float<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.value {
            Value::Number(n) => self.locate(visit_number(n, visitor)),
            _ => {
                self.mismatch(&visitor);
                self.locate(visitor.visit_f64(0.0))
            }
        }
    }

    fn string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.value {
            Value::String(s) => self.locate(visitor.visit_borrowed_str(s)),
            _ => {
                self.mismatch(&visitor);
                self.locate(visitor.visit_borrowed_str(""))
            }
        }
    }

    fn seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.value {
            Value::Array(items) => self.locate(self.visit_array(items, visitor)),
            _ => {
                self.mismatch(&visitor);
                self.locate(self.visit_array(&[], visitor))
            }
        }
    }

    fn map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.value {
            Value::Object(fields) => self.locate(self.visit_object(fields, visitor)),
            _ => {
                self.mismatch(&visitor);
                self.locate(visitor.visit_map(Fields {
                    iter: EMPTY_MAP.iter(),
                    pending: None,
                    path: self.path,
                    ctx: self.ctx,
                }))
            }
        }
    }
}

/// The stand-in for an object that is not one.
static EMPTY_MAP: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

/// What `serde_json` calls a value in its error messages.
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (None, Some(i)) => Unexpected::Signed(i),
            (None, None) => Unexpected::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// The unsigned integer in `value` if it is one of at most `max`, else serde's error for `expected`.
fn fit_unsigned(value: &Value, max: u64, expected: &dyn Expected) -> Result<u64> {
    let Value::Number(n) = value else {
        return Err(de::Error::invalid_type(unexpected(value), expected));
    };
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) if u <= max => Ok(u),
        (Some(u), _) => Err(de::Error::invalid_value(Unexpected::Unsigned(u), expected)),
        (None, Some(i)) => Err(de::Error::invalid_value(Unexpected::Signed(i), expected)),
        (None, None) => Err(de::Error::invalid_type(unexpected(value), expected)),
    }
}

/// The signed integer in `value` if it is one in `min..=max`, else serde's error for `expected`.
fn fit_signed(value: &Value, min: i64, max: i64, expected: &dyn Expected) -> Result<i64> {
    let Value::Number(n) = value else {
        return Err(de::Error::invalid_type(unexpected(value), expected));
    };
    match (n.as_i64(), n.as_u64()) {
        (Some(i), _) if (min..=max).contains(&i) => Ok(i),
        (Some(i), _) => Err(de::Error::invalid_value(Unexpected::Signed(i), expected)),
        (None, Some(u)) => Err(de::Error::invalid_value(Unexpected::Unsigned(u), expected)),
        (None, None) => Err(de::Error::invalid_type(unexpected(value), expected)),
    }
}

fn visit_number<'de, V: Visitor<'de>>(n: &Number, visitor: V) -> Result<V::Value> {
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => visitor.visit_u64(u),
        (None, Some(i)) => visitor.visit_i64(i),
        (None, None) => visitor.visit_f64(n.as_f64().unwrap_or_default()),
    }
}

macro_rules! unsigned {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            self.unsigned(<$ty>::MAX.into(), visitor)
        }
    )*};
}

macro_rules! signed {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            self.signed(<$ty>::MIN.into(), <$ty>::MAX.into(), visitor)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for De<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let result = match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => visit_number(n, visitor),
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => self.visit_array(items, visitor),
            Value::Object(fields) => self.visit_object(fields, visitor),
        };
        self.locate(result)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.value {
            Value::Bool(b) => self.locate(visitor.visit_bool(*b)),
            _ => {
                self.mismatch(&visitor);
                self.locate(visitor.visit_bool(false))
            }
        }
    }

    unsigned!(deserialize_u8: u8, deserialize_u16: u16, deserialize_u32: u32, deserialize_u64: u64);
    signed!(deserialize_i8: i8, deserialize_i16: i16, deserialize_i32: i32, deserialize_i64: i64);

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.float(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.float(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.string(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.string(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.value {
            Value::Array(_) => self.seq(visitor),
            _ => self.string(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.value {
            Value::Null => self.locate(visitor.visit_none()),
            _ => self.locate(visitor.visit_some(self)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if !self.value.is_null() {
            self.record_type(&visitor);
        }
        self.locate(visitor.visit_unit())
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.locate(visitor.visit_newtype_struct(self))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.seq(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.map(visitor)
    }

    /// Structs come from objects only (a list in place of an object is an error, not a positional struct).
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let (variant, content) = match self.value {
            Value::String(variant) => (variant.as_str(), None),
            Value::Object(fields) if fields.len() == 1 => match fields.iter().next() {
                Some((variant, content)) => (variant.as_str(), Some(content)),
                None => return Err(Error::abandoned()),
            },
            Value::Object(_) => {
                self.record(de::Error::invalid_value(
                    Unexpected::Map,
                    &"map with a single key",
                ));
                return self.stand_in_variant(variants, visitor);
            }
            _ => {
                self.record_type(&"string or map");
                return self.stand_in_variant(variants, visitor);
            }
        };
        if !variants.contains(&variant) {
            self.record(de::Error::unknown_variant(variant, variants));
            return self.stand_in_variant(variants, visitor);
        }
        self.locate(visitor.visit_enum(Variant {
            name: variant,
            content,
            at: self,
            stand_in: false,
        }))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.string(visitor)
    }

    /// Called for fields the target does not know: they are reported (when asked for) and skipped.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.ctx.options.warn_unknown {
            let finding =
                Finding::warning(self.path.render(self.ctx.prefix), "unknown field (ignored)");
            self.ctx.warnings.borrow_mut().push(finding);
        }
        visitor.visit_unit()
    }
}

impl<'de> De<'_, 'de> {
    /// Decodes the first variant in place of a wrong one (the error is already recorded).
    fn stand_in_variant<V: Visitor<'de>>(
        self,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let Some(first) = variants.first() else {
            return Err(Error::abandoned());
        };
        visitor.visit_enum(Variant {
            name: first,
            content: None,
            at: self,
            stand_in: true,
        })
    }
}

/// Walks a list.
struct Seq<'p, 'de> {
    items: std::slice::Iter<'de, Value>,
    index: usize,
    path: Path<'p>,
    ctx: &'p Ctx<'p>,
}

impl<'de> SeqAccess<'de> for Seq<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let Some(value) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(De {
            value,
            path: Path::Index(&self.path, index),
            ctx: self.ctx,
        })
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// Walks an object's fields (skipping `null` ones when the options say so).
struct Fields<'p, 'de> {
    iter: serde_json::map::Iter<'de>,
    pending: Option<(&'de str, &'de Value)>,
    path: Path<'p>,
    ctx: &'p Ctx<'p>,
}

impl<'de> MapAccess<'de> for Fields<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let skip_null = self.ctx.options.skip_null_fields;
        let Some((key, value)) = self.iter.find(|(_, v)| !(skip_null && v.is_null())) else {
            return Ok(None);
        };
        self.pending = Some((key, value));
        seed.deserialize(Key {
            key,
            at: De {
                value,
                path: self.path,
                ctx: self.ctx,
            },
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let Some((key, value)) = self.pending.take() else {
            return Err(de::Error::custom("value requested before its key"));
        };
        seed.deserialize(De {
            value,
            path: Path::Key(&self.path, key),
            ctx: self.ctx,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// Deserializes an object key: text, or a number or bool written as text (`"8080"` for a `u32` key).
struct Key<'p, 'de> {
    key: &'de str,
    /// The object's path (a bad key is reported on the object, whose rules may see the stand-in key) and the
    /// field's value.
    at: De<'p, 'de>,
}

impl<'de> Key<'_, 'de> {
    /// The key as a number, or serde's error for `expected` naming the key text.
    fn parsed(&self, expected: &dyn Expected) -> Result<Value> {
        match self.key.parse::<Number>() {
            Ok(n) => Ok(Value::Number(n)),
            Err(_) => Err(de::Error::invalid_type(Unexpected::Str(self.key), expected)),
        }
    }

    fn unsigned<V: Visitor<'de>>(self, max: u64, visitor: V) -> Result<V::Value> {
        match self
            .parsed(&visitor)
            .and_then(|n| fit_unsigned(&n, max, &visitor))
        {
            Ok(u) => self.at.locate(visitor.visit_u64(u)),
            Err(error) => {
                self.at.record(error);
                self.at.locate(visitor.visit_u64(0))
            }
        }
    }

    fn signed<V: Visitor<'de>>(self, min: i64, max: i64, visitor: V) -> Result<V::Value> {
        match self
            .parsed(&visitor)
            .and_then(|n| fit_signed(&n, min, max, &visitor))
        {
            Ok(i) => self.at.locate(visitor.visit_i64(i)),
            Err(error) => {
                self.at.record(error);
                self.at.locate(visitor.visit_i64(0))
            }
        }
    }
}

impl<'de> de::Deserializer<'de> for Key<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_str(self.key)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.key {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => {
                self.at
                    .record(de::Error::invalid_type(Unexpected::Str(self.key), &visitor));
                self.at.locate(visitor.visit_bool(false))
            }
        }
    }

    unsigned!(deserialize_u8: u8, deserialize_u16: u16, deserialize_u32: u32, deserialize_u64: u64);
    signed!(deserialize_i8: i8, deserialize_i16: i16, deserialize_i32: i32, deserialize_i64: i64);

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_enum(self.key.into_deserializer())
    }

    serde::forward_to_deserialize_any! {
        u128 i128 f32 f64 char str string bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

/// One enum variant with its content (if any).
struct Variant<'p, 'de> {
    name: &'de str,
    content: Option<&'de Value>,
    /// The enum's own value and path.
    at: De<'p, 'de>,
    /// The variant stands in for a wrong one: a further error is a consequence, not news.
    stand_in: bool,
}

impl<'p, 'de> EnumAccess<'de> for Variant<'p, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self)> {
        let name: de::value::BorrowedStrDeserializer<'de, Error> =
            de::value::BorrowedStrDeserializer::new(self.name);
        let value = seed.deserialize(name)?;
        Ok((value, self))
    }
}

impl<'de> Variant<'_, 'de> {
    /// The content deserializer, or the error for a variant written without the content it needs.
    fn content(&self, expected: &'static str) -> Result<De<'_, 'de>> {
        match self.content {
            Some(value) if !self.stand_in => Ok(De {
                value,
                path: Path::Key(&self.at.path, self.name),
                ctx: self.at.ctx,
            }),
            _ if self.stand_in => Err(Error::abandoned()),
            _ => Err(de::Error::invalid_type(Unexpected::UnitVariant, &expected)),
        }
    }
}

impl<'de> VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        match self.content {
            Some(value) if !value.is_null() => {
                self.at
                    .record(de::Error::invalid_type(unexpected(value), &"unit variant"));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(self.content("newtype variant")?)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_seq(self.content("tuple variant")?, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_map(self.content("struct variant")?, visitor)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::istio::VirtualService;
    use crate::Severity;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Sample {
        name: String,
        port: Option<u32>,
        ports: BTreeMap<u32, String>,
        mode: Mode,
        nested: Vec<Inner>,
        config: Option<serde_json::Map<String, Value>>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct Inner {
        on: bool,
        weight: i32,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    enum Mode {
        #[default]
        Off,
        On,
    }

    const SPEC: Options = Options {
        warn_unknown: true,
        skip_null_fields: true,
        null_is_zero: false,
    };

    fn run<T: DeserializeOwned>(value: Value, options: Options) -> (Outcome<T>, Vec<Finding>) {
        let mut findings = Vec::new();
        let outcome = deserialize(&value, "spec", options, &mut findings);
        (outcome, findings)
    }

    fn errors(findings: &[Finding]) -> Vec<(String, String)> {
        findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| (f.field.clone(), f.message.clone()))
            .collect()
    }

    #[test]
    fn a_clean_value_decodes_as_serde_json_decodes_it() {
        let value = json!({"name": "a", "port": 80, "ports": {"8080": "web"}, "mode": "On",
            "nested": [{"on": true, "weight": -3}], "config": {"k": [1, null, {"x": "y"}]}});
        let (outcome, findings) = run::<Sample>(value.clone(), SPEC);
        let expected: Sample = serde_json::from_value(value).unwrap();
        assert_eq!(outcome, Outcome::Clean(expected));
        assert!(findings.is_empty());
    }

    #[test]
    fn every_type_error_is_reported_with_its_path_and_serde_message() {
        let value = json!({"name": 5, "port": -1, "ports": {"abc": "x", "70000000000": "y"},
            "mode": "Sideways", "nested": [{"on": "yes"}, {"weight": 1.5}, {"weight": 3_000_000_000u64}]});
        let (outcome, findings) = run::<Sample>(value, SPEC);
        assert_eq!(
            errors(&findings),
            [
                (
                    "spec.mode",
                    "unknown variant `Sideways`, expected `Off` or `On`"
                ),
                ("spec.name", "invalid type: integer `5`, expected a string"),
                (
                    "spec.nested[0].on",
                    "invalid type: string \"yes\", expected a boolean"
                ),
                (
                    "spec.nested[1].weight",
                    "invalid type: floating point `1.5`, expected i32"
                ),
                (
                    "spec.nested[2].weight",
                    "invalid value: integer `3000000000`, expected i32"
                ),
                ("spec.port", "invalid value: integer `-1`, expected u32"),
                (
                    "spec.ports",
                    "invalid value: integer `70000000000`, expected u32"
                ),
                ("spec.ports", "invalid type: string \"abc\", expected u32"),
            ]
            .map(|(f, m)| (f.to_string(), m.to_string()))
        );
        let Outcome::Patched(sample) = outcome else {
            panic!("expected a patched value, got {outcome:?}");
        };
        assert_eq!(sample.name, "");
        assert_eq!(sample.port, Some(0));
        assert_eq!(sample.mode, Mode::Off);
        assert_eq!(sample.nested.len(), 3);
    }

    #[test]
    fn messages_match_serde_json_for_the_first_error() {
        for value in [
            json!({"name": ["x"]}),
            json!({"port": "80"}),
            json!({"nested": {"on": true}}),
            json!({"nested": [3]}),
            json!({"mode": 1}),
            json!({"mode": {"On": null, "Off": null}}),
            json!({"config": "text"}),
        ] {
            let serde_message = serde_json::from_value::<Sample>(value.clone())
                .unwrap_err()
                .to_string();
            let (_, findings) = run::<Sample>(value.clone(), SPEC);
            let first = &errors(&findings)[0].1;
            assert_eq!(first, &serde_message, "{value}");
        }
    }

    #[test]
    fn a_list_in_place_of_an_object_is_an_error() {
        let (outcome, findings) = run::<Sample>(json!({"nested": [["x"]]}), SPEC);
        assert!(matches!(outcome, Outcome::Patched(_)));
        assert_eq!(
            errors(&findings),
            [(
                "spec.nested[0]".to_string(),
                "invalid type: sequence, expected struct Inner".to_string()
            )]
        );
    }

    #[test]
    fn unknown_fields_are_warnings_with_readable_paths() {
        let value =
            json!({"bogus": 1, "nested": [{}, {"extra": {"deep": 1}}], "config": {"free": 1}});
        let (outcome, findings) = run::<Sample>(value.clone(), SPEC);
        assert!(matches!(outcome, Outcome::Clean(_)));
        let warnings: Vec<&str> = findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(warnings, ["spec.bogus", "spec.nested[1].extra"]);
        let (_, quiet) = run::<Sample>(value, Options::default());
        assert!(quiet.is_empty());
    }

    #[test]
    fn null_object_fields_are_absent_only_when_asked() {
        let value = json!({"name": null, "nested": [{"on": null}]});
        let (outcome, findings) = run::<Sample>(value.clone(), SPEC);
        assert_eq!(
            outcome,
            Outcome::Clean(Sample {
                nested: vec![Inner::default()],
                ..Sample::default()
            })
        );
        assert!(findings.is_empty());
        let (_, findings) = run::<Sample>(value, Options::default());
        assert_eq!(errors(&findings).len(), 2);
    }

    #[test]
    fn a_virtual_service_with_three_wrong_fields_reports_all_three() {
        let spec = json!({"hosts": ["a.example.com", 7], "http": [{"timeout": 5,
            "route": [{"destination": {"host": "a", "port": {"number": "80"}}}]}]});
        let (outcome, findings) = run::<VirtualService>(spec, SPEC);
        assert!(matches!(outcome, Outcome::Patched(_)));
        let fields: Vec<String> = errors(&findings).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "spec.hosts[1]",
                "spec.http[0].route[0].destination.port.number",
                "spec.http[0].timeout"
            ]
        );
    }

    #[test]
    fn an_empty_prefix_starts_paths_at_the_first_key() {
        let mut findings = Vec::new();
        let outcome: Outcome<Sample> = deserialize(&json!({"name": 1}), "", SPEC, &mut findings);
        assert!(matches!(outcome, Outcome::Patched(_)));
        assert_eq!(findings[0].field, "name");
    }
}
