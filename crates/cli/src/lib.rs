//! sanbench as a library: every command the binary has, as a function over a
//! [`context::Context`] (the run's state: placement, watch, metrics, `mem:` targets, the job)
//! and its parsed arguments, so that tests and other programs call `run` and `compare`
//! without a subprocess. The binary (main.rs) parses the command line, picks the job, makes
//! the context, calls [`dispatch`] and maps the outcome to an exit code: 0 ok, 1 the run
//! failed, 2 bad usage or input (always with one clear line on stderr).

#[macro_use]
pub mod stdout;

pub mod ana_cmd;
pub mod args;
pub mod bottleneck;
pub mod compare;
pub mod context;
pub mod crosscheck;
pub mod curve;
pub mod demo;
pub mod discover_cmd;
pub mod disruption_out;
pub mod error;
pub mod eta;
pub mod faults;
pub mod findings_out;
pub mod fio_cmd;
pub mod fit;
pub mod help_cmd;
pub mod job;
pub mod lab_cmd;
pub mod launcher;
pub mod measure;
pub mod metrics;
pub mod monitoring;
pub mod monitors_cmd;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod outfile;
pub mod output;
pub mod partial;
pub mod placement;
pub mod precondition;
pub mod progress;
pub mod ranks;
pub mod replay_cmd;
pub mod run_cmd;
pub mod run_config;
pub mod run_table;
pub mod serve_cmd;
pub mod serve_metrics;
pub mod servers;
pub mod signals;
pub mod sinks;
pub mod store_cmd;
pub mod suite_cmd;
pub mod targets;
pub mod verify_cmd;
pub mod watch;

use crate::args::Command;
use crate::context::Context;
use crate::error::CliError;

/// Runs one command in `cx`.
pub fn dispatch(cx: &Context, command: Command) -> Result<(), CliError> {
    match command {
        Command::Run(a) => run_cmd::run(cx, a),
        Command::Replay(a) => replay_cmd::run(cx, a),
        Command::Suite { command } => suite_cmd::run(command),
        Command::Compare(a) => compare::run(cx, a),
        Command::Verify(a) => verify_cmd::run(cx, a),
        Command::Crosscheck(a) => crosscheck::run(cx, a),
        Command::Demo(a) => demo::run(cx, a),
        Command::Discover(a) => discover_cmd::run(a),
        Command::Ana(a) => ana_cmd::run(a),
        Command::Monitors(a) => monitors_cmd::run(a),
        Command::History(a) => store_cmd::history(a),
        Command::Report(a) => store_cmd::report(a),
        Command::Diff(a) => store_cmd::diff(a),
        Command::Serve { command } => serve_cmd::run(command),
        Command::Lab { command } => lab_cmd::run(command),
        Command::Completions { shell } => help_cmd::completions(shell),
        Command::Man(a) => help_cmd::man(a),
    }
}
