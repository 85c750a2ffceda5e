//! `admitpilot analyze`: takes files and folders, validates every document as `validate` does, then checks the
//! valid objects together (like `istioctl analyze`): what each names that the others do not provide (Istio's
//! analyzer codes, see [`admitpilot::validate::references`]) and what every gateway a Gateway selects would reject
//! when loading the translated config. Prints one line per finding (or JSON); exit 0 clean, 1 errors (or warnings
//! with `--fail-on warning`), 2 unreadable input.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::{Finding, Snapshot};
use admitpilot::translate::effect::{check_changed, describe_labels, gateway_proxies};
use admitpilot::translate::{GatewayResources, Options, Translator};
use admitpilot::validate::references::{check_references, HostClaims};

use super::args::IngressArgs;
use super::validate::{exit_code, load, print, DocumentResult, Output};

/// Arguments of `admitpilot analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Files and folders (searched recursively for *.yaml, *.yml, *.json; entries starting with `.` skipped), or
    /// `-` for stdin; analyzed as one config.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Namespace of documents that name none (as `istioctl validate --namespace` gives it them).
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// Lowest severity that makes the exit code 1.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,
    /// Namespace of the higress-config ConfigMap (other ConfigMaps are skipped).
    #[arg(long, default_value = "higress-system")]
    higress_namespace: String,

    /// Namespace of Istio's mesh config, the ConfigMap `istio` (its `extensionProviders` serve CUSTOM
    /// AuthorizationPolicies); other ConfigMaps there are not admitpilot's business.
    #[arg(long, default_value = "istio-system")]
    istio_namespace: String,

    #[command(flatten)]
    ingress: IngressArgs,
}

/// Which findings fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FailOn {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warning,
}

/// Validates, analyzes the valid objects together, prints the findings.
pub fn run(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let options = DecodeOptions {
        higress_namespace: args.higress_namespace.clone(),
        mesh_namespace: args.istio_namespace.clone(),
        ..DecodeOptions::default()
    };
    let mut loaded = load(&args.paths, &options, &args.namespace);
    let mut config = Snapshot {
        version: 1,
        ..Snapshot::default()
    };
    for object in loaded.objects.iter().flatten() {
        config
            .objects
            .insert(object.key(), Arc::new(object.clone()));
    }
    let translate_options = Options {
        ingress: args.ingress.options(),
        ..Options::default()
    };
    let claims = HostClaims::new(&config, &translate_options.domain_suffix);
    for (result, object) in loaded.results.iter_mut().zip(&loaded.objects) {
        let Some(object) = object
            .as_ref()
            .filter(|_| result.findings.iter().all(|f| !f.is_error()))
        else {
            continue;
        };
        for reference in check_references(
            &config,
            object,
            &translate_options.domain_suffix,
            Some(&claims),
        ) {
            result.findings.push(Finding::warning(
                reference.field,
                format!("[{}] {}", reference.code, reference.message),
            ));
        }
    }
    for proxy in gateway_proxies(&config, &translate_options) {
        let mut translator = Translator::new(translate_options.clone());
        translator.translate(&config, &proxy);
        let resources = translator.into_resources();
        let findings: Vec<Finding> = check_changed(&GatewayResources::default(), &resources)
            .into_iter()
            .map(|rejection| {
                Finding::error(
                    format!("{} {}", rejection.resource, rejection.path)
                        .trim_end()
                        .to_string(),
                    format!("Envoy would reject it: {}", rejection.message),
                )
            })
            .collect();
        if !findings.is_empty() {
            loaded.results.push(DocumentResult::gateway(
                &proxy.namespace,
                describe_labels(&proxy),
                findings,
            ));
        }
    }
    print(&loaded.results, args.output)?;
    Ok(exit_code(&loaded, args.fail_on == FailOn::Warning))
}
