//! `sanbench verify ARGS` as a [`VerifyConfig`].

use super::run::{file_options, io_timeout};
use crate::args::VerifyArgs;
use sanbench_session::error::CliError;
use sanbench_session::verify_cmd::VerifyConfig;

/// The configuration of `sanbench verify ARGS`: targets opened read-only.
pub fn verify(a: VerifyArgs) -> Result<VerifyConfig, CliError> {
    Ok(VerifyConfig {
        run_id: a
            .run_id
            .as_deref()
            .map(VerifyConfig::parse_run_id)
            .transpose()?,
        span: a.span.map(|b| b.0),
        bs: a.bs.0,
        qd: a.qd,
        files: file_options(&a.engine, None, false)?,
        io_timeout: io_timeout(&a.engine)?,
        verify_state: a.verify_state,
        json: a.json,
        quiet: a.quiet,
        targets: a.targets,
    })
}
