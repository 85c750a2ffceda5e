//! Overlays (pure): takes a generated object and the documents of a Gateway's parameters for it
//! ([`admitpilot_model::gateway_api::parameters`]), and yields the object with each merged in, in order, by the
//! rules of Kubernetes' strategic merge patch for the fields a gateway's objects have:
//!
//! * a mapping merges into a mapping key by key; a `null` removes the key;
//! * a list of containers, volumes, environment variables, image pull secrets, volume mounts or ports merges item
//!   by item on its merge key (`name`; `mountPath`; a container's ports by `containerPort`, a Service's by `port`),
//!   an item with `$patch: delete` removes its match, a new item is appended; other directives (keys starting with
//!   `$`) are dropped, never sent;
//! * any other value (a list of tolerations, a number) replaces.
//!
//! Afterwards the fields that tie the objects together are put back ([`keep`]): the name, namespace, owner, the
//! provisioned labels and the selectors.

use serde_json::{Map, Value};

/// Merges `patch` into `target` (both documents of one object).
pub fn merge(target: &mut Value, patch: &Value) {
    merge_at(target, patch, "");
}

fn merge_at(target: &mut Value, patch: &Value, field: &str) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => merge_maps(target, patch, field),
        (Value::Array(target), Value::Array(patch)) => match merge_key(field) {
            Some(key) => merge_lists(target, patch, (field, key)),
            None => *target = patch.clone(),
        },
        (target, patch) => *target = patch.clone(),
    }
}

fn merge_maps(target: &mut Map<String, Value>, patch: &Map<String, Value>, parent: &str) {
    for (key, value) in patch {
        // Directives (`$patch`, `$retainKeys`…) are not fields: the only one read is a list item's `$patch: delete`.
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        // A container's ports merge on another key than a Service's: the path says which.
        let field = if parent == "container" && key == "ports" {
            "containerPorts".to_string()
        } else {
            key.clone()
        };
        match target.get_mut(key) {
            Some(existing) => merge_at(existing, value, &field),
            None => {
                target.insert(key.clone(), without_directives(value));
            }
        }
    }
}

fn merge_lists(target: &mut Vec<Value>, patch: &[Value], (field, key): (&str, &str)) {
    // Items of a container list are containers: their `ports` merge as a container's do.
    let item_field = match field {
        "containers" | "initContainers" => "container",
        _ => "",
    };
    for item in patch {
        let id = item.get(key);
        let position = id.and_then(|id| target.iter().position(|t| t.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                target.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => merge_at(&mut target[i], &without_directives(item), item_field),
            (None, false) => target.push(without_directives(item)),
        }
    }
}

/// The merge key of the list under `field`, if it merges by one.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers" | "initContainers" | "volumes" | "env" | "imagePullSecrets" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "containerPorts" => Some("containerPort"),
        "ports" => Some("port"),
        _ => None,
    }
}

/// `value` without directives (keys starting with `$`): none reaches the object.
fn without_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| !key.starts_with('$'))
                .map(|(key, value)| (key.clone(), without_directives(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_directives).collect()),
        other => other.clone(),
    }
}

/// Puts the value of each path of `generated` back into `merged` (paths are lists of keys; a missing value in
/// `generated` is removed from `merged`).
pub fn keep(merged: &mut Value, generated: &Value, paths: &[&[&str]]) {
    for path in paths {
        let original = path.iter().try_fold(generated, |value, key| value.get(key));
        put(merged, path, original);
    }
}

/// Sets (or, for `None`, removes) the value at `path` of `target`, making the mappings on the way.
fn put(target: &mut Value, path: &[&str], value: Option<&Value>) {
    let (Some((first, rest)), Some(map)) = (path.split_first(), target.as_object_mut()) else {
        return;
    };
    if rest.is_empty() {
        match value {
            Some(value) => {
                map.insert(first.to_string(), value.clone());
            }
            None => {
                map.remove(*first);
            }
        }
        return;
    }
    if value.is_none() && !map.contains_key(*first) {
        return;
    }
    let next = map
        .entry(first.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    put(next, rest, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_merge_lists_merge_on_their_keys_and_null_removes() {
        let mut target = json!({
            "metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"replicas": 1, "template": {"spec": {
                "containers": [{"name": "envoy", "image": "e:1",
                    "ports": [{"containerPort": 15021, "name": "readiness"}],
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"requests": {"cpu": "100m"}}}],
                "tolerations": [{"key": "x"}],
                "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "old", "emptyDir": {}}]}}},
        });
        merge(
            &mut target,
            &json!({
                "metadata": {"labels": {"b": null, "c": "3"}},
                "spec": {"replicas": 3, "template": {"spec": {
                    "containers": [{"name": "envoy", "resources": {"requests": {"cpu": "1"}},
                        "ports": [{"containerPort": 9901, "name": "admin"}],
                        "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "b"}]},
                        {"name": "sidecar", "image": "s:1", "$patch": "merge"},
                    {"name": "envoy", "$patch": "replace", "args": ["--x"]}],
                "affinity": {"$patch": "delete"},
                    "tolerations": [{"key": "y"}],
                    "volumes": [{"name": "old", "$patch": "delete"}]}}},
            }),
        );
        assert_eq!(target["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(target["spec"]["replicas"], 3);
        let pod = &target["spec"]["template"]["spec"];
        let envoy = &pod["containers"][0];
        assert_eq!(envoy["image"], "e:1", "kept");
        assert_eq!(envoy["resources"]["requests"]["cpu"], "1");
        assert_eq!(
            envoy["ports"].as_array().unwrap().len(),
            2,
            "merged on containerPort"
        );
        assert_eq!(
            envoy["env"],
            json!([{"name": "A", "value": "2"}, {"name": "B", "value": "b"}])
        );
        assert_eq!(
            pod["containers"][1],
            json!({"name": "sidecar", "image": "s:1"})
        );
        assert_eq!(pod["tolerations"], json!([{"key": "y"}]), "replaced");
        assert_eq!(pod["volumes"], json!([{"name": "tmp", "emptyDir": {}}]));
        assert!(
            !target.to_string().contains('$'),
            "no directive is sent: {target}"
        );
    }

    #[test]
    fn service_ports_merge_on_port() {
        let mut target = json!({"spec": {"ports": [{"port": 80, "name": "tcp-80"}]}});
        merge(
            &mut target,
            &json!({"spec": {"ports": [{"port": 80, "nodePort": 30080}]}}),
        );
        assert_eq!(
            target["spec"]["ports"],
            json!([{"port": 80, "name": "tcp-80", "nodePort": 30080}])
        );
    }

    #[test]
    fn kept_paths_come_back() {
        let generated = json!({"metadata": {"name": "gw", "labels": {"k": "v"}}, "spec": {"selector": {"a": "b"}}});
        let mut merged = json!({"metadata": {"name": "x", "labels": {"k": "other", "mine": "y"}},
            "spec": {"selector": {"c": "d"}, "extra": 1}});
        keep(
            &mut merged,
            &generated,
            &[
                &["metadata", "name"],
                &["metadata", "labels", "k"],
                &["spec", "selector"],
                &["spec", "absent"],
            ],
        );
        assert_eq!(
            merged,
            json!({"metadata": {"name": "gw", "labels": {"k": "v", "mine": "y"}},
            "spec": {"selector": {"a": "b"}, "extra": 1}})
        );
    }
}
