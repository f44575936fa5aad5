//! `sanbench ana --control PATH [PORT=STATE ...]`: reads or sets the ANA states of a running
//! `sanbench serve nvme --control PATH` through its control socket
//! (`sanbench_nvme::target::control`), and prints every port's state after the change, one
//! line each (`INDEX ADDRESS STATE`), or a JSON array with `--json`.
//!
//! A bad PORT=STATE is refused by the argument parser, an unknown port by the target; both
//! are one line and exit 2. A socket that is not there is bad input too (exit 2); one that
//! does not answer is a failure (exit 1).

use serde_json::json;

use crate::args::AnaArgs;
use sanbench_nvme::target::control::{request, ControlError};
use sanbench_session::error::{usage, CliError};

pub fn run(a: AnaArgs) -> Result<(), CliError> {
    let mut line = String::from("ana");
    for s in &a.settings {
        line.push_str(&format!(" {}={}", s.port, s.state));
    }
    let ports = match request(&a.control, &line) {
        Ok(p) => p,
        Err(e @ ControlError::Refused(..)) => return Err(usage(e.to_string())),
        Err(ControlError::Io { path, source }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(usage(format!(
                "--control {}: no such socket (is `sanbench serve nvme --control` running?)",
                path.display()
            )))
        }
        Err(e) => return Err(CliError::Failed(e.into())),
    };
    if a.json {
        let list: Vec<_> = ports
            .iter()
            .map(|p| json!({"index": p.index, "addr": p.addr.to_string(), "state": p.state.name()}))
            .collect();
        outln!("{}", serde_json::Value::Array(list));
    } else {
        for p in &ports {
            outln!("{p}");
        }
    }
    Ok(())
}
