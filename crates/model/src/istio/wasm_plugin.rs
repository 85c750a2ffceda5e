//! Istio `WasmPlugin` spec (extensions.istio.io v1alpha1): takes the `spec` JSON, yields the typed plugin
//! (module location, VM config, phase, traffic selectors). The env/enum types are shared with Higress's WasmPlugin.

use serde::{Deserialize, Serialize};

use super::proxy_config::TypeWorkloadSelector;
use super::types::{PolicyTargetReference, PortSelector, WorkloadMode};

/// Declares a struct holding the fields every Wasm module reference shares (Istio's WasmPlugin, its
/// TrafficExtension `wasm`, Higress's WasmPlugin: location, pull settings, plugin name and config, failure
/// strategy, VM settings), followed by the struct's own fields.
macro_rules! wasm_module_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct $name {
            /// Module location: `oci://` (default when no scheme), `file://`, `http://` or `https://`; required.
            pub url: Option<String>,
            /// Expected SHA-256 of the module, 64 lower-case hex digits.
            pub sha256: Option<String>,
            /// OCI pull policy.
            pub image_pull_policy: Option<$crate::istio::wasm_plugin::PullPolicy>,
            /// Name of the docker pull secret in the plugin's namespace.
            pub image_pull_secret: Option<String>,
            /// PEM public key used to verify signed modules.
            pub verification_key: Option<String>,
            /// Configuration handed to the plugin as is.
            pub plugin_config: Option<serde_json::Map<String, serde_json::Value>>,
            /// Plugin (root) name inside the module.
            pub plugin_name: Option<String>,
            /// Behaviour on fatal plugin errors (FAIL_CLOSE or FAIL_OPEN).
            pub fail_strategy: Option<$crate::istio::wasm_plugin::FailStrategy>,
            /// VM settings.
            pub vm_config: Option<$crate::istio::wasm_plugin::VmConfig>,
            $($(#[$field_meta])* pub $field: $ty,)*
        }
    };
}
pub(crate) use wasm_module_struct;

wasm_module_struct! {
    /// The `spec` of an extensions.istio.io WasmPlugin.
    pub struct WasmPlugin {
        /// Workloads the plugin applies to.
        pub selector: Option<TypeWorkloadSelector>,
        /// Single resource the plugin attaches to.
        pub target_ref: Option<PolicyTargetReference>,
        /// Resources the plugin attaches to.
        pub target_refs: Vec<PolicyTargetReference>,
        /// Where in the filter chain the plugin goes.
        pub phase: Option<PluginPhase>,
        /// Order within a phase (higher first).
        pub priority: Option<i32>,
        /// Traffic the plugin applies to; empty means all.
        #[serde(rename = "match")]
        pub match_: Vec<TrafficSelector>,
        /// HTTP or network filter.
        #[serde(rename = "type")]
        pub type_: Option<PluginType>,
    }
}

/// Restricts a plugin to a traffic direction and ports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficSelector {
    /// Traffic direction.
    pub mode: WorkloadMode,
    /// Ports; empty means all.
    pub ports: Vec<PortSelector>,
}

/// Kind of filter a plugin is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PluginType {
    /// Defaults to HTTP.
    #[default]
    UnspecifiedPluginType,
    /// HTTP filter.
    Http,
    /// Network filter.
    Network,
}

/// Where in the filter chain a plugin is inserted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PluginPhase {
    /// Let the control plane decide (just before the router).
    #[default]
    UnspecifiedPhase,
    /// Before authentication filters.
    Authn,
    /// Before authorization filters.
    Authz,
    /// Before stats filters.
    Stats,
}

/// OCI image pull policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PullPolicy {
    /// IfNotPresent, or Always for the `latest` tag.
    #[default]
    #[serde(rename = "UNSPECIFIED_POLICY")]
    UnspecifiedPolicy,
    /// Pull only when not cached.
    IfNotPresent,
    /// Always pull.
    Always,
}

/// Behaviour on fatal plugin errors (Istio accepts all three; Higress only the first two).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailStrategy {
    /// Fail requests with 5xx.
    #[default]
    FailClose,
    /// Skip the plugin.
    FailOpen,
    /// Reload the VM and retry.
    FailReload,
}

/// Wasm VM settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmConfig {
    /// Environment variables for the VM.
    pub env: Vec<EnvVar>,
}

/// One VM environment variable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvVar {
    /// Variable name; required, unique, at most 256 characters.
    pub name: Option<String>,
    /// Where the value comes from (default INLINE).
    pub value_from: Option<EnvValueSource>,
    /// Inline value; only with INLINE.
    pub value: Option<String>,
}

/// Source of an environment variable's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EnvValueSource {
    /// The `value` field.
    #[default]
    Inline,
    /// The proxy's environment variable of the same name.
    Host,
}
