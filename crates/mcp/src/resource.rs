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
use admitpilot_model::{ConfigObject, Kind, ObjectKey};

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
    #[error("{object}: spec does not encode as {message}: {source}")]
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
    let value = body::encode(kind, spec).map_err(|source| Error::Encode {
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
/// [`admitpilot_model::decode::decode`] and validation.
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

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::decode::{
        decode as decode_document, test_object, DecodeOptions, Decoded,
    };
    use envoy_types::pb::google::protobuf::Timestamp;

    fn virtual_service() -> Value {
        json!({"apiVersion": "networking.istio.io/v1beta1", "kind": "VirtualService",
            "metadata": {"name": "reviews", "namespace": "bookinfo", "labels": {"app": "reviews"},
                "annotations": {"note": "canary"}, "creationTimestamp": "2024-03-01T12:34:56Z",
                "resourceVersion": "4711"},
            "spec": {"hosts": ["reviews"], "gateways": ["mesh"], "http": [{
                "match": [{"headers": {"end-user": {"exact": "jason"}}, "uri": {"prefix": "/v2"}}],
                "route": [{"destination": {"host": "reviews", "subset": "v2"}, "weight": 75},
                          {"destination": {"host": "reviews", "subset": "v1"}, "weight": 25}],
                "timeout": "10s", "retries": {"attempts": 3, "perTryTimeout": "2s"}}]}})
    }

    /// Decodes what [`decode`] yields with the project's decoder.
    fn object_of(document: &Value) -> ConfigObject {
        match decode_document(document, &DecodeOptions::default()) {
            Decoded::Object { object, .. } => object,
            other => panic!("does not decode: {other:?}"),
        }
    }

    fn received(kind: Kind, document: Value) -> Resource {
        encode(&test_object(document)).unwrap_or_else(|e| panic!("{kind}: {e}"))
    }

    #[test]
    fn a_virtual_service_round_trips() {
        let object = test_object(virtual_service());
        let resource = encode(&object).unwrap();
        let meta = resource.metadata.as_ref().unwrap();
        assert_eq!(meta.name, "bookinfo/reviews");
        assert_eq!(meta.version, "4711");
        assert_eq!(
            meta.create_time,
            Some(Timestamp {
                seconds: 1_709_296_496,
                nanos: 0
            })
        );
        assert_eq!(meta.labels["app"], "reviews");
        assert_eq!(meta.annotations["note"], "canary");
        let body = resource.body.as_ref().unwrap();
        assert_eq!(
            body.type_url,
            "type.googleapis.com/istio.networking.v1alpha3.VirtualService"
        );

        let document = decode(Kind::VirtualService, &resource).unwrap();
        assert_eq!(document["apiVersion"], "networking.istio.io/v1");
        assert_eq!(document["kind"], "VirtualService");
        let back = object_of(&document);
        assert_eq!(back.metadata, object.metadata);
        assert_eq!(back.spec, object.spec);
    }

    /// Gateway API specs travel as a `google.protobuf.Struct` and come back as the same object, schema defaults
    /// included (an older `v1beta1` object comes back as `v1`).
    #[test]
    fn gateway_api_kinds_round_trip_as_structs() {
        let route = json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "HTTPRoute",
            "metadata": {"name": "shop", "namespace": "web"},
            "spec": {"parentRefs": [{"name": "gw", "port": 8080}], "hostnames": ["shop.example"],
                "rules": [{"matches": [{"path": {"type": "Exact", "value": "/a"}, "headers": [{"name": "x", "value": "1"}]}],
                    "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80},
                        "fraction": {"numerator": 1}}}],
                    "backendRefs": [{"name": "svc", "port": 8080, "weight": 0}]}]}});
        let object = test_object(route);
        let resource = encode(&object).unwrap();
        assert_eq!(
            resource.body.as_ref().unwrap().type_url,
            "type.googleapis.com/google.protobuf.Struct"
        );
        let document = decode(Kind::HttpRoute, &resource).unwrap();
        assert_eq!(document["apiVersion"], "gateway.networking.k8s.io/v1");
        let back = object_of(&document);
        assert_eq!(back.spec, object.spec);
        let report = admitpilot_validate::validate_document(&document, &DecodeOptions::default());
        assert!(report.is_valid(), "{:?}", report.findings);
    }

    /// Ingresses travel as a `google.protobuf.Struct` too, their annotations (Higress's settings) in the metadata.
    #[test]
    fn ingresses_round_trip_as_structs() {
        let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "shop", "namespace": "web",
                "annotations": {"nginx.ingress.kubernetes.io/rewrite-target": "/$1"}},
            "spec": {"ingressClassName": "higress", "rules": [{"host": "shop.example", "http": {"paths": [
                {"path": "/a", "pathType": "Prefix", "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}]}});
        let object = test_object(ingress);
        let resource = encode(&object).unwrap();
        assert_eq!(
            resource.body.as_ref().unwrap().type_url,
            "type.googleapis.com/google.protobuf.Struct"
        );
        let back = object_of(&decode(Kind::Ingress, &resource).unwrap());
        assert_eq!(back.spec, object.spec);
        assert_eq!(back.metadata.annotations, object.metadata.annotations);
    }

    #[test]
    fn the_higress_kinds_round_trip() {
        let documents = [
            json!({"apiVersion": "networking.higress.io/v1", "kind": "McpBridge",
                "metadata": {"name": "default", "namespace": "higress-system"},
                "spec": {"registries": [
                    {"type": "nacos2", "name": "my-nacos", "domain": "nacos.example.com", "port": 8848,
                     "nacosNamespaceId": "public", "nacosGroups": ["DEFAULT_GROUP"],
                     "nacosRefreshInterval": 30_000_000_000_i64, "enableMCPServer": true,
                     "metadata": {"svc": {"innerMap": {"k": "v"}}}},
                    {"type": "consul", "name": "c", "domain": "consul.svc", "port": 8500,
                     "vport": {"default": 80, "services": [{"name": "s", "value": 8080}]}}],
                    "proxies": [{"type": "http", "name": "egress", "serverAddress": "proxy.corp",
                     "serverPort": 3128, "listenerPort": 50001, "connectTimeout": 500}]}}),
            json!({"apiVersion": "networking.higress.io/v1", "kind": "Http2Rpc",
                "metadata": {"name": "dubbo", "namespace": "higress-system"},
                "spec": {"dubbo": {"service": "com.example.DemoService", "version": "1.0.0", "group": "dev",
                    "methods": [{"serviceMethod": "sayName", "headersAttach": "*", "httpPath": "/dubbo/sayName",
                        "httpMethods": ["GET"], "params": [{"paramKey": "p", "paramSource": "QUERY",
                        "paramType": "java.lang.String"}]},
                      {"serviceMethod": "echo", "httpPath": "/dubbo/echo", "httpMethods": ["POST"],
                        "paramFromEntireBody": {"paramType": "java.util.Map"}}]}}}),
            json!({"apiVersion": "extensions.higress.io/v1alpha1", "kind": "WasmPlugin",
                "metadata": {"name": "key-auth", "namespace": "higress-system"},
                "spec": {"url": "oci://registry.example.com/plugins/key-auth:1.0.0", "phase": "AUTHN",
                    "priority": 310, "failStrategy": "FAIL_OPEN",
                    "defaultConfig": {"consumers": [{"credential": "k", "name": "c"}], "keys": ["x-api-key"]},
                    "matchRules": [{"ingress": ["default/foo"], "config": {"allow": ["c"]}},
                        {"service": ["httpbin.default.svc.cluster.local:8080"], "routeType": "GRPC",
                         "configDisable": true}]}}),
        ];
        for document in documents {
            let object = test_object(document);
            let resource = encode(&object).unwrap();
            let back = object_of(&decode(object.kind(), &resource).unwrap());
            assert_eq!(back.spec, object.spec, "{}", object.key());
            assert_eq!(back.api_version, object.api_version);
        }
    }

    #[test]
    fn without_a_resource_version_the_version_hashes_the_content() {
        let mut document = virtual_service();
        if let Some(meta) = document["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
        }
        let version = |document: &Value| {
            let resource = received(Kind::VirtualService, document.clone());
            resource.metadata.unwrap().version
        };
        let first = version(&document);
        assert_eq!(first.len(), 32);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        assert_eq!(version(&document), first, "stable");
        let mut relabelled = document.clone();
        relabelled["metadata"]["labels"]["app"] = json!("other");
        assert_ne!(version(&relabelled), first, "labels are part of it");
        let mut rerouted = document.clone();
        rerouted["spec"]["http"][0]["route"][0]["weight"] = json!(70);
        assert_ne!(version(&rerouted), first, "the body is part of it");
    }

    #[test]
    fn unserved_kinds_are_refused() {
        let secret = test_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "n"}, "type": "Opaque"}));
        assert_eq!(
            encode(&secret),
            Err(Error::NotServed { kind: Kind::Secret })
        );
        let resource = received(Kind::VirtualService, virtual_service());
        assert_eq!(
            decode(Kind::Secret, &resource),
            Err(Error::NotServed { kind: Kind::Secret })
        );
    }

    #[test]
    fn encoding_names_the_object_and_what_is_wrong() {
        let mut document = virtual_service();
        if let Some(meta) = document["metadata"].as_object_mut() {
            meta.remove("namespace");
        }
        let err = encode(&test_object(document)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "VirtualService /reviews: an MCP resource needs a namespace"
        );

        let mut document = virtual_service();
        document["metadata"]["creationTimestamp"] = json!("yesterday");
        let err = encode(&test_object(document)).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "VirtualService bookinfo/reviews: metadata.creationTimestamp \"yesterday\" is not an RFC 3339 time"
            ),
            "{err}"
        );

        // A field the model knows but the istio/api schema of proto/ does not.
        let mut document = virtual_service();
        document["spec"]["http"][0]["sessionPersistence"] = json!({"cookie": {"name": "s"}});
        let err = encode(&test_object(document)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "VirtualService bookinfo/reviews: spec does not encode as istio.networking.v1alpha3.VirtualService: \
             spec.http[0].sessionPersistence: unknown field sessionPersistence"
        );
    }

    #[test]
    fn decoding_refuses_resources_that_are_not_namespace_name() {
        for name in ["reviews", "/reviews", "bookinfo/", "a/b/c"] {
            let mut resource = received(Kind::VirtualService, virtual_service());
            if let Some(meta) = resource.metadata.as_mut() {
                meta.name = name.to_string();
            }
            assert_eq!(
                decode(Kind::VirtualService, &resource)
                    .unwrap_err()
                    .to_string(),
                format!("MCP VirtualService resource {name:?}: the name must be namespace/name")
            );
        }
        let mut resource = received(Kind::VirtualService, virtual_service());
        resource.metadata = None;
        assert_eq!(
            decode(Kind::VirtualService, &resource)
                .unwrap_err()
                .to_string(),
            "MCP VirtualService resource has no metadata"
        );
    }

    #[test]
    fn decoding_refuses_bodies_of_another_type_or_none() {
        let resource = received(Kind::VirtualService, virtual_service());
        assert_eq!(
            decode(Kind::DestinationRule, &resource)
                .unwrap_err()
                .to_string(),
            "MCP DestinationRule resource \"bookinfo/reviews\": body type \
             \"type.googleapis.com/istio.networking.v1alpha3.VirtualService\" is not \
             istio.networking.v1alpha3.DestinationRule, the message of its collection"
        );
        let mut bodiless = resource.clone();
        bodiless.body = None;
        assert_eq!(
            decode(Kind::VirtualService, &bodiless)
                .unwrap_err()
                .to_string(),
            "MCP VirtualService resource \"bookinfo/reviews\" has no body"
        );
        // Only the part after the last `/` names the message, as in Go.
        let mut other_domain = resource;
        if let Some(body) = other_domain.body.as_mut() {
            body.type_url = "example.com/x/istio.networking.v1alpha3.VirtualService".into();
        }
        assert!(decode(Kind::VirtualService, &other_domain).is_ok());
    }

    #[test]
    fn decoding_refuses_bodies_and_times_that_do_not_decode() {
        let mut resource = received(Kind::VirtualService, virtual_service());
        if let Some(body) = resource.body.as_mut() {
            body.value = vec![0x0a, 0x05, b'a'];
        }
        let err = decode(Kind::VirtualService, &resource).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "MCP VirtualService resource \"bookinfo/reviews\": body does not decode as \
                 istio.networking.v1alpha3.VirtualService: "
            ),
            "{err}"
        );

        let mut resource = received(Kind::VirtualService, virtual_service());
        if let Some(meta) = resource.metadata.as_mut() {
            meta.create_time = Some(Timestamp {
                seconds: i64::MAX,
                nanos: 0,
            });
        }
        let err = decode(Kind::VirtualService, &resource).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "MCP VirtualService resource \"bookinfo/reviews\": create_time seconds"
            ),
            "{err}"
        );
    }

    /// A resource from a server that sets only name and body (as Higress does without labels) decodes to a
    /// document with just those.
    #[test]
    fn minimal_resources_decode_to_minimal_documents() {
        let resource = Resource {
            metadata: Some(Metadata {
                name: "ns/gw".into(),
                ..Metadata::default()
            }),
            body: Some(Any {
                type_url: format!("{TYPE_URL_PREFIX}istio.networking.v1alpha3.Gateway"),
                value: Vec::new(),
            }),
        };
        assert_eq!(
            decode(Kind::Gateway, &resource).unwrap(),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "ns"}, "spec": {}})
        );
    }
}
