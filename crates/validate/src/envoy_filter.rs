//! EnvoyFilter rules: takes a decoded Istio EnvoyFilter spec and its metadata, records findings with field
//! paths. Besides Istio's webhook rules (patch shape, match/applyTo agreement, proxy version regex, selector
//! rules and the CRD's CEL rules), every patch value is converted to the Envoy message its `applyTo` implies,
//! each `typed_config` to the message its `@type` names; unknown types and fields are errors. Whole values
//! (ADD, INSERT_*, REPLACE) must also satisfy Envoy's protoc-gen-validate rules; MERGE values are partial, so
//! every field they set must satisfy its rules, while presence rules (which depend on the merge target) are not
//! checked (`envoy_proto::validate_partial_message`).

use prost_reflect::{DynamicMessage, ReflectMessage, Value};

use super::common;
use admitpilot_envoy_proto as envoy_proto;
use admitpilot_model::istio::envoy_filter::{
    ApplyTo, ConfigPatch, EnvoyFilter, FilterMatch, ObjectMatch, Operation, PatchContext,
    PolicyTargetReference, WorkloadSelector,
};
use admitpilot_model::{Findings, ObjectMeta};

/// The HTTP connection manager's filter name (and its deprecated alias), the only network filter with HTTP
/// sub-filters.
const HCM_NAMES: [&str; 2] = [
    "envoy.filters.network.http_connection_manager",
    "envoy.http_connection_manager",
];

/// Longest proxyVersion regex Istio compiles; longer ones are ignored with a warning.
const MAX_PROXY_VERSION_LEN: usize = 1024;

/// Validates one EnvoyFilter.
pub fn validate(spec: &EnvoyFilter, _meta: &ObjectMeta, out: &mut Findings) {
    out.warning(
        "spec",
        "EnvoyFilter patches Envoy's internal configuration, which can change between versions; prefer a \
         higher-level API where one exists and re-test every EnvoyFilter on upgrade",
    );
    if spec.workload_selector.is_some() && !spec.target_refs.is_empty() {
        out.error(
            "spec",
            "only one of targetRefs or workloadSelector can be set",
        );
    }
    if let Some(selector) = &spec.workload_selector {
        validate_selector(selector, out);
    }
    validate_target_refs(&spec.target_refs, out);
    for (i, patch) in spec.config_patches.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        validate_patch(patch, &format!("spec.configPatches[{i}]"), out);
    }
}

/// Validates the workload selector. Mirrors Istio's `validateEnvoyFilter` use of `ValidateAlphaWorkloadSelector`,
/// with its texts; the 63-character value limit is the CRD's.
fn validate_selector(selector: &WorkloadSelector, out: &mut Findings) {
    if selector.labels.is_empty() {
        out.warning(
            "spec.workloadSelector",
            "Envoy filter: workload selector specified without labels, will be applied to all services in namespace",
        );
    }
    for (key, value) in &selector.labels {
        let field = format!("spec.workloadSelector.labels[{key}]");
        let pair = common::go_quote(&format!("{key}={value}"));
        if key.is_empty() {
            out.error(
                &field,
                format!("empty key is not supported in selector: {pair}"),
            );
        }
        if key.contains('*') || value.contains('*') {
            out.error(
                &field,
                format!("wildcard is not supported in selector: {pair}"),
            );
        }
        if value.len() > 63 {
            out.error(
                &field,
                "selector label values must be at most 63 characters",
            );
        }
    }
}

