//! `sanbench crosscheck ARGS` as a [`CrosscheckConfig`].

use crate::args::CrosscheckArgs;
use sanbench_session::crosscheck::CrosscheckConfig;
use sanbench_session::error::{usage, CliError};

/// The configuration of `sanbench crosscheck ARGS`: the run as `sanbench run` would build it,
/// without the host monitor (I/O figures only: no idle baseline before every run).
pub fn crosscheck(mut a: CrosscheckArgs) -> Result<CrosscheckConfig, CliError> {
    a.run.monitor.no_monitor = true;
    if !a.run.faults.is_empty() {
        // Said before the schedule is read: whatever it holds, fio could not run it.
        return Err(usage(
            "crosscheck takes no --fault (fio's runs could not have them)",
        ));
    }
    let c = CrosscheckConfig {
        run: super::run::run(a.run)?,
        repeat: a.repeat,
        max_repeat: a.max_repeat,
        budget: a.budget.map(|b| b.0),
        tolerance: a.tolerance,
        fio_bin: a.fio_bin,
        db: a.db,
        no_store: a.no_store,
    };
    c.check()?;
    Ok(c)
}
