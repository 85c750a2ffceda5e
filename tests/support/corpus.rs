//! The shared conformance corpus (`../shared/corpus` beside the checkout): takes a folder inside it and yields its
//! path, or `None` after printing why the test skips.

use std::path::{Path, PathBuf};

/// `../shared/corpus/<part>`, or `None` (with a printed skip message) when it is absent.
pub fn corpus_dir(part: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus")
        .join(part);
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipping: corpus folder not found at {}", dir.display());
        None
    }
}
