//! Local folder source (`--config-dir`): takes a directory of `*.yaml`/`*.yml`/`*.json` files (recursive,
//! multi-document YAML, `kind: List` expanded), yields [`SourceEvent`]s: one resync after the initial load, then
//! applies and deletes as files are created, changed, renamed or deleted (watched with `notify`).
//!
//! Rules (also in the README):
//! * Entries whose name starts with `.` are skipped, so a Kubernetes ConfigMap volume (`..data` symlink swaps)
//!   can be mounted as the folder; any change under such an entry triggers a full rescan.
//! * A burst of file events is settled for [`SETTLE`] (quiet time) before files are re-read; the store then
//!   debounces again.
//! * A file that does not parse is skipped as a whole and every object it held stays as it was (last good); an
//!   object that does not validate keeps its last good version from that file. Both are logged with file, document
//!   position (1-based, `3` or `3.items[0]`, the numbering `admitpilot validate` prints), field and message, and
//!   counted (`parse_errors`, `rejected_objects`).
//! * Deleting (or renaming away) a file deletes the objects it held.
//! * Duplicates (the same kind/namespace/name in two files): the file whose path sorts first (byte-wise) wins; the
//!   others are reported (warning + `rejected_objects{reason="duplicate"}`). Within one file the first document
//!   wins.
//! * Objects served in a last good version are reported to the shared [`HeldObjects`] (with their file, relative
//!   to the folder) so they can be persisted; after a restart, an invalid document (or a file that does not parse)
//!   falls back on the version persisted for the same file.
//! * Files are read on the async task with blocking I/O; a config folder is small and local.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::admit::{admit, Admission, AdmitOptions};
use super::last_good::{fallback, Held, HeldObject, HeldObjects};
use super::refusals::Refusals;
use super::state::State;
use super::{Scope, ScopedSender, SourceEvent, SourceMetrics};
use admitpilot_model::document::{parse_documents, Document};
use admitpilot_model::refusal::{self, Refusal};
use admitpilot_model::{ConfigObject, Finding, ObjectKey};

