//! protoc-gen-validate rules (pure): takes a [`DynamicMessage`] from [`super::pool`] and yields every
//! `(validate.rules)` / `(validate.required)` constraint it breaks, as [`Violation`]s naming the proto field
//! path and the rule.
//!
//! The rules of each message type are read from the descriptors once and cached, so a check costs one map
//! lookup per message plus the comparisons. Nested messages, repeated items, map values and `Any` payloads
//! (resolved through the pool) are checked recursively. Timestamp rules relative to "now" (`lt_now`,
//! `gt_now`, `within`) are not checked: this module is pure and has no clock. One check beyond the proto rules:
//! a URI template (`UriTemplateMatchConfig.path_template`) must parse as Envoy parses it ([`super::uri_template`]),
//! as Envoy aborts on one that does not; and a regex (`RegexMatcher.regex`) must stay within Envoy's RE2 program size
//! limit ([`admitpilot_model::re2::re2_program_size_bound`]), as Envoy rejects the whole resource otherwise.

use std::collections::HashMap;
use std::fmt;

use ahash::AHashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, LazyLock, RwLock};

use envoy_types::pb::google::protobuf::{Duration, Timestamp};
use envoy_types::pb::validate::{
    field_rules::Type as RuleType, string_rules::WellKnown, AnyRules, BytesRules, DurationRules,
    EnumRules, FieldRules, KnownRegex, MapRules, RepeatedRules, StringRules, TimestampRules,
};
use prost_reflect::{
    DynamicMessage, ExtensionDescriptor, FieldDescriptor, Kind, MapKey, MessageDescriptor,
    OneofDescriptor, ReflectMessage, Value,
};
use regex::Regex;

use super::pool;

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Proto field path below the validated message (`http_filters[0].name`); empty for the message itself.
    pub path: String,
    /// The rule, as written in the proto (`string.min_len`, `message.required`, `oneof.required`).
    pub rule: String,
    /// What the value should have been.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{} (rule {})", self.message, self.rule)
        } else {
            write!(f, "{}: {} (rule {})", self.path, self.message, self.rule)
        }
    }
}

/// Checks `message` and everything below it; returns every violation, in field order.
pub fn validate_message(message: &DynamicMessage) -> Vec<Violation> {
    let mut walker = Walker {
        path: String::new(),
        out: Vec::new(),
        partial: false,
    };
    walker.message(message);
    walker.out
}

/// Checks a partial `message`, one to be merged into another (an EnvoyFilter MERGE value): every field it sets
/// must satisfy its rules, but presence and size rules, which depend on what it is merged into, are not checked
/// (`required`, required oneofs, `min_items`, `min_pairs`). Upper bounds still hold: merging appends lists and
/// unites maps, so what is already too long stays too long. List items and map values are appended or replaced
/// whole, so they are checked as whole messages.
pub fn validate_partial_message(message: &DynamicMessage) -> Vec<Violation> {
    let mut walker = Walker {
        path: String::new(),
        out: Vec::new(),
        partial: true,
    };
    walker.message(message);
    walker.out
}

/// The cached rules of one message type.
struct MessagePlan {
    /// `(validate.disabled)` or `(validate.ignored)`: nothing below is checked.
    skip: bool,
    /// Fields with rules or with message values to recurse into.
    fields: Vec<FieldPlan>,
    /// Oneofs marked `(validate.required)`.
    required_oneofs: Vec<OneofDescriptor>,
}

struct FieldPlan {
    field: FieldDescriptor,
    rules: Option<FieldRules>,
    /// What the walk asks of the field for every message it checks, read from the descriptor once.
    is_map: bool,
    is_list: bool,
    in_oneof: bool,
    is_message: bool,
    is_enum: bool,
}

struct Extensions {
    rules: Option<ExtensionDescriptor>,
    required: Option<ExtensionDescriptor>,
    disabled: Option<ExtensionDescriptor>,
    ignored: Option<ExtensionDescriptor>,
}

/// The URI template matcher's config, whose template Envoy parses on load ([`super::uri_template`]).
const URI_TEMPLATE_MATCH: &str =
    "envoy.extensions.path.match.uri_template.v3.UriTemplateMatchConfig";

/// The regex matcher, whose pattern Envoy compiles with RE2 under a program size limit.
const REGEX_MATCHER: &str = "envoy.type.matcher.v3.RegexMatcher";

static EXTENSIONS: LazyLock<Extensions> = LazyLock::new(|| Extensions {
    rules: pool().get_extension_by_name("validate.rules"),
    required: pool().get_extension_by_name("validate.required"),
    disabled: pool().get_extension_by_name("validate.disabled"),
    ignored: pool().get_extension_by_name("validate.ignored"),
});

/// By message name; aHash, as every message checked looks its plan up.
static PLANS: LazyLock<RwLock<AHashMap<String, Arc<MessagePlan>>>> =
    LazyLock::new(|| RwLock::new(AHashMap::new()));

static REGEXES: LazyLock<RwLock<HashMap<String, Option<Arc<Regex>>>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

fn plan(desc: &MessageDescriptor) -> Arc<MessagePlan> {
    if let Ok(plans) = PLANS.read() {
        if let Some(plan) = plans.get(desc.full_name()) {
            return plan.clone();
        }
    }
    let plan = Arc::new(build_plan(desc));
    if let Ok(mut plans) = PLANS.write() {
        plans.insert(desc.full_name().to_string(), plan.clone());
    }
    plan
}

fn bool_extension(options: &DynamicMessage, ext: Option<&ExtensionDescriptor>) -> bool {
    ext.is_some_and(|ext| {
        options.has_extension(ext) && options.get_extension(ext).as_bool() == Some(true)
    })
}

