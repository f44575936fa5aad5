//! `sanbench serve nbd|iscsi|nvme` (the session's serve.rs): the built-in RAM-disk targets, in the foreground until Ctrl-C or
//! SIGTERM, then a clean exit with a summary line that ends with the bytes the store holds
//! ("allocated N bytes"): scripts precondition a server, stop it and read that figure.
//!
//! The ready line (the URI) is the only thing a server writes to stdout, through `outln!`
//! like every command: it is informational, so a reader that has gone away (a closed pipe)
//! does not stop the server. It keeps serving until Ctrl-C or SIGTERM and then
//! exits 0 as it would have (tests/closed_pipe.rs).

use sanbench_session::error::CliError;

use crate::args::ServeCommand;

pub fn run(cmd: ServeCommand) -> Result<(), CliError> {
    let c = crate::from_args::serve::serve(cmd)?;
    // Before the ready line: whoever reads it may send SIGINT at once.
    let stop = sanbench_session::signals::stop_flag();
    let stopped = sanbench_session::serve::execute(c, stop, &mut |line| outln!("{line}"))?;
    eprintln!("{stopped}");
    Ok(())
}
