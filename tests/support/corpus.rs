//! The shared conformance corpus (`ADMITPILOT_CORPUS`, else `../shared/corpus` beside the checkout): takes a folder
//! inside it and yields its path, or `None` after printing why the test skips.

use std::path::{Path, PathBuf};

/// `<corpus>/<part>`, or `None` (with a printed skip message) when it is absent.
pub fn corpus_dir(part: &str) -> Option<PathBuf> {
    let root = std::env::var_os("ADMITPILOT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(crate::REPO_ROOT).join("../shared/corpus"));
    let dir = root.join(part);
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipping: corpus folder not found at {}", dir.display());
        None
    }
}
