//! The Gateway API CRDs' OpenAPI checks (pure): takes a Gateway API document's `spec` and its CRD version's schema
//! ([`admitpilot_model::gateway_api::schema`]), yields every `required`, `enum`, `pattern`, `maxLength`/`minLength`,
//! `maxItems`/`minItems`, `minimum`/`maximum`, `maxProperties`, `x-kubernetes-list-type`, and `oneOf`/`anyOf`
//! (with the `not`, `enum` and `ipv4`/`ipv6` `format` of their branches) failure with the field
//! path and text the API server gives: apiextensions-apiserver's `kubeOpenAPIResultToFieldErrors` turning
//! kube-openapi's `validate` errors into apimachinery `field.Error`s (`spec.port: Invalid value: 0: spec.port in
//! body should be greater than or equal to 1`). The CRDs' CEL rules are mirrored per kind in the sibling modules.

use serde_json::Value;

use crate::common::metadata::{field_invalid, field_too_long};
use crate::common::text::go_quote;
use admitpilot_model::gateway_api::schema::{apply_defaults, Crd};
use admitpilot_model::Findings;

/// Checks `spec` (as written; the CRD's defaults are applied first, as the API server does) against the `spec`
/// schema of `version`.
pub fn check(crd: &Crd, version: &str, spec: &Value, out: &mut Findings) {
    let Some(schema) = crd.spec_schema(version) else {
        return;
    };
    let mut spec = match spec {
        Value::Null => Value::Object(serde_json::Map::new()),
        spec => spec.clone(),
    };
    apply_defaults(schema, &mut spec);
    let mut path = String::from("spec");
    walk(crd, schema, &spec, &mut path, out);
}

/// A value's checks. A null object field is not looked at: the API server drops a null it does not allow before
/// validating (structural pruning); a null list item is checked ([`null_item`]).
fn walk(crd: &Crd, schema: &Value, value: &Value, path: &mut String, out: &mut Findings) {
    if !value.is_null() {
        type_check(schema, value, path, out);
    }
    match value {
        Value::String(text) => string(crd, schema, text, path, out),
        Value::Number(number) => number_checks(schema, number, path, out),
        Value::Array(items) => array(crd, schema, items, path, out),
        Value::Object(fields) => object(crd, schema, fields, path, out),
        Value::Null | Value::Bool(_) => {}
    }
}

/// The JSON type kube-openapi names a value by (`integer` for a whole number).
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The schema's `type`, as kube-openapi's type validator words a mismatch: `spec.port: Invalid value: "string":
/// spec.port in body must be of type integer: "string"`.
fn type_check(schema: &Value, value: &Value, path: &str, out: &mut Findings) {
    let Some(expected) = schema.get("type").and_then(Value::as_str) else {
        return;
    };
    let actual = json_type(value);
    if actual == expected || (expected == "number" && actual == "integer") {
        return;
    }
    out.error(
        path,
        format!("Invalid value: {actual:?}: {path} in body must be of type {expected}: {actual:?}"),
    );
}

/// A null list item: a type error, and an enum's `Unsupported value: null` too, as the API server gives both.
fn null_item(schema: &Value, path: &str, out: &mut Findings) {
    if schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        return;
    }
    type_check(schema, &Value::Null, path, out);
    if schema.get("enum").is_some() {
        out.error(path, unsupported("null", schema));
    }
}

