//! MCP resources (pure): takes a decoded [`ConfigObject`] of a served kind and yields the MCP [`Resource`] istiod
//! reads (metadata `namespace/name`, labels, annotations, creation time, version; the spec as the kind's proto in
//! an `Any`); and takes a received [`Resource`] of a known kind back to the Kubernetes document the project's
//! decoder and validators read.

use std::fmt::Write as _;

use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use serde_json::{json, Map, Value};

use super::pb::{Metadata, Resource};
use super::{body, collection, timestamp};
use crate::model::{ConfigObject, Kind, ObjectKey};

/// The prefix of the body's type URL (`type.googleapis.com/istio.networking.v1alpha3.VirtualService`).
const TYPE_URL_PREFIX: &str = "type.googleapis.com/";

/// Why an object could not be encoded, or a resource decoded. Each names the object or the resource.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The kind is not served over MCP.
    #[error("{kind} is not served over MCP")]
    NotServed {
        /// The kind.
        kind: Kind,
    },
    /// The object has no namespace, so it has no `namespace/name`.
    #[error("{object}: an MCP resource needs a namespace")]
    NoNamespace {
        /// The object.
        object: ObjectKey,
    },
    /// `metadata.creationTimestamp` is not a time.
    #[error("{object}: metadata.creationTimestamp {source}")]
    CreationTimestamp {
        /// The object.
        object: ObjectKey,
        /// What is wrong with it.
        source: timestamp::Error,
    },
    /// The typed spec did not serialize to JSON (a map with keys that are not strings).
    #[error("{object}: spec does not serialize to JSON: {reason}")]
    SpecJson {
        /// The object.
        object: ObjectKey,
        /// serde_json's explanation.
        reason: String,
    },
    /// The spec does not fit the kind's body message.
    #[error("{object}: spec does not encode as {message}: spec.{source}")]
    Encode {
        /// The object.
        object: ObjectKey,
        /// The body message.
        message: &'static str,
        /// The field and what is wrong with it.
        source: body::Error,
    },
    /// The resource has no metadata.
    #[error("MCP {kind} resource has no metadata")]
    NoMetadata {
        /// The kind of its collection.
        kind: Kind,
    },
    /// The metadata name is not `namespace/name`.
    #[error("MCP {kind} resource {name:?}: the name must be namespace/name")]
    Name {
        /// The kind of its collection.
        kind: Kind,
        /// The name as received.
        name: String,
    },
    /// The resource has no body.
    #[error("MCP {kind} resource {name:?} has no body")]
    NoBody {
        /// The kind of its collection.
        kind: Kind,
        /// The resource name.
        name: String,
    },
    /// The body is not the collection's message.
    #[error("MCP {kind} resource {name:?}: body type {found:?} is not {expected}, the message of its collection")]
    BodyType {
        /// The kind of its collection.
        kind: Kind,
        /// The resource name.
        name: String,
        /// The body's type URL.
        found: String,
        /// The message the collection carries.
        expected: &'static str,
    },
    /// The body does not decode as the collection's message.
    #[error("MCP {kind} resource {name:?}: body does not decode as {message}: {source}")]
    Decode {
        /// The kind of its collection.
        kind: Kind,
        /// The resource name.
        name: String,
        /// The body message.
        message: &'static str,
        /// What is wrong with it.
        source: body::Error,
    },
    /// The creation time is not a representable time.
    #[error("MCP {kind} resource {name:?}: create_time {source}")]
    CreateTime {
        /// The kind of its collection.
        kind: Kind,
        /// The resource name.
        name: String,
        /// What is wrong with it.
        source: timestamp::Error,
    },
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds the MCP resource of a served object. Its version is `metadata.resourceVersion` when the object came
/// from a cluster, otherwise a hash of everything else in the resource (name, time, labels, annotations, body),
/// so that a change to any of them is a new version: istiod skips a resource whose version it already has.
pub fn encode(object: &ConfigObject) -> Result<Resource> {
    let kind = object.kind();
    let message = collection::body_message(kind).ok_or(Error::NotServed { kind })?;
    let meta = &object.metadata;
    if meta.namespace.is_empty() {
        return Err(Error::NoNamespace {
            object: object.key(),
        });
    }
    let create_time = meta
        .creation_timestamp
        .as_deref()
        .map(timestamp::from_rfc3339)
        .transpose()
        .map_err(|source| Error::CreationTimestamp {
            object: object.key(),
            source,
        })?;
    let spec = serde_json::to_value(&object.spec).map_err(|e| Error::SpecJson {
        object: object.key(),
        reason: e.to_string(),
    })?;
    let value = body::encode(kind, &spec).map_err(|source| Error::Encode {
        object: object.key(),
        message,
        source,
    })?;
    let mut resource = Resource {
        metadata: Some(Metadata {
            name: format!("{}/{}", meta.namespace, meta.name),
            create_time,
            version: String::new(),
            labels: meta.labels.clone(),
            annotations: meta.annotations.clone(),
        }),
        body: Some(Any {
            type_url: format!("{TYPE_URL_PREFIX}{message}"),
            value,
        }),
    };
    let version = match meta.resource_version.as_deref() {
        Some(version) if !version.is_empty() => version.to_string(),
        _ => content_version(&resource),
    };
    if let Some(metadata) = resource.metadata.as_mut() {
        metadata.version = version;
    }
    Ok(resource)
}