/// Quiet time that ends a burst of file-system events before the touched files are re-read.
pub const SETTLE: Duration = Duration::from_millis(5);
/// Longest a burst of file-system events is held before the touched files are re-read anyway.
pub const SETTLE_MAX: Duration = Duration::from_millis(100);
/// Deepest directory nesting followed (guards against symlink loops).
const MAX_DEPTH: usize = 32;
/// Largest file read; bigger files are reported and skipped.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Errors starting the folder source.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The path is missing or not a directory.
    #[error("not a readable directory: {0}")]
    NotADirectory(#[source] std::io::Error),
    /// The path exists but is a file.
    #[error("not a directory")]
    IsAFile,
    /// The file-system watcher could not be set up.
    #[error("cannot watch: {0}")]
    Watch(#[from] notify::Error),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Returns the store scope of the folder `dir`.
pub fn scope(dir: &Path) -> Scope {
    Scope::new(format!("folder:{}", dir.display()))
}

/// Starts watching `dir`, waits for the persisted last good versions of `state`, loads the folder, sends the
/// initial resync, then sends changes until the task is aborted; objects served in a last good version go to `held`.
pub fn spawn(
    dir: PathBuf,
    options: AdmitOptions,
    sender: ScopedSender,
    metrics: SourceMetrics,
    state: State,
    held: HeldObjects,
    refusals: Refusals,
) -> Result<JoinHandle<()>, Error> {
    let root = dir.canonicalize().map_err(Error::NotADirectory)?;
    if !root.is_dir() {
        return Err(Error::IsAFile);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        // The receiver is gone only when the task ended; nothing to do then.
        let _ = tx.send(event);
    })?;
    // Watch before the first scan so no change between the two is lost.
    watcher.watch(&root, RecursiveMode::Recursive)?;
    let mut folder = Folder::new(root, options, metrics);
    Ok(tokio::spawn(async move {
        let _watcher = watcher;
        folder.persisted = state.loaded().await;
        folder.run(rx, sender, (held, refusals)).await;
    }))
}

/// What one file contributes: its content hash, the objects in force from it, which of them are last good
/// versions of invalid documents, and the documents validation refuses.
#[derive(Debug, Default)]
struct FileState {
    hash: u64,
    objects: BTreeMap<ObjectKey, Arc<ConfigObject>>,
    held: BTreeSet<ObjectKey>,
    refused: BTreeMap<ObjectKey, Refusal>,
}

/// The folder's state: every file's objects and, per key, the files that define it.
#[derive(Debug)]
pub struct Folder {
    root: PathBuf,
    options: AdmitOptions,
    metrics: SourceMetrics,
    files: BTreeMap<PathBuf, FileState>,
    index: HashMap<ObjectKey, BTreeSet<PathBuf>>,
    /// Last good versions an earlier run persisted (origin: the file, relative to `root`).
    persisted: Arc<Held>,
}

impl Folder {
    /// Builds an empty folder state for the canonical directory `root`.
    pub fn new(root: PathBuf, options: AdmitOptions, metrics: SourceMetrics) -> Self {
        Folder {
            root,
            options,
            metrics,
            files: BTreeMap::new(),
            index: HashMap::new(),
            persisted: Arc::default(),
        }
    }

    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
        sender: ScopedSender,
        (held, refusals): (HeldObjects, Refusals),
    ) {
        self.rescan();
        held.set(sender.scope(), self.held());
        refusals.set(sender.scope(), self.refusals());
        if sender.send(SourceEvent::Resync(self.objects())).is_err() {
            return;
        }
        tracing::info!(dir = %self.root.display(), objects = self.index.len(), files = self.files.len(),
            "config folder loaded");
        while let Some(first) = rx.recv().await {
            let mut batch = Batch::default();
            batch.add(first);
            let started = Instant::now();
            loop {
                let wait = SETTLE.min(SETTLE_MAX.saturating_sub(started.elapsed()));
                match tokio::time::timeout(wait, rx.recv()).await {
                    Ok(Some(event)) => batch.add(event),
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            let events = self.process(batch);
            held.set(sender.scope(), self.held());
            refusals.set(sender.scope(), self.refusals());
            for event in events {
                if sender.send(event).is_err() {
                    return;
                }
            }
        }
    }

    /// Re-reads the touched paths and returns the resulting store events.
    fn process(&mut self, batch: Batch) -> Vec<SourceEvent> {
        let affected = if batch.rescan
            || batch
                .paths
                .iter()
                .any(|p| self.hidden(p) || !p.starts_with(&self.root))
        {
            self.rescan()
        } else {
            let mut affected = BTreeSet::new();
            for path in &batch.paths {
                affected.extend(self.refresh(path));
            }
            affected
        };
        affected
            .into_iter()
            .map(|key| self.event_for(key))
            .collect()
    }

    /// Returns every object in force (duplicates resolved and reported), for a resync.
    pub fn objects(&self) -> Vec<Arc<ConfigObject>> {
        let mut keys: Vec<&ObjectKey> = self.index.keys().collect();
        keys.sort();
        keys.into_iter()
            .filter_map(|key| self.resolve(key))
            .collect()
    }

    /// The documents of every file that validation refuses.
    pub fn refusals(&self) -> BTreeMap<ObjectKey, Refusal> {
        self.files
            .values()
            .flat_map(|file| file.refused.iter())
            .map(|(key, refusal)| (key.clone(), refusal.clone()))
            .collect()
    }

    /// Returns the objects served in a last good version, with their files.
    pub fn held(&self) -> Held {
        let mut held = Held::new();
        for (path, file) in &self.files {
            for key in &file.held {
                if let Some(object) = file.objects.get(key) {
                    let origin = self.origin(path);
                    held.insert(
                        key.clone(),
                        HeldObject {
                            origin,
                            object: object.clone(),
                        },
                    );
                }
            }
        }
        held
    }

    /// A file's name relative to the folder (the origin recorded with persisted versions).
    fn origin(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// The last good version of `key` from `path`: this run's, else the one an earlier run persisted.
    fn last_good_of(
        &self,
        path: &Path,
        key: &ObjectKey,
        previous: &BTreeMap<ObjectKey, Arc<ConfigObject>>,
    ) -> Option<Arc<ConfigObject>> {
        previous.get(key).cloned().or_else(|| {
            fallback(&self.persisted, key, None)
                .filter(|held| held.origin == self.origin(path))
                .map(|held| held.object.clone())
        })
    }

    /// Reads the whole folder again; returns the keys whose files changed.
    pub fn rescan(&mut self) -> BTreeSet<ObjectKey> {
        let found = self.config_files(&self.root);
        let mut affected = BTreeSet::new();
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !found.contains(*p))
            .cloned()
            .collect();
        for path in gone {
            affected.extend(self.forget(&path));
        }
        for path in &found {
            affected.extend(self.load(path));
        }
        affected
    }

    /// Re-reads one touched path (file or directory, present or gone); returns the affected keys.
    fn refresh(&mut self, path: &Path) -> BTreeSet<ObjectKey> {
        let mut affected = BTreeSet::new();
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let found = self.config_files(path);
                let gone: Vec<PathBuf> = self
                    .files_under(path)
                    .filter(|p| !found.contains(p))
                    .collect();
                for gone in gone {
                    affected.extend(self.forget(&gone));
                }
                for file in &found {
                    affected.extend(self.load(file));
                }
            }
            Ok(_) if is_config_file(path) => affected.extend(self.load(path)),
            Ok(_) => {}
            Err(_) => {
                let gone: Vec<PathBuf> = self.files_under(path).collect();
                for gone in gone {
                    affected.extend(self.forget(&gone));
                }
            }
        }
        affected
    }

    /// Lists the config files under `dir`; folders that cannot be read are logged and contribute nothing.
    fn config_files(&self, dir: &Path) -> BTreeSet<PathBuf> {
        let listing = config_files(dir);
        for (folder, error) in &listing.unreadable {
            tracing::warn!(dir = %folder.display(), %error, "cannot list config folder");
        }
        listing.files
    }

    /// Known files at `path` or below it.
    fn files_under<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = PathBuf> + 'a {
        self.files
            .range(path.to_path_buf()..)
            .take_while(move |(p, _)| p.starts_with(path))
            .map(|(p, _)| p.clone())
    }

    fn hidden(&self, path: &Path) -> bool {
        path.strip_prefix(&self.root).is_ok_and(|rel| {
            rel.components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        })
    }

    /// Loads one file; returns the keys it held before or holds now.
    fn load(&mut self, path: &Path) -> BTreeSet<ObjectKey> {
        let text = match read_limited(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return self.forget(path),
            Err(error) => {
                tracing::error!(file = %path.display(), %error,
                    "cannot read config file; keeping the objects it held");
                self.metrics.parse_error("folder");
                return BTreeSet::new();
            }
        };
        let hash = content_hash(&text);
        if self.files.get(path).is_some_and(|f| f.hash == hash) {
            return BTreeSet::new();
        }
        let documents = parse_documents(&text);
        if let Some((position, error)) = documents.iter().find_map(|d| match &d.value {
            Ok(_) => None,
            Err(error) => Some((&d.position, error)),
        }) {
            tracing::error!(file = %path.display(), document = %position, field = "", %error,
                "config file does not parse; skipped, the objects it held stay in force");
            self.metrics.parse_error("folder");
            if let Some(file) = self.files.get_mut(path) {
                file.hash = hash;
                file.held = file.objects.keys().cloned().collect();
                return BTreeSet::new();
            }
            return self.restore_persisted(path, hash);
        }
        let previous = self.files.remove(path).unwrap_or_default();
        let mut loaded = FileState {
            hash,
            ..FileState::default()
        };
        for Document { position, value } in documents {
            if let Ok(value) = value {
                let document = Admitted {
                    path,
                    label: &position,
                    previous: &previous.objects,
                };
                self.admit_document(&document, value, &mut loaded);
            }
        }
        let mut affected: BTreeSet<ObjectKey> = previous.objects.keys().cloned().collect();
        for key in previous.objects.keys() {
            self.unindex(key, path);
        }
        for key in loaded.objects.keys() {
            self.index
                .entry(key.clone())
                .or_default()
                .insert(path.to_path_buf());
            affected.insert(key.clone());
        }
        self.files.insert(path.to_path_buf(), loaded);
        affected
    }

    /// A file that does not parse, seen for the first time this run: the versions an earlier run persisted for it
    /// are put in force (all held). Returns their keys.
    fn restore_persisted(&mut self, path: &Path, hash: u64) -> BTreeSet<ObjectKey> {
        let origin = self.origin(path);
        let objects: BTreeMap<ObjectKey, Arc<ConfigObject>> = self
            .persisted
            .iter()
            .filter(|(_, held)| held.origin == origin)
            .map(|(key, held)| (key.clone(), held.object.clone()))
            .collect();
        if !objects.is_empty() {
            tracing::warn!(file = %path.display(), objects = objects.len(),
                "serving the last good versions an earlier run persisted for this file");
        }
        for key in objects.keys() {
            self.index
                .entry(key.clone())
                .or_default()
                .insert(path.to_path_buf());
        }
        let keys: BTreeSet<ObjectKey> = objects.keys().cloned().collect();
        self.files.insert(
            path.to_path_buf(),
            FileState {
                hash,
                objects,
                held: keys.clone(),
                refused: BTreeMap::new(),
            },
        );
        keys
    }

    /// Admits one document into the file's `objects`; a key served in its last good version goes into `held`, a
    /// refused document into `refused`.
    fn admit_document(&self, document: &Admitted<'_>, value: Value, file: &mut FileState) {
        let FileState {
            objects,
            held,
            refused,
            ..
        } = file;
        let addressing = refusal::addressing(&value);
        let Admitted {
            path,
            label,
            previous,
        } = *document;
        let verdict = admit(value, &self.options, &|key| {
            self.last_good_of(path, key, previous)
        });
        let log_warning = |key: &ObjectKey, warning: &Finding| {
            tracing::warn!(file = %path.display(), document = %label, object = %key,
                field = %warning.field, warning = %warning.message, "config warning");
        };
        match verdict.settle(&self.metrics, log_warning) {
            Admission::Serve {
                key,
                object,
                rejected,
            } => {
                for error in &rejected {
                    tracing::error!(file = %path.display(), document = %label, object = %key,
                        field = %error.field, error = %error.message, "invalid part skipped");
                }
                if !rejected.is_empty() {
                    held.insert(key.clone());
                }
                match objects.entry(key) {
                    std::collections::btree_map::Entry::Occupied(entry) => {
                        tracing::warn!(file = %path.display(), document = %label, object = %entry.key(),
                            "duplicate object in one file; the first document wins");
                        self.metrics.reject(Some(entry.key().kind), "duplicate");
                    }
                    std::collections::btree_map::Entry::Vacant(entry) => {
                        entry.insert(Arc::from(object));
                    }
                }
            }
            Admission::Refuse { key, errors } => {
                let object = key.as_ref().map(ToString::to_string).unwrap_or_default();
                for error in &errors {
                    tracing::error!(file = %path.display(), document = %label, object = %object,
                        field = %error.field, error = %error.message, "invalid object skipped");
                }
                if let Some(key) = key {
                    let last_good = self.last_good_of(path, &key, previous);
                    if let Some(addressing) = &addressing {
                        let kept = last_good.is_some();
                        let refusal =
                            Refusal::from_document(key.clone(), addressing, &errors, kept);
                        refused.insert(key.clone(), refusal);
                    }
                    if let Some(last_good) = last_good {
                        if let std::collections::btree_map::Entry::Vacant(entry) =
                            objects.entry(key)
                        {
                            tracing::warn!(file = %path.display(), object = %entry.key(),
                                "keeping the last good version of the invalid object");
                            held.insert(entry.key().clone());
                            entry.insert(last_good);
                        }
                    }
                }
            }
            Admission::Ignore => {
                tracing::debug!(file = %path.display(), document = %label, "kind not handled; skipped");
            }
        }
    }

    /// Drops one file; returns the keys it held.
    fn forget(&mut self, path: &Path) -> BTreeSet<ObjectKey> {
        let Some(state) = self.files.remove(path) else {
            return BTreeSet::new();
        };
        for key in state.objects.keys() {
            self.unindex(key, path);
        }
        state.objects.into_keys().collect()
    }

    fn unindex(&mut self, key: &ObjectKey, path: &Path) {
        if let Some(paths) = self.index.get_mut(key) {
            paths.remove(path);
            if paths.is_empty() {
                self.index.remove(key);
            }
        }
    }

    /// Returns the object in force for `key`: the one from the first path in byte order. Reports duplicates.
    fn resolve(&self, key: &ObjectKey) -> Option<Arc<ConfigObject>> {
        let paths = self.index.get(key)?;
        let path = paths.first()?;
        if paths.len() > 1 {
            let ignored: Vec<String> = paths
                .iter()
                .skip(1)
                .map(|p| p.display().to_string())
                .collect();
            tracing::warn!(object = %key, winner = %path.display(), ?ignored,
                "object defined in several files; the first path wins");
            self.metrics.reject(Some(key.kind), "duplicate");
        }
        self.files.get(path)?.objects.get(key).cloned()
    }

    fn event_for(&self, key: ObjectKey) -> SourceEvent {
        match self.resolve(&key) {
            Some(object) => SourceEvent::Apply(object),
            None => SourceEvent::Delete(key),
        }
    }
}

