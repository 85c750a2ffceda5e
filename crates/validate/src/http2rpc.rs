//! Http2Rpc rules: takes a decoded higress Http2Rpc spec and its metadata, records findings with field paths.
//!
//! Enforces the CRD's one-of (`dubbo` or `grpc`) and what Higress's controller (`IngressConfig.constructHttp2RpcMethods`,
//! `pkg/ingress/config/ingress_config.go`) needs to build the Dubbo
//! transcoder route: service and version, at least one method, each with a Dubbo method name, an HTTP path and
//! HTTP methods it maps (GET/POST/PUT/DELETE/PATCH; only the first is used), and parameters with a known source,
//! a key and a type. The controller does not implement `grpc`, so that choice only gets a warning.

use admitpilot_model::higress::http2rpc::{DubboMethod, DubboService};
use admitpilot_model::{higress::Http2Rpc, Findings, ObjectMeta};

/// HTTP methods the controller maps to transcoder method specs.
const HTTP_METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "PATCH"];
/// Parameter sources the controller maps to transcoder key specs.
const PARAM_SOURCES: &[&str] = &["QUERY", "HEADER", "PATH", "BODY"];

/// Validates one Http2Rpc.
pub fn validate(spec: &Http2Rpc, _meta: &ObjectMeta, out: &mut Findings) {
    match (&spec.dubbo, &spec.grpc) {
        (Some(_), Some(_)) => out.error("spec", "only one of dubbo and grpc may be set"),
        (None, None) => out.error("spec", "one of dubbo or grpc must be set"),
        (None, Some(_)) => out.warning(
            "spec.grpc",
            "Higress only implements Dubbo mappings; a grpc Http2Rpc has no effect",
        ),
        (Some(_), None) => {}
    }
    if let Some(dubbo) = &spec.dubbo {
        validate_dubbo(dubbo, out);
    }
}

/// The service, version and methods are `REQUIRED` in Higress's `DubboService` (`api/networking/v1/http_2_rpc.proto`).
/// Higress has no check on them: its `IngressConfig.constructHttp2RpcMethods` (`pkg/ingress/config/ingress_config.go`)
/// copies `service` and `version` as they are into the `http_dubbo_transcoder` filter's `services_mapping` (`name`,
/// `version`), where an empty one names no Dubbo service. Any non-empty name is taken, as Higress takes it.
fn validate_dubbo(dubbo: &DubboService, out: &mut Findings) {
    if dubbo.service.is_empty() {
        out.error(
            "spec.dubbo.service",
            "the Dubbo service (interface) name is required",
        );
    }
    if dubbo.version.is_empty() {
        out.error(
            "spec.dubbo.version",
            "the Dubbo service version is required",
        );
    }
    if dubbo.methods.is_empty() {
        out.error(
            "spec.dubbo.methods",
            "at least one method mapping is required",
        );
    }
    for (i, method) in dubbo.methods.iter().enumerate() {
        validate_method(method, &format!("spec.dubbo.methods[{i}]"), out);
    }
}

