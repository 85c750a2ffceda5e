//! Istio `TrafficExtension` spec (extensions.istio.io v1alpha1): takes the `spec` JSON, yields the typed
//! extension: a Wasm module or inline Lua code, where in the filter chain it runs, and which traffic it applies to.

use serde::{Deserialize, Serialize};

use super::proxy_config::TypeWorkloadSelector;
use super::types::PolicyTargetReference;
use super::wasm_plugin::{wasm_module_struct, PluginType, TrafficSelector};

/// The `spec` of a TrafficExtension: exactly one of `wasm` and `lua`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficExtension {
    /// Workloads the extension applies to.
    pub selector: Option<TypeWorkloadSelector>,
    /// Resources the extension attaches to (exclusive with `selector`).
    pub target_refs: Vec<PolicyTargetReference>,
    /// Where in the filter chain the extension runs.
    pub phase: Option<ExecutionPhase>,
    /// Order within a phase (higher first).
    pub priority: Option<i32>,
    /// Traffic the extension applies to; empty means all.
    #[serde(rename = "match")]
    pub match_: Vec<TrafficSelector>,
    /// A Wasm module.
    pub wasm: Option<WasmConfig>,
    /// Inline Lua code.
    pub lua: Option<LuaConfig>,
}

/// Where in the filter chain an extension runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionPhase {
    /// Let the control plane decide (just before the router).
    #[default]
    Unspecified,
    /// Before authentication filters.
    Authn,
    /// Before authorization filters.
    Authz,
    /// Before stats filters.
    Stats,
}

wasm_module_struct! {
    /// A Wasm module and its settings.
    pub struct WasmConfig {
        /// HTTP or network filter.
        #[serde(rename = "type")]
        pub type_: Option<PluginType>,
    }
}

/// Inline Lua code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LuaConfig {
    /// The Lua source; required, at most 64 KiB.
    pub inline_code: Option<String>,
}
