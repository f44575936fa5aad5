//! sanbench as a library: every command the binary has, as a function over a
//! [`context::Context`] (the run's state: placement, watch, metrics, `mem:` targets, the job)
//! and its parsed arguments, so that tests and other programs call `run` and `compare`
//! without a subprocess. The binary (main.rs) parses the command line, picks the job, makes
//! the context, calls [`dispatch`] and maps the outcome to an exit code: 0 ok, 1 the run
//! failed, 2 bad usage or input (always with one clear line on stderr).

#[macro_use]
extern crate sanbench_session;

pub mod ana_cmd;
pub mod args;
pub mod discover_cmd;
pub mod disruption_out;
pub mod findings_out;
pub mod fio_cmd;
pub mod from_args;
pub mod help_cmd;
pub mod lab_cmd;
pub mod monitors_cmd;
pub mod output;
pub mod render;
pub mod replay_cmd;
pub mod run_table;
pub mod serve_cmd;
pub mod store_cmd;
pub mod suite_cmd;

use crate::args::Command;
use sanbench_session::context::Context;
use sanbench_session::error::CliError;
use sanbench_session::{compare, crosscheck, demo, job, run_cmd, verify_cmd};

/// What `command` is to the choice of job ([`job::select::for_command`]).
pub fn job_kind(command: &Command) -> job::JobKind {
    use job::JobKind;
    match command {
        Command::Run(_) => JobKind::Run,
        Command::Compare(c) if c.curve.is_none() => JobKind::Compare,
        Command::Compare(_) => JobKind::CompareCurve,
        _ => JobKind::Other,
    }
}

/// Runs one command in `cx`.
pub fn dispatch(cx: &Context, command: Command) -> Result<(), CliError> {
    match command {
        Command::Run(a) => {
            let c = from_args::run::run(a)?;
            match run_cmd::execute(cx, &c)? {
                Some(doc) => render::run(&c, &doc),
                None => Ok(()),
            }
        }
        Command::Replay(a) => replay_cmd::run(cx, a),
        Command::Suite { command } => suite_cmd::run(command),
        Command::Compare(a) => {
            let c = from_args::compare::compare(a)?;
            render::compared(compare::execute(cx, &c)?, c.quiet)
        }
        Command::Verify(a) => verify_cmd::execute(cx, &from_args::verify::verify(a)?)?.outcome(),
        Command::Crosscheck(a) => {
            crosscheck::execute(cx, &from_args::crosscheck::crosscheck(a)?)?.outcome()
        }
        Command::Demo(a) => {
            let c = from_args::demo::demo(a);
            render::compared(demo::execute(cx, &c)?, c.quiet)
        }
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
