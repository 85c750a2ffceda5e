//! Higress `Http2Rpc` spec (networking.higress.io v1): takes the `spec` JSON, yields the HTTP-to-RPC mapping
//! (a Dubbo service with its method mappings, or gRPC).

use serde::{Deserialize, Serialize};

/// The `spec` of an Http2Rpc: exactly one of `dubbo` and `grpc`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Http2Rpc {
    /// Map HTTP requests to a Dubbo service.
    pub dubbo: Option<DubboService>,
    /// Map HTTP requests to gRPC (declared by the API, not implemented by the Higress controller).
    pub grpc: Option<GrpcService>,
}

/// A Dubbo service and how HTTP requests map to its methods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DubboService {
    /// Dubbo interface name; required.
    pub service: String,
    /// Service version; required.
    pub version: String,
    /// Service group.
    pub group: String,
    /// Method mappings; at least one.
    pub methods: Vec<DubboMethod>,
}

/// Maps one HTTP path and method to one Dubbo method.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DubboMethod {
    /// Dubbo method name; required.
    pub service_method: String,
    /// Headers passed as attachments: empty for none, `*` for all, or a header name.
    pub headers_attach: String,
    /// HTTP path pattern; required.
    pub http_path: String,
    /// HTTP methods (GET, POST, PUT, DELETE, PATCH); required, the first one is used.
    pub http_methods: Vec<String>,
    /// Method parameters taken from the request.
    pub params: Vec<DubboParam>,
    /// Take the single parameter from the whole body instead of `params`.
    pub param_from_entire_body: Option<ParamFromEntireBody>,
}

/// One Dubbo method parameter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DubboParam {
    /// Where the value comes from: QUERY, HEADER, PATH or BODY.
    pub param_source: String,
    /// Name of the query parameter, header, path variable or body field.
    pub param_key: String,
    /// Java type of the parameter (e.g. `java.lang.String`).
    pub param_type: String,
}

/// A parameter made of the whole request body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ParamFromEntireBody {
    /// Java type of the parameter.
    pub param_type: String,
}

/// gRPC mapping (no fields).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcService {}
