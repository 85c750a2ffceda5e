//! Protobuf merging with Istio's EnvoyFilter semantics (pure): takes a destination and a source message and
//! merges the source's set fields into the destination.
//!
//! Scalars and bytes set in the source overwrite; messages merge recursively; lists append (or replace, for
//! MERGE_AND_REPLACE_LIST); map entries replace; `google.protobuf.Duration` values replace as a whole (a
//! field-wise merge would keep stale nanoseconds). [`merge_any`] merges two `Any` payloads of the same type.

use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use prost_reflect::{DynamicMessage, ReflectMessage, Value};

use super::json::{from_dynamic, to_dynamic, Error};
use super::pool;

/// How repeated fields merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMerge {
    /// Source items are appended (protobuf MERGE).
    Append,
    /// A list set in the source replaces the destination's list (MERGE_AND_REPLACE_LIST).
    Replace,
}

/// Merges `src` into `dst` (both of the same message type; a mismatch leaves `dst` unchanged).
pub fn merge(dst: &mut DynamicMessage, src: &DynamicMessage, lists: ListMerge) {
    if dst.descriptor() != src.descriptor() {
        return;
    }
    for (field, value) in src.fields() {
        match value {
            Value::List(items) => {
                let Value::List(target) = dst.get_field_mut(&field) else {
                    continue;
                };
                if lists == ListMerge::Replace {
                    target.clear();
                }
                target.extend(items.iter().cloned());
            }
            Value::Map(entries) => {
                let Value::Map(target) = dst.get_field_mut(&field) else {
                    continue;
                };
                for (k, v) in entries {
                    target.insert(k.clone(), v.clone());
                }
            }
            Value::Message(inner) => {
                let replace_whole = inner.descriptor().full_name() == "google.protobuf.Duration"
                    || !dst.has_field(&field);
                if replace_whole {
                    dst.set_field(&field, Value::Message(inner.clone()));
                } else if let Value::Message(target) = dst.get_field_mut(&field) {
                    merge(target, inner, lists);
                }
            }
            other => dst.set_field(&field, other.clone()),
        }
    }
}

/// Merges the generated message `dst` with the dynamic `src` of the same type, in place.
pub fn merge_into<M: Message + Default + prost::Name>(
    dst: &mut M,
    src: &DynamicMessage,
    lists: ListMerge,
) -> Result<(), Error> {
    let mut dynamic = to_dynamic(dst)?;
    merge(&mut dynamic, src, lists);
    *dst = from_dynamic(&dynamic)?;
    Ok(())
}

/// Merges the payload of `src` into the payload of `dst` when both carry the same, known type; returns
/// whether `dst` changed. Lists append, as Istio does for typed_config merges.
pub fn merge_any(dst: &mut Any, src: &Any) -> bool {
    if dst.type_url != src.type_url {
        return false;
    }
    let name = dst.type_url.rsplit('/').next().unwrap_or_default();
    let Some(desc) = pool().get_message_by_name(name) else {
        return false;
    };
    let (Ok(mut target), Ok(patch)) = (
        DynamicMessage::decode(desc.clone(), dst.value.as_slice()),
        DynamicMessage::decode(desc, src.value.as_slice()),
    ) else {
        return false;
    };
    merge(&mut target, &patch, ListMerge::Append);
    dst.value = target.encode_to_vec();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{from_json, message_to_json};
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use serde_json::json;

    fn cluster(value: serde_json::Value) -> Cluster {
        from_dynamic(&from_json("envoy.config.cluster.v3.Cluster", &value).unwrap()).unwrap()
    }

    #[test]
    fn merges_scalars_messages_lists_and_durations() {
        let mut dst = cluster(
            json!({"name": "a", "connect_timeout": "1.5s", "dns_lookup_family": "V4_ONLY",
            "common_lb_config": {"healthy_panic_threshold": {"value": 10}}, "dns_resolvers": [{"socket_address": {"address": "1.1.1.1"}}],
            "metadata": {"filter_metadata": {"x": {"a": 1}, "y": {"b": 2}}}}),
        );
        let src = from_json(
            "envoy.config.cluster.v3.Cluster",
            &json!({"connect_timeout": "2s", "common_lb_config": {"ignore_new_hosts_until_first_hc": true},
                "dns_resolvers": [{"socket_address": {"address": "8.8.8.8"}}], "metadata": {"filter_metadata": {"x": {"c": 3}}}}),
        )
        .unwrap();
        merge_into(&mut dst, &src, ListMerge::Append).unwrap();
        let out = message_to_json(&dst).unwrap();
        assert_eq!(out["name"], "a");
        assert_eq!(out["connect_timeout"], "2s");
        assert_eq!(out["dns_lookup_family"], "V4_ONLY");
        assert_eq!(
            out["common_lb_config"]["healthy_panic_threshold"]["value"],
            10.0
        );
        assert_eq!(
            out["common_lb_config"]["ignore_new_hosts_until_first_hc"],
            true
        );
        assert_eq!(out["dns_resolvers"].as_array().unwrap().len(), 2);
        assert_eq!(out["metadata"]["filter_metadata"]["x"], json!({"c": 3.0}));
        assert_eq!(out["metadata"]["filter_metadata"]["y"], json!({"b": 2.0}));
        merge_into(&mut dst, &src, ListMerge::Replace).unwrap();
        let out = message_to_json(&dst).unwrap();
        assert_eq!(
            out["dns_resolvers"],
            json!([{"socket_address": {"address": "8.8.8.8"}}])
        );
    }

    #[test]
    fn merges_any_payloads_of_the_same_type_only() {
        let lua = |code: &str| {
            let mut any = Any {
                type_url: "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua".into(),
                value: Vec::new(),
            };
            let m = from_json(
                "envoy.extensions.filters.http.lua.v3.Lua",
                &json!({"default_source_code": {"inline_string": code}, "stat_prefix": "p"}),
            )
            .unwrap();
            any.value = m.encode_to_vec();
            any
        };
        let mut dst = lua("old");
        let mut src = lua("new");
        assert!(merge_any(&mut dst, &src));
        assert_eq!(dst.value, lua("new").value);
        src.type_url = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router".into();
        assert!(!merge_any(&mut dst, &src));
    }
}
