//! Status (pure): takes a snapshot, admitpilot's GatewayClass controller name and what the gateways have done with
//! the config, and yields the `status` each Gateway API object admitpilot manages should carry, with the spec's
//! conditions and reasons ([`gateway_api`]). `render --status` prints it; a status writer patches it onto the
//! objects.

pub mod gateway_api;
pub mod programmed;

pub use gateway_api::{gateway_api_status, Programmed, Served, StatusUpdate};
