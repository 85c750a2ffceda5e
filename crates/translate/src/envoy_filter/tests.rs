//! Unit tests of the patch engine: one small hand-built GatewayResources per applyTo × operation.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use prost::Message;
use serde_json::{json, Value};

use super::*;
use admitpilot_envoy_proto::{message_from_json, message_to_json};
use admitpilot_model::{ObjectMeta, Spec};

const HCM_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

fn listener(name: &str, port: u32, http_filters: &[&str]) -> Listener {
    let filters: Vec<Value> = http_filters.iter().map(|n| json!({"name": n})).collect();
    message_from_json(&json!({"name": name,
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},
        "listener_filters": [{"name": "envoy.filters.listener.tls_inspector",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"}}],
        "filter_chains": [{"name": "main", "filter_chain_match": {"server_names": ["a.example.com"]},
            "filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {"@type": HCM_TYPE,
                "stat_prefix": "in", "rds": {"config_source": {"ads": {}}, "route_config_name": "http.8080"},
                "http_filters": filters}}]}]}))
    .unwrap()
}

fn resources() -> GatewayResources {
    GatewayResources {
        listeners: vec![listener(
            "0.0.0.0_8080",
            8080,
            &["envoy.filters.http.cors", "envoy.filters.http.router"],
        )],
        route_configs: vec![message_from_json::<RouteConfiguration>(
            &json!({"name": "http.8080", "virtual_hosts": [
            {"name": "a.example.com:8080", "domains": ["a.example.com"], "routes": [
                {"name": "r1", "match": {"prefix": "/a"}, "route": {"cluster": "c1"}},
                {"name": "r2", "match": {"prefix": "/"}, "direct_response": {"status": 404}}]}]}),
        )
        .unwrap()],
        clusters: vec![
            message_from_json::<Cluster>(
                &json!({"name": "outbound|80||s.ns.svc.cluster.local", "connect_timeout": "1s"}),
            )
            .unwrap(),
            message_from_json::<Cluster>(&json!({"name": "outbound|80|v1|s.ns.svc.cluster.local"}))
                .unwrap(),
        ],
        ..GatewayResources::default()
    }
}

fn object(namespace: &str, name: &str, spec: Value) -> ConfigObject {
    ConfigObject {
        api_version: "networking.istio.io/v1alpha3".into(),
        metadata: ObjectMeta {
            name: name.into(),
            namespace: namespace.into(),
            ..ObjectMeta::default()
        },
        spec: Spec::EnvoyFilter(serde_json::from_value(spec).unwrap()),
    }
}

fn proxy() -> Proxy {
    Proxy {
        namespace: "gw".into(),
        labels: BTreeMap::from([("app".to_string(), "gateway".to_string())]),
        ..Default::default()
    }
}

/// Applies one patch (in namespace `gw`) to the default resources.
fn patched(patch: Value) -> GatewayResources {
    patched_with(
        vec![object("gw", "f", json!({"configPatches": [patch]}))],
        &PatchOptions::default(),
    )
}

fn patched_with(objects: Vec<ConfigObject>, options: &PatchOptions) -> GatewayResources {
    let mut res = resources();
    let refs: Vec<&ConfigObject> = objects.iter().collect();
    apply(&mut res, &refs, &proxy(), options);
    res
}

fn http_filter_names(res: &GatewayResources) -> Vec<String> {
    let Some(filter::ConfigType::TypedConfig(any)) =
        &res.listeners[0].filter_chains[0].filters[0].config_type
    else {
        panic!("no typed config")
    };
    HttpConnectionManager::decode(any.value.as_slice())
        .unwrap()
        .http_filters
        .into_iter()
        .map(|f| f.name)
        .collect()
}

fn route_names(res: &GatewayResources) -> Vec<String> {
    res.route_configs[0].virtual_hosts[0]
        .routes
        .iter()
        .map(|r| r.name.clone())
        .collect()
}

fn lua(name: &str) -> Value {
    json!({"name": name, "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
        "default_source_code": {"inline_string": "x"}}})
}

fn hcm_match(sub: Option<&str>) -> Value {
    let mut filter = json!({"name": "envoy.filters.network.http_connection_manager"});
    if let Some(sub) = sub {
        filter["subFilter"] = json!({"name": sub});
    }
    json!({"context": "GATEWAY", "listener": {"portNumber": 8080, "filterChain": {"filter": filter}}})
}

