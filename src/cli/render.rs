//! `admitpilot render`: loads a config folder (with the folder source's loader and validation), translates it
//! for one gateway (labels + namespace) and prints the Envoy resources as YAML or JSON; with `--status`, prints
//! the status admitpilot gives the folder's Gateway API (and, with `--istio-status`, Istio) objects instead.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::refusal::Refusal;
use admitpilot::model::Snapshot;
use admitpilot::source::folder::Folder;
use admitpilot::source::{AdmitOptions, SourceMetrics, DEFAULT_NAMESPACE};
use admitpilot::status::{from_reports, StatusScope};
use admitpilot::translate::dangling::LEFT_OUT_MESSAGE;
use admitpilot::translate::{output, Options, Proxy, Translator};

use super::args::{parse_labels, IngressArgs};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// YAML (default).
    Yaml,
    /// JSON.
    Json,
}

/// Arguments of `admitpilot render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Folder of YAML/JSON config files (searched recursively), as given to `serve --config-dir`.
    #[arg(long)]
    config_dir: PathBuf,
    /// Gateway pod labels, `k=v,k2=v2` (Gateways select proxies by these, Ingresses by
    /// --ingress-gateway-selector).
    #[arg(long, default_value = "higress=higress-system-higress-gateway", value_parser = parse_labels)]
    labels: BTreeMap<String, String>,
    /// Namespace of the gateway pod (credential Secrets are read from it).
    #[arg(long, default_value = "higress-system")]
    namespace: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
    /// Print private keys of SDS secrets instead of `[redacted]`.
    #[arg(long)]
    show_secrets: bool,
    /// Print the status of the Gateway API objects of --gateway-controller-name's classes (GatewayClass, Gateway
    /// with its listeners, HTTPRoute parents) instead of Envoy resources. No gateway runs here, so Gateways are
    /// Programmed=False, reason Pending.
    #[arg(long)]
    status: bool,
    /// With --status, also the status of Istio objects as `serve --istio-status` writes it (validationMessages
    /// with Istio's analyzer codes; Reconciled=False, as no gateway runs here).
    #[arg(long)]
    istio_status: bool,
    /// The GatewayClass controllerName whose objects --status reports on.
    #[arg(long, default_value = admitpilot::model::gateway_api::DEFAULT_CONTROLLER_NAME)]
    gateway_controller_name: String,
    #[command(flatten)]
    ingress: IngressArgs,
}

/// Loads, translates and prints.
pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let proxy = Proxy {
        namespace: args.namespace.clone(),
        labels: args.labels.clone(),
        ..Default::default()
    };
    let root = args
        .config_dir
        .canonicalize()
        .with_context(|| format!("--config-dir {}", args.config_dir.display()))?;
    if !root.is_dir() {
        bail!("--config-dir {} is not a directory", root.display());
    }
    let options = AdmitOptions {
        decode: DecodeOptions::default(),
        default_namespace: DEFAULT_NAMESPACE.into(),
    };
    let mut folder = Folder::new(root, options, SourceMetrics::default());
    folder.rescan();
    let refusals: Vec<_> = folder.refusals().into_values().collect();
    let snapshot = Snapshot {
        version: 1,
        objects: folder
            .objects()
            .into_iter()
            .map(|object| (object.key(), Arc::clone(&object)))
            .collect(),
    };
    if args.status {
        return print_status(&snapshot, &refusals, &args);
    }
    let mut translator = Translator::new(Options {
        ingress: args.ingress.options(),
        ..Options::default()
    });
    translator.translate(&snapshot, &proxy);
    let resources = translator.into_resources();
    for item in &resources.left_out {
        tracing::warn!(resource = %item.resource, feature = %item.feature, missing_clusters = ?item.missing,
            effect = %item.effect, blame = ?item.blame, "{LEFT_OUT_MESSAGE}");
    }
    let json = output::to_json(&resources, !args.show_secrets)
        .context("converting the resources to JSON")?;
    let text = match args.output {
        Format::Json => serde_json::to_string_pretty(&json)? + "\n",
        Format::Yaml => serde_yaml_ng::to_string(&json)?,
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Prints each object's status as `{kind, namespace, name, status}`.
fn print_status(
    snapshot: &Snapshot,
    refusals: &[Refusal],
    args: &RenderArgs,
) -> anyhow::Result<ExitCode> {
    let now = admitpilot::status_writer::now();
    let scope = StatusScope {
        address_pools: Default::default(),
        controller: args.gateway_controller_name.clone(),
        gateway_api: true,
        istio_domain_suffix: args
            .istio_status
            .then(|| admitpilot::translate::Options::default().domain_suffix),
    };
    // No replica reports: nothing has acknowledged this configuration.
    let updates = from_reports(
        snapshot,
        &scope,
        (&[], refusals, &Default::default()),
        None,
        &now,
    );
    let json: Vec<serde_json::Value> = updates
        .into_iter()
        .map(|update| {
            serde_json::json!({
                "kind": update.key.kind.info().kind,
                "namespace": update.key.namespace,
                "name": update.key.name,
                "status": update.status,
            })
        })
        .collect();
    let text = match args.output {
        Format::Json => serde_json::to_string_pretty(&json)? + "\n",
        Format::Yaml => serde_yaml_ng::to_string(&json)?,
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