/// Hex of the first 16 bytes of the SHA-256 of the encoded resource (its maps are ordered, its body canonical).
fn content_version(resource: &Resource) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, &resource.encode_to_vec());
    digest.as_ref()[..16]
        .iter()
        .fold(String::with_capacity(32), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// Rebuilds the Kubernetes document of a resource received in `kind`'s collection: `apiVersion` (the kind's
/// newest), `kind`, `metadata` (name and namespace from `namespace/name`, labels, annotations,
/// `creationTimestamp`, `resourceVersion` from the version) and `spec` (the body as proto JSON), ready for
/// [`crate::model::decode::decode`] and validation.
pub fn decode(kind: Kind, resource: &Resource) -> Result<Value> {
    let message = collection::body_message(kind).ok_or(Error::NotServed { kind })?;
    let meta = resource
        .metadata
        .as_ref()
        .ok_or(Error::NoMetadata { kind })?;
    let name_error = || Error::Name {
        kind,
        name: meta.name.clone(),
    };
    let (namespace, name) = meta.name.split_once('/').ok_or_else(name_error)?;
    if namespace.is_empty() || name.is_empty() || name.contains('/') {
        return Err(name_error());
    }
    let body = resource.body.as_ref().ok_or_else(|| Error::NoBody {
        kind,
        name: meta.name.clone(),
    })?;
    // As Go's Any resolution does, only the part after the last `/` names the message.
    let found = body.type_url.rsplit('/').next().unwrap_or_default();
    if found != message {
        return Err(Error::BodyType {
            kind,
            name: meta.name.clone(),
            found: body.type_url.clone(),
            expected: message,
        });
    }
    let spec = body::decode(kind, &body.value).map_err(|source| Error::Decode {
        kind,
        name: meta.name.clone(),
        message,
        source,
    })?;

    let mut metadata = Map::new();
    metadata.insert("name".into(), name.into());
    metadata.insert("namespace".into(), namespace.into());
    if !meta.labels.is_empty() {
        metadata.insert("labels".into(), json!(meta.labels));
    }
    if !meta.annotations.is_empty() {
        metadata.insert("annotations".into(), json!(meta.annotations));
    }
    if let Some(created) = &meta.create_time {
        let text = timestamp::to_rfc3339(created).map_err(|source| Error::CreateTime {
            kind,
            name: meta.name.clone(),
            source,
        })?;
        metadata.insert("creationTimestamp".into(), text.into());
    }
    if !meta.version.is_empty() {
        metadata.insert("resourceVersion".into(), meta.version.clone().into());
    }
    Ok(json!({
        "apiVersion": kind.api_version(),
        "kind": kind.info().kind,
        "metadata": metadata,
        "spec": spec,
    }))
}
