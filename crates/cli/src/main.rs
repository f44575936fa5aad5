//! `sanbench`: the one binary. It parses the command line, picks the job (alone or a rank of
//! an MPI job), makes the context and calls the library (lib.rs), then maps the outcome to an
//! exit code. Exit codes: 0 ok, 1 the run failed, 2 bad usage or input
//! (always with one clear line on stderr).

use sanbench::args::Cli;
use sanbench_session::{context, job, stdout};

use std::process::ExitCode;

use clap::Parser;

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
    // `sanbench help TOPIC` (targets, spec, exit-codes): the long texts, before clap.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(r) = sanbench::help_cmd::topic(&args) {
        let unwritten = stdout::finish();
        return match (r, unwritten) {
            (Ok(()), None) => ExitCode::SUCCESS,
            (Ok(()), Some(e)) => {
                eprintln!("sanbench: writing to stdout: {e}");
                ExitCode::from(1)
            }
            (Err(e), _) => {
                eprintln!("sanbench: {}", e.message());
                ExitCode::from(e.code())
            }
        };
    }
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
    let job = match job::select::for_command(sanbench::job_kind(&cli.command)) {
        Ok(j) => j,
        Err(msg) => {
            eprintln!("sanbench: {msg}");
            return ExitCode::from(2);
        }
    };
    // The one context of this command (placement, watch, metrics, `mem:` targets, the job).
    let cx = &context::Context::new(job);
    let result = sanbench::dispatch(cx, cli.command);
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
