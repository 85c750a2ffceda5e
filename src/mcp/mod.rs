//! TEMPORARY STUB (replaced by the mcp-proto branch): MCP collections and resource codec.
#![allow(missing_docs, dead_code, clippy::missing_errors_doc)]
use crate::model::{ConfigObject, Kind};

pub mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Metadata {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub create_time: Option<envoy_types::pb::google::protobuf::Timestamp>,
        #[prost(string, tag = "3")]
        pub version: String,
        #[prost(map = "string, string", tag = "4")]
        pub labels: std::collections::HashMap<String, String>,
        #[prost(map = "string, string", tag = "5")]
        pub annotations: std::collections::HashMap<String, String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, optional, tag = "1")]
        pub metadata: Option<Metadata>,
        #[prost(message, optional, tag = "2")]
        pub body: Option<envoy_types::pb::google::protobuf::Any>,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    X(String),
}

pub const SERVED: &[Kind] = &[Kind::VirtualService, Kind::DestinationRule, Kind::Gateway];

pub fn collection(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::VirtualService => Some("networking.istio.io/v1alpha3/VirtualService"),
        Kind::DestinationRule => Some("networking.istio.io/v1alpha3/DestinationRule"),
        Kind::Gateway => Some("networking.istio.io/v1alpha3/Gateway"),
        _ => None,
    }
}

pub fn kind_of(collection: &str) -> Option<Kind> {
    SERVED
        .iter()
        .copied()
        .find(|k| self::collection(*k) == Some(collection))
}

pub fn encode(_object: &ConfigObject) -> Result<pb::Resource, Error> {
    Err(Error::X("stub".into()))
}

pub fn decode(_kind: Kind, _resource: &pb::Resource) -> Result<serde_json::Value, Error> {
    Err(Error::X("stub".into()))
}