#[test]
fn http_filter_insert_before_after_first_add_replace_remove() {
    let names = |op: &str, sub: Option<&str>| {
        http_filter_names(&patched(
            json!({"applyTo": "HTTP_FILTER", "match": hcm_match(sub),
            "patch": {"operation": op, "value": lua("lua")}}),
        ))
    };
    let router = Some("envoy.filters.http.router");
    assert_eq!(
        names("INSERT_BEFORE", router),
        [
            "envoy.filters.http.cors",
            "lua",
            "envoy.filters.http.router"
        ]
    );
    assert_eq!(
        names("INSERT_AFTER", Some("envoy.filters.http.cors")),
        [
            "envoy.filters.http.cors",
            "lua",
            "envoy.filters.http.router"
        ]
    );
    assert_eq!(
        names("INSERT_FIRST", router),
        [
            "lua",
            "envoy.filters.http.cors",
            "envoy.filters.http.router"
        ]
    );
    assert_eq!(
        names("INSERT_BEFORE", None),
        [
            "lua",
            "envoy.filters.http.cors",
            "envoy.filters.http.router"
        ]
    );
    assert_eq!(
        names("ADD", None),
        [
            "envoy.filters.http.cors",
            "envoy.filters.http.router",
            "lua"
        ]
    );
    assert_eq!(
        names("REPLACE", Some("envoy.filters.http.cors")),
        ["lua", "envoy.filters.http.router"]
    );
    assert_eq!(
        names("INSERT_BEFORE", Some("missing")),
        ["envoy.filters.http.cors", "envoy.filters.http.router"]
    );
    let removed = http_filter_names(&patched(
        json!({"applyTo": "HTTP_FILTER", "match": hcm_match(Some("envoy.filters.http.cors")),
        "patch": {"operation": "REMOVE"}}),
    ));
    assert_eq!(removed, ["envoy.filters.http.router"]);
}

#[test]
fn http_filter_merge_merges_typed_config_of_the_same_type() {
    let mut res = resources();
    let objects = [object(
        "gw",
        "a",
        json!({"configPatches": [{"applyTo": "HTTP_FILTER", "match": hcm_match(None),
        "patch": {"operation": "ADD", "value": lua("lua")}}, {"applyTo": "HTTP_FILTER", "match": hcm_match(Some("lua")),
        "patch": {"operation": "MERGE", "value": {"typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
            "stat_prefix": "merged"}}}}]}),
    )];
    let refs: Vec<&ConfigObject> = objects.iter().collect();
    apply(&mut res, &refs, &proxy(), &PatchOptions::default());
    let json = message_to_json(&res.listeners[0]).unwrap();
    let filters = &json["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"];
    assert_eq!(filters[2]["typed_config"]["stat_prefix"], "merged");
    assert_eq!(
        filters[2]["typed_config"]["default_source_code"]["inline_string"],
        "x"
    );
}

