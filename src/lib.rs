//! admitpilot: a validating admission webhook and xDS control plane for Higress and Istio gateways.
//!
//! ```text
//!  kube watch / config dir ──► source ──► store (debounce, last good) ──► Snapshot
//!        │                                                    │
//!        └─ every object ──► validate ◄── admission webhook   ▼
//!                               ▲        ◄── `validate` CLI  translate ──► xds (ADS SotW/Delta) ──► Envoy
//!                               └───────────── model ◄──────────┘
//! ```
//!
//! Pure modules (`model`, `validate`, `translate`, `envoy_proto`, `mcp`, `status`) do no I/O; `source`, `xds`,
//! `admission`, `admin`, `leader`, `status_writer` and `tls` (the serving certificates of the webhook and the xDS
//! server) are the edges.

/// The shipped process allocator: jemalloc, which holds idle xDS connections in less memory than glibc's malloc
/// (it leaves the untouched pages of HTTP/2's fixed buffers unbacked) and speeds up webhook reviews (BENCHMARKS.md
/// has both figures). Declared here, in the library, so that the binary and the benchmarks run with it when the
/// feature `jemalloc` is on (the container image and the benchmark scripts turn it on); without it, the system
/// allocator.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

pub mod app;
pub mod leader;
pub mod provisioner;
pub mod status_writer;

pub use admitpilot_admin as admin;
pub use admitpilot_admission as admission;
pub use admitpilot_envoy_proto as envoy_proto;
pub use admitpilot_mcp as mcp;
pub use admitpilot_model as model;
pub use admitpilot_provision as provision;
pub use admitpilot_serving::{metrics, tls};
pub use admitpilot_source as source;
pub use admitpilot_status as status;
pub use admitpilot_translate as translate;
pub use admitpilot_validate as validate;
pub use admitpilot_xds as xds;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    /// The `admitpilot-…` crates each workspace crate's `Cargo.toml` lists under `[dependencies]`.
    fn declared_graph() -> BTreeMap<String, Vec<String>> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut graph = BTreeMap::new();
        let crates = std::fs::read_dir(root.join("crates")).expect("crates/ is readable");
        for entry in crates {
            let dir = entry.expect("a crates/ entry").path();
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("a Cargo.toml");
            let name = manifest
                .lines()
                .find_map(|line| line.strip_prefix("name = "))
                .expect("a package name")
                .trim_matches('"')
                .to_string();
            let dependencies = manifest
                .split("\n[")
                .find(|section| section.starts_with("dependencies]"))
                .map(|section| {
                    section
                        .lines()
                        .filter_map(|line| line.strip_prefix("admitpilot-"))
                        .filter_map(|line| line.split(['.', ' ']).next())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            graph.insert(name, dependencies);
        }
        graph
    }

    /// The crate list of the README's "Where things are" section, as crate → dependencies.
    fn readme_graph() -> BTreeMap<String, Vec<String>> {
        let readme = include_str!("../README.md");
        let block = readme
            .split(" crate                    depends on (admitpilot-…)\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("the README lists the crate graph");
        block
            .lines()
            .filter(|line| line.starts_with(" admitpilot-"))
            .map(|line| {
                let (name, uses) = line.trim().split_once(' ').expect("crate and dependencies");
                let uses = uses.trim();
                let uses = if uses == "—" {
                    Vec::new()
                } else {
                    uses.split(", ").map(str::to_string).collect()
                };
                (name.to_string(), uses)
            })
            .collect()
    }

    #[test]
    fn the_readme_crate_graph_is_the_declared_one() {
        let mut declared = declared_graph();
        for uses in declared.values_mut() {
            uses.sort();
        }
        let mut readme = readme_graph();
        for uses in readme.values_mut() {
            uses.sort();
        }
        assert_eq!(readme, declared);
    }
}
