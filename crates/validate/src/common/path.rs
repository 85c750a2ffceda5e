//! Field paths (pure): takes field names and indexes as a validator walks an object, yields `spec.http[0].route[1]`-style
//! paths in one reusable buffer ([`FieldPath`]), so walking an object does not allocate per field.

use std::fmt::Write as _;
use std::ops::Deref;
use std::ops::DerefMut;

/// A field path under construction (`spec.http[0].match[1].uri`), grown and shrunk as a validator walks an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(String);

/// A path extended by one segment; derefs to the [`FieldPath`] and removes the segment again when dropped.
#[derive(Debug)]
pub struct Segment<'a> {
    path: &'a mut FieldPath,
    mark: usize,
}

impl FieldPath {
    /// Starts a path at `root` (for example `spec`).
    pub fn new(root: &str) -> Self {
        let mut buf = String::with_capacity(96);
        buf.push_str(root);
        FieldPath(buf)
    }

    /// Returns the path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Appends `.name` (or `name` at the root) until the returned segment is dropped.
    pub fn field(&mut self, name: &str) -> Segment<'_> {
        let mark = self.0.len();
        if !self.0.is_empty() {
            self.0.push('.');
        }
        self.0.push_str(name);
        Segment { path: self, mark }
    }

    /// Appends `[index]` until the returned segment is dropped.
    pub fn index(&mut self, index: usize) -> Segment<'_> {
        let mark = self.0.len();
        // Writing into a String cannot fail.
        let _ = write!(self.0, "[{index}]");
        Segment { path: self, mark }
    }

    /// Returns `path.name` as a new string (for one-off findings).
    pub fn child(&self, name: &str) -> String {
        if self.0.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.0)
        }
    }
}

impl Deref for Segment<'_> {
    type Target = FieldPath;
    fn deref(&self) -> &FieldPath {
        self.path
    }
}

impl DerefMut for Segment<'_> {
    fn deref_mut(&mut self) -> &mut FieldPath {
        self.path
    }
}

impl Drop for Segment<'_> {
    fn drop(&mut self) {
        self.path.0.truncate(self.mark);
    }
}