/// Checks `targetRefs`. Istio's webhook (`validateEnvoyFilter`, pkg/config/validation/envoyfilter/envoyfilter.go)
/// does not look at them: these mirror the EnvoyFilter CRD's schema (manifests/charts/base/files/crd-all.gen.yaml),
/// which the API server enforces: `maxItems: 16`, `kind` and `name` required, and its x-kubernetes-validations rule
/// on `namespace`, whose message is used verbatim; the other texts are ours. Neither the webhook nor the CRD limits
/// the kinds an EnvoyFilter may target, so no kind is refused here; the CRD's `kind`/`group` patterns and length
/// limits are not checked.
fn validate_target_refs(refs: &[PolicyTargetReference], out: &mut Findings) {
    if refs.len() > common::MAX_TARGET_REFS {
        out.error(
            "spec.targetRefs",
            format!(
                "at most {} targetRefs may be listed, found {}",
                common::MAX_TARGET_REFS,
                refs.len()
            ),
        );
    }
    for (i, target) in refs.iter().enumerate() {
        let field = format!("spec.targetRefs[{i}]");
        if target.kind.is_empty() {
            out.error(format!("{field}.kind"), "kind is required");
        }
        if target.name.is_empty() {
            out.error(format!("{field}.name"), "name is required");
        }
        if !target.namespace.is_empty() {
            out.error(
                format!("{field}.namespace"),
                "cross namespace referencing is not currently supported",
            );
        }
    }
}

/// Checks one config patch. Mirrors the patch loop of Istio's `validateEnvoyFilter`
/// (pkg/config/validation/envoyfilter/envoyfilter.go), with its texts: WAYPOINT patches skipped, then applyTo,
/// patch, operation and value required, the match agreeing with applyTo, and the value converted.
fn validate_patch(cp: &ConfigPatch, field: &str, out: &mut Findings) {
    let context = cp.r#match.as_ref().map(|m| m.context).unwrap_or_default();
    if let Some(m) = &cp.r#match {
        if !validate_match_shape(m, &format!("{field}.match"), out) {
            return;
        }
    }
    if context == PatchContext::Waypoint {
        // Istio applies no further checks to waypoint patches.
        return;
    }
    if cp.apply_to == ApplyTo::Invalid {
        out.error(format!("{field}.applyTo"), "Envoy filter: missing applyTo");
        return;
    }
    let Some(patch) = &cp.patch else {
        out.error(format!("{field}.patch"), "Envoy filter: missing patch");
        return;
    };
    if patch.operation == Operation::Invalid {
        out.error(
            format!("{field}.patch.operation"),
            "Envoy filter: missing patch operation",
        );
        return;
    }
    let value = patch.value.as_ref().filter(|v| !v.is_null());
    if patch.operation != Operation::Remove && value.is_none() {
        out.error(
            format!("{field}.patch.value"),
            "Envoy filter: missing patch value for non-remove operation",
        );
        return;
    }
    if let Some(m) = &cp.r#match {
        if !validate_match_for_target(cp.apply_to, m, &format!("{field}.match"), out) {
            return;
        }
    }
    if let Some(value) = value {
        validate_value(
            cp.apply_to,
            patch.operation,
            value,
            &format!("{field}.patch.value"),
            out,
        );
    }
}

/// Checks the CRD rules on `match` (one object type; a waypoint match exactly with context WAYPOINT, the CRD's
/// x-kubernetes-validations message) and Istio's `validateEnvoyFilter` proxyVersion rule (with its texts); returns
/// false when the patch should not be examined further.
fn validate_match_shape(m: &ObjectMatch, field: &str, out: &mut Findings) -> bool {
    let mut ok = true;
    if m.object_type_count() > 1 {
        out.error(
            field,
            "only one of listener, routeConfiguration, cluster or waypoint may be set",
        );
        ok = false;
    }
    if (m.context == PatchContext::Waypoint) != m.waypoint.is_some() {
        out.error(field, "only support waypointMatch when context is WAYPOINT");
        ok = false;
    }
    // Istio's webhook skips WAYPOINT patches entirely; this mirrors the CRD's x-kubernetes-validations rule on
    // `waypoint.portNumber` (`0 < self && self <= 65535`), with its message. The model reads an absent port as 0,
    // so only the upper bound is checked.
    if let Some(waypoint) = &m.waypoint {
        if waypoint.port_number > 65535 {
            out.error(
                format!("{field}.waypoint.portNumber"),
                "port must be between 1-65535",
            );
            ok = false;
        }
    }
    if let Some(proxy) = &m.proxy {
        let version = &proxy.proxy_version;
        if version.len() > MAX_PROXY_VERSION_LEN {
            out.warning(
                format!("{field}.proxy.proxyVersion"),
                format!("Envoy filter: proxyVersion match exceeds {MAX_PROXY_VERSION_LEN} characters and will be ignored"),
            );
        } else if !version.is_empty() {
            if let Err(e) = regex::Regex::new(version) {
                out.error(
                    format!("{field}.proxy.proxyVersion"),
                    // Istio's text; the bracketed error is Rust's regex error, not Go's.
                    format!("Envoy filter: invalid regex for proxy version, [{e}]"),
                );
                ok = false;
            }
        }
    }
    ok
}

