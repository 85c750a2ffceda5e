//! Shared validation primitives (pure): take field values plus a field path, record findings.
//!
//! Every `validate_*` function pushes its errors/warnings into a [`Findings`](admitpilot_model::Findings) at the given path; `check_*` and
//! `is_*` functions only answer (a message or a bool) so callers can combine them. Each rule names the upstream
//! function it mirrors (Istio's `pkg/config/validation`, `agent/validation.go`, `labels`, `visibility`, Kubernetes
//! apimachinery) and, for names, hosts, domains, addresses and headers, gives its error text ([`go_quote`] writes
//! values as Go's `%q` does).
//! [`FieldPath`] builds `spec.http[0].route[1]`-style paths in one reusable buffer, so walking an object does not
//! allocate per field.
//!
//! One file per kind of value: [`path`] (field paths), [`text`] (Go-quoted texts), [`host`], [`address`] (addresses
//! and ports), [`duration`] (durations and percentages), [`regex`], [`labels`] (labels and selectors), [`export_to`],
//! [`target`] (policy targets), [`go_netip`] (Go's address parsers, for Istio's policy IP texts), [`header`] (HTTP headers), [`metadata`], [`attachment`] (policy attachment);
//! and the rules several kinds share: [`destination`], [`connection_pool`], [`server_tls`], [`endpoint`] and [`wasm`]
//! (Wasm modules). Every item
//! is re-exported here, so kinds import `common` only.

pub mod address;
pub mod attachment;
pub mod connection_pool;
pub mod destination;
pub mod duration;
pub mod endpoint;
pub mod export_to;
pub mod go_netip;
pub mod header;
pub mod host;
pub mod labels;
pub mod metadata;
pub mod object_meta;
pub mod path;
pub mod regex;
pub mod server_tls;
pub mod target;
pub mod text;
pub mod wasm;

pub use self::address::*;
pub use self::attachment::*;
pub use self::connection_pool::*;
pub use self::destination::*;
pub use self::duration::*;
pub use self::endpoint::*;
pub use self::export_to::*;
pub use self::header::*;
pub use self::host::*;
pub use self::labels::*;
pub use self::metadata::*;
pub use self::path::*;
pub use self::regex::*;
pub use self::server_tls::*;
pub use self::target::*;
pub use self::text::*;
pub use self::wasm::*;

#[cfg(test)]
mod tests;
