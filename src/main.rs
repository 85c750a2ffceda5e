//! The `admitpilot` binary: parses the command line and hands off to the library.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("admitpilot: {error:#}");
            ExitCode::from(2)
        }
    }
}
