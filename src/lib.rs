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

/// The process allocator: jemalloc, which holds idle xDS connections in less memory than glibc's malloc (it
/// leaves the untouched pages of HTTP/2's fixed buffers unbacked) and speeds up webhook reviews (BENCHMARKS.md
/// has both figures). Declared here, in the library, so that the binary, the tests and the benchmarks all run
/// with the allocator that ships. The default feature `jemalloc`; without it the system allocator is used.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

pub mod app;
pub mod leader;
pub mod status_writer;

pub use admitpilot_admin as admin;
pub use admitpilot_admission as admission;
pub use admitpilot_envoy_proto as envoy_proto;
pub use admitpilot_mcp as mcp;
pub use admitpilot_model as model;
pub use admitpilot_serving::{metrics, tls};
pub use admitpilot_source as source;
pub use admitpilot_status as status;
pub use admitpilot_translate as translate;
pub use admitpilot_validate as validate;
pub use admitpilot_xds as xds;