/// One document being admitted: its file, its 1-based position there (as `admitpilot validate` prints it), and
/// the objects the file held before.
#[derive(Clone, Copy)]
struct Admitted<'a> {
    path: &'a Path,
    label: &'a str,
    previous: &'a BTreeMap<ObjectKey, Arc<ConfigObject>>,
}

/// Touched paths collected from one burst of file-system events.
#[derive(Debug, Default)]
struct Batch {
    paths: BTreeSet<PathBuf>,
    rescan: bool,
}

impl Batch {
    fn add(&mut self, event: notify::Result<notify::Event>) {
        match event {
            Ok(event) => {
                if event.need_rescan() {
                    self.rescan = true;
                }
                if event.kind.is_access() {
                    return;
                }
                self.paths.extend(event.paths);
            }
            Err(error) => {
                tracing::warn!(%error, "file watcher error; rescanning the config folder");
                self.rescan = true;
            }
        }
    }
}

/// Tells whether `path` names a config file (`*.yaml`, `*.yml`, `*.json`, any case).
pub fn is_config_file(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["yaml", "yml", "json"]
            .iter()
            .any(|x| e.eq_ignore_ascii_case(x))
    })
}

/// The config files found under a folder, and the folders that could not be listed.
#[derive(Debug, Default)]
pub struct ConfigFiles {
    /// Config files, in path order.
    pub files: BTreeSet<PathBuf>,
    /// Folders that could not be read (or were nested deeper than 32 levels), with the reason.
    pub unreadable: Vec<(PathBuf, std::io::Error)>,
}

