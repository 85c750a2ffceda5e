//! Compiles the `.proto` files under the repository's `proto/` into one encoded `FileDescriptorSet` in
//! `OUT_DIR/envoy_descriptors.bin`, which `src/lib.rs` embeds: Envoy's API with protoc-gen-validate's rules
//! (`proto/vendor`, see `proto/README.md`) and the project's own files (`proto/admitpilot`).
//!
//! The compiler is protox (pure Rust, no `protoc`); the build reads only this repository and touches no network.
//! protox resolves a relative type name by looking for its first part in every package loaded so far, where protoc
//! looks only among the packages of the file's own imports (and their public imports); Envoy's API relies on
//! protoc's rule (`config.core.v3.HttpUri` inside `envoy.extensions.*`, with an `envoy.extensions.config` package
//! also loaded), so [`Qualifying`] rewrites every relative name to its full name with protoc's rule first.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use protox::file::{
    ChainFileResolver, File, FileResolver, GoogleFileResolver, IncludeFileResolver,
};
use protox::prost_reflect::prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto,
};

/// The include roots under `proto/`; every `.proto` file below them is compiled.
const ROOTS: &[&str] = &[
    "admitpilot",
    "vendor/data-plane-api",
    "vendor/xds",
    "vendor/protoc-gen-validate",
    "vendor/googleapis",
    "vendor/opentelemetry-proto",
    "vendor/client_model",
    "vendor/cel-spec/proto",
    "vendor/ratelimit",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../../proto");
    let proto = Path::new("../../proto");
    let mut resolver = ChainFileResolver::new();
    let mut files = Vec::new();
    for root in ROOTS {
        let root = proto.join(root);
        resolver.add(IncludeFileResolver::new(root.clone()));
        list_proto_files(&root, &mut files);
    }
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(Qualifying::new(resolver));
    compiler.include_imports(true).include_source_info(false);
    if let Err(err) = compiler.open_files(&files) {
        panic!("compiling proto/: {err}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = out.join("envoy_descriptors.bin");
    // `encode_file_descriptor_set` keeps custom options such as `validate.rules` (prost-types would drop them).
    std::fs::write(&target, compiler.encode_file_descriptor_set())
        .unwrap_or_else(|e| panic!("write {}: {e}", target.display()));
}

/// Appends every `.proto` file below `dir`, in a stable order.
fn list_proto_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            list_proto_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            out.push(path);
        }
    }
}

/// A [`FileResolver`] that opens files through `inner` and rewrites each relative type name (field types,
/// extendees, method types) to `.full.name`, found as protoc finds it.
struct Qualifying<R> {
    inner: R,
    declared: RefCell<HashMap<String, Rc<Declared>>>,
}

/// What one file declares and imports.
struct Declared {
    package: String,
    /// Full names of its messages and enums, nested ones included.
    types: HashSet<String>,
    imports: Vec<String>,
    public_imports: Vec<String>,
}

/// The names one file may use: its own and its imports' (with their public imports), and the packages they are
/// in, with every parent package.
#[derive(Default)]
struct Visible {
    types: HashSet<String>,
    packages: HashSet<String>,
}

impl<R: FileResolver> Qualifying<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            declared: RefCell::default(),
        }
    }

    fn declared(&self, name: &str) -> Result<Rc<Declared>, protox::Error> {
        if let Some(found) = self.declared.borrow().get(name) {
            return Ok(found.clone());
        }
        let file = self.inner.open_file(name)?;
        let proto = file.file_descriptor_proto();
        let package = proto.package().to_string();
        let mut types = HashSet::new();
        collect_types(&package, &proto.message_type, &proto.enum_type, &mut types);
        let declared = Rc::new(Declared {
            package,
            types,
            imports: proto.dependency.clone(),
            public_imports: proto
                .public_dependency
                .iter()
                .filter_map(|&i| proto.dependency.get(usize::try_from(i).ok()?).cloned())
                .collect(),
        });
        self.declared
            .borrow_mut()
            .insert(name.to_string(), declared.clone());
        Ok(declared)
    }

    fn visible(&self, name: &str) -> Result<Visible, protox::Error> {
        let mut visible = Visible::default();
        let own = self.declared(name)?;
        visible.add(&own);
        let mut pending = own.imports.clone();
        let mut seen = HashSet::new();
        while let Some(import) = pending.pop() {
            if seen.insert(import.clone()) {
                let declared = self.declared(&import)?;
                visible.add(&declared);
                pending.extend(declared.public_imports.iter().cloned());
            }
        }
        Ok(visible)
    }
}

impl<R: FileResolver> FileResolver for Qualifying<R> {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        self.inner.resolve_path(path)
    }

    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        let mut proto = self.inner.open_file(name)?.file_descriptor_proto().clone();
        let visible = self.visible(name)?;
        let package = proto.package().to_string();
        for message in &mut proto.message_type {
            visible.qualify_message(&package, message);
        }
        for extension in &mut proto.extension {
            visible.qualify_field(&package, extension);
        }
        for method in proto.service.iter_mut().flat_map(|s| s.method.iter_mut()) {
            for name in [&mut method.input_type, &mut method.output_type]
                .into_iter()
                .flatten()
            {
                visible.qualify(&package, name);
            }
        }
        Ok(File::from_file_descriptor_proto(proto))
    }
}

impl Visible {
    fn add(&mut self, declared: &Declared) {
        self.types.extend(declared.types.iter().cloned());
        let mut package = declared.package.as_str();
        while !package.is_empty() {
            self.packages.insert(package.to_string());
            package = parent(package);
        }
    }

    fn qualify_message(&self, scope: &str, message: &mut DescriptorProto) {
        let scope = join(scope, message.name());
        for field in message.field.iter_mut().chain(message.extension.iter_mut()) {
            self.qualify_field(&scope, field);
        }
        for nested in &mut message.nested_type {
            self.qualify_message(&scope, nested);
        }
    }

    fn qualify_field(&self, scope: &str, field: &mut FieldDescriptorProto) {
        for name in [&mut field.type_name, &mut field.extendee]
            .into_iter()
            .flatten()
        {
            self.qualify(scope, name);
        }
    }

    /// Rewrites `name`, relative to `scope`, as protoc resolves it: from the innermost scope outwards, the first
    /// scope that declares the name's first part decides. A name protoc would not find is left for protox to
    /// report.
    fn qualify(&self, scope: &str, name: &mut String) {
        if name.starts_with('.') {
            return;
        }
        let first = name.split('.').next().unwrap_or_default();
        let mut scope = scope;
        loop {
            let full = join(scope, name);
            if self.types.contains(&full) {
                *name = format!(".{full}");
                return;
            }
            let first_in_scope = join(scope, first);
            let is_dotted = first.len() < name.len();
            if scope.is_empty()
                || (is_dotted
                    && (self.types.contains(&first_in_scope)
                        || self.packages.contains(&first_in_scope)))
            {
                return;
            }
            scope = parent(scope);
        }
    }
}

fn collect_types(
    scope: &str,
    messages: &[DescriptorProto],
    enums: &[EnumDescriptorProto],
    out: &mut HashSet<String>,
) {
    out.extend(enums.iter().map(|e| join(scope, e.name())));
    for message in messages {
        let full = join(scope, message.name());
        collect_types(&full, &message.nested_type, &message.enum_type, out);
        out.insert(full);
    }
}

fn join(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_string()
    } else {
        format!("{scope}.{name}")
    }
}

fn parent(scope: &str) -> &str {
    scope.rsplit_once('.').map_or("", |(parent, _)| parent)
}
