//! What the process's servers share, below every I/O layer: the serving certificate store that the webhook and the
//! xDS server read and reload ([`tls`]), and metric registration into the admin port's registry ([`metrics`]).

pub mod metrics;
pub mod tls;