/// Checks that the match fits the `applyTo` class, as Istio's `validateEnvoyFilter` does, with its texts; returns
/// false when the patch should not be examined further.
fn validate_match_for_target(
    apply_to: ApplyTo,
    m: &ObjectMatch,
    field: &str,
    out: &mut Findings,
) -> bool {
    let has_object_match = m.object_type_count() > 0;
    match apply_to {
        ApplyTo::Listener | ApplyTo::FilterChain | ApplyTo::NetworkFilter | ApplyTo::HttpFilter => {
            if !has_object_match {
                return true;
            }
            let Some(listener) = &m.listener else {
                out.error(
                    field,
                    "Envoy filter: applyTo for listener class objects cannot have non listener match",
                );
                return false;
            };
            match listener
                .filter_chain
                .as_ref()
                .and_then(|fc| fc.filter.as_ref())
            {
                Some(filter) => validate_filter_match(
                    apply_to,
                    filter,
                    &format!("{field}.listener.filterChain.filter"),
                    out,
                ),
                None => true,
            }
        }
        ApplyTo::RouteConfiguration | ApplyTo::VirtualHost | ApplyTo::HttpRoute => {
            if has_object_match && m.route_configuration.is_none() {
                out.error(
                    field,
                    "Envoy filter: applyTo for http route class objects cannot have non route configuration match",
                );
            }
            true
        }
        ApplyTo::Cluster => {
            if has_object_match && m.cluster.is_none() {
                out.error(
                    field,
                    "Envoy filter: applyTo for cluster class objects cannot have non cluster match",
                );
            }
            true
        }
        _ => true,
    }
}

fn validate_filter_match(
    apply_to: ApplyTo,
    filter: &FilterMatch,
    field: &str,
    out: &mut Findings,
) -> bool {
    if matches!(apply_to, ApplyTo::Listener | ApplyTo::FilterChain) {
        out.warning(
            field,
            format!(
                "Envoy filter: filter match has no effect when used with {}",
                apply_to.as_str()
            ),
        );
    }
    // Mirrors the filter-name rules of Istio's `validateEnvoyFilter` (and `validateListenerMatchName`), with its
    // texts.
    if filter.name.is_empty() {
        out.error(
            format!("{field}.name"),
            "Envoy filter: filter match has no name to match on",
        );
        return false;
    }
    if let Some(sub) = &filter.sub_filter {
        if apply_to != ApplyTo::HttpFilter {
            out.error(
                format!("{field}.subFilter"),
                "Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only",
            );
            return false;
        }
        if !HCM_NAMES.contains(&filter.name.as_str()) {
            out.error(
                format!("{field}.name"),
                format!(
                    "Envoy filter: subfilter match requires filter match with {}",
                    HCM_NAMES[0]
                ),
            );
            return false;
        }
        if sub.name.is_empty() {
            out.error(
                format!("{field}.subFilter.name"),
                "Envoy filter: subfilter match has no name to match on",
            );
            return false;
        }
    }
    warn_deprecated_filter_name(&filter.name, &format!("{field}.name"), out);
    if let Some(sub) = &filter.sub_filter {
        warn_deprecated_filter_name(&sub.name, &format!("{field}.subFilter.name"), out);
    }
    true
}

