//! extensions.higress.io WasmPlugin rules: takes a decoded Higress WasmPlugin spec and its metadata, records
//! findings with field paths.
//!
//! The module checks (URL scheme oci/file/http/https, SHA-256, pull secret, plugin name, VM env) are Istio's.
//! On top, what Higress's controller needs when it converts the plugin: FAIL_CLOSE or FAIL_OPEN only, and every
//! enabled match rule names at least one ingress, domain or service (well-formed). Configurations the controller
//! silently drops get warnings.

use admitpilot_model::higress::wasm_plugin::MatchRule;
use admitpilot_model::istio::wasm_plugin::FailStrategy;
use admitpilot_model::{higress::WasmPlugin, Findings, ObjectMeta};

use super::common::{
    check_fqdn, check_port, is_k8s_namespace, is_k8s_object_name, validate_module, WasmModule,
};

/// Validates one extensions.higress.io WasmPlugin.
pub fn validate(spec: &WasmPlugin, _meta: &ObjectMeta, out: &mut Findings) {
    validate_module(
        &WasmModule {
            url: spec.url.as_deref(),
            // Higress's CRD has no minimum lengths: an empty string means "not set".
            sha256: spec.sha256.as_deref().filter(|s| !s.is_empty()),
            image_pull_secret: spec.image_pull_secret.as_deref().filter(|s| !s.is_empty()),
            plugin_name: spec.plugin_name.as_deref().filter(|s| !s.is_empty()),
            vm_config: spec.vm_config.as_ref(),
        },
        "spec",
        out,
    );
    if spec.fail_strategy == Some(FailStrategy::FailReload) {
        out.error(
            "spec.failStrategy",
            "Higress supports failStrategy FAIL_CLOSE or FAIL_OPEN, not FAIL_RELOAD",
        );
    }
    if spec.plugin_config.is_some()
        && (spec.default_config.is_some() || !spec.match_rules.is_empty())
    {
        out.warning(
            "spec.pluginConfig",
            "pluginConfig is used as is: defaultConfig and matchRules are ignored when it is set",
        );
    }
    let mut enabled_rules = 0;
    for (i, rule) in spec.match_rules.iter().enumerate() {
        let path = format!("spec.matchRules[{i}]");
        if rule.config_disable == Some(true) {
            continue;
        }
        enabled_rules += 1;
        validate_match_rule(rule, &path, out);
    }
    if spec.plugin_config.is_none()
        && spec.default_config_disable == Some(true)
        && enabled_rules == 0
    {
        out.warning(
            "spec.defaultConfigDisable",
            "the default configuration is disabled and no match rule is enabled: the plugin applies nowhere",
        );
    }
}

/// Validates an enabled match rule. The empty-rule check mirrors Higress's `convertIstioWasmPlugin`
/// (`pkg/ingress/config/ingress_config.go`), whose text ends with the Go struct (`rule:%v`), left out here.
fn validate_match_rule(rule: &MatchRule, path: &str, out: &mut Findings) {
    if rule.ingress.is_empty() && rule.domain.is_empty() && rule.service.is_empty() {
        out.error(path, "invalid match rule has no match condition");
    }
    for (k, ingress) in rule.ingress.iter().enumerate() {
        if let Err(e) = check_ingress_name(ingress) {
            out.error(format!("{path}.ingress[{k}]"), e);
        }
    }
    // Domains are plain strings in Higress (`MatchRule.domain`), handed to the plugin's domain matching as they
    // are; host names with underscores are used in Higress's own end-to-end tests. Only an empty one matches
    // nothing.
    for (k, domain) in rule.domain.iter().enumerate() {
        if domain.is_empty() {
            out.error(format!("{path}.domain[{k}]"), "domain must not be empty");
        }
    }
    for (k, service) in rule.service.iter().enumerate() {
        if let Err(e) = check_service(service) {
            out.error(format!("{path}.service[{k}]"), e);
        }
    }
}

/// An ingress (route) is named `name` or `namespace/name`, both Kubernetes object names (apimachinery's
/// `IsDNS1123Label` for the namespace, [`is_k8s_namespace`], so no upper case; `IsDNS1123Subdomain` for the name). Higress has no check (it passes the
/// strings to the plugin as `_match_route_`); admitpilot refuses names no Ingress can have, as they never match.
fn check_ingress_name(ingress: &str) -> Result<(), String> {
    let (namespace, name) = match ingress.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, ingress),
    };
    if namespace.is_some_and(|ns| !is_k8s_namespace(ns)) {
        return Err(format!(
            "ingress {ingress:?}: namespace must be a DNS-1123 label"
        ));
    }
    if !is_k8s_object_name(name) {
        return Err(format!(
            "ingress {ingress:?} must be 'name' or 'namespace/name' with a Kubernetes object name"
        ));
    }
    Ok(())
}

