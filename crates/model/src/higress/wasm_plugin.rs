//! Higress `WasmPlugin` spec (extensions.higress.io v1alpha1): takes the `spec` JSON, yields the typed plugin.
//! It is Istio's WasmPlugin without selectors/targetRefs/match/type, plus Higress's `defaultConfig`,
//! `defaultConfigDisable` and per-ingress/domain/service `matchRules`.

use serde::{Deserialize, Serialize};

use crate::istio::wasm_plugin::{wasm_module_struct, PluginPhase};

wasm_module_struct! {
    /// The `spec` of an extensions.higress.io WasmPlugin. When `pluginConfig` is set, `defaultConfig` and
    /// `matchRules` are ignored.
    pub struct WasmPlugin {
        /// Where in the filter chain the plugin goes.
        pub phase: Option<PluginPhase>,
        /// Order within a phase (higher first).
        pub priority: Option<i32>,
        /// Configuration applied everywhere no match rule applies.
        pub default_config: Option<serde_json::Map<String, serde_json::Value>>,
        /// Per-route/domain/service configuration.
        pub match_rules: Vec<MatchRule>,
        /// Turn the default configuration off (the plugin then runs only where a match rule applies).
        pub default_config_disable: Option<bool>,
    }
}

/// Configuration for the routes of some ingresses, some domains or some services.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MatchRule {
    /// Ingress (route) names, `name` or `namespace/name`.
    pub ingress: Vec<String>,
    /// Domains, exact or `*.`-wildcard.
    pub domain: Vec<String>,
    /// Configuration for matching requests.
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
    /// Turn this rule off.
    pub config_disable: Option<bool>,
    /// Upstream services.
    pub service: Vec<String>,
    /// Route type the ingress names refer to (default HTTP).
    pub route_type: Option<RouteType>,
}

/// The kind of route a match rule refers to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RouteType {
    /// HTTP routes.
    #[default]
    Http,
    /// gRPC routes.
    Grpc,
}
