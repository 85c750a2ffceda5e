//! Validation against the conformance corpora (Istio, Higress, MCP round trips), generated and fuzzed documents, and the descriptors.
//! One test binary for the area (linked once); each module is one former test file.

mod corpus_higress;
mod corpus_istio;
mod higress_config_props;
mod mcp_corpus;
mod proto_descriptors;
mod unenforced_objects;
mod validate_fuzz;
mod validate_names_props;