fn build_plan(desc: &MessageDescriptor) -> MessagePlan {
    let ext = &*EXTENSIONS;
    let options = desc.options();
    let skip = bool_extension(&options, ext.disabled.as_ref())
        || bool_extension(&options, ext.ignored.as_ref());
    let mut fields = Vec::new();
    for field in desc.fields() {
        let rules = ext.rules.as_ref().and_then(|rules_ext| {
            let options = field.options();
            if !options.has_extension(rules_ext) {
                return None;
            }
            options
                .get_extension(rules_ext)
                .as_message()
                .and_then(|m| m.transcode_to::<FieldRules>().ok())
        });
        let recurses = match field.kind() {
            Kind::Message(m) => {
                !field.is_map() || matches!(map_value_kind(&m), Some(Kind::Message(_)))
            }
            _ => false,
        };
        if rules.is_some() || recurses {
            fields.push(FieldPlan {
                is_map: field.is_map(),
                is_list: field.is_list(),
                in_oneof: field.containing_oneof().is_some(),
                is_message: matches!(field.kind(), Kind::Message(_)),
                is_enum: matches!(field.kind(), Kind::Enum(_)),
                field,
                rules,
            });
        }
    }
    let required_oneofs = desc
        .oneofs()
        .filter(|oneof| bool_extension(&oneof.options(), ext.required.as_ref()))
        .collect();
    MessagePlan {
        skip,
        fields,
        required_oneofs,
    }
}

fn map_value_kind(entry: &MessageDescriptor) -> Option<Kind> {
    entry.get_field(2).map(|f| f.kind())
}

fn regex(pattern: &str) -> Option<Arc<Regex>> {
    if let Ok(cache) = REGEXES.read() {
        if let Some(found) = cache.get(pattern) {
            return found.clone();
        }
    }
    let compiled = Regex::new(pattern).ok().map(Arc::new);
    if let Ok(mut cache) = REGEXES.write() {
        cache.insert(pattern.to_string(), compiled.clone());
    }
    compiled
}

/// One step of a field path.
enum Segment<'a> {
    /// A field, by name.
    Field(&'a str),
    /// A list index or map key, with its brackets.
    Index(fmt::Arguments<'a>),
}

struct Walker {
    path: String,
    out: Vec<Violation>,
    /// Checking a value to be merged: only the rules of the fields it sets.
    partial: bool,
}

/// Numeric rules, normalised across the twelve numeric rule messages.
struct NumRules<'a, T> {
    family: &'static str,
    konst: Option<T>,
    lt: Option<T>,
    lte: Option<T>,
    gt: Option<T>,
    gte: Option<T>,
    r#in: &'a [T],
    not_in: &'a [T],
    ignore_empty: bool,
    show: fn(&T) -> String,
}

macro_rules! num_rules {
    ($family:literal, $r:expr) => {
        NumRules {
            family: $family,
            konst: $r.r#const,
            lt: $r.lt,
            lte: $r.lte,
            gt: $r.gt,
            gte: $r.gte,
            r#in: &$r.r#in,
            not_in: &$r.not_in,
            ignore_empty: $r.ignore_empty.unwrap_or(false),
            show: ToString::to_string,
        }
    };
}

impl Walker {
    fn violation(&mut self, rule: impl Into<String>, message: impl Into<String>) {
        self.out.push(Violation {
            path: self.path.clone(),
            rule: rule.into(),
            message: message.into(),
        });
    }

    /// Runs `f` with `segment` appended to the path: a field name (`.name`) or a bracketed index or key (`[3]`,
    /// `["key"]`). Writes into the one path buffer, without allocating.
    fn at<R>(&mut self, segment: Segment<'_>, f: impl FnOnce(&mut Self) -> R) -> R {
        use std::fmt::Write as _;
        let len = self.path.len();
        let index = match segment {
            Segment::Field(name) => {
                if !self.path.is_empty() {
                    self.path.push('.');
                }
                self.path.push_str(name);
                false
            }
            Segment::Index(index) => {
                // Writing into a String cannot fail.
                let _ = self.path.write_fmt(index);
                true
            }
        };
        // List items and map values are not merged into anything: merging appends or replaces them whole.
        let partial = self.partial;
        self.partial &= !index;
        let result = f(self);
        self.partial = partial;
        self.path.truncate(len);
        result
    }

    fn message(&mut self, message: &DynamicMessage) {
        let desc = message.descriptor();
        if desc.full_name() == "google.protobuf.Any" {
            self.any_payload(message);
            return;
        }
        let plan = plan(&desc);
        if plan.skip {
            return;
        }
        match desc.full_name() {
            URI_TEMPLATE_MATCH => self.uri_template(message),
            REGEX_MATCHER => self.re2_program_size(message),
            name if super::json::TYPED_STRUCTS.contains(&name) => self.typed_struct(message),
            _ => {}
        }
        let required_oneofs = if self.partial {
            &[][..]
        } else {
            &plan.required_oneofs[..]
        };
        for oneof in required_oneofs {
            if !oneof.fields().any(|f| message.has_field(&f)) {
                let names: Vec<String> = oneof.fields().map(|f| f.name().to_string()).collect();
                self.at(Segment::Field(oneof.name()), |w| {
                    w.violation(
                        "oneof.required",
                        format!("exactly one of {} must be set", names.join(", ")),
                    )
                });
            }
        }
        for fp in &plan.fields {
            let present = message.has_field(&fp.field);
            // A field without rules that is not set has nothing to check or recurse into.
            if fp.rules.is_none() && !present {
                continue;
            }
            self.at(Segment::Field(fp.field.name()), |w| {
                w.field(message, fp, present)
            });
        }
    }

    /// Envoy's load-time parse of a URI template ([`super::uri_template`]), which aborts Envoy when it fails.
    fn uri_template(&mut self, message: &DynamicMessage) {
        let template = message
            .get_field_by_name("path_template")
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        if let Err(why) = super::uri_template::check(&template) {
            self.at(Segment::Field("path_template"), |w| {
                w.violation(
                    "uri_template.path_template",
                    format!("Envoy cannot parse the URI template {template:?}: {why}"),
                )
            });
        }
    }

