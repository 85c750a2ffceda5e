//! Regexes against real Envoy 1.40 (`envoy --mode validate` on a route matching `safe_regex`): admitpilot denies a
//! pattern for Envoy's RE2 program-size limit only when Envoy rejects it for that limit, never claims a smaller
//! program than Envoy reports, and every pattern of the table admitpilot admits, Envoy loads.
//!
//! Envoy comes from `ADMITPILOT_ENVOY`, else `.venv/bin/envoy`; without it the test prints why and passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;

use admitpilot::model::re2::re2_program_size_bound;
use admitpilot::validate::regex::{check_regex, start_object};
use serde_json::json;

/// Patterns around Envoy's limit of 100 instructions, and ordinary ones.
const PATTERNS: &[&str] = &[
    "a{96}",
    "a{97}",
    "^a{98}",
    r"\w{32}",
    r"\w{33}",
    r"\w{300}",
    r"\d{999}",
    "[a-z0-9]{50}",
    "(a|b){40}",
    ".{50}",
    "é{60}",
    r"^/api/v[0-9]+/.*$",
    "(?i)/API/[a-z]+",
    "[^/]+/[^/]+",
    r"\s{32}",
    "(?:abc|abd){20}",
    "(?:abcdefghijklmnopqrstuvwxyz0123456789){2,}",
    "(?:abcdefghijklmnopqrstuvwxyz0123456789abcdefghijkl)+",
    // Optional parts: each is a branch instruction too (found with Istio's service-account regex).
    "spiffe://.+/ns/edge/(.+/|)sa/vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv(/.+)?",
    "spiffe://.+/ns/edge/(.+/|)sa/vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv(/.+)?",
    "x{0,48}",
    "x{0,49}",
    "(?:ab?){33}",
    "(?:abc)*d{95}",
    "(?:abc)*d{92}",
];

/// Envoy's verdict: `Ok(())`, or the RE2 program size it reported, or another rejection.
fn envoy_verdict(
    envoy: &std::path::Path,
    dir: &std::path::Path,
    re: &str,
) -> Result<(), Result<u64, String>> {
    let config = json!({"static_resources": {"listeners": [{
        "name": "l", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
        "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "x",
            "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
            "route_config": {"virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [
                {"match": {"safe_regex": {"regex": re}}, "direct_response": {"status": 200}}]}]}}}]}]}]}});
    let file = dir.join("regex.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let out = std::process::Command::new(envoy)
        .args(["--mode", "validate", "--log-level", "error", "-c"])
        .arg(&file)
        .output()
        .unwrap();
    if out.status.success() {
        return Ok(());
    }
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    Err(text
        .split("program size of ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or(text))
}

#[test]
fn admitpilot_denies_a_regex_for_its_program_size_only_when_envoy_does() {
    let Some(envoy) = envoy::envoy_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for re in PATTERNS {
        start_object();
        let ours = check_regex(re);
        let theirs = envoy_verdict(&envoy, dir.path(), re);
        match (&ours, &theirs) {
            (Ok(()), Ok(())) => {}
            (Err(e), Err(Ok(size))) if e.contains("Envoy rejects more than 100") => {
                let bound = re2_program_size_bound(re).unwrap();
                assert!(bound <= *size, "{re}: our bound {bound} > Envoy's {size}");
            }
            _ => panic!("{re}: admitpilot {ours:?}, Envoy {theirs:?}"),
        }
    }
}