/// `serviceMethod`, `httpPath`, `httpMethods` and each parameter's source, key and type are `REQUIRED` in Higress's
/// `Method` (`api/networking/v1/http_2_rpc.proto`). Higress's `IngressConfig.constructHttp2RpcMethods`
/// (`pkg/ingress/config/ingress_config.go`) has no check: it copies `serviceMethod` as it is into the transcoder's
/// `method_mapping[].name`, maps `httpMethods[0]` through `Http2RpcMethodMap` and each `paramSource` through
/// `Http2RpcParamSourceMap` (an unknown one maps to nothing), and reads `httpMethods[0]` without a length check (an
/// empty list is out of range). Any non-empty method name is taken, as Higress takes it.
fn validate_method(method: &DubboMethod, path: &str, out: &mut Findings) {
    if method.service_method.is_empty() {
        out.error(
            format!("{path}.serviceMethod"),
            "the Dubbo method name is required",
        );
    }
    if method.http_path.is_empty() {
        out.error(format!("{path}.httpPath"), "httpPath is required");
    } else if !method.http_path.starts_with('/') {
        out.error(format!("{path}.httpPath"), "httpPath must start with '/'");
    }
    if method.http_methods.is_empty() {
        out.error(
            format!("{path}.httpMethods"),
            "at least one HTTP method is required",
        );
    } else if method.http_methods.len() > 1 {
        out.warning(
            format!("{path}.httpMethods"),
            "only the first HTTP method is used",
        );
    }
    for (k, m) in method.http_methods.iter().enumerate() {
        if !HTTP_METHODS.contains(&m.as_str()) {
            out.error(
                format!("{path}.httpMethods[{k}]"),
                format!(
                    "unsupported HTTP method {m:?}; use one of {}",
                    HTTP_METHODS.join(", ")
                ),
            );
        }
    }
    if let Some(body) = &method.param_from_entire_body {
        if body.param_type.is_empty() {
            out.error(
                format!("{path}.paramFromEntireBody.paramType"),
                "paramType is required",
            );
        }
        if !method.params.is_empty() {
            out.warning(
                format!("{path}.params"),
                "params are ignored when paramFromEntireBody is set",
            );
        }
    }
    for (k, param) in method.params.iter().enumerate() {
        let item = format!("{path}.params[{k}]");
        if !PARAM_SOURCES.contains(&param.param_source.as_str()) {
            out.error(
                format!("{item}.paramSource"),
                format!(
                    "paramSource {:?} must be one of {}",
                    param.param_source,
                    PARAM_SOURCES.join(", ")
                ),
            );
        }
        if param.param_key.is_empty() && param.param_source != "BODY" {
            out.error(format!("{item}.paramKey"), "paramKey is required");
        }
        if param.param_type.is_empty() {
            out.error(format!("{item}.paramType"), "paramType is required");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn findings(spec: serde_json::Value) -> Vec<(String, bool)> {
        crate::testing::findings_of(
            "networking.higress.io/v1",
            "Http2Rpc",
            json!({"name": "h", "namespace": "higress-system"}),
            spec,
        )
    }

    #[test]
    fn accepts_a_dubbo_mapping() {
        let spec = json!({"dubbo": {"service": "com.alibaba.nacos.example.dubbo.service.DemoService",
            "version": "1.0.0", "group": "dev", "methods": [
                {"serviceMethod": "sayName", "headersAttach": "*", "httpPath": "/dubbo/sayName",
                 "httpMethods": ["GET"], "params": [{"paramKey": "p", "paramSource": "QUERY", "paramType": "java.lang.String"}]},
                {"serviceMethod": "echo", "httpPath": "/dubbo/echo", "httpMethods": ["POST"],
                 "paramFromEntireBody": {"paramType": "java.util.Map"}}]}});
        assert_eq!(findings(spec), vec![]);
    }

    #[test]
    fn rejects_incomplete_mappings() {
        let spec = json!({"dubbo": {"methods": [
            {"httpPath": "dubbo", "httpMethods": ["FETCH", "GET"],
             "params": [{"paramSource": "COOKIE", "paramType": "int"}],
             "paramFromEntireBody": {}}]}});
        assert_eq!(
            findings(spec),
            vec![
                ("spec.dubbo.service".to_string(), true),
                ("spec.dubbo.version".to_string(), true),
                ("spec.dubbo.methods[0].serviceMethod".to_string(), true),
                ("spec.dubbo.methods[0].httpPath".to_string(), true),
                ("spec.dubbo.methods[0].httpMethods".to_string(), false),
                ("spec.dubbo.methods[0].httpMethods[0]".to_string(), true),
                (
                    "spec.dubbo.methods[0].paramFromEntireBody.paramType".to_string(),
                    true
                ),
                ("spec.dubbo.methods[0].params".to_string(), false),
                (
                    "spec.dubbo.methods[0].params[0].paramSource".to_string(),
                    true
                ),
                ("spec.dubbo.methods[0].params[0].paramKey".to_string(), true),
            ]
        );
        assert_eq!(
            findings(json!({"dubbo": {"service": "s", "version": "1"}})),
            vec![("spec.dubbo.methods".to_string(), true)]
        );
    }

    #[test]
    fn needs_exactly_one_destination() {
        assert_eq!(findings(json!({})), vec![("spec".to_string(), true)]);
        assert_eq!(
            findings(json!({"grpc": {}})),
            vec![("spec.grpc".to_string(), false)]
        );
        let both = json!({"grpc": {}, "dubbo": {"service": "s", "version": "1",
            "methods": [{"serviceMethod": "m", "httpPath": "/m", "httpMethods": ["GET"]}]}});
        assert_eq!(findings(both), vec![("spec".to_string(), true)]);
    }
}
