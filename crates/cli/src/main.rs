//! `sanbench`: the one binary. Argument parsing, output and exit codes live here; everything
//! else is in the library crates. Exit codes: 0 ok, 1 the run failed, 2 bad usage or input
//! (always with one clear line on stderr).

#[macro_use]
mod stdout;

mod ana_cmd;
mod args;
mod bottleneck;
mod compare;
mod context;
mod crosscheck;
mod curve;
mod demo;
mod discover_cmd;
mod disruption_out;
mod error;
mod faults;
mod fio_cmd;
mod job;
mod lab_cmd;
mod launcher;
mod measure;
mod metrics;
mod monitoring;
mod monitors_cmd;
#[cfg(feature = "mpi")]
mod mpi;
mod outfile;
mod output;
mod partial;
mod placement;
mod precondition;
mod progress;
mod ranks;
mod run_cmd;
mod serve_cmd;
mod serve_metrics;
mod servers;
mod signals;
mod sinks;
mod store_cmd;
mod suite_cmd;
mod targets;
mod verify_cmd;
mod watch;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

/// clap's message up to its first blank line or usage block, on one line: the problem and
/// what it concerns ("the following required arguments were not provided: <TARGET>...").
fn one_line(msg: &str) -> String {
    let text: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect();
    if text.is_empty() {
        "bad arguments".into()
    } else {
        text.join(" ")
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                _ => 2,
            };
            if code == 0 || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                // `sanbench` or `sanbench serve` alone: the help is the answer (exit 2 all
                // the same: nothing ran).
                let _ = e.print();
            } else {
                // One line, as every bad input (the help is one flag away).
                eprintln!("{}", one_line(&e.to_string()));
            }
            return ExitCode::from(code);
        }
    };
    // Under a launcher: join the job (left, MPI finalized, when the context is dropped as main
    // returns); otherwise alone.
    let job = match job::select::for_command(&cli.command) {
        Ok(j) => j,
        Err(msg) => {
            eprintln!("sanbench: {msg}");
            return ExitCode::from(2);
        }
    };
    // The one context of this command (placement, watch, metrics, `mem:` targets, the job).
    let cx = &context::Context::new(job);
    let result = match cli.command {
        Command::Run(a) => run_cmd::run(cx, a),
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
    };
    let unwritten = stdout::finish();
    match result {
        Ok(()) => match unwritten {
            None => ExitCode::SUCCESS,
            Some(e) => {
                eprintln!("sanbench: writing to stdout: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            // One rank failed: end the whole job now (no rank waits for it), naming it.
            cx.job().abort(&e.message());
            eprintln!("sanbench: {}", e.message());
            ExitCode::from(e.code())
        }
    }
}