/// Deprecated Envoy filter names and their canonical names (Istio's `xds.DeprecatedFilterNames`, reversed).
/// `envoy.ext_authz` was both the HTTP and the network filter; Istio's reversed map keeps either (Go map order),
/// admitpilot names the HTTP one.
const DEPRECATED_FILTER_NAMES: &[(&str, &str)] = &[
    ("envoy.buffer", "envoy.filters.http.buffer"),
    ("envoy.cors", "envoy.filters.http.cors"),
    ("envoy.csrf", "envoy.filters.http.csrf"),
    ("envoy.http_dynamo_filter", "envoy.filters.http.dynamo"),
    ("envoy.ext_authz", "envoy.filters.http.ext_authz"),
    ("envoy.fault", "envoy.filters.http.fault"),
    (
        "envoy.grpc_http1_bridge",
        "envoy.filters.http.grpc_http1_bridge",
    ),
    (
        "envoy.grpc_json_transcoder",
        "envoy.filters.http.grpc_json_transcoder",
    ),
    ("envoy.grpc_web", "envoy.filters.http.grpc_web"),
    ("envoy.gzip", "envoy.filters.http.gzip"),
    ("envoy.health_check", "envoy.filters.http.health_check"),
    ("envoy.ip_tagging", "envoy.filters.http.ip_tagging"),
    ("envoy.lua", "envoy.filters.http.lua"),
    ("envoy.rate_limit", "envoy.filters.http.ratelimit"),
    ("envoy.router", "envoy.filters.http.router"),
    ("envoy.squash", "envoy.filters.http.squash"),
    (
        "envoy.listener.http_inspector",
        "envoy.filters.listener.http_inspector",
    ),
    (
        "envoy.listener.original_dst",
        "envoy.filters.listener.original_dst",
    ),
    (
        "envoy.listener.original_src",
        "envoy.filters.listener.original_src",
    ),
    (
        "envoy.listener.proxy_protocol",
        "envoy.filters.listener.proxy_protocol",
    ),
    (
        "envoy.listener.tls_inspector",
        "envoy.filters.listener.tls_inspector",
    ),
    (
        "envoy.client_ssl_auth",
        "envoy.filters.network.client_ssl_auth",
    ),
    (
        "envoy.http_connection_manager",
        "envoy.filters.network.http_connection_manager",
    ),
    ("envoy.mongo_proxy", "envoy.filters.network.mongo_proxy"),
    ("envoy.ratelimit", "envoy.filters.network.ratelimit"),
    ("envoy.redis_proxy", "envoy.filters.network.redis_proxy"),
    ("envoy.tcp_proxy", "envoy.filters.network.tcp_proxy"),
];

/// Warns when a matched filter name is a deprecated one. Mirrors Istio's `validateListenerMatchName`, with its
/// text.
fn warn_deprecated_filter_name(name: &str, path: &str, out: &mut Findings) {
    if let Some((_, canonical)) = DEPRECATED_FILTER_NAMES.iter().find(|(old, _)| *old == name) {
        out.warning(
            path,
            format!(
                "using deprecated filter name {}; use {} instead",
                common::go_quote(name),
                common::go_quote(canonical)
            ),
        );
    }
}

/// Converts the patch value to its Envoy message and, for whole values, runs the protoc-gen-validate rules.
fn validate_value(
    apply_to: ApplyTo,
    operation: Operation,
    value: &serde_json::Value,
    field: &str,
    out: &mut Findings,
) {
    let Some(message_name) = apply_to.envoy_message() else {
        return;
    };
    if !value.is_object() {
        out.error(field, "patch value must be an object");
        return;
    }
    let message = match envoy_proto::from_json(message_name, value) {
        Ok(message) => message,
        Err(error) => {
            let at = join(field, error.path());
            out.error(at, describe_conversion_error(&error, message_name));
            return;
        }
    };
    let mut untyped = Vec::new();
    untyped_filter_names(&message, &mut untyped);
    if !untyped.is_empty() {
        out.warning(
            field,
            format!(
                "filters configured by name without typed_config (deprecated in Envoy): {}",
                untyped.join(", ")
            ),
        );
    }
    if operation == Operation::Remove {
        return;
    }
    let violations = if operation.is_merge() {
        envoy_proto::validate_partial_message(&message)
    } else {
        envoy_proto::validate_message(&message)
    };
    for violation in violations {
        out.error(
            join(field, &violation.path),
            format!("{} (Envoy rule {})", violation.message, violation.rule),
        );
    }
}

