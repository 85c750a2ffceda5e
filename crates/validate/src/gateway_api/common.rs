//! Rules several Gateway API route kinds share (pure): takes parent references, backend references, filters and
//! header matches, records the CRDs' CEL failures with the API server's text (`<path>: Invalid value: "object":
//! <message>`, as apiextensions-apiserver's CEL validator reports a rule without `reason`), and what Envoy would
//! refuse that CEL does not check (RE2 regexes, header names repeated in another case, a header both set and added).

use std::collections::HashMap;

use crate::common::validate_regex;
use admitpilot_model::gateway_api::common::{
    BackendRef, HeaderModifier, HttpRouteFilter, MatchType, ParentReference, ValueMatch,
};
use admitpilot_model::Findings;

/// The CEL value type the API server shows for a failing rule on an object.
pub const OBJECT: &str = "object";
/// The CEL value type the API server shows for a failing rule on a list.
pub const ARRAY: &str = "array";

/// Records a CEL rule's failure as the API server words it: `Invalid value: "<type>": <message>`.
pub fn cel(out: &mut Findings, path: impl Into<String>, value_type: &str, message: &str) {
    out.error(path, format!("Invalid value: {value_type:?}: {message}"));
}

fn no_section(r: &ParentReference) -> bool {
    r.section_name.as_deref().is_none_or(str::is_empty)
}

fn no_port(r: &ParentReference) -> bool {
    r.port.is_none_or(|p| p == 0)
}

fn same_parent(a: &ParentReference, b: &ParentReference) -> bool {
    a.group() == b.group()
        && a.kind() == b.kind()
        && a.name == b.name
        && a.namespace.as_deref().unwrap_or("") == b.namespace.as_deref().unwrap_or("")
}

/// The two `spec.parentRefs` rules of every route CRD: two references to one parent must each name a section or
/// port ("sectionName or port must be specified when parentRefs includes 2 or more references to the same
/// parent"), and different ones ("sectionName or port must be unique …").
pub fn parent_refs(refs: &[ParentReference], out: &mut Findings) {
    let specified = refs.iter().all(|p1| {
        refs.iter().all(|p2| {
            !same_parent(p1, p2) || (no_section(p1) == no_section(p2) && no_port(p1) == no_port(p2))
        })
    });
    if !specified {
        cel(
            out,
            "spec.parentRefs",
            ARRAY,
            "sectionName or port must be specified when parentRefs includes 2 or more references to the \
             same parent",
        );
    }
    let unique = refs.iter().all(|p1| {
        refs.iter()
            .filter(|p2| {
                same_parent(p1, p2)
                    && ((no_section(p1) && no_section(p2)) || p1.section_name == p2.section_name)
                    && ((no_port(p1) && no_port(p2)) || p1.port == p2.port)
            })
            .count()
            == 1
    });
    if !unique {
        cel(
            out,
            "spec.parentRefs",
            ARRAY,
            "sectionName or port must be unique when parentRefs includes 2 or more references to the same \
             parent",
        );
    }
}

/// `BackendObjectReference`'s rule "Must have port for Service reference".
pub fn backend_port(backend: &BackendRef, path: &str, out: &mut Findings) {
    if backend.is_service() && backend.port.is_none() {
        cel(out, path, OBJECT, "Must have port for Service reference");
    }
}

/// The route-wide rules HTTPRoute and GRPCRoute share: [`parent_refs`], "While 16 rules and 64 matches per rule are
/// allowed, the total number of matches across all rules in a route must be less than 128" on `spec.rules` (given
/// the total), and [`rule_names`].
pub fn route_rules<'a>(
    parents: &[ParentReference],
    total_matches: usize,
    names: impl Iterator<Item = Option<&'a str>> + Clone,
    out: &mut Findings,
) {
    parent_refs(parents, out);
    if total_matches > 128 {
        cel(
            out,
            "spec.rules",
            ARRAY,
            "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules \
             in a route must be less than 128",
        );
    }
    rule_names(names, out);
}

/// The rule "Rule name must be unique within the route" on `spec.rules`.
fn rule_names<'a>(names: impl Iterator<Item = Option<&'a str>> + Clone, out: &mut Findings) {
    let all: Vec<&str> = names.flatten().collect();
    let unique = all
        .iter()
        .all(|n| all.iter().filter(|m| *m == n).count() == 1);
    if !unique {
        cel(
            out,
            "spec.rules",
            ARRAY,
            "Rule name must be unique within the route",
        );
    }
}