#[test]
fn network_filter_operations() {
    let tcp = json!({"name": "envoy.filters.network.tcp_proxy", "typed_config": {"@type":
        "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "c"}});
    let names = |op: &str| -> Vec<String> {
        let res = patched(
            json!({"applyTo": "NETWORK_FILTER", "match": hcm_match(None),
            "patch": {"operation": op, "value": tcp}}),
        );
        res.listeners[0].filter_chains[0]
            .filters
            .iter()
            .map(|f| f.name.clone())
            .collect()
    };
    assert_eq!(
        names("INSERT_BEFORE"),
        [
            "envoy.filters.network.tcp_proxy",
            "envoy.filters.network.http_connection_manager"
        ]
    );
    assert_eq!(
        names("INSERT_AFTER"),
        [
            "envoy.filters.network.http_connection_manager",
            "envoy.filters.network.tcp_proxy"
        ]
    );
    assert_eq!(names("REPLACE"), ["envoy.filters.network.tcp_proxy"]);
    let res = patched(
        json!({"applyTo": "NETWORK_FILTER", "match": hcm_match(None), "patch": {"operation": "REMOVE"}}),
    );
    assert!(res.listeners[0].filter_chains[0].filters.is_empty());
    let res = patched(
        json!({"applyTo": "NETWORK_FILTER", "match": hcm_match(None), "patch": {"operation": "MERGE",
        "value": {"typed_config": {"@type": HCM_TYPE, "stat_prefix": "patched"}}}}),
    );
    let json = message_to_json(&res.listeners[0]).unwrap();
    assert_eq!(
        json["filter_chains"][0]["filters"][0]["typed_config"]["stat_prefix"],
        "patched"
    );
    assert_eq!(
        json["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn listener_filter_chain_and_listener_filter_operations() {
    let res = patched(
        json!({"applyTo": "LISTENER", "match": {"listener": {"portNumber": 8080}},
        "patch": {"operation": "MERGE", "value": {"per_connection_buffer_limit_bytes": 1024}}}),
    );
    assert_eq!(
        res.listeners[0]
            .per_connection_buffer_limit_bytes
            .as_ref()
            .unwrap()
            .value,
        1024
    );
    let res = patched(
        json!({"applyTo": "LISTENER", "match": {"listener": {"portNumber": 9090}},
        "patch": {"operation": "MERGE", "value": {"per_connection_buffer_limit_bytes": 1024}}}),
    );
    assert!(res.listeners[0].per_connection_buffer_limit_bytes.is_none());
    let res = patched(
        json!({"applyTo": "LISTENER", "match": {"listener": {"name": "0.0.0.0_8080"}}, "patch": {"operation": "REMOVE"}}),
    );
    assert!(res.listeners.is_empty());
    let res = patched(
        json!({"applyTo": "LISTENER", "patch": {"operation": "ADD", "value":
        {"name": "0.0.0.0_7000", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 7000}}}}}),
    );
    let names: Vec<&str> = res.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_7000", "0.0.0.0_8080"]);
    let res = patched(
        json!({"applyTo": "FILTER_CHAIN", "match": {"listener": {"filterChain": {"sni": "a.example.com"}}},
        "patch": {"operation": "REMOVE"}}),
    );
    assert!(res.listeners[0].filter_chains.is_empty());
    let res = patched(
        json!({"applyTo": "FILTER_CHAIN", "match": {"listener": {"filterChain": {"sni": "b.example.com"}}},
        "patch": {"operation": "REMOVE"}}),
    );
    assert_eq!(res.listeners[0].filter_chains.len(), 1);
    let res = patched(
        json!({"applyTo": "FILTER_CHAIN", "patch": {"operation": "ADD", "value": {"name": "extra",
        "filters": [{"name": "envoy.filters.network.tcp_proxy"}]}}}),
    );
    assert_eq!(res.listeners[0].filter_chains[1].name, "extra");
    let res = patched(
        json!({"applyTo": "FILTER_CHAIN", "match": {"listener": {"filterChain": {"name": "main"}}},
        "patch": {"operation": "MERGE", "value": {"filter_chain_match": {"server_names": ["c.example.com"]}}}}),
    );
    assert_eq!(
        res.listeners[0].filter_chains[0]
            .filter_chain_match
            .as_ref()
            .unwrap()
            .server_names,
        ["a.example.com", "c.example.com"]
    );
    let res = patched(
        json!({"applyTo": "FILTER_CHAIN", "match": {"listener": {"filterChain": {"name": "main"}}},
        "patch": {"operation": "MERGE_AND_REPLACE_LIST", "value": {"filter_chain_match": {"server_names": ["c.example.com"]}}}}),
    );
    assert_eq!(
        res.listeners[0].filter_chains[0]
            .filter_chain_match
            .as_ref()
            .unwrap()
            .server_names,
        ["c.example.com"]
    );
    let proxy_protocol = json!({"name": "envoy.filters.listener.proxy_protocol", "typed_config": {"@type":
        "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol"}});
    let res = patched(
        json!({"applyTo": "LISTENER_FILTER", "patch": {"operation": "INSERT_FIRST", "value": proxy_protocol}}),
    );
    let names: Vec<&str> = res.listeners[0]
        .listener_filters
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "envoy.filters.listener.proxy_protocol",
            "envoy.filters.listener.tls_inspector"
        ]
    );
    let res = patched(
        json!({"applyTo": "LISTENER_FILTER", "match": {"listener": {"listenerFilter": "envoy.filters.listener.tls_inspector"}},
        "patch": {"operation": "REMOVE"}}),
    );
    assert!(res.listeners[0].listener_filters.is_empty());
}

#[test]
fn route_configuration_virtual_host_and_route_operations() {
    let res = patched(
        json!({"applyTo": "ROUTE_CONFIGURATION", "match": {"routeConfiguration": {"portNumber": 8080}},
        "patch": {"operation": "MERGE", "value": {"max_direct_response_body_size_bytes": 4096}}}),
    );
    assert_eq!(
        res.route_configs[0]
            .max_direct_response_body_size_bytes
            .as_ref()
            .unwrap()
            .value,
        4096
    );
    let res = patched(
        json!({"applyTo": "VIRTUAL_HOST", "patch": {"operation": "ADD", "value": {"name": "extra", "domains": ["x"]}}}),
    );
    assert_eq!(res.route_configs[0].virtual_hosts.len(), 2);
    let res = patched(
        json!({"applyTo": "VIRTUAL_HOST", "match": {"routeConfiguration": {"vhost": {"domainName": "a.example.com"}}},
        "patch": {"operation": "REMOVE"}}),
    );
    assert!(res.route_configs[0].virtual_hosts.is_empty());
    let res = patched(
        json!({"applyTo": "VIRTUAL_HOST", "match": {"routeConfiguration": {"vhost": {"name": "a.example.com:8080"}}},
        "patch": {"operation": "REPLACE", "value": {"name": "new", "domains": ["n"]}}}),
    );
    assert_eq!(res.route_configs[0].virtual_hosts[0].name, "new");
    let res = patched(
        json!({"applyTo": "VIRTUAL_HOST", "patch": {"operation": "MERGE", "value": {"domains": ["b.example.com"]}}}),
    );
    assert_eq!(
        res.route_configs[0].virtual_hosts[0].domains,
        ["a.example.com", "b.example.com"]
    );
    let route = |op: &str, route_match: Value| {
        route_names(&patched(
            json!({"applyTo": "HTTP_ROUTE", "match": {"routeConfiguration": {"vhost": {"route": route_match}}},
            "patch": {"operation": op, "value": {"name": "new", "match": {"prefix": "/n"}, "route": {"cluster": "c"}}}}),
        ))
    };
    assert_eq!(
        route("INSERT_BEFORE", json!({"name": "r2"})),
        ["r1", "new", "r2"]
    );
    assert_eq!(
        route("INSERT_AFTER", json!({"name": "r1"})),
        ["r1", "new", "r2"]
    );
    assert_eq!(
        route("INSERT_FIRST", json!({"name": "r2"})),
        ["new", "r1", "r2"]
    );
    assert_eq!(route("INSERT_FIRST", json!({"name": "zzz"})), ["r1", "r2"]);
    assert_eq!(route("ADD", json!({})), ["r1", "r2", "new"]);
    assert_eq!(
        route("REMOVE", json!({"action": "DIRECT_RESPONSE"})),
        ["r1"]
    );
    let res = patched(
        json!({"applyTo": "HTTP_ROUTE", "match": {"routeConfiguration": {"vhost": {"route": {"action": "ROUTE"}}}},
        "patch": {"operation": "MERGE", "value": {"route": {"timeout": "7s"}}}}),
    );
    let json = message_to_json(&res.route_configs[0]).unwrap();
    assert_eq!(
        json["virtual_hosts"][0]["routes"][0]["route"]["timeout"],
        "7s"
    );
    assert_eq!(
        json["virtual_hosts"][0]["routes"][0]["route"]["cluster"],
        "c1"
    );
}

#[test]
fn cluster_and_extension_config_operations() {
    let res = patched(
        json!({"applyTo": "CLUSTER", "match": {"cluster": {"subset": "v1"}}, "patch": {"operation": "REMOVE"}}),
    );
    assert_eq!(res.clusters.len(), 1);
    let res = patched(
        json!({"applyTo": "CLUSTER", "match": {"cluster": {"service": "s.ns.svc.cluster.local", "portNumber": 80}},
        "patch": {"operation": "MERGE", "value": {"connect_timeout": "3s"}}}),
    );
    let timeouts: Vec<_> = res
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.connect_timeout))
        .collect();
    assert!(
        timeouts
            .iter()
            .all(|(_, t)| t.is_some_and(|t| t.seconds == 3)),
        "{timeouts:?}"
    );
    let res = patched(
        json!({"applyTo": "CLUSTER", "patch": {"operation": "ADD", "value": {"name": "a-new", "connect_timeout": "1s"}}}),
    );
    assert_eq!(res.clusters[0].name, "a-new");
    let res = patched(
        json!({"applyTo": "CLUSTER", "match": {"cluster": {"name": "outbound|80||s.ns.svc.cluster.local"}},
        "patch": {"operation": "MERGE", "value": {"transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {"@type":
            "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "sni": "s"}}}}}),
    );
    // Sorted by name: the v1 subset cluster comes first.
    assert_eq!(
        res.clusters[1].transport_socket.as_ref().unwrap().name,
        "envoy.transport_sockets.tls"
    );
    assert!(res.clusters[0].transport_socket.is_none());
    let res = patched(
        json!({"applyTo": "EXTENSION_CONFIG", "patch": {"operation": "ADD", "value": lua("ecds-lua")}}),
    );
    assert_eq!(res.extension_configs[0].name, "ecds-lua");
}

#[test]
fn selection_context_and_ordering() {
    let add = |name: &str| json!({"applyTo": "HTTP_FILTER", "match": hcm_match(None), "patch": {"operation": "INSERT_FIRST", "value": lua(name)}});
    // Other namespace: ignored; root namespace: applies; selector must match; sidecar contexts never apply.
    let objects = vec![
        object("other", "a", json!({"configPatches": [add("other")]})),
        object("istio-system", "b", json!({"configPatches": [add("root")]})),
        object(
            "gw",
            "c",
            json!({"workloadSelector": {"labels": {"app": "nope"}}, "configPatches": [add("unselected")]}),
        ),
        object(
            "gw",
            "d",
            json!({"configPatches": [{"applyTo": "HTTP_FILTER", "match": {"context": "SIDECAR_INBOUND"},
            "patch": {"operation": "INSERT_FIRST", "value": lua("sidecar")}}]}),
        ),
        object(
            "gw",
            "e",
            json!({"priority": -1, "workloadSelector": {"labels": {"app": "gateway"}}, "configPatches": [add("early")]}),
        ),
        object("gw", "a-local", json!({"configPatches": [add("local")]})),
    ];
    let res = patched_with(objects.clone(), &PatchOptions::default());
    // Applied in order early (priority -1), root (root namespace first), local; each inserted first.
    assert_eq!(http_filter_names(&res)[..3], ["local", "root", "early"]);
    assert_eq!(http_filter_names(&res).len(), 5);
    assert!(!http_filter_names(&res).contains(&"other".to_string()));
    let other_root = PatchOptions {
        root_namespace: "other".into(),
        ..PatchOptions::default()
    };
    let names = http_filter_names(&patched_with(objects, &other_root));
    assert!(names.contains(&"other".to_string()) && !names.contains(&"root".to_string()));
}

#[test]
fn proxy_version_metadata_and_target_refs() {
    let versioned = object(
        "gw",
        "v",
        json!({"configPatches": [{"applyTo": "CLUSTER", "match": {"proxy": {"proxyVersion": "^1\\.2.*",
        "metadata": {"ROLE": "edge"}}}, "patch": {"operation": "REMOVE"}}]}),
    );
    assert_eq!(
        patched_with(vec![versioned.clone()], &PatchOptions::default())
            .clusters
            .len(),
        2
    );
    let options = PatchOptions {
        proxy_version: Some("1.24.0".into()),
        node_metadata: BTreeMap::from([("ROLE".to_string(), "edge".to_string())]),
        ..PatchOptions::default()
    };
    assert!(patched_with(vec![versioned], &options).clusters.is_empty());
    let targeted = object(
        "gw",
        "t",
        json!({"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "g"}],
        "configPatches": [{"applyTo": "CLUSTER", "patch": {"operation": "REMOVE"}}]}),
    );
    let mut res = resources();
    let mut labelled = proxy();
    labelled
        .labels
        .insert(GATEWAY_NAME_LABEL.into(), "g".into());
    apply(&mut res, &[&targeted], &labelled, &PatchOptions::default());
    assert!(res.clusters.is_empty());
    assert_eq!(
        patched_with(vec![targeted], &PatchOptions::default())
            .clusters
            .len(),
        2
    );
}