fn limit(schema: &Value, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

/// `NotSupported` text: `Unsupported value: "x": supported values: "a", "b"`.
fn unsupported(bad: &str, schema: &Value) -> String {
    let values: Vec<String> = schema["enum"]
        .as_array()
        .map(|values| {
            values
                .iter()
                .map(|v| match v {
                    Value::String(s) => format!("{s:?}"),
                    other => format!("{:?}", other.to_string()),
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "Unsupported value: {bad}: supported values: {}",
        values.join(", ")
    )
}

/// A string's `maxLength`, `minLength` and `pattern`, the first that fails only (kube-openapi's string validator
/// stops there; the real API server is the judge, `tests/kube/kube_gateway_api_validation.rs`), then its `enum`.
fn string(crd: &Crd, schema: &Value, text: &str, path: &str, out: &mut Findings) {
    let chars = text.chars().count() as u64;
    if let Some(max) = limit(schema, "maxLength").filter(|max| chars > *max) {
        out.error(
            path,
            field_too_long(usize::try_from(max).unwrap_or(usize::MAX)),
        );
    } else if let Some(min) = limit(schema, "minLength").filter(|min| chars < *min) {
        let detail = format!("{path} in body should be at least {min} chars long");
        out.error(path, field_invalid(text, &detail));
    } else if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        if crd.pattern(pattern).is_some_and(|re| !re.is_match(text)) {
            let detail = format!("{path} in body should match '{pattern}'");
            out.error(path, field_invalid(text, &detail));
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        if !values.iter().any(|v| v.as_str() == Some(text)) {
            out.error(path, unsupported(&format!("{text:?}"), schema));
        }
    }
}

fn number_checks(schema: &Value, number: &serde_json::Number, path: &str, out: &mut Findings) {
    let Some(value) = number.as_f64() else {
        return;
    };
    let shown = number.to_string();
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        if !values.iter().any(|v| v.as_f64() == Some(value)) {
            out.error(path, unsupported(&shown, schema));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        if value < min {
            out.error(
                path,
                format!(
                    "Invalid value: {shown}: {path} in body should be greater than or equal to {}",
                    schema["minimum"]
                ),
            );
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        if value > max {
            out.error(
                path,
                format!(
                    "Invalid value: {shown}: {path} in body should be less than or equal to {}",
                    schema["maximum"]
                ),
            );
        }
    }
}

fn array(crd: &Crd, schema: &Value, items: &[Value], path: &mut String, out: &mut Findings) {
    let count = items.len() as u64;
    if let Some(max) = limit(schema, "maxItems").filter(|max| count > *max) {
        let unit = if max == 1 { "item" } else { "items" };
        out.error(
            path.as_str(),
            format!("Too many: {count}: must have at most {max} {unit}"),
        );
    }
    if let Some(min) = limit(schema, "minItems").filter(|min| count < *min) {
        out.error(
            path.as_str(),
            format!("Invalid value: {count}: {path} in body should have at least {min} items"),
        );
    }
    list_type_duplicates(schema, items, path, out);
    let Some(item_schema) = schema.get("items") else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let mark = path.len();
        path.push_str(&format!("[{i}]"));
        if item.is_null() {
            null_item(item_schema, path, out);
        }
        walk(crd, item_schema, item, path, out);
        path.truncate(mark);
    }
}

/// `x-kubernetes-list-type: set` and `map` (apiextensions' `listtype.ValidateListSetsAndMaps`): the second of two
/// equal items (or items with equal keys) is a `field.Duplicate`.
fn list_type_duplicates(schema: &Value, items: &[Value], path: &str, out: &mut Findings) {
    let key_of = |item: &Value| -> Option<Value> {
        match schema
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)?
        {
            "set" => Some(item.clone()),
            "map" => {
                let keys = schema.get("x-kubernetes-list-map-keys")?.as_array()?;
                let mut key = serde_json::Map::new();
                for name in keys.iter().filter_map(Value::as_str) {
                    if let Some(v) = item.get(name) {
                        key.insert(name.to_string(), v.clone());
                    }
                }
                Some(Value::Object(key))
            }
            _ => None,
        }
    };
    let is_map = schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
    let mut seen: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if is_map && !item.is_object() && !item.is_null() {
            let shown = match item {
                Value::String(text) => go_quote(text),
                other => other.to_string(),
            };
            out.error(
                format!("{path}[{i}]"),
                format!("Invalid value: {shown}: must be an object for an array of list-type map"),
            );
            continue;
        }
        let Some(key) = key_of(item) else {
            return;
        };
        if seen.contains(&key) {
            out.error(format!("{path}[{i}]"), format!("Duplicate value: {key}"));
        } else {
            seen.push(key);
        }
    }
}

fn object(
    crd: &Crd,
    schema: &Value,
    fields: &serde_json::Map<String, Value>,
    path: &mut String,
    out: &mut Findings,
) {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if fields.get(name).is_none_or(Value::is_null) {
                out.error(format!("{path}.{name}"), "Required value");
            }
        }
    }
    let count = fields.len() as u64;
    if let Some(max) = limit(schema, "maxProperties").filter(|max| count > *max) {
        let unit = if max == 1 { "item" } else { "items" };
        out.error(
            path.as_str(),
            format!("Too many: {count}: must have at most {max} {unit}"),
        );
    }
    if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
        one_of(branches, fields, path, out);
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (name, value) in fields {
        let Some(child) = properties.and_then(|p| p.get(name)).or(additional) else {
            continue;
        };
        let mark = path.len();
        path.push('.');
        path.push_str(name);
        walk(crd, child, value, path, out);
        path.truncate(mark);
    }
}

