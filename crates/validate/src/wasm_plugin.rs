//! extensions.istio.io WasmPlugin rules: takes a decoded WasmPlugin spec and its metadata, records findings with
//! field paths. Follows Istio's webhook (`ValidateWasmPlugin`) and the CRD's OpenAPI/CEL rules. The module checks
//! (URL, SHA-256, pull secret, plugin name, VM env), shared with Higress's WasmPlugin, are in [`super::common::wasm`].

use admitpilot_model::{istio::WasmPlugin, Findings, ObjectMeta};

use super::common::{
    validate_module, validate_policy_attachment, validate_traffic_selectors, WasmModule,
};

/// Validates one extensions.istio.io WasmPlugin.
pub fn validate(spec: &WasmPlugin, _meta: &ObjectMeta, out: &mut Findings) {
    validate_policy_attachment(
        spec.selector.as_ref(),
        spec.target_ref.as_ref(),
        &spec.target_refs,
        out,
    );
    validate_module(
        &WasmModule {
            url: spec.url.as_deref(),
            sha256: spec.sha256.as_deref(),
            image_pull_secret: spec.image_pull_secret.as_deref(),
            plugin_name: spec.plugin_name.as_deref(),
            vm_config: spec.vm_config.as_ref(),
        },
        "spec",
        out,
    );
    validate_traffic_selectors(&spec.match_, "spec.match", out);
}

#[cfg(test)]
mod tests {
    use crate::common::check_wasm_url;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn url_check_never_panics(s in r"([a-z0-9:/@%\[\]?#.]|é){0,40}") {
            let _ = check_wasm_url(&s);
        }
    }
    use serde_json::json;

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::testing::errors_of(
            "extensions.istio.io/v1alpha1",
            "WasmPlugin",
            json!({"name": "w"}),
            spec,
        )
    }

    #[test]
    fn accepts_module_locations() {
        for url in [
            "oci://ghcr.io/a/b:v1",
            "ghcr.io/a/b:v1",
            "file:///opt/filter.wasm",
            "https://example.com/x.wasm",
            "http://10.0.0.1:8080/x.wasm?token=a",
            "/opt/filter.wasm",
            "bar:latest",
            "localhost:5000/x",
        ] {
            assert_eq!(check_wasm_url(url), Ok(()), "{url}");
        }
    }

    #[test]
    fn rejects_unsupported_or_broken_urls() {
        for url in [
            "ftp://domain.com/module.wasm",
            "fake://example.com",
            "#%blah$#@",
            "https://host:port/x",
            "http://h/%zz",
        ] {
            assert!(check_wasm_url(url).is_err(), "{url}");
        }
    }

    #[test]
    fn accepts_a_full_plugin() {
        let sha = "a".repeat(64);
        assert!(error_paths(json!({"url": "oci://a/b", "sha256": sha, "imagePullSecret": "s",
            "pluginName": "p", "phase": "AUTHN", "priority": 10, "failStrategy": "FAIL_RELOAD",
            "pluginConfig": {"a": [1, 2]}, "vmConfig": {"env": [{"name": "A", "value": "1"},
            {"name": "B", "valueFrom": "HOST"}]}, "match": [{"mode": "SERVER", "ports": [{"number": 80}]}],
            "type": "NETWORK", "targetRefs": [{"kind": "Service", "name": "s"}]}))
        .is_empty());
    }

    #[test]
    fn reports_each_bad_field() {
        assert_eq!(
            error_paths(
                json!({"url": "", "sha256": "foo", "imagePullSecret": "", "pluginName": "",
                "vmConfig": {"env": [{"name": "a"}, {"name": "a"}, {"name": ""}, {"name": "h", "valueFrom": "HOST", "value": "v"}]},
                "match": [{"ports": [{}, {"number": 0}, {"number": 80}, {"number": 80}]}]})
            ),
            vec![
                "spec.url",
                "spec.sha256",
                "spec.imagePullSecret",
                "spec.pluginName",
                "spec.vmConfig.env[1].name",
                "spec.vmConfig.env[2].name",
                "spec.vmConfig.env[3].value",
                "spec.match[0].ports[0].number",
                "spec.match[0].ports[1].number",
                "spec.match[0].ports[3].number",
            ]
        );
        assert_eq!(error_paths(json!(null)), vec!["spec.url"]);
        assert_eq!(error_paths(json!({"url": null})), vec!["spec.url"]);
        assert_eq!(
            error_paths(json!({"url": "oci://a", "phase": "LATE"})),
            vec!["spec.phase"]
        );
        assert_eq!(
            error_paths(json!({"url": "oci://a", "selector": {"matchLabels": {"istio": "bar*"}}})),
            vec!["spec.selector.matchLabels"]
        );
    }
}