/// The filter types and the field each must (and only it may) set, in the CRDs' order.
const FILTER_FIELDS: &[(&str, &str)] = &[
    ("CORS", "cors"),
    ("RequestHeaderModifier", "requestHeaderModifier"),
    ("ResponseHeaderModifier", "responseHeaderModifier"),
    ("RequestMirror", "requestMirror"),
    ("RequestRedirect", "requestRedirect"),
    ("URLRewrite", "urlRewrite"),
    ("ExtensionRef", "extensionRef"),
    ("ExternalAuth", "externalAuth"),
];

fn has_field(filter: &HttpRouteFilter, field: &str) -> bool {
    match field {
        "cors" => filter.cors.is_some(),
        "requestHeaderModifier" => filter.request_header_modifier.is_some(),
        "responseHeaderModifier" => filter.response_header_modifier.is_some(),
        "requestMirror" => filter.request_mirror.is_some(),
        "requestRedirect" => filter.request_redirect.is_some(),
        "urlRewrite" => filter.url_rewrite.is_some(),
        "extensionRef" => filter.extension_ref.is_some(),
        "externalAuth" => filter.external_auth.is_some(),
        _ => false,
    }
}

/// Which route kind's filter rules apply: gRPC filters know only header modifiers, mirrors and extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterSet {
    /// `HTTPRouteFilter`.
    Http,
    /// `GRPCRouteFilter`.
    Grpc,
}

/// The CEL rules of a `filters` list (`spec.rules[*].filters` and `…backendRefs[*].filters`) and of each filter,
/// plus the header modifier checks CEL cannot make ([`header_modifier`]).
pub fn filters(filters: &[HttpRouteFilter], path: &str, set: FilterSet, out: &mut Findings) {
    let count = |t: &str| filters.iter().filter(|f| f.filter_type == t).count();
    if set == FilterSet::Http && count("RequestRedirect") > 0 && count("URLRewrite") > 0 {
        cel(
            out,
            path,
            ARRAY,
            "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both",
        );
    }
    let repeatable: &[&str] = match set {
        FilterSet::Http => &[
            "CORS",
            "RequestHeaderModifier",
            "ResponseHeaderModifier",
            "RequestRedirect",
            "URLRewrite",
        ],
        FilterSet::Grpc => &["RequestHeaderModifier", "ResponseHeaderModifier"],
    };
    for t in repeatable {
        if count(t) > 1 {
            cel(out, path, ARRAY, &format!("{t} filter cannot be repeated"));
        }
    }
    for (i, filter) in filters.iter().enumerate() {
        let at = format!("{path}[{i}]");
        for (filter_type, field) in FILTER_FIELDS {
            let grpc_field = matches!(
                *field,
                "requestHeaderModifier"
                    | "responseHeaderModifier"
                    | "requestMirror"
                    | "extensionRef"
            );
            if set == FilterSet::Grpc && !grpc_field {
                continue;
            }
            let has = has_field(filter, field);
            if has && filter.filter_type != *filter_type {
                let m =
                    format!("filter.{field} must be nil if the filter.type is not {filter_type}");
                cel(out, &at, OBJECT, &m);
            }
            if !has && filter.filter_type == *filter_type {
                let m = format!("filter.{field} must be specified for {filter_type} filter.type");
                cel(out, &at, OBJECT, &m);
            }
        }
        one_filter(filter, &at, out);
    }
}