/// An object's `oneOf`: exactly one branch must hold. When none does, kube-openapi also reports each branch's
/// property whose `anyOf` failed (`spec.addresses[0].value` for a Gateway address that is no IP).
fn one_of(
    branches: &[Value],
    fields: &serde_json::Map<String, Value>,
    path: &str,
    out: &mut Findings,
) {
    let object = Value::Object(fields.clone());
    let valid = branches.iter().filter(|b| holds(b, &object)).count();
    if valid == 1 {
        return;
    }
    let found = match valid {
        0 => "Found none valid".to_string(),
        n => format!("Found {n} valid alternatives"),
    };
    out.error(
        path,
        format!("Invalid value: \"\": \"{path}\" must validate one and only one schema (oneOf). {found}"),
    );
    if valid > 0 {
        return;
    }
    for branch in branches {
        let Some(properties) = branch.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (name, property) in properties {
            let Some(value) = fields.get(name) else {
                continue;
            };
            if property.get("anyOf").is_some() && !holds(property, value) {
                let field = format!("{path}.{name}");
                out.error(
                    field.as_str(),
                    format!("Invalid value: \"\": \"{field}\" must validate at least one schema (anyOf)"),
                );
                // kube-openapi adds the first alternative's own failure: its format.
                let first = property["anyOf"].get(0);
                let format = first.and_then(|b| b.get("format")).and_then(Value::as_str);
                if let (Some(format), Some(text)) = (format, value.as_str()) {
                    if !format_holds(format, text) {
                        out.error(
                            field.as_str(),
                            format!(
                                "Invalid value: {text:?}: {field} in body must be of type {format}: {text:?}"
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// Whether `value` satisfies the constraints a `oneOf`/`anyOf` branch states: `enum`, `not`, `format`, `anyOf`,
/// `oneOf` and its `properties` (absent properties hold).
fn holds(schema: &Value, value: &Value) -> bool {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        if !values.contains(value) {
            return false;
        }
    }
    if let Some(not) = schema.get("not") {
        if holds(not, value) {
            return false;
        }
    }
    if let (Some(format), Some(text)) =
        (schema.get("format").and_then(Value::as_str), value.as_str())
    {
        if !format_holds(format, text) {
            return false;
        }
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        if !any.iter().any(|branch| holds(branch, value)) {
            return false;
        }
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        if one.iter().filter(|branch| holds(branch, value)).count() != 1 {
            return false;
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    match (properties, value.as_object()) {
        (Some(properties), Some(fields)) => properties
            .iter()
            .all(|(name, property)| fields.get(name).is_none_or(|v| holds(property, v))),
        _ => true,
    }
}

/// kube-openapi's string formats the Gateway API CRDs use in `anyOf` branches: `ipv4` and `ipv6` are
/// `ParseIPSloppy` addresses written with a `.` or a `:` (strfmt `IsIPv4`/`IsIPv6`); other formats are not checked
/// here.
fn format_holds(format: &str, text: &str) -> bool {
    use crate::common::go_netip::is_ip_sloppy;
    match format {
        "ipv4" => is_ip_sloppy(text) && text.contains('.'),
        "ipv6" => is_ip_sloppy(text) && text.contains(':'),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::gateway_api::schema::crd;
    use admitpilot_model::Kind;
    use serde_json::json;

    fn errors(kind: Kind, spec: Value) -> Vec<String> {
        let mut out = Findings::default();
        if let Some(crd) = crd(kind) {
            check(crd, "v1", &spec, &mut out);
        }
        out.into_vec()
            .into_iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect()
    }

    /// Texts from kube-apiserver v1.34 with the v1.6.3 CRDs (`kubectl apply --dry-run=server`): an IPAddress that
    /// is no IP fails the address's `oneOf` and its value's `anyOf`; leading zeros are an IP (`ParseIPSloppy`).
    #[test]
    fn gateway_addresses_must_be_ips() {
        let gateway = |address: Value| {
            errors(
                Kind::KubernetesGateway,
                json!({"gatewayClassName": "c", "addresses": [address],
                       "listeners": [{"name": "l", "port": 80, "protocol": "HTTP"}]}),
            )
        };
        for bad in [
            "1.1.1",
            "256.255.255.255",
            "2001:db8:3c4d:15:0:d234:3eee:::",
        ] {
            assert_eq!(
                gateway(json!({"value": bad})),
                [
                    "spec.addresses[0]: Invalid value: \"\": \"spec.addresses[0]\" must validate one and only one \
                     schema (oneOf). Found none valid".to_string(),
                    "spec.addresses[0].value: Invalid value: \"\": \"spec.addresses[0].value\" must validate at \
                     least one schema (anyOf)"
                        .to_string(),
                    format!(
                        "spec.addresses[0].value: Invalid value: {bad:?}: spec.addresses[0].value in body must be of \
                         type ipv4: {bad:?}"
                    ),
                ],
                "{bad}"
            );
        }
        for good in [
            json!({"value": "01.1.1.1"}),
            json!({"value": "1.2.3.4"}),
            json!({"value": "::ffff:1.2.3.4"}),
            json!({"type": "IPAddress"}),
            json!({"type": "NamedAddress", "value": "x"}),
            json!({"type": "Hostname", "value": "a.example:80"}),
        ] {
            assert!(gateway(good.clone()).is_empty(), "{good}");
        }
    }

    #[test]
    fn api_server_texts_for_each_openapi_check() {
        let gateway = |listener: Value| {
            errors(
                Kind::KubernetesGateway,
                json!({"gatewayClassName": "c", "listeners": [listener]}),
            )
        };
        assert_eq!(
            gateway(json!({"name": "l", "port": 0, "protocol": "HTTP"})),
            ["spec.listeners[0].port: Invalid value: 0: spec.listeners[0].port in body should be greater \
              than or equal to 1"]
        );
        assert_eq!(
            gateway(json!({"name": "l", "protocol": "HTTP"})),
            ["spec.listeners[0].port: Required value"]
        );
        assert_eq!(
            gateway(json!({"name": "L", "port": 80, "protocol": "HTTP"})),
            ["spec.listeners[0].name: Invalid value: \"L\": spec.listeners[0].name in body should match \
              '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"]
        );
        let route = errors(
            Kind::HttpRoute,
            json!({"rules": [{"matches": [{"path": {"type": "Prefix", "value": "/"}}]}]}),
        );
        assert_eq!(
            route,
            ["spec.rules[0].matches[0].path.type: Unsupported value: \"Prefix\": supported values: \
              \"Exact\", \"PathPrefix\", \"RegularExpression\""]
        );
        let redirect = errors(
            Kind::HttpRoute,
            json!({"rules": [{"filters": [{"type": "RequestRedirect",
                "requestRedirect": {"statusCode": 304}}]}]}),
        );
        assert_eq!(
            redirect,
            ["spec.rules[0].filters[0].requestRedirect.statusCode: Unsupported value: 304: supported values: \
              \"301\", \"302\", \"303\", \"307\", \"308\""]
        );
        let long = errors(Kind::HttpRoute, json!({"hostnames": ["a".repeat(254)]}));
        assert!(
            long.contains(
                &"spec.hostnames[0]: Too long: may not be more than 253 bytes".to_string()
            ),
            "{long:?}"
        );
        let many = errors(
            Kind::HttpRoute,
            json!({"hostnames": (0..17).map(|i| format!("h{i}.example")).collect::<Vec<_>>()}),
        );
        assert_eq!(
            many,
            ["spec.hostnames: Too many: 17: must have at most 16 items"]
        );
    }
}
