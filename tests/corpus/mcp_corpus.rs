//! MCP round trip over the shared corpus: every valid Istio document (`../shared/corpus/istio/valid/<Kind>/*.yaml`)
//! is decoded by the project's decoder, encoded with `mcp::encode`, sent through the wire bytes of
//! `istio.mcp.v1alpha1.Resource`, decoded with `mcp::decode` and the project's decoder again, and must come back
//! as the same object: namespace, name, labels, annotations, creation time and typed spec.
//!
//! "The same" is exact equality of the typed spec, or, where the model keeps a distinction the proto cannot
//! carry, the same Istio message: proto3 has no presence for scalars and enums, so an explicit zero value
//! (`tls: {mode: DISABLE}`, `location: MESH_EXTERNAL`) comes back unset, and a Go-style duration (`1m`) comes back
//! as seconds (`60s`). istiod sees exactly the same in both cases; the test then checks that both specs encode to
//! identical body bytes and prints the differing paths.
//!
//! The documents that cannot take part are listed in [`EXCLUDED`] with the reason; the only others left out are
//! those of a kind admitpilot does not know (InboundTrafficPolicy), printed with their count. The Higress corpus
//! (`../shared/corpus/higress`) holds higress-config cases only, a ConfigMap that is not served over MCP, so it
//! contributes nothing here; the Higress kinds are covered by the unit tests of `crates/mcp/src/resource.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::corpus;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use admitpilot::mcp::{self, pb};
use admitpilot::model::decode::{decode, DecodeOptions, Decoded};
use admitpilot::model::ConfigObject;
use admitpilot::source::DEFAULT_NAMESPACE;
use prost::Message;
use serde_json::Value;

/// One corpus document that cannot round-trip.
struct Exclusion {
    /// The file, relative to `valid/`.
    file: &'static str,
    /// A part of the error it must fail with, so that it fails for the stated reason only.
    error: &'static str,
    /// Why.
    reason: &'static str,
}

const EXCLUDED: &[Exclusion] = &[
    Exclusion {
        file: "VirtualService/valid__VirtualService__v1__tests.testdata.virtualservice-session-persistence__d0__a24bbd.yaml",
        error: "spec.http[0].sessionPersistence: unknown field sessionPersistence",
        reason: "http[].sessionPersistence is newer than the istio/api schema proto/ follows (b8f8791): no field \
                 number to encode it with, so encoding refuses it rather than drop it",
    },
    Exclusion {
        file: "VirtualService/valid__VirtualService__v1__tests.testdata.virtualservice-session-persistence__d1__97dbf6.yaml",
        error: "spec.http[0].sessionPersistence: unknown field sessionPersistence",
        reason: "as d0",
    },
    Exclusion {
        file: "RequestAuthentication/valid__RequestAuthentication__v1__pkg.config.validation.testdata.crds.reqauth-valid__d0__1fb4a0.yaml",
        error: "spec.jwtRules[0].presence: unknown field presence",
        reason: "jwtRules[].presence is newer than the istio/api schema proto/ follows (b8f8791; istio/istio at \
                 86c9f01 builds on a later istio/api): no field number to encode it with",
    },
    Exclusion {
        file: "ServiceEntry/valid__ServiceEntry__v1__pkg.config.validation.testdata.crds.serviceentry-valid__d0__ccd8fa.yaml",
        error: "YAML: found unexpected ':'",
        reason: "does not parse: libyaml reads `001:db8::]` in a flow sequence as a mapping \
                 (tests/corpus-known-differences.md)",
    },
];

/// The entries of `dir` that `keep` accepts, sorted.
fn entries(dir: &Path, keep: fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| keep(path))
        .collect();
    paths.sort();
    paths
}

fn is_yaml(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "yaml")
}

/// Reads one corpus document as the folder source would: the `_err` test annotation removed and the default
/// namespace filled in.
fn read_document(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut doc: Value = serde_yaml_ng::from_str(&text).map_err(|e| format!("YAML: {e}"))?;
    let fields = doc.as_object_mut().expect("a corpus document is a mapping");
    fields.remove("_err");
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if metadata["namespace"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        metadata["namespace"] = Value::from(DEFAULT_NAMESPACE);
    }
    Ok(doc)
}

/// What the project's decoder makes of a corpus document.
enum Read {
    /// A typed object.
    Object(Box<ConfigObject>),
    /// A kind admitpilot does not know (so not served either).
    Unrecognized,
    /// Unreadable or undecodable, with why.
    Failed(String),
}

fn read(path: &Path) -> Read {
    let doc = match read_document(path) {
        Ok(doc) => doc,
        Err(reason) => return Read::Failed(reason),
    };
    match decode(&doc, &DecodeOptions::default()) {
        Decoded::Object { object, .. } => Read::Object(Box::new(object)),
        Decoded::Unrecognized { .. } => Read::Unrecognized,
        Decoded::Invalid { findings, .. } => Read::Failed(format!("does not decode: {findings:?}")),
    }
}

fn decode_object(doc: &Value) -> Result<ConfigObject, String> {
    match decode(doc, &DecodeOptions::default()) {
        Decoded::Object { object, .. } => Ok(object),
        other => Err(format!("{other:?}")),
    }
}