/// A service is a host name with an optional `:port` (`foo.default.svc.cluster.local:80`, `api.dns`), the host an
/// FQDN (Istio's `ValidateFQDN`). Higress has no check (the strings go to the plugin as `_match_service_`);
/// admitpilot refuses what no cluster name can match.
fn check_service(service: &str) -> Result<(), String> {
    let (host, port) = match service.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (service, None),
    };
    if let Some(port) = port {
        let number: u32 = port
            .parse()
            .map_err(|_| format!("service {service:?}: port {port:?} is not a number"))?;
        check_port(number).map_err(|e| format!("service {service:?}: {e}"))?;
    }
    check_fqdn(host).map_err(|e| format!("service {service:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn findings(spec: serde_json::Value) -> Vec<(String, bool)> {
        crate::testing::findings_of(
            "extensions.higress.io/v1alpha1",
            "WasmPlugin",
            json!({"name": "key-auth", "namespace": "higress-system"}),
            spec,
        )
    }

    #[test]
    fn accepts_a_plugin_with_match_rules() {
        let spec = json!({
            "url": "oci://higress-registry.cn-hangzhou.cr.aliyuncs.com/plugins/key-auth:1.0.0",
            "phase": "AUTHN", "priority": 310, "failStrategy": "FAIL_OPEN",
            "imagePullSecret": "", "pluginName": "", "sha256": "",
            "defaultConfig": {"consumers": [{"credential": "k", "name": "c"}], "keys": ["x-api-key"]},
            "defaultConfigDisable": false,
            "matchRules": [
                {"ingress": ["default/foo", "bar"], "config": {"allow": ["c"]}},
                {"domain": ["*.example.com", "api.example.com"], "config": {"allow": []}},
                {"service": ["httpbin.default.svc.cluster.local:8080", "api.dns"], "routeType": "GRPC"},
                {"configDisable": true}
            ]
        });
        assert_eq!(findings(spec), vec![]);
    }

    /// Names of Ingresses are Kubernetes object names (`IsDNS1123Subdomain`: no 63-character limit per part);
    /// domains are Higress's plain strings (underscores and wildcards anywhere pass, as in Higress).
    #[test]
    fn ingress_names_and_domains_follow_kubernetes_and_higress() {
        let long = "a".repeat(66);
        let longest = format!("{}.{}", "b".repeat(200), "c".repeat(52));
        assert_eq!(longest.len(), 253);
        let spec = json!({"url": "oci://a", "matchRules": [
            {"ingress": [long, format!("default/{longest}")], "config": {}},
            {"domain": ["system_deny.example.com", "a.*.com"], "config": {}}
        ]});
        assert_eq!(findings(spec), vec![]);
        let spec = json!({"url": "oci://a", "matchRules": [
            {"ingress": [format!("{longest}d"), "Upper", "a..b", "-a"], "config": {}}
        ]});
        assert_eq!(
            findings(spec),
            (0..4)
                .map(|i| (format!("spec.matchRules[0].ingress[{i}]"), true))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn rejects_bad_plugins() {
        let spec = json!({
            "url": "ftp://x/y.wasm", "failStrategy": "FAIL_RELOAD", "sha256": "abc",
            "vmConfig": {"env": [{"name": "A"}, {"name": "A"}]},
            "matchRules": [
                {"config": {"a": 1}},
                {"ingress": ["Bad Name", "ns/"], "domain": [""], "service": ["svc:99999", "bad_host"]}
            ]
        });
        assert_eq!(
            findings(spec),
            vec![
                ("spec.url".to_string(), true),
                ("spec.sha256".to_string(), true),
                ("spec.vmConfig.env[1].name".to_string(), true),
                ("spec.failStrategy".to_string(), true),
                ("spec.matchRules[0]".to_string(), true),
                ("spec.matchRules[1].ingress[0]".to_string(), true),
                ("spec.matchRules[1].ingress[1]".to_string(), true),
                ("spec.matchRules[1].domain[0]".to_string(), true),
                ("spec.matchRules[1].service[0]".to_string(), true),
                ("spec.matchRules[1].service[1]".to_string(), true),
            ]
        );
        assert_eq!(findings(json!({})), vec![("spec.url".to_string(), true)]);
        assert_eq!(
            findings(
                json!({"url": "oci://a", "matchRules": [{"routeType": "TCP", "ingress": ["a"]}]})
            ),
            vec![("spec.matchRules[0].routeType".to_string(), true)]
        );
    }

    #[test]
    fn warns_when_configuration_is_dropped() {
        assert_eq!(
            findings(
                json!({"url": "oci://a", "pluginConfig": {"a": 1}, "defaultConfig": {"b": 2}})
            ),
            vec![("spec.pluginConfig".to_string(), false)]
        );
        assert_eq!(
            findings(json!({"url": "oci://a", "defaultConfigDisable": true,
                "matchRules": [{"configDisable": true, "ingress": ["a"]}]})),
            vec![("spec.defaultConfigDisable".to_string(), false)]
        );
    }

    #[test]
    fn ingress_and_service_forms() {
        assert!(check_ingress_name("ns/name.v1").is_ok());
        assert!(check_ingress_name("a/b/c").is_err());
        // The namespace is apimachinery's `IsDNS1123Label` (lowercase), not Istio's case-insensitive label rule.
        assert_eq!(
            check_ingress_name("Default/foo").unwrap_err(),
            r#"ingress "Default/foo": namespace must be a DNS-1123 label"#
        );
        assert!(check_ingress_name("default/foo").is_ok());
        assert!(check_service("foo.ns.svc.cluster.local").is_ok());
        assert!(check_service("foo:0").is_err());
    }
}
