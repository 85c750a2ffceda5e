//! A generative differential against the real API server: takes valid documents, yields mutants of them (every
//! place of the spec changed in turn, and the metadata), sends each to the API server as a server-side dry run
//! (`dryRun=All`, as `kubectl create --dry-run=server` sends it) and reads its errors as `field: message`, for tests
//! to compare with admitpilot's validation.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// Every leaf, list and object of `value` under `path` (JSON pointer), in document order (`spec` itself aside).
fn places(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if path != "/spec" {
                out.push(path.to_string());
            }
            for (key, item) in map {
                places(item, &format!("{path}/{key}"), out);
            }
        }
        Value::Array(items) => {
            out.push(path.to_string());
            for (i, item) in items.iter().enumerate() {
                places(item, &format!("{path}/{i}"), out);
            }
        }
        _ => out.push(path.to_string()),
    }
}

/// The mutants of `base`: each place of its `spec` changed in each way that applies to it.
pub fn mutants(base: &Value) -> Vec<(String, Value)> {
    let mut paths = Vec::new();
    places(&base["spec"], "/spec", &mut paths);
    let mut out = Vec::new();
    for path in paths {
        let original = base.pointer(&path).cloned().unwrap_or(Value::Null);
        let changes: Vec<(&str, Value)> = match &original {
            Value::String(_) => vec![
                ("empty", json!("")),
                ("not a name", json!("Not A_Name!")),
                ("no leading slash", json!("relative/path")),
                ("too long", json!("a".repeat(300))),
                ("one character", json!("a")),
                ("a wildcard host", json!("*.example.com")),
                ("a host with a port", json!("a.example:80")),
            ],
            Value::Number(_) => vec![
                ("zero", json!(0)),
                ("negative", json!(-1)),
                ("huge", json!(100_000_000)),
                ("one past the port range", json!(65_536)),
                ("fractional", json!(1.5)),
            ],
            Value::Bool(b) => vec![("flipped", json!(!b))],
            Value::Array(items) if !items.is_empty() => vec![
                ("first repeated", {
                    let mut items = items.clone();
                    items.push(items[0].clone());
                    json!(items)
                }),
                ("emptied", json!([])),
                (
                    "grown past limits",
                    json!(std::iter::repeat_n(items[0].clone(), 70).collect::<Vec<_>>()),
                ),
            ],
            Value::Object(fields) if !fields.is_empty() => vec![("emptied", json!({}))],
            _ => Vec::new(),
        };
        // Every place also as null (the API server drops a null it does not allow) and as the wrong JSON type.
        let wrong_type = match &original {
            Value::String(_) => json!(7),
            _ => json!("seven"),
        };
        let changes = changes
            .into_iter()
            .chain([("null", Value::Null), ("wrong type", wrong_type)]);
        for (how, value) in changes {
            let mut mutant = base.clone();
            if let Some(slot) = mutant.pointer_mut(&path) {
                *slot = value;
                out.push((format!("{path} {how}"), mutant));
            }
        }
    }
    out
}

/// The mutants of `base`'s metadata: labels and annotations null, with a null value, a key or value Kubernetes
/// refuses; a name that is no DNS subdomain, or too long.
pub fn metadata_mutants(base: &Value) -> Vec<(String, Value)> {
    let changes: Vec<(&str, &str, Value)> = vec![
        ("/metadata/labels", "labels null", Value::Null),
        ("/metadata/labels", "a label null", json!({"a": null})),
        (
            "/metadata/labels",
            "a bad label key",
            json!({"bad key!": "v"}),
        ),
        (
            "/metadata/labels",
            "a long label value",
            json!({"a": "v".repeat(64)}),
        ),
        (
            "/metadata/labels",
            "a prefixed label",
            json!({"example.com/tier": "edge"}),
        ),
        ("/metadata/annotations", "annotations null", Value::Null),
        (
            "/metadata/annotations",
            "an annotation null",
            json!({"a": null}),
        ),
        (
            "/metadata/annotations",
            "a bad annotation key",
            json!({"bad key!": "v"}),
        ),
        ("/metadata/name", "a name with capitals", json!("Bad_Name")),
        ("/metadata/name", "a name too long", json!("a".repeat(254))),
        ("/metadata/finalizers", "finalizers null", Value::Null),
    ];
    changes
        .into_iter()
        .filter_map(|(path, how, value)| {
            let mut mutant = base.clone();
            let (parent, field) = path.rsplit_once('/')?;
            mutant
                .pointer_mut(parent)?
                .as_object_mut()?
                .insert(field.into(), value);
            Some((format!("metadata: {how}"), mutant))
        })
        .collect()
}

/// The collection URL `doc` is created in: `/apis/<group>/<version>[/namespaces/<ns>]/<plural>`.
fn collection_url(doc: &Value) -> String {
    let kind = doc["kind"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let plural = if kind.ends_with('s') {
        format!("{kind}es")
    } else if let Some(stem) = kind.strip_suffix("cy") {
        format!("{stem}cies")
    } else {
        format!("{kind}s")
    };
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    match doc["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("/apis/{api_version}/namespaces/{namespace}/{plural}"),
        None => format!("/apis/{api_version}/{plural}"),
    }
}

/// The API server's errors for `doc` (server-side dry run, `dryRun=All`), as `field: message` lines (kubectl's
/// rendering of the Status causes); empty when it accepts it; `None` when it refuses it before validation.
pub async fn server_errors(client: &kube::Client, doc: &Value) -> Option<BTreeSet<String>> {
    // JSON, not YAML: a YAML 1.1 reader would take a string such as `yes` for a boolean.
    let request = axum::http::Request::post(format!("{}?dryRun=All", collection_url(doc)))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(doc).unwrap())
        .unwrap();
    let status = match client.request_text(request).await {
        Ok(_) => return Some(BTreeSet::new()),
        Err(kube::Error::Api(status)) if status.reason == "Invalid" => status,
        Err(_) => return None,
    };
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    if causes.is_empty() {
        return None;
    }
    Some(
        causes
            .into_iter()
            .map(|c| format!("{}: {}", cause_field(&c.field, &c.message), c.message))
            // The API server's note that it skipped the CEL rules after schema errors.
            .filter(|l| !l.contains("some validation rules were not checked"))
            .collect(),
    )
}

/// The field of a Status cause: kube-openapi's `oneOf`/`anyOf` errors come with the field `<nil>` and the path
/// quoted in the message (`Invalid value: "": "spec.addresses[0]" must validate …`); admitpilot names that path.
fn cause_field<'a>(field: &'a str, message: &'a str) -> &'a str {
    if field != "<nil>" {
        return field;
    }
    message
        .strip_prefix("Invalid value: \"\": \"")
        .and_then(|rest| rest.split_once('"'))
        .map_or(field, |(path, _)| path)
}