    /// Envoy's RE2 program size limit (runtime `re2.max_program_size.error_level`, default 100), over which it rejects
    /// the resource. Generated patterns (an authorization principal's `spiffe://.*<suffix>`) can exceed it.
    fn re2_program_size(&mut self, message: &DynamicMessage) {
        use admitpilot_model::re2::{re2_program_size_bound, ENVOY_RE2_PROGRAM_LIMIT};
        let Some(pattern) = message
            .get_field_by_name("regex")
            .and_then(|v| v.as_str().map(str::to_string))
        else {
            return;
        };
        match re2_program_size_bound(&pattern) {
            Some(size) if size > ENVOY_RE2_PROGRAM_LIMIT => {
                self.at(Segment::Field("regex"), |w| {
                    w.violation(
                        "regex.re2_program_size",
                        format!(
                            "Envoy refuses the regex {pattern:?}: its RE2 program size is at least {size}, over \
                             Envoy's limit of {ENVOY_RE2_PROGRAM_LIMIT} (runtime re2.max_program_size.error_level)"
                        ),
                    )
                });
            }
            _ => {}
        }
    }

    /// Envoy converts a `TypedStruct`'s `value` into the message its `type_url` names (ignoring unknown fields) and
    /// rejects the resource when that fails, e.g. a Duration given as a number (found by tests/e2e/envoy_generated.rs).
    /// Types the descriptors do not know (a Wasm or Go plugin's own config) are left to the gateway.
    fn typed_struct(&mut self, message: &DynamicMessage) {
        let Some(desc) = super::json::typed_struct_target(message) else {
            return;
        };
        let name = desc.full_name().to_string();
        if let Some(Err(error)) = super::json::typed_struct_value(message, desc) {
            self.at(Segment::Field("value"), |w| {
                w.violation(
                    "typed_struct.value",
                    format!("Envoy cannot convert the value into {name}: {error}"),
                )
            });
        }
    }

    fn any_payload(&mut self, any: &DynamicMessage) {
        let type_url = any
            .get_field_by_name("type_url")
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let name = type_url.rsplit('/').next().unwrap_or_default();
        let Some(desc) = pool().get_message_by_name(name) else {
            self.violation("any.type", format!("referenced type unknown: {type_url}"));
            return;
        };
        let bytes = any
            .get_field_by_name("value")
            .and_then(|v| v.as_bytes().cloned())
            .unwrap_or_default();
        match DynamicMessage::decode(desc, bytes) {
            Ok(payload) => self.message(&payload),
            Err(e) => self.violation("any.type", format!("payload does not decode: {e}")),
        }
    }

    /// Checks one field of `message` (`present`: whether the message sets it) against its plan's rules.
    fn field(&mut self, message: &DynamicMessage, plan: &FieldPlan, present: bool) {
        let field = &plan.field;
        let rules = plan.rules.as_ref();
        let skip_message = rules
            .and_then(|r| r.message.as_ref())
            .is_some_and(|m| m.skip == Some(true));
        let required = rules
            .and_then(|r| r.message.as_ref())
            .is_some_and(|m| m.required == Some(true));
        if plan.is_map {
            let value = message.get_field(field);
            if let Some(map) = value.as_map() {
                self.map(map, field, rules, skip_message);
            }
            return;
        }
        if plan.is_list {
            let value = message.get_field(field);
            if let Some(items) = value.as_list() {
                self.repeated(items, field, rules, skip_message);
            }
            return;
        }
        if plan.in_oneof && !present {
            // An unset member of a oneof is not checked.
            return;
        }
        if self.partial && !present {
            // Not set by the value to merge: whatever the target has stays.
            return;
        }
        if plan.is_message && !present {
            let wkt_required = match rules.and_then(|r| r.r#type.as_ref()) {
                Some(RuleType::Any(r)) => r.required == Some(true),
                Some(RuleType::Duration(r)) => r.required == Some(true),
                Some(RuleType::Timestamp(r)) => r.required == Some(true),
                _ => false,
            };
            if required || wkt_required {
                let rule = if required {
                    "message.required"
                } else {
                    "required"
                };
                self.violation(rule, "value is required");
            }
            return;
        }
        let value = message.get_field(field);
        if plan.is_enum {
            self.enum_value(&value, field, rules);
        } else {
            self.value(&value, rules, skip_message);
        }
    }

    /// Checks one singular value (a field, a list item or a map value) against `rules`, then recurses.
    fn value(&mut self, value: &Value, rules: Option<&FieldRules>, skip_message: bool) {
        if let Some(kind) = rules.and_then(|r| r.r#type.as_ref()) {
            self.typed(value, kind);
        }
        if let Value::Message(m) = value {
            if !skip_message {
                self.message(m);
            }
        }
    }

