//! `admitpilot validate`: reads files, folders or stdin, validates every document, prints text or JSON.

use std::process::ExitCode;

use clap::Args;

/// Arguments of `admitpilot validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Files, folders (searched recursively for *.yaml, *.yml, *.json) or `-` for stdin.
    #[arg(required = true)]
    paths: Vec<String>,
}

/// Validates the documents and prints findings (implementation pending).
pub fn run(_args: ValidateArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
