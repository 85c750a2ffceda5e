//! MCP over xDS (pure): takes validated config objects and yields the MCP resources istiod and Higress read
//! (`istio.mcp.v1alpha1.Resource`: metadata, and the spec as its Istio or Higress proto in an `Any`), and takes
//! received resources back to Kubernetes documents for the normal decode and validation path.
//!
//! [`collection`] maps kinds to the collection names (xDS type URLs) they are served under and to their body
//! messages; [`resource`] encodes and decodes whole resources, [`body`] the spec through the descriptors (after
//! [`crd_json`] turns Istio's CRD JSON into proto JSON), [`canonical`] writes deterministic bytes and
//! [`timestamp`] converts creation times; [`pb`] holds the generated `Resource` and `Metadata` types. The body
//! schemas are the project's own `.proto` files under `proto/admitpilot/{istio,higress}` (see `proto/README.md`).

pub mod body;
pub mod canonical;
pub mod collection;
pub mod crd_json;
pub mod pb;
pub mod resource;
pub mod timestamp;

pub use collection::{body_message, collection, collections, kind_of, SERVED};
pub use resource::{decode, encode, Error, Result};