    fn typed(&mut self, value: &Value, kind: &RuleType) {
        // Wrapper types (google.protobuf.UInt32Value, ...) carry scalar rules for their `value` field.
        let unwrapped;
        let value = match value {
            Value::Message(m)
                if m.descriptor().full_name().starts_with("google.protobuf.")
                    && m.descriptor().full_name().ends_with("Value")
                    && !matches!(
                        kind,
                        RuleType::Any(_) | RuleType::Duration(_) | RuleType::Timestamp(_)
                    ) =>
            {
                match m.get_field_by_name("value") {
                    Some(v) => {
                        unwrapped = v.into_owned();
                        &unwrapped
                    }
                    None => return,
                }
            }
            other => other,
        };
        match (kind, value) {
            (RuleType::Float(r), Value::F32(v)) => self.number(*v, &num_rules!("float", r)),
            (RuleType::Double(r), Value::F64(v)) => self.number(*v, &num_rules!("double", r)),
            (RuleType::Int32(r), Value::I32(v)) => self.number(*v, &num_rules!("int32", r)),
            (RuleType::Int64(r), Value::I64(v)) => self.number(*v, &num_rules!("int64", r)),
            (RuleType::Uint32(r), Value::U32(v)) => self.number(*v, &num_rules!("uint32", r)),
            (RuleType::Uint64(r), Value::U64(v)) => self.number(*v, &num_rules!("uint64", r)),
            (RuleType::Sint32(r), Value::I32(v)) => self.number(*v, &num_rules!("sint32", r)),
            (RuleType::Sint64(r), Value::I64(v)) => self.number(*v, &num_rules!("sint64", r)),
            (RuleType::Fixed32(r), Value::U32(v)) => self.number(*v, &num_rules!("fixed32", r)),
            (RuleType::Fixed64(r), Value::U64(v)) => self.number(*v, &num_rules!("fixed64", r)),
            (RuleType::Sfixed32(r), Value::I32(v)) => self.number(*v, &num_rules!("sfixed32", r)),
            (RuleType::Sfixed64(r), Value::I64(v)) => self.number(*v, &num_rules!("sfixed64", r)),
            (RuleType::Bool(r), Value::Bool(v)) => {
                if let Some(c) = r.r#const {
                    if *v != c {
                        self.violation("bool.const", format!("value must be {c}"));
                    }
                }
            }
            (RuleType::String(r), Value::String(v)) => self.string(v, r),
            (RuleType::Bytes(r), Value::Bytes(v)) => self.bytes(v, r),
            (RuleType::Enum(r), Value::EnumNumber(v)) => self.enumeration(*v, r, true),
            (RuleType::Any(r), Value::Message(m)) => self.any_rules(m, r),
            (RuleType::Duration(r), Value::Message(m)) => self.duration(m, r),
            (RuleType::Timestamp(r), Value::Message(m)) => self.timestamp(m, r),
            // Repeated/map rules are handled by the caller; mismatched kinds are descriptor quirks.
            _ => {}
        }
    }

    fn number<T: PartialOrd + Copy + Default>(&mut self, v: T, r: &NumRules<'_, T>) {
        if r.ignore_empty && v == T::default() {
            return;
        }
        let family = r.family;
        let show = r.show;
        if let Some(c) = r.konst.filter(|c| v != *c) {
            self.violation(
                format!("{family}.const"),
                format!("value must equal {}", show(&c)),
            );
        }
        // (bound, inclusive, rule name)
        let lower =
            r.gt.map(|b| (b, false, "gt"))
                .or(r.gte.map(|b| (b, true, "gte")));
        let upper =
            r.lt.map(|b| (b, false, "lt"))
                .or(r.lte.map(|b| (b, true, "lte")));
        let above = |(b, inclusive, _): (T, bool, &str)| if inclusive { v >= b } else { v > b };
        let below = |(b, inclusive, _): (T, bool, &str)| if inclusive { v <= b } else { v < b };
        let describe = |(b, inclusive, _): (T, bool, &str), greater: bool| {
            let op = match (greater, inclusive) {
                (true, true) => "greater than or equal to",
                (true, false) => "greater than",
                (false, true) => "less than or equal to",
                (false, false) => "less than",
            };
            format!("{op} {}", show(&b))
        };
        match (lower, upper) {
            (Some(lo), Some(hi)) => {
                // A reversed range (upper bound below the lower one) means "outside the interval".
                let inside = hi.0 >= lo.0;
                let ok = if inside {
                    above(lo) && below(hi)
                } else {
                    above(lo) || below(hi)
                };
                if !ok {
                    let joiner = if inside { "and" } else { "or" };
                    self.violation(
                        format!("{family}.{}+{}", lo.2, hi.2),
                        format!(
                            "value must be {} {joiner} {}",
                            describe(lo, true),
                            describe(hi, false)
                        ),
                    );
                }
            }
            (Some(lo), None) if !above(lo) => self.violation(
                format!("{family}.{}", lo.2),
                format!("value must be {}", describe(lo, true)),
            ),
            (None, Some(hi)) if !below(hi) => self.violation(
                format!("{family}.{}", hi.2),
                format!("value must be {}", describe(hi, false)),
            ),
            _ => {}
        }
        if !r.r#in.is_empty() && !r.r#in.contains(&v) {
            self.violation(
                format!("{family}.in"),
                format!("value must be one of {}", list(r.r#in, show)),
            );
        }
        if r.not_in.contains(&v) {
            self.violation(
                format!("{family}.not_in"),
                format!("value must not be one of {}", list(r.not_in, show)),
            );
        }
    }

    fn string(&mut self, v: &str, r: &StringRules) {
        if r.ignore_empty == Some(true) && v.is_empty() {
            return;
        }
        let chars = v.chars().count() as u64;
        let bytes = v.len() as u64;
        if let Some(c) = &r.r#const {
            if v != c {
                self.violation("string.const", format!("value must equal {c:?}"));
            }
        }
        if let Some(n) = r.len {
            if chars != n {
                self.violation("string.len", format!("value length must be {n} characters"));
            }
        }
        if let Some(n) = r.min_len {
            if chars < n {
                self.violation(
                    "string.min_len",
                    format!("value length must be at least {n} characters"),
                );
            }
        }
        if let Some(n) = r.max_len {
            if chars > n {
                self.violation(
                    "string.max_len",
                    format!("value length must be at most {n} characters"),
                );
            }
        }
        if let Some(n) = r.len_bytes {
            if bytes != n {
                self.violation("string.len_bytes", format!("value must be {n} bytes long"));
            }
        }
        if let Some(n) = r.min_bytes {
            if bytes < n {
                self.violation(
                    "string.min_bytes",
                    format!("value must be at least {n} bytes long"),
                );
            }
        }
        if let Some(n) = r.max_bytes {
            if bytes > n {
                self.violation(
                    "string.max_bytes",
                    format!("value must be at most {n} bytes long"),
                );
            }
        }
        if let Some(p) = &r.pattern {
            if let Some(re) = regex(p) {
                if !re.is_match(v) {
                    self.violation(
                        "string.pattern",
                        format!("value does not match regex pattern {p:?}"),
                    );
                }
            }
        }
        if let Some(p) = &r.prefix {
            if !v.starts_with(p.as_str()) {
                self.violation("string.prefix", format!("value must start with {p:?}"));
            }
        }
        if let Some(s) = &r.suffix {
            if !v.ends_with(s.as_str()) {
                self.violation("string.suffix", format!("value must end with {s:?}"));
            }
        }
        if let Some(s) = &r.contains {
            if !v.contains(s.as_str()) {
                self.violation("string.contains", format!("value must contain {s:?}"));
            }
        }
        if let Some(s) = &r.not_contains {
            if v.contains(s.as_str()) {
                self.violation(
                    "string.not_contains",
                    format!("value must not contain {s:?}"),
                );
            }
        }
        if !r.r#in.is_empty() && !r.r#in.iter().any(|s| s == v) {
            self.violation("string.in", format!("value must be one of {:?}", r.r#in));
        }
        if r.not_in.iter().any(|s| s == v) {
            self.violation(
                "string.not_in",
                format!("value must not be one of {:?}", r.not_in),
            );
        }
        if let Some(known) = r.well_known {
            self.well_known(v, known, r.strict.unwrap_or(true));
        }
    }

    fn well_known(&mut self, v: &str, known: WellKnown, strict: bool) {
        let (rule, ok) = match known {
            WellKnown::Email(true) => ("string.email", is_email(v)),
            WellKnown::Hostname(true) => ("string.hostname", is_hostname(v)),
            WellKnown::Ip(true) => ("string.ip", v.parse::<IpAddr>().is_ok()),
            WellKnown::Ipv4(true) => ("string.ipv4", v.parse::<Ipv4Addr>().is_ok()),
            WellKnown::Ipv6(true) => ("string.ipv6", v.parse::<Ipv6Addr>().is_ok()),
            WellKnown::Uri(true) => ("string.uri", is_uri(v)),
            WellKnown::UriRef(true) => ("string.uri_ref", !v.chars().any(char::is_whitespace)),
            WellKnown::Address(true) => (
                "string.address",
                v.parse::<IpAddr>().is_ok() || is_hostname(v),
            ),
            WellKnown::Uuid(true) => ("string.uuid", is_uuid(v)),
            WellKnown::WellKnownRegex(n) => match KnownRegex::try_from(n) {
                Ok(KnownRegex::HttpHeaderName) => {
                    ("string.well_known_regex", is_header_name(v, strict))
                }
                Ok(KnownRegex::HttpHeaderValue) => {
                    ("string.well_known_regex", is_header_value(v, strict))
                }
                _ => return,
            },
            _ => return,
        };
        if !ok {
            let what = match known {
                WellKnown::Email(_) => "an email address",
                WellKnown::Hostname(_) => "a valid hostname",
                WellKnown::Ip(_) => "an IP address",
                WellKnown::Ipv4(_) => "an IPv4 address",
                WellKnown::Ipv6(_) => "an IPv6 address",
                WellKnown::Uri(_) => "an absolute URI",
                WellKnown::UriRef(_) => "a URI reference",
                WellKnown::Address(_) => "an IP address or hostname",
                WellKnown::Uuid(_) => "a UUID",
                WellKnown::WellKnownRegex(n) if n == KnownRegex::HttpHeaderName as i32 => {
                    "a valid HTTP header name"
                }
                WellKnown::WellKnownRegex(_) => "a valid HTTP header value",
            };
            self.violation(rule, format!("value must be {what}"));
        }
    }

    fn bytes(&mut self, v: &[u8], r: &BytesRules) {
        if r.ignore_empty == Some(true) && v.is_empty() {
            return;
        }
        let n = v.len() as u64;
        if r.r#const.as_deref().is_some_and(|c| c != v) {
            self.violation("bytes.const", "value must equal the constant");
        }
        if r.len.is_some_and(|l| n != l) {
            self.violation(
                "bytes.len",
                format!("value must be {} bytes long", r.len.unwrap_or_default()),
            );
        }
        if r.min_len.is_some_and(|l| n < l) {
            self.violation(
                "bytes.min_len",
                format!(
                    "value must be at least {} bytes long",
                    r.min_len.unwrap_or_default()
                ),
            );
        }
        if r.max_len.is_some_and(|l| n > l) {
            self.violation(
                "bytes.max_len",
                format!(
                    "value must be at most {} bytes long",
                    r.max_len.unwrap_or_default()
                ),
            );
        }
        if let Some(p) = &r.pattern {
            let text = String::from_utf8_lossy(v);
            if regex(p).is_some_and(|re| !re.is_match(&text)) {
                self.violation(
                    "bytes.pattern",
                    format!("value does not match regex pattern {p:?}"),
                );
            }
        }
        if r.prefix.as_deref().is_some_and(|p| !v.starts_with(p)) {
            self.violation("bytes.prefix", "value does not have the required prefix");
        }
        if r.suffix.as_deref().is_some_and(|s| !v.ends_with(s)) {
            self.violation("bytes.suffix", "value does not have the required suffix");
        }
        if r.contains
            .as_deref()
            .is_some_and(|c| !v.windows(c.len().max(1)).any(|w| w == c))
        {
            self.violation(
                "bytes.contains",
                "value does not contain the required bytes",
            );
        }
        if !r.r#in.is_empty() && !r.r#in.iter().any(|c| c == v) {
            self.violation("bytes.in", "value must be one of the allowed values");
        }
        if r.not_in.iter().any(|c| c == v) {
            self.violation(
                "bytes.not_in",
                "value must not be one of the forbidden values",
            );
        }
    }

    fn enumeration(&mut self, v: i32, r: &EnumRules, defined: bool) {
        if r.r#const.is_some_and(|c| c != v) {
            self.violation(
                "enum.const",
                format!("value must equal {}", r.r#const.unwrap_or_default()),
            );
        }
        if !r.r#in.is_empty() && !r.r#in.contains(&v) {
            self.violation(
                "enum.in",
                format!(
                    "value must be one of {}",
                    list(&r.r#in, ToString::to_string)
                ),
            );
        }
        if r.not_in.contains(&v) {
            self.violation(
                "enum.not_in",
                format!(
                    "value must not be one of {}",
                    list(&r.not_in, ToString::to_string)
                ),
            );
        }
        if r.defined_only == Some(true) && !defined {
            self.violation(
                "enum.defined_only",
                format!("value {v} is not a defined enum value"),
            );
        }
    }

    fn any_rules(&mut self, any: &DynamicMessage, r: &AnyRules) {
        let type_url = any
            .get_field_by_name("type_url")
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        if !r.r#in.is_empty() && !r.r#in.contains(&type_url) {
            self.violation("any.in", format!("type URL must be one of {:?}", r.r#in));
        }
        if r.not_in.contains(&type_url) {
            self.violation(
                "any.not_in",
                format!("type URL must not be one of {:?}", r.not_in),
            );
        }
    }

    fn duration(&mut self, m: &DynamicMessage, r: &DurationRules) {
        let Ok(d) = m.transcode_to::<Duration>() else {
            return;
        };
        let nanos = |d: &Duration| i128::from(d.seconds) * 1_000_000_000 + i128::from(d.nanos);
        let v = nanos(&d);
        let rules = NumRules {
            family: "duration",
            konst: r.r#const.as_ref().map(nanos),
            lt: r.lt.as_ref().map(nanos),
            lte: r.lte.as_ref().map(nanos),
            gt: r.gt.as_ref().map(nanos),
            gte: r.gte.as_ref().map(nanos),
            r#in: &r.r#in.iter().map(nanos).collect::<Vec<_>>(),
            not_in: &r.not_in.iter().map(nanos).collect::<Vec<_>>(),
            ignore_empty: false,
            show: show_nanos,
        };
        self.number(v, &rules);
    }

    fn timestamp(&mut self, m: &DynamicMessage, r: &TimestampRules) {
        let Ok(t) = m.transcode_to::<Timestamp>() else {
            return;
        };
        let nanos = |t: &Timestamp| i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos);
        let rules = NumRules {
            family: "timestamp",
            konst: r.r#const.as_ref().map(nanos),
            lt: r.lt.as_ref().map(nanos),
            lte: r.lte.as_ref().map(nanos),
            gt: r.gt.as_ref().map(nanos),
            gte: r.gte.as_ref().map(nanos),
            r#in: &[],
            not_in: &[],
            ignore_empty: false,
            show: show_nanos,
        };
        self.number(nanos(&t), &rules);
    }

    fn repeated(
        &mut self,
        items: &[Value],
        field: &FieldDescriptor,
        rules: Option<&FieldRules>,
        skip_message: bool,
    ) {
        let r: Option<&RepeatedRules> = match rules.and_then(|r| r.r#type.as_ref()) {
            Some(RuleType::Repeated(r)) => Some(r),
            _ => None,
        };
        if let Some(r) = r {
            if (r.ignore_empty == Some(true) || self.partial) && items.is_empty() {
                return;
            }
            let n = items.len() as u64;
            if let Some(min) = r.min_items.filter(|min| n < *min && !self.partial) {
                self.violation(
                    "repeated.min_items",
                    format!("value must contain at least {min} item(s)"),
                );
            }
            if let Some(max) = r.max_items.filter(|max| n > *max) {
                self.violation(
                    "repeated.max_items",
                    format!("value must contain at most {max} item(s)"),
                );
            }
            if r.unique == Some(true) {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        self.at(Segment::Index(format_args!("[{i}]")), |w| {
                            w.violation(
                                "repeated.unique",
                                "repeated value must contain unique items",
                            )
                        });
                    }
                }
            }
        }
        let item_rules = r.and_then(|r| r.items.as_deref());
        let item_skip = skip_message
            || item_rules
                .and_then(|r| r.message.as_ref())
                .is_some_and(|m| m.skip == Some(true));
        let is_enum = matches!(field.kind(), Kind::Enum(_));
        for (i, item) in items.iter().enumerate() {
            self.at(Segment::Index(format_args!("[{i}]")), |w| {
                if is_enum {
                    w.enum_value(item, field, item_rules);
                } else {
                    w.value(item, item_rules, item_skip);
                }
            });
        }
    }

    fn map(
        &mut self,
        map: &HashMap<MapKey, Value>,
        field: &FieldDescriptor,
        rules: Option<&FieldRules>,
        skip_message: bool,
    ) {
        let r: Option<&MapRules> = match rules.and_then(|r| r.r#type.as_ref()) {
            Some(RuleType::Map(r)) => Some(r),
            _ => None,
        };
        if let Some(r) = r {
            if (r.ignore_empty == Some(true) || self.partial) && map.is_empty() {
                return;
            }
            let n = map.len() as u64;
            if let Some(min) = r.min_pairs.filter(|min| n < *min && !self.partial) {
                self.violation(
                    "map.min_pairs",
                    format!("value must contain at least {min} pair(s)"),
                );
            }
            if let Some(max) = r.max_pairs.filter(|max| n > *max) {
                self.violation(
                    "map.max_pairs",
                    format!("value must contain at most {max} pair(s)"),
                );
            }
        }
        let key_rules = r.and_then(|r| r.keys.as_deref());
        let value_rules = r.and_then(|r| r.values.as_deref());
        let value_is_enum = match field.kind() {
            Kind::Message(entry) => matches!(map_value_kind(&entry), Some(Kind::Enum(_))),
            _ => false,
        };
        let mut keys: Vec<&MapKey> = map.keys().collect();
        keys.sort();
        for key in keys {
            let Some(value) = map.get(key) else { continue };
            self.at(Segment::Index(format_args!("[{}]", render_key(key))), |w| {
                if let Some(kind) = key_rules.and_then(|r| r.r#type.as_ref()) {
                    w.typed(&Value::from(key.clone()), kind);
                }
                if value_is_enum {
                    w.typed_enum_map_value(value, field, value_rules);
                } else {
                    w.value(value, value_rules, skip_message);
                }
            });
        }
    }

    fn typed_enum_map_value(
        &mut self,
        value: &Value,
        field: &FieldDescriptor,
        rules: Option<&FieldRules>,
    ) {
        if let Kind::Message(entry) = field.kind() {
            if let Some(value_field) = entry.get_field(2) {
                self.enum_value(value, &value_field, rules);
            }
        }
    }

    /// Checks an enum value, including `defined_only` against the field's enum descriptor.
    fn enum_value(&mut self, value: &Value, field: &FieldDescriptor, rules: Option<&FieldRules>) {
        let (Some(RuleType::Enum(r)), Value::EnumNumber(v)) =
            (rules.and_then(|r| r.r#type.as_ref()), value)
        else {
            return;
        };
        let defined = match field.kind() {
            Kind::Enum(e) => e.get_value(*v).is_some(),
            _ => true,
        };
        self.enumeration(*v, r, defined);
    }
}

/// Renders nanoseconds as a protobuf-JSON duration (`1.5s`).
fn show_nanos(n: &i128) -> String {
    let seconds = *n / 1_000_000_000;
    let frac = (*n % 1_000_000_000).abs();
    if frac == 0 {
        format!("{seconds}s")
    } else {
        let digits = format!("{frac:09}");
        format!("{seconds}.{}s", digits.trim_end_matches('0'))
    }
}

fn render_key(key: &MapKey) -> String {
    match key {
        MapKey::String(s) => format!("{s:?}"),
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
    }
}

fn list<T>(values: &[T], show: fn(&T) -> String) -> String {
    let items: Vec<String> = values.iter().map(show).collect();
    format!("[{}]", items.join(", "))
}

fn is_hostname(v: &str) -> bool {
    let v = v.strip_suffix('.').unwrap_or(v);
    !v.is_empty()
        && v.len() <= 253
        && v.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn is_email(v: &str) -> bool {
    let addr = match (v.find('<'), v.strip_suffix('>')) {
        (Some(i), Some(inner)) => &inner[i + 1..],
        _ => v,
    };
    match addr.rsplit_once('@') {
        Some((local, host)) => !local.is_empty() && local.len() <= 64 && is_hostname(host),
        None => false,
    }
}

fn is_uri(v: &str) -> bool {
    match v.split_once(':') {
        Some((scheme, _)) => {
            let mut chars = scheme.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && !v.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn is_uuid(v: &str) -> bool {
    let groups: Vec<&str> = v.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Envoy's `HTTP_HEADER_NAME` regex: RFC 7230 token characters, optionally prefixed by `:` (strict), or no
/// NUL/CR/LF (non-strict).
fn is_header_name(v: &str, strict: bool) -> bool {
    if !strict {
        return !v.chars().any(|c| matches!(c, '\0' | '\n' | '\r'));
    }
    let name = v.strip_prefix(':').unwrap_or(v);
    !name.is_empty()
        && name.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '!' | '#'
                        | '$'
                        | '%'
                        | '&'
                        | '\''
                        | '*'
                        | '+'
                        | '-'
                        | '.'
                        | '^'
                        | '_'
                        | '|'
                        | '~'
                        | '`'
                )
        })
}

/// Envoy's `HTTP_HEADER_VALUE` regex: no control characters except horizontal tab (strict), or no NUL/CR/LF.
fn is_header_value(v: &str, strict: bool) -> bool {
    if strict {
        !v.chars()
            .any(|c| (c <= '\u{8}') || ('\u{a}'..='\u{1f}').contains(&c) || c == '\u{7f}')
    } else {
        !v.chars().any(|c| matches!(c, '\0' | '\n' | '\r'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json;
    use serde_json::json;

    fn check(message: &str, value: serde_json::Value) -> Vec<Violation> {
        validate_message(&from_json(message, &value).unwrap())
    }

    fn rules(found: &[Violation]) -> Vec<(String, String)> {
        found
            .iter()
            .map(|v| (v.path.clone(), v.rule.clone()))
            .collect()
    }

    fn has(found: &[Violation], path: &str, rule: &str) -> bool {
        found.iter().any(|v| v.path == path && v.rule == rule)
    }

    #[test]
    fn valid_cluster_has_no_violations() {
        let found = check(
            "envoy.config.cluster.v3.Cluster",
            json!({"name": "c", "type": "STRICT_DNS", "connect_timeout": "1s",
                "load_assignment": {"cluster_name": "c", "endpoints": [{"lb_endpoints": [{"endpoint": {"address":
                    {"socket_address": {"address": "example.com", "port_value": 80}}}}]}]}}),
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn string_min_len_and_message_required() {
        // ListenerFilter.name has min_len 1; RouteAction-less Route breaks oneof.required on `action`.
        let found = check("envoy.config.listener.v3.ListenerFilter", json!({}));
        assert!(has(&found, "name", "string.min_len"), "{found:?}");
        let found = check(
            "envoy.config.route.v3.Route",
            json!({"match": {"prefix": "/"}}),
        );
        assert!(has(&found, "action", "oneof.required"), "{found:?}");
        // RouteMatch has a required `path_specifier` oneof; Route.match is message.required.
        let found = check(
            "envoy.config.route.v3.Route",
            json!({"route": {"cluster": "c"}}),
        );
        assert!(has(&found, "match", "message.required"), "{found:?}");
        let found = check(
            "envoy.config.route.v3.Route",
            json!({"match": {}, "route": {"cluster": "c"}}),
        );
        assert!(
            has(&found, "match.path_specifier", "oneof.required"),
            "{found:?}"
        );
    }

    #[test]
    fn numeric_ranges() {
        // SocketAddress.port_value: uint32 lte 65535.
        let found = check(
            "envoy.config.core.v3.SocketAddress",
            json!({"address": "1.2.3.4", "port_value": 70000}),
        );
        assert_eq!(
            rules(&found),
            vec![("port_value".into(), "uint32.lte".into())]
        );
        // RuntimeFractionalPercent / FractionalPercent numerator fine; HealthCheck.unhealthy_threshold is required.
        // CircuitBreakers thresholds: retry_budget.budget_percent is a double wrapper? use Percent: double gte 0 lte 100.
        let found = check("envoy.type.v3.Percent", json!({"value": 150.0}));
        assert!(has(&found, "value", "double.gte+lte"), "{found:?}");
        let found = check("envoy.type.v3.Percent", json!({"value": -1.0}));
        assert!(has(&found, "value", "double.gte+lte"), "{found:?}");
        // Wrapper types carry scalar rules: Cluster.per_connection_buffer_limit_bytes has none, but
        // HttpProtocolOptions.max_headers_count (UInt32Value gte 1).
        let found = check(
            "envoy.config.core.v3.HttpProtocolOptions",
            json!({"max_headers_count": 0}),
        );
        assert!(has(&found, "max_headers_count", "uint32.gte"), "{found:?}");
    }

    #[test]
    fn enum_defined_only() {
        let found = check(
            "envoy.config.core.v3.SocketAddress",
            json!({"address": "a", "port_value": 1, "protocol": 7}),
        );
        assert!(has(&found, "protocol", "enum.defined_only"), "{found:?}");
    }

    #[test]
    fn repeated_and_items() {
        // HeaderMatcher name: well-known HTTP header name, min_len 1.
        let found = check(
            "envoy.config.route.v3.RouteMatch",
            json!({"prefix": "/", "headers": [{"name": "ok", "present_match": true}, {"name": "bad\nname", "present_match": true}]}),
        );
        assert!(
            has(&found, "headers[1].name", "string.well_known_regex"),
            "{found:?}"
        );
        assert_eq!(found.len(), 1, "{found:?}");
        // WeightedCluster.clusters: repeated min_items 1; VirtualHost.domains items: header-value regex.
        let found = check(
            "envoy.config.route.v3.WeightedCluster",
            json!({"clusters": []}),
        );
        assert!(has(&found, "clusters", "repeated.min_items"), "{found:?}");
        let found = check(
            "envoy.config.route.v3.VirtualHost",
            json!({"name": "v", "domains": ["ok", "a\nb"]}),
        );
        assert_eq!(
            rules(&found),
            vec![("domains[1]".into(), "string.well_known_regex".into())]
        );
    }

    #[test]
    fn header_value_and_prefix() {
        let found = check(
            "envoy.config.core.v3.HeaderValue",
            json!({"key": "x-a", "value": "a\nb"}),
        );
        assert!(has(&found, "value", "string.well_known_regex"), "{found:?}");
        let found = check(
            "envoy.config.core.v3.HeaderValue",
            json!({"key": "", "value": "v"}),
        );
        assert!(has(&found, "key", "string.min_len"), "{found:?}");
    }

    #[test]
    fn maps_and_durations() {
        // Cluster.connect_timeout: duration gt 0.
        let found = check(
            "envoy.config.cluster.v3.Cluster",
            json!({"name": "c", "connect_timeout": "0s"}),
        );
        assert!(has(&found, "connect_timeout", "duration.gt"), "{found:?}");
        // Map recursion: typed_extension_protocol_options values are Anys; their payloads are checked.
        let found = check(
            "envoy.config.cluster.v3.Cluster",
            json!({"name": "c", "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions":
                {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                 "explicit_http_config": {"http_protocol_options": {}}, "common_http_protocol_options": {"max_headers_count": 0}}}}),
        );
        assert!(
            has(&found, "typed_extension_protocol_options[\"envoy.extensions.upstreams.http.v3.HttpProtocolOptions\"].common_http_protocol_options.max_headers_count", "uint32.gte"),
            "{found:?}"
        );
    }

    #[test]
    fn any_payloads_are_checked() {
        let found = check(
            "envoy.config.listener.v3.Filter",
            json!({"name": "hcm", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "", "http_filters": [{"name": ""}], "rds": {"config_source": {"ads": {}}, "route_config_name": "r"}}}),
        );
        assert!(
            has(&found, "typed_config.stat_prefix", "string.min_len"),
            "{found:?}"
        );
        assert!(
            has(
                &found,
                "typed_config.http_filters[0].name",
                "string.min_len"
            ),
            "{found:?}"
        );
    }

    #[test]
    fn regexes_over_envoys_re2_program_size_are_violations() {
        // Envoy 1.40 rejects this generated principal regex with "RE2 program size of 113 > max program size of 100".
        let long = format!("spiffe://.*{}", "v".repeat(100));
        let found = check(
            "envoy.type.matcher.v3.StringMatcher",
            json!({"safe_regex": {"regex": long}}),
        );
        assert!(
            has(&found, "safe_regex.regex", "regex.re2_program_size"),
            "{found:?}"
        );
        let found = check(
            "envoy.type.matcher.v3.StringMatcher",
            json!({"safe_regex": {"regex": "spiffe://.*/sa/bar"}}),
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn violations_display_path_and_rule() {
        let v = Violation {
            path: "a.b".into(),
            rule: "string.min_len".into(),
            message: "too short".into(),
        };
        assert_eq!(v.to_string(), "a.b: too short (rule string.min_len)");
        assert_eq!(show_nanos(&1_500_000_000), "1.5s");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::from_json;
    use proptest::prelude::*;

    /// Arbitrary JSON trees using field names that Envoy messages actually have, so conversions get deep.
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let names = prop::sample::select(vec![
            "name",
            "typed_config",
            "filter_chains",
            "filters",
            "address",
            "socket_address",
            "port_value",
            "routes",
            "match",
            "prefix",
            "route",
            "cluster",
            "virtual_hosts",
            "domains",
            "http_filters",
            "connect_timeout",
            "@type",
            "stat_prefix",
            "headers",
            "value",
            "key",
        ]);
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z0-9./:_ -]{0,12}".prop_map(serde_json::Value::from),
            Just(serde_json::Value::from(
                "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
            )),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(names.clone(), inner, 0..5).prop_map(|m| {
                    serde_json::Value::Object(
                        m.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                    )
                }),
            ]
        })
    }

    proptest! {
        // 256 cases by default; `PROPTEST_CASES` raises it for a long run.
        #![proptest_config(ProptestConfig::default())]
        #[test]
        fn conversion_and_rules_never_panic(value in json_value()) {
            for name in ["envoy.config.listener.v3.Listener", "envoy.config.route.v3.RouteConfiguration",
                "envoy.config.listener.v3.Filter"] {
                if let Ok(message) = from_json(name, &value) {
                    let _ = validate_message(&message);
                    let _ = crate::to_json(&message);
                }
            }
        }
    }
}
