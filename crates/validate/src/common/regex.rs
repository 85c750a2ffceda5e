//! Regular expressions (pure): takes a regex field, records an error unless Envoy takes it (the RE2 checks live in
//! [`crate::regex`]).

use admitpilot_model::Findings;

pub use crate::regex::check_regex;

/// Records an error at `path` unless `re` is a valid, non-empty RE2-style regex that Envoy takes.
pub fn validate_regex(re: &str, path: &str, out: &mut Findings) {
    if re.is_empty() {
        out.error(path, "regex must not be empty");
    } else if let Err(e) = check_regex(re) {
        out.error(path, e);
    }
}
