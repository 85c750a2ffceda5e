//! The integration tests' shared support (the crate `admitpilot-test-support`, imported as `support`): real
//! Envoy and backends, the serve pipeline, a Kubernetes API server double and the real one's helpers, corpora and
//! golden cases, generators, deadline-bounded polling and log capture. Compiled once for every test binary.
// Test support: a failed step is a failed test, so unwrapping is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod apiserver;
pub mod cases;
pub mod corpus;
pub mod differential;
pub mod echo;
pub mod envoy;
pub mod gen;
pub mod helm;
pub mod jwt;
pub mod kube_server;
pub mod kubelet;
pub mod logs;
pub mod pipeline;
pub mod reviews;
pub mod serve;
pub mod tls_backends;
pub mod tls_probe;
pub mod websocket;
pub mod xds_auth;
pub mod xds_harness;

use std::sync::Arc;
use std::time::Duration;

use admitpilot::model::Snapshot;
use tokio::sync::watch;

/// The repository's root folder (this crate lives in `tests/support`).
pub const REPO_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The `admitpilot` binary cargo built for the running test binary: in the folder above the test binary's `deps/`.
pub fn admitpilot_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("test binaries run from target/<profile>/deps");
    profile_dir.join(format!("admitpilot{}", std::env::consts::EXE_SUFFIX))
}

/// How long any wait in these tests may take before it fails.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// Waits (at most [`DEADLINE`]) until the latest published snapshot satisfies `check`, and returns it.
pub async fn wait_for(
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    mut check: impl FnMut(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let result = tokio::time::timeout(DEADLINE, rx.wait_for(|s| check(s)))
        .await
        .map(|found| found.map(|snapshot| snapshot.clone()));
    match result {
        Ok(Ok(snapshot)) => snapshot,
        Ok(Err(_)) => panic!("snapshot channel closed"),
        Err(_) => {
            let current = rx.borrow().clone();
            let keys: Vec<String> = current.objects.keys().map(ToString::to_string).collect();
            panic!(
                "no matching snapshot within {DEADLINE:?}; latest is version {} with {keys:?}",
                current.version
            )
        }
    }
}

/// Polls `check` every few milliseconds until it holds, failing after [`DEADLINE`].
pub async fn eventually(mut check: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !check() {
        assert!(
            start.elapsed() < DEADLINE,
            "condition not met within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
