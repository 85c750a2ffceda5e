//! Command-line interface: `serve`, `validate`, `analyze` and `render`. Takes argv, dispatches to the library, returns the exit code.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Validating admission webhook and xDS control plane for Higress and Istio gateways.
#[derive(Debug, Parser)]
#[command(name = "admitpilot", version, about)]
pub struct Cli {
    /// Log line format (level from RUST_LOG, default info).
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTPS admission webhook, the config sources, the xDS server and the admin server.
    Serve(Box<serve::ServeArgs>),
    /// Validate Istio/Higress config files offline (exit 0 valid, 1 invalid, 2 usage or unreadable input).
    Validate(validate::ValidateArgs),
    /// Validate config files and check them together: broken references (Istio analyzer codes) and what gateways
    /// would reject (exit 0 clean, 1 errors, 2 usage or unreadable input).
    Analyze(analyze::AnalyzeArgs),
    /// Print the Envoy resources a gateway with the given labels gets from a config folder.
    Render(render::RenderArgs),
}

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    logging::init(cli.log_format);
    match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Validate(args) => validate::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Render(args) => render::run(args),
    }
}

mod analyze;
mod args;
mod logging;
mod render;
mod serve;
mod validate;
