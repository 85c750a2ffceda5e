//! higress-config item rules: takes the decoded HigressConfig and records Higress's own error strings.

use crate::model::{higress_config::HigressConfig, Findings};

/// Validates the higress-config items (rules still to be written).
pub fn validate(_config: &HigressConfig, _out: &mut Findings) {}