/// Names of filters in `message` configured by name alone (a `typed_config` field exists but neither it nor
/// `config_discovery` is set); Envoy is phasing out lookups by name.
fn untyped_filter_names(message: &DynamicMessage, out: &mut Vec<String>) {
    let desc = message.descriptor();
    let mut has_typed_field = false;
    let mut configured = false;
    for field in desc.fields() {
        let name = field.name();
        if name == "typed_config" {
            has_typed_field = true;
        }
        if !message.has_field(&field) {
            continue;
        }
        if name == "typed_config" || name == "config_discovery" {
            configured = true;
        }
        // Like Istio, only singular message fields are entered (not lists, maps or Any payloads).
        if let Value::Message(inner) = &*message.get_field(&field) {
            untyped_filter_names(inner, out);
        }
    }
    if has_typed_field && !configured {
        let name = message
            .get_field_by_name("name")
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        out.push(name);
    }
}

fn describe_conversion_error(error: &envoy_proto::Error, message_name: &str) -> String {
    let reason = error.reason();
    if reason.starts_with("referenced type unknown") && reason.contains(".v2.") {
        format!("{reason} (hint: only the v3 xDS API is supported)")
    } else {
        format!("not a valid {message_name}: {reason}")
    }
}

fn join(prefix: &str, path: &str) -> String {
    if path.is_empty() {
        prefix.to_string()
    } else if path.starts_with('[') {
        format!("{prefix}{path}")
    } else {
        format!("{prefix}.{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::Finding;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> Vec<Finding> {
        let spec: EnvoyFilter = serde_json::from_value(spec).unwrap();
        let mut out = Findings::default();
        validate(&spec, &ObjectMeta::default(), &mut out);
        out.into_vec()
    }

    fn errors(spec: serde_json::Value) -> Vec<(String, String)> {
        run(spec)
            .into_iter()
            .filter(Finding::is_error)
            .map(|f| (f.field, f.message))
            .collect()
    }

    fn lua_filter() -> serde_json::Value {
        json!({"name": "envoy.lua", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
            "inline_code": "function envoy_on_request(h) end"}})
    }

    #[test]
    fn valid_http_filter_insert_has_only_the_caution_warning() {
        let found = run(
            json!({"workloadSelector": {"labels": {"app": "gw"}}, "configPatches": [{"applyTo": "HTTP_FILTER",
            "match": {"context": "GATEWAY", "listener": {"filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager",
                "subFilter": {"name": "envoy.filters.http.router"}}}}},
            "patch": {"operation": "INSERT_BEFORE", "value": lua_filter()}}]}),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(!found[0].is_error());
    }

    /// Istio's `validateListenerMatchName` warns about every deprecated filter name, filter and sub-filter.
    #[test]
    fn deprecated_filter_names_warn() {
        let found = run(
            json!({"workloadSelector": {"labels": {"app": "gw"}}, "configPatches": [{"applyTo": "HTTP_FILTER",
            "match": {"context": "GATEWAY", "listener": {"filterChain": {"filter": {"name": "envoy.http_connection_manager",
                "subFilter": {"name": "envoy.router"}}}}},
            "patch": {"operation": "INSERT_BEFORE", "value": lua_filter()}}]}),
        );
        let messages: Vec<&str> = found.iter().map(|f| f.message.as_str()).collect();
        assert!(found.iter().all(|f| !f.is_error()), "{found:?}");
        assert!(messages.contains(
            &r#"using deprecated filter name "envoy.http_connection_manager"; use "envoy.filters.network.http_connection_manager" instead"#
        ), "{messages:?}");
        assert!(messages.contains(
            &r#"using deprecated filter name "envoy.router"; use "envoy.filters.http.router" instead"#
        ), "{messages:?}");
    }

    #[test]
    fn patch_shape_errors() {
        assert_eq!(
            errors(json!({"configPatches": [{"patch": {"operation": "ADD", "value": {}}}]}))[0].0,
            "spec.configPatches[0].applyTo"
        );
        assert_eq!(
            errors(json!({"configPatches": [{"applyTo": "LISTENER"}]}))[0].0,
            "spec.configPatches[0].patch"
        );
        assert_eq!(
            errors(json!({"configPatches": [{"applyTo": "LISTENER", "patch": {}}]}))[0].0,
            "spec.configPatches[0].patch.operation"
        );
        assert_eq!(
            errors(
                json!({"configPatches": [{"applyTo": "LISTENER", "patch": {"operation": "ADD"}}]})
            )[0]
            .0,
            "spec.configPatches[0].patch.value"
        );
        assert!(errors(
            json!({"configPatches": [{"applyTo": "CLUSTER", "patch": {"operation": "REMOVE"}}]})
        )
        .is_empty());
    }

    /// `validateEnvoyFilter`'s texts (and the CRD's waypoint message).
    #[test]
    fn istio_texts() {
        let first = |spec: serde_json::Value| errors(spec).remove(0).1;
        assert_eq!(
            first(json!({"configPatches": [{"patch": {"operation": "ADD", "value": {}}}]})),
            "Envoy filter: missing applyTo"
        );
        assert_eq!(
            first(json!({"configPatches": [{"applyTo": "LISTENER"}]})),
            "Envoy filter: missing patch"
        );
        assert_eq!(
            first(json!({"configPatches": [{"applyTo": "LISTENER", "patch": {}}]})),
            "Envoy filter: missing patch operation"
        );
        assert_eq!(
            first(
                json!({"configPatches": [{"applyTo": "LISTENER", "patch": {"operation": "ADD"}}]})
            ),
            "Envoy filter: missing patch value for non-remove operation"
        );
        let mismatch = |apply_to: &str, object: serde_json::Value| {
            first(
                json!({"configPatches": [{"applyTo": apply_to, "match": object, "patch": {"operation": "REMOVE"}}]}),
            )
        };
        assert_eq!(
            mismatch("HTTP_FILTER", json!({"cluster": {"name": "c"}})),
            "Envoy filter: applyTo for listener class objects cannot have non listener match"
        );
        assert_eq!(
            mismatch("VIRTUAL_HOST", json!({"cluster": {"name": "c"}})),
            "Envoy filter: applyTo for http route class objects cannot have non route configuration match"
        );
        assert_eq!(
            mismatch("CLUSTER", json!({"listener": {"name": "l"}})),
            "Envoy filter: applyTo for cluster class objects cannot have non cluster match"
        );
        assert!(
            mismatch("CLUSTER", json!({"proxy": {"proxyVersion": "1.(2"}}))
                .starts_with("Envoy filter: invalid regex for proxy version, [")
        );
        assert_eq!(
            mismatch(
                "HTTP_FILTER",
                json!({"context": "SIDECAR_INBOUND", "waypoint": {}})
            ),
            "only support waypointMatch when context is WAYPOINT"
        );
        let warnings = |spec: serde_json::Value| -> Vec<String> {
            run(spec)
                .into_iter()
                .filter(|f| !f.is_error() && f.field != "spec")
                .map(|f| f.message)
                .collect()
        };
        assert_eq!(
            warnings(
                json!({"configPatches": [{"applyTo": "CLUSTER", "match": {"proxy": {"proxyVersion": "1".repeat(1025)}},
                "patch": {"operation": "REMOVE"}}]})
            ),
            ["Envoy filter: proxyVersion match exceeds 1024 characters and will be ignored"]
        );
        assert_eq!(
            warnings(
                json!({"configPatches": [{"applyTo": "LISTENER", "match": {"listener": {"filterChain": {"filter": {"name": "f"}}}},
                "patch": {"operation": "REMOVE"}}]})
            ),
            ["Envoy filter: filter match has no effect when used with LISTENER"]
        );
    }

    #[test]
    fn match_and_apply_to_must_agree() {
        let e = errors(
            json!({"configPatches": [{"applyTo": "HTTP_FILTER", "match": {"cluster": {"name": "c"}},
            "patch": {"operation": "REMOVE"}}]}),
        );
        assert_eq!(e[0].0, "spec.configPatches[0].match");
        let e = errors(
            json!({"configPatches": [{"applyTo": "CLUSTER", "match": {"listener": {"name": "l"}},
            "patch": {"operation": "REMOVE"}}]}),
        );
        assert_eq!(e[0].0, "spec.configPatches[0].match");
        let e = errors(
            json!({"configPatches": [{"applyTo": "VIRTUAL_HOST", "match": {"cluster": {"name": "c"}},
            "patch": {"operation": "REMOVE"}}]}),
        );
        assert_eq!(e[0].0, "spec.configPatches[0].match");
        let e = errors(
            json!({"configPatches": [{"applyTo": "NETWORK_FILTER", "match": {"listener": {"filterChain": {"filter": {"subFilter": {"name": "x"}}}}},
            "patch": {"operation": "REMOVE"}}]}),
        );
        assert_eq!(
            e[0].0,
            "spec.configPatches[0].match.listener.filterChain.filter.name"
        );
        let e = errors(
            json!({"configPatches": [{"applyTo": "NETWORK_FILTER", "match": {"listener": {"filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager", "subFilter": {"name": "x"}}}}},
            "patch": {"operation": "REMOVE"}}]}),
        );
        assert_eq!(
            e[0].0,
            "spec.configPatches[0].match.listener.filterChain.filter.subFilter"
        );
        let e = errors(
            json!({"configPatches": [{"applyTo": "HTTP_FILTER", "match": {"listener": {"filterChain": {"filter": {"name": "tcp", "subFilter": {"name": "x"}}}}},
            "patch": {"operation": "REMOVE"}}]}),
        );
        assert_eq!(
            e[0].0,
            "spec.configPatches[0].match.listener.filterChain.filter.name"
        );
    }

    #[test]
    fn proxy_version_must_compile_and_waypoint_rules() {
        let e = errors(
            json!({"configPatches": [{"applyTo": "CLUSTER", "match": {"proxy": {"proxyVersion": "1.(2"}},
            "patch": {"operation": "REMOVE"}}]}),
        );
        assert_eq!(e[0].0, "spec.configPatches[0].match.proxy.proxyVersion");
        let e = errors(
            json!({"configPatches": [{"applyTo": "HTTP_FILTER", "match": {"context": "SIDECAR_INBOUND", "waypoint": {}}}]}),
        );
        assert_eq!(e[0].0, "spec.configPatches[0].match");
        let e = errors(
            json!({"configPatches": [{"applyTo": "HTTP_FILTER", "match": {"context": "WAYPOINT", "waypoint": {"portNumber": 65536}}}]}),
        );
        assert_eq!(e[0].0, "spec.configPatches[0].match.waypoint.portNumber");
        // The CRD's x-kubernetes-validations message.
        assert_eq!(e[0].1, "port must be between 1-65535");
        assert!(errors(json!({"configPatches": [{"applyTo": "HTTP_FILTER", "match": {"context": "WAYPOINT", "waypoint": {"portNumber": 80}}}]})).is_empty());
    }

    #[test]
    fn values_are_converted_strictly() {
        let e = errors(
            json!({"configPatches": [{"applyTo": "HTTP_FILTER", "patch": {"operation": "ADD", "value":
            {"name": "x", "typed_config": {"@type": "type.googleapis.com/envoy.config.filter.http.lua.v2.Lua"}}}}]}),
        );
        assert_eq!(e[0].0, "spec.configPatches[0].patch.value.typed_config");
        assert!(e[0].1.contains("v3"), "{e:?}");
        let e = errors(
            json!({"configPatches": [{"applyTo": "NETWORK_FILTER", "patch": {"operation": "MERGE", "value":
            {"typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "http_filters": [{"name": "a", "bogus": true}]}}}}]}),
        );
        assert_eq!(
            e[0].0, "spec.configPatches[0].patch.value.typed_config.http_filters[0].bogus",
            "{e:?}"
        );
    }

    #[test]
    fn pgv_rules_apply_to_whole_values_only() {
        // An empty filter name breaks Envoy's min_len rule when ADDed, but is fine in a MERGE.
        let add = json!({"configPatches": [{"applyTo": "NETWORK_FILTER", "patch": {"operation": "INSERT_FIRST", "value":
            {"typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "s", "http_filters": [{"name": ""}]}}}}]});
        let e = errors(add.clone());
        assert!(
            e.iter()
                .any(|(f, _)| f == "spec.configPatches[0].patch.value.name"),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|(f, _)| f
                    == "spec.configPatches[0].patch.value.typed_config.http_filters[0].name"),
            "{e:?}"
        );
        // In a MERGE the network filter's own name may be left out (the target has one), but the HTTP filter is
        // appended as it is, so its empty name still breaks the rule.
        let mut merge = add;
        merge["configPatches"][0]["patch"]["operation"] = json!("MERGE");
        let e = errors(merge);
        assert_eq!(
            e.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
            ["spec.configPatches[0].patch.value.typed_config.http_filters[0].name"],
            "{e:?}"
        );
    }

    #[test]
    fn merge_values_keep_envoys_field_rules() {
        // Envoy rejects every listener with this merged in: max_request_headers_kb must be in (0, 8192].
        let hcm = json!({"configPatches": [{"applyTo": "NETWORK_FILTER", "match": {"context": "GATEWAY",
            "listener": {"filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}}}},
            "patch": {"operation": "MERGE", "value": {"typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "max_request_headers_kb": 99999}}}}]});
        let e = errors(hcm);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            e[0].0,
            "spec.configPatches[0].patch.value.typed_config.max_request_headers_kb"
        );
        assert!(e[0].1.contains("less than or equal to 8192"), "{e:?}");
        // A cluster's connect_timeout must be > 0.
        let cluster = json!({"configPatches": [{"applyTo": "CLUSTER", "match": {"context": "GATEWAY"},
            "patch": {"operation": "MERGE", "value": {"connect_timeout": "0s"}}}]});
        let e = errors(cluster);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].0, "spec.configPatches[0].patch.value.connect_timeout");
        // Leaving out what the merge target already has is fine: no name, no stat_prefix, no required fields.
        let fine = json!({"configPatches": [{"applyTo": "CLUSTER", "match": {"context": "GATEWAY"},
            "patch": {"operation": "MERGE", "value": {"connect_timeout": "2s",
                "circuit_breakers": {"thresholds": [{"max_connections": 10}]}}}}]});
        assert_eq!(errors(fine), Vec::<(String, String)>::new());
    }

    #[test]
    fn filters_without_typed_config_get_a_warning() {
        let found = run(
            json!({"configPatches": [{"applyTo": "HTTP_FILTER", "patch": {"operation": "ADD",
            "value": {"name": "envoy.filters.http.cors"}}}]}),
        );
        let warning = found
            .iter()
            .find(|f| f.field == "spec.configPatches[0].patch.value")
            .unwrap();
        assert!(
            !warning.is_error() && warning.message.contains("envoy.filters.http.cors"),
            "{found:?}"
        );
    }

    #[test]
    fn selector_and_target_refs() {
        let e = errors(
            json!({"workloadSelector": {"labels": {"app": "*"}}, "targetRefs": [{"kind": "Gateway", "name": "g", "namespace": "other"}]}),
        );
        let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "spec",
                "spec.workloadSelector.labels[app]",
                "spec.targetRefs[0].namespace"
            ]
        );
        // The CRD's x-kubernetes-validations message for `namespace`.
        assert_eq!(
            e[2].1,
            "cross namespace referencing is not currently supported"
        );
        // `maxItems: 16`; any kind is accepted (neither the webhook nor the CRD limits them).
        let refs: Vec<_> = (0..17)
            .map(|i| json!({"kind": "Anything", "name": format!("n{i}")}))
            .collect();
        assert_eq!(
            errors(json!({"targetRefs": refs})),
            [(
                "spec.targetRefs".to_string(),
                "at most 16 targetRefs may be listed, found 17".to_string()
            )]
        );
        let w = run(json!({"workloadSelector": {}}));
        assert!(w
            .iter()
            .any(|f| f.field == "spec.workloadSelector" && !f.is_error()));
    }
}