/// Encodes, crosses the wire and decodes back; returns the object the second decoding yields.
fn round_trip(object: &ConfigObject) -> Result<ConfigObject, String> {
    let resource = mcp::encode(object).map_err(|e| format!("encode: {e}"))?;
    let wire = resource.encode_to_vec();
    let received = pb::Resource::decode(wire.as_slice()).map_err(|e| format!("wire: {e}"))?;
    assert_eq!(received, resource, "the Resource survives its wire bytes");
    let doc = mcp::decode(object.kind(), &received).map_err(|e| format!("decode: {e}"))?;
    decode_object(&doc).map_err(|e| format!("project decoder: {e}\n    document: {doc}"))
}

/// How a round-tripped object agrees with the original.
enum Agreement {
    /// Equal, typed spec included.
    Exact,
    /// Equal metadata, and the specs encode to the same body; the paths where their JSON differs.
    SameMessage(Vec<String>),
}

fn agreement(before: &ConfigObject, after: &ConfigObject) -> Result<Agreement, String> {
    let (mut old, mut new) = (comparable(before), comparable(after));
    if old == new {
        return Ok(Agreement::Exact);
    }
    let (old_spec, new_spec) = (old["spec"].take(), new["spec"].take());
    let differs = || {
        format!(
            "before: {}\n    after:  {}",
            comparable(before),
            comparable(after)
        )
    };
    if old != new {
        return Err(differs());
    }
    let kind = before.kind();
    let old_body = mcp::body::encode(kind, old_spec.clone()).map_err(|e| e.to_string())?;
    let new_body = mcp::body::encode(kind, new_spec.clone()).map_err(|e| e.to_string())?;
    if old_body != new_body {
        return Err(differs());
    }
    let mut paths = Vec::new();
    diff_paths("spec", &old_spec, &new_spec, &mut paths);
    Ok(Agreement::SameMessage(paths))
}

/// Appends `path: before -> after` for every leaf where `a` and `b` differ.
fn diff_paths(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let (l, r) = (
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                );
                diff_paths(&format!("{path}.{key}"), l, r, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                diff_paths(&format!("{path}[{i}]"), l, r, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} -> {b}")),
        _ => {}
    }
}

/// What the round trip must keep (the API version is the kind's newest and the resource version is MCP's).
fn comparable(object: &ConfigObject) -> Value {
    let meta = &object.metadata;
    serde_json::json!({
        "namespace": meta.namespace,
        "name": meta.name,
        "labels": meta.labels,
        "annotations": meta.annotations,
        "creationTimestamp": meta.creation_timestamp,
        "spec": object.spec,
    })
}

#[test]
fn every_valid_istio_document_round_trips_through_mcp() {
    let Some(root) = corpus::corpus_dir("istio/valid") else {
        return;
    };
    let mut passed: BTreeMap<String, usize> = BTreeMap::new();
    let mut unrecognized: BTreeMap<String, usize> = BTreeMap::new();
    let mut excluded_seen = 0;
    let mut same_message = 0;
    let mut failures = Vec::new();
    for kind_dir in entries(&root, Path::is_dir) {
        let kind_name = kind_dir.file_name().unwrap().to_string_lossy().to_string();
        for path in entries(&kind_dir, is_yaml) {
            let rel = format!(
                "{kind_name}/{}",
                path.file_name().unwrap().to_string_lossy()
            );
            let outcome = match read(&path) {
                Read::Unrecognized => {
                    *unrecognized.entry(kind_name.clone()).or_default() += 1;
                    continue;
                }
                Read::Failed(reason) => Err(reason),
                Read::Object(object) => {
                    round_trip(&object).and_then(|back| agreement(&object, &back))
                }
            };
            if let Some(exclusion) = EXCLUDED.iter().find(|e| e.file == rel) {
                excluded_seen += 1;
                match outcome {
                    Err(error) if error.contains(exclusion.error) => {
                        println!("excluded: {rel}: {}", exclusion.reason);
                    }
                    Err(error) => {
                        failures.push(format!("{rel}\n    excluded, but fails otherwise: {error}"))
                    }
                    Ok(_) => {
                        failures.push(format!("{rel}\n    excluded, but round-trips: remove it"))
                    }
                }
                continue;
            }
            match outcome {
                Ok(Agreement::Exact) => *passed.entry(kind_name.clone()).or_default() += 1,
                Ok(Agreement::SameMessage(paths)) => {
                    *passed.entry(kind_name.clone()).or_default() += 1;
                    same_message += 1;
                    println!("same message: {rel}: {}", paths.join("; "));
                }
                Err(reason) => failures.push(format!("{rel}\n    {reason}")),
            }
        }
    }
    let total: usize = passed.values().sum();
    println!("mcp corpus: {total} documents round-tripped ({same_message} as the same message): {passed:?}");
    println!("kinds admitpilot does not know: {unrecognized:?}; excluded: {excluded_seen}");
    assert_eq!(
        excluded_seen,
        EXCLUDED.len(),
        "every exclusion names a corpus file"
    );
    assert!(
        failures.is_empty(),
        "{} document(s) did not round-trip:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total >= 600, "the corpus shrank to {total} documents");
}
