//! `admitpilot validate`: takes files, folders or stdin, validates every document with the shared validator,
//! prints one line per finding (or JSON) and returns exit code 0 (all valid), 1 (invalid) or 2 (unreadable input).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde::Serialize;

use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::document::parse_documents;
use admitpilot::model::{ConfigObject, Finding};
use admitpilot::source::folder::config_files;
use admitpilot::validate::{validate_document, Report};

/// Arguments of `admitpilot validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Files, folders (searched recursively for *.yaml, *.yml, *.json; entries starting with `.` skipped) or `-`
    /// for stdin.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Namespace of documents that name none (as `istioctl validate --namespace` gives it them).
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// Namespace of the higress-config ConfigMap (other ConfigMaps are skipped).
    #[arg(long, default_value = "higress-system")]
    higress_namespace: String,

    /// Namespace of Istio's mesh config, the ConfigMap `istio` (its `extensionProviders` serve CUSTOM
    /// AuthorizationPolicies); other ConfigMaps there are not admitpilot's business.
    #[arg(long, default_value = "istio-system")]
    istio_namespace: String,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Output {
    /// One line per finding, then a summary line.
    Text,
    /// A JSON array with one object per document.
    Json,
}

/// The verdict on one document, as printed.
#[derive(Debug, Serialize)]
pub(super) struct DocumentResult {
    path: String,
    doc: String,
    kind: String,
    namespace: String,
    name: String,
    valid: bool,
    /// Errors and warnings, in document order.
    pub findings: Vec<Finding>,
}

/// Validates every document under the given paths and prints the findings.
pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let options = DecodeOptions {
        higress_namespace: args.higress_namespace.clone(),
        mesh_namespace: args.istio_namespace.clone(),
        ..DecodeOptions::default()
    };
    let loaded = load(&args.paths, &options, &args.namespace);
    print(&loaded.results, args.output)?;
    Ok(exit_code(&loaded, false))
}

/// Every document under some paths, validated.
pub(super) struct Loaded {
    /// One result per document that parsed, in input order.
    pub results: Vec<DocumentResult>,
    /// The decoded object of each result, when it decoded (index-aligned with `results`).
    pub objects: Vec<Option<ConfigObject>>,
    /// Some input could not be read or parsed.
    pub unreadable: bool,
}

/// Reads and validates every document under `paths` (unreadable input is reported on stderr); a document
/// without a namespace is in `namespace`.
pub(super) fn load(paths: &[String], options: &DecodeOptions, namespace: &str) -> Loaded {
    let mut loaded = Loaded {
        results: Vec::new(),
        objects: Vec::new(),
        unreadable: false,
    };
    for source in expand_paths(paths, &mut loaded.unreadable) {
        let text = match source.read() {
            Ok(text) => text,
            Err(error) => {
                eprintln!("{}: cannot read: {error}", source.name());
                loaded.unreadable = true;
                continue;
            }
        };
        for document in parse_documents(&text) {
            match document.value {
                Ok(mut value) => {
                    default_namespace(&mut value, namespace);
                    let mut report = validate_document(&value, options);
                    loaded.objects.push(report.object.take());
                    loaded
                        .results
                        .push(to_result(&source.name(), document.position, report));
                }
                Err(error) => {
                    eprintln!(
                        "{}:{}: cannot parse: {error}",
                        source.name(),
                        document.position
                    );
                    loaded.unreadable = true;
                }
            }
        }
    }
    loaded
}

/// Gives a document whose `metadata` names no namespace the namespace `namespace`, as `istioctl validate` does
/// with its `--namespace` (the cluster would put it there).
fn default_namespace(doc: &mut serde_json::Value, namespace: &str) {
    let Some(metadata) = doc.get_mut("metadata").and_then(|m| m.as_object_mut()) else {
        return;
    };
    let named = metadata
        .get("namespace")
        .and_then(|ns| ns.as_str())
        .is_some_and(|ns| !ns.is_empty());
    if !named {
        metadata.insert("namespace".into(), namespace.into());
    }
}

/// Prints the results in `output` format.
pub(super) fn print(results: &[DocumentResult], output: Output) -> anyhow::Result<()> {
    match output {
        Output::Text => print_text(results),
        Output::Json => println!("{}", serde_json::to_string_pretty(results)?),
    }
    Ok(())
}

/// 2 when some input was unreadable, else 1 when some document has errors (or warnings, with
/// `fail_on_warnings`), else 0.
pub(super) fn exit_code(loaded: &Loaded, fail_on_warnings: bool) -> ExitCode {
    let failed = |r: &DocumentResult| !r.valid || (fail_on_warnings && !r.findings.is_empty());
    if loaded.unreadable {
        ExitCode::from(2)
    } else if loaded.results.iter().any(failed) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

impl DocumentResult {
    /// The findings of no single document but of the config a gateway (pods in `namespace` with `labels`, shown
    /// as `{k=v,…}`) gets.
    pub(super) fn gateway(namespace: &str, labels: String, findings: Vec<Finding>) -> Self {
        DocumentResult {
            path: "(translated)".into(),
            doc: "-".into(),
            kind: "gateway".into(),
            namespace: namespace.to_string(),
            name: labels,
            valid: !findings.iter().any(Finding::is_error),
            findings,
        }
    }
}

fn to_result(path: &str, doc: String, report: Report) -> DocumentResult {
    let mut findings = report.findings;
    if report.unrecognized {
        findings.push(Finding::warning(
            "",
            format!(
                "{} {} is not a kind admitpilot validates; skipped",
                report.header.api_version, report.header.kind
            ),
        ));
    }
    DocumentResult {
        path: path.to_string(),
        doc,
        kind: report.header.kind,
        namespace: report.header.namespace,
        name: report.header.name,
        valid: !findings.iter().any(Finding::is_error),
        findings,
    }
}

fn print_text(results: &[DocumentResult]) {
    let (mut errors, mut warnings) = (0, 0);
    for result in results {
        for finding in &result.findings {
            if finding.is_error() {
                errors += 1;
            } else {
                warnings += 1;
            }
            println!(
                "{}:{}: {} {}/{}: {finding}",
                result.path, result.doc, result.kind, result.namespace, result.name
            );
        }
    }
    let invalid = results.iter().filter(|r| !r.valid).count();
    println!(
        "{} documents: {} valid, {invalid} invalid ({errors} errors, {warnings} warnings)",
        results.len(),
        results.len() - invalid
    );
}

/// Something to read documents from.
enum InputSource {
    Stdin,
    File(PathBuf),
}

impl InputSource {
    fn name(&self) -> String {
        match self {
            InputSource::Stdin => "-".to_string(),
            InputSource::File(path) => path.display().to_string(),
        }
    }

    fn read(&self) -> std::io::Result<String> {
        match self {
            InputSource::Stdin => {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text)?;
                Ok(text)
            }
            InputSource::File(path) => std::fs::read_to_string(path),
        }
    }
}

/// Expands the command-line paths into sources: folders recursively (sorted, the folder source's walker), files
/// as given.
fn expand_paths(paths: &[String], unreadable: &mut bool) -> Vec<InputSource> {
    let mut sources = Vec::new();
    for path in paths {
        if path == "-" {
            sources.push(InputSource::Stdin);
            continue;
        }
        let path = Path::new(path);
        if path.is_dir() {
            let listing = config_files(path);
            for (folder, error) in &listing.unreadable {
                eprintln!("{}: cannot read folder: {error}", folder.display());
                *unreadable = true;
            }
            sources.extend(listing.files.into_iter().map(InputSource::File));
        } else {
            sources.push(InputSource::File(path.to_path_buf()));
        }
    }
    sources
}
