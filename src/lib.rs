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
//! Pure modules (`model`, `validate`, `translate`, `envoy_proto`) do no I/O; `source`, `xds`, `admission` and
//! `admin` are the edges.

pub mod admin;
pub mod admission;
pub mod app;
pub mod envoy_proto;
pub mod model;
pub mod source;
pub mod translate;
pub mod validate;
pub mod xds;
