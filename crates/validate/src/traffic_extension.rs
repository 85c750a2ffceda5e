//! TrafficExtension rules: takes a decoded istio TrafficExtension spec and its metadata, records findings with
//! field paths. Follows Istio's webhook (`ValidateTrafficExtension`) and the CRD: exactly one of `wasm` and
//! `lua`, selector/targetRefs attachment, Lua code of 1 byte to 64 KiB, the WasmPlugin module checks, and ports.

use admitpilot_model::{istio::TrafficExtension, Findings, ObjectMeta};

use super::common::{
    validate_module, validate_policy_attachment, validate_traffic_selectors, WasmModule,
};

/// Largest inline Lua program.
const MAX_LUA_BYTES: usize = 64 * 1024;

/// Validates one TrafficExtension.
pub fn validate(spec: &TrafficExtension, _meta: &ObjectMeta, out: &mut Findings) {
    validate_policy_attachment(spec.selector.as_ref(), None, &spec.target_refs, out);
    match (&spec.wasm, &spec.lua) {
        // Istio's `ValidateTrafficExtension` text, for both cases.
        (Some(_), Some(_)) | (None, None) => {
            out.error("spec", "exactly one of wasm or lua must be set")
        }
        _ => {}
    }
    if let Some(lua) = &spec.lua {
        let code = lua.inline_code.as_deref().unwrap_or_default();
        // Istio's `validateLuaConfig` texts.
        if code.is_empty() {
            out.error("spec.lua.inlineCode", "lua.inlineCode cannot be empty");
        } else if code.len() > MAX_LUA_BYTES {
            out.error(
                "spec.lua.inlineCode",
                "lua.inlineCode exceeds maximum size of 64KB",
            );
        }
    }
    // The WasmPlugin module checks (Istio's `validateWasmPluginURL`, `validateWasmConfigSHA`,
    // `validateWasmConfigImagePullSecret`, `validateWasmConfigName`, `validateWasmPluginVMConfig`); for a too long
    // pluginName Istio's TrafficExtension text says 256 where WasmPlugin's says 255, and admitpilot gives the latter.
    if let Some(wasm) = &spec.wasm {
        validate_module(
            &WasmModule {
                url: wasm.url.as_deref(),
                sha256: wasm.sha256.as_deref(),
                image_pull_secret: wasm.image_pull_secret.as_deref(),
                plugin_name: wasm.plugin_name.as_deref(),
                vm_config: wasm.vm_config.as_ref(),
            },
            "spec.wasm",
            out,
        );
    }
    validate_traffic_selectors(&spec.match_, "spec.match", out);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::testing::errors_of(
            "extensions.istio.io/v1alpha1",
            "TrafficExtension",
            json!({"name": "t"}),
            spec,
        )
    }

    #[test]
    fn accepts_lua_or_wasm() {
        assert!(error_paths(
            json!({"selector": {"matchLabels": {"app": "a"}}, "phase": "AUTHN",
            "lua": {"inlineCode": "function envoy_on_request(h) end"}})
        )
        .is_empty());
        assert!(error_paths(json!({"targetRefs": [{"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "g"}],
            "priority": 5, "wasm": {"url": "oci://a/b:1", "type": "HTTP", "failStrategy": "FAIL_OPEN"},
            "match": [{"mode": "CLIENT", "ports": [{"number": 8080}]}]})).is_empty());
    }

    #[test]
    fn rejects_bad_extensions() {
        assert_eq!(error_paths(json!({})), vec!["spec"]);
        assert_eq!(
            error_paths(
                json!({"lua": {"inlineCode": ""}, "wasm": {"url": "ftp://x", "sha256": "z"}})
            ),
            vec![
                "spec",
                "spec.lua.inlineCode",
                "spec.wasm.url",
                "spec.wasm.sha256"
            ]
        );
        let big = "x".repeat(64 * 1024 + 1);
        assert_eq!(
            error_paths(json!({"lua": {"inlineCode": big}})),
            vec!["spec.lua.inlineCode"]
        );
        assert_eq!(
            error_paths(json!({"lua": {"inlineCode": "x"}, "phase": "LATE"})),
            vec!["spec.phase"]
        );
        assert_eq!(
            error_paths(
                json!({"lua": {"inlineCode": "x"}, "selector": {"matchLabels": {"a": "b"}},
                "targetRefs": [{"kind": "Service", "name": "s"}], "match": [{"ports": [{"number": 0}]}]})
            ),
            vec!["spec", "spec.match[0].ports[0].number"]
        );
    }
}