fn one_filter(filter: &HttpRouteFilter, at: &str, out: &mut Findings) {
    if let Some(cors) = &filter.cors {
        let star = |list: &[String]| list.iter().any(|v| v == "*") && list.len() > 1;
        for (field, list, message) in [
            (
                "allowHeaders",
                &cors.allow_headers,
                "AllowHeaders cannot contain '*' alongside other methods",
            ),
            (
                "allowMethods",
                &cors.allow_methods,
                "AllowMethods cannot contain '*' alongside other methods",
            ),
            (
                "allowOrigins",
                &cors.allow_origins,
                "AllowOrigins cannot contain '*' alongside other origins",
            ),
        ] {
            if star(list) {
                cel(out, format!("{at}.cors.{field}"), ARRAY, message);
            }
        }
    }
    if let Some(mirror) = &filter.request_mirror {
        let at = format!("{at}.requestMirror");
        if mirror.percent.is_some() && mirror.fraction.is_some() {
            cel(
                out,
                &at,
                OBJECT,
                "Only one of percent or fraction may be specified in HTTPRequestMirrorFilter",
            );
        }
        backend_port(&mirror.backend_ref, &format!("{at}.backendRef"), out);
        if let Some(fraction) = &mirror.fraction {
            if fraction.numerator > fraction.denominator.unwrap_or(100) {
                cel(
                    out,
                    format!("{at}.fraction"),
                    OBJECT,
                    "numerator must be less than or equal to denominator",
                );
            }
        }
    }
    let paths = [
        (
            "requestRedirect",
            filter
                .request_redirect
                .as_ref()
                .and_then(|r| r.path.as_ref()),
        ),
        (
            "urlRewrite",
            filter.url_rewrite.as_ref().and_then(|r| r.path.as_ref()),
        ),
    ];
    for (field, path) in paths {
        let Some(path) = path else { continue };
        let at = format!("{at}.{field}.path");
        for (kind, set) in [
            ("ReplaceFullPath", path.replace_full_path.is_some()),
            ("ReplacePrefixMatch", path.replace_prefix_match.is_some()),
        ] {
            let name = if kind == "ReplaceFullPath" {
                "replaceFullPath"
            } else {
                "replacePrefixMatch"
            };
            if path.modifier_type == kind && !set {
                let m = format!("{name} must be specified when type is set to '{kind}'");
                cel(out, &at, OBJECT, &m);
            }
            if set && path.modifier_type != kind {
                let m = format!("type must be '{kind}' when {name} is set");
                cel(out, &at, OBJECT, &m);
            }
        }
    }
    for (field, modifier) in [
        ("requestHeaderModifier", &filter.request_header_modifier),
        ("responseHeaderModifier", &filter.response_header_modifier),
    ] {
        if let Some(modifier) = modifier {
            header_modifier(modifier, &format!("{at}.{field}"), out);
        }
    }
}

/// What CEL does not check of a header modifier and Envoy (or the spec) then gets wrong, denied: a header name
/// given twice in different case within `set`, `add` or `remove` (Gateway API #2277: names are case-insensitive,
/// the CRD's list-map keys are not), and one header both set and added (#3407: the result depends on the order
/// Envoy applies them).
pub fn header_modifier(modifier: &HeaderModifier, path: &str, out: &mut Findings) {
    for (field, names) in [
        (
            "set",
            modifier
                .set
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>(),
        ),
        (
            "add",
            modifier.add.iter().map(|h| h.name.as_str()).collect(),
        ),
        (
            "remove",
            modifier.remove.iter().map(String::as_str).collect(),
        ),
    ] {
        let mut seen: HashMap<String, &str> = HashMap::new();
        for (i, name) in names.iter().enumerate() {
            match seen.get(&name.to_ascii_lowercase()) {
                Some(first) if first != name => out.error(
                    format!("{path}.{field}[{i}].name"),
                    format!(
                        "header {name:?} is also given as {first:?}: header names are case-insensitive, so the \
                         two name one header (Gateway API #2277)"
                    ),
                ),
                Some(_) => {}
                None => {
                    seen.insert(name.to_ascii_lowercase(), name);
                }
            }
        }
    }
    for (i, added) in modifier.add.iter().enumerate() {
        if modifier
            .set
            .iter()
            .any(|set| set.name.eq_ignore_ascii_case(&added.name))
        {
            out.error(
                format!("{path}.add[{i}].name"),
                format!(
                    "header {:?} is both set and added: Envoy's result then depends on the order it applies \
                     them (Gateway API #3407); set it, or add it, not both",
                    added.name
                ),
            );
        }
    }
}

/// RE2 regexes of header and query matches that Envoy would refuse (Gateway API #2886; the CRDs cannot check
/// them), and, for headers (`headers` true; query parameter names are case-sensitive), names repeated in another
/// case within one match (#2277).
pub fn value_matches(matches: &[ValueMatch], path: &str, headers: bool, out: &mut Findings) {
    let mut seen: HashMap<String, &str> = HashMap::new();
    for (i, m) in matches.iter().enumerate() {
        if m.match_type == MatchType::RegularExpression {
            validate_regex(&m.value, &format!("{path}[{i}].value"), out);
        }
        if !headers {
            continue;
        }
        match seen.get(&m.name.to_ascii_lowercase()) {
            Some(first) if *first != m.name => out.error(
                format!("{path}[{i}].name"),
                format!(
                    "{:?} is also matched as {first:?}: names are case-insensitive, so the two match one header \
                     (Gateway API #2277)",
                    m.name
                ),
            ),
            Some(_) => {}
            None => {
                seen.insert(m.name.to_ascii_lowercase(), &m.name);
            }
        }
    }
}
