//! The command line (`validate`, `analyze`, `render --status`) and the Helm chart as rendered.
//! One test binary for the area (linked once); each module is one former test file.

mod chart;
mod cli_analyze;
mod cli_render_status;
mod cli_validate;
