//! Shared helpers for the source tests: deadline-bounded polling, log capture and a Kubernetes API server double.
//! Each test crate uses a subset, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod apiserver;
pub mod logs;
pub mod serve;
pub mod xds_auth;

use std::sync::Arc;
use std::time::Duration;

use admitpilot::model::Snapshot;
use tokio::sync::watch;

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