/// Lists the config files under `dir`, recursively: entries whose name starts with `.` are skipped, symlinks are
/// followed (at most 32 folders deep, which also ends symlink loops). The one walker of the folder source and
/// `admitpilot validate`.
pub fn config_files(dir: &Path) -> ConfigFiles {
    let mut out = ConfigFiles::default();
    walk(dir, 0, &mut out);
    out
}

fn walk(dir: &Path, depth: usize, out: &mut ConfigFiles) {
    if depth > MAX_DEPTH {
        let error = std::io::Error::other(format!("nested more than {MAX_DEPTH} folders deep"));
        out.unreadable.push((dir.to_path_buf(), error));
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            out.unreadable.push((dir.to_path_buf(), error));
            return;
        }
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => walk(&path, depth + 1, out),
            Ok(_) if is_config_file(&path) => {
                out.files.insert(path);
            }
            _ => {}
        }
    }
}

fn read_limited(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "file is {} bytes, more than the {MAX_FILE_BYTES} byte limit",
            meta.len()
        )));
    }
    std::fs::read_to_string(path)
}

fn content_hash(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_config_files() {
        assert!(is_config_file(Path::new("a/b.YAML")));
        assert!(is_config_file(Path::new("b.json")));
        assert!(!is_config_file(Path::new("b.txt")));
    }
}
