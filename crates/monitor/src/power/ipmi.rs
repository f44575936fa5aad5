//! Power from the BMC (IPMI DCMI `Get Power Reading`) and from any command that prints watts.
//!
//! `ipmitool dcmi power reading` prints, among others:
//! ```text
//!     Instantaneous power reading:                   220 Watts
//!     Minimum during sampling period:                 90 Watts
//!     ...
//!     Power reading state is:                   activated
//! ```
//! Readings are whole watts averaged by the BMC over a window it chooses, so they are coarse;
//! the sampler integrates them like any other watt reading.

use super::{PowerSource, Reading};
use crate::cmd::{first_number, run, shell};
use crate::error::{MonitorError, Result};
use std::time::Duration;

/// The default command line; tests substitute a script.
pub fn default_ipmi_cmd() -> Vec<String> {
    ["ipmitool", "dcmi", "power", "reading"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Watts from `ipmitool dcmi power reading` output.
pub fn parse_dcmi(text: &str) -> std::result::Result<f64, String> {
    if let Some(l) = text.lines().find(|l| l.contains("Power reading state is")) {
        if l.contains("deactivated") {
            return Err("the BMC reports power reading as deactivated".into());
        }
    }
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Instantaneous power reading"))
        .ok_or("no \"Instantaneous power reading\" line")?;
    let (_, v) = line.split_once(':').ok_or("no value")?;
    first_number(v).ok_or_else(|| format!("no number in {:?}", line.trim()))
}

#[derive(Debug)]
pub struct IpmiSource {
    argv: Vec<String>,
    timeout: Duration,
}

impl IpmiSource {
    /// Runs the command once to check that a reading comes back.
    pub fn open(argv: Vec<String>) -> Result<IpmiSource> {
        let mut s = IpmiSource {
            argv,
            timeout: Duration::from_secs(5),
        };
        s.read()?;
        Ok(s)
    }
}

impl PowerSource for IpmiSource {
    fn name(&self) -> &str {
        "ipmi-dcmi"
    }

    fn read(&mut self) -> Result<Reading> {
        let out = run(&self.argv, self.timeout)?;
        parse_dcmi(&out)
            .map(Reading::Watts)
            .map_err(|reason| MonitorError::Command {
                cmd: self.argv.join(" "),
                reason,
            })
    }
}

/// `--power-cmd CMD`: a shell command whose output's first number is watts (PDUs, smart plugs,
/// anything scriptable).
#[derive(Debug)]
pub struct CommandSource {
    line: String,
    argv: Vec<String>,
    timeout: Duration,
}

impl CommandSource {
    pub fn open(line: &str) -> Result<CommandSource> {
        let mut s = CommandSource {
            line: line.to_string(),
            argv: shell(line),
            timeout: Duration::from_secs(5),
        };
        s.read()?;
        Ok(s)
    }
}

impl PowerSource for CommandSource {
    fn name(&self) -> &str {
        "command"
    }

    fn read(&mut self) -> Result<Reading> {
        let out = run(&self.argv, self.timeout)?;
        first_number(&out)
            .map(Reading::Watts)
            .ok_or_else(|| MonitorError::Command {
                cmd: self.line.clone(),
                reason: format!("no number in its output {:?}", out.trim()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DCMI: &str = "\n    Instantaneous power reading:                   220 Watts\n    \
        Minimum during sampling period:                 90 Watts\n    \
        Maximum during sampling period:                312 Watts\n    \
        Average power reading over sample period:      205 Watts\n    \
        IPMI timestamp:                           Sun Nov 22 08:00:00 2026\n    \
        Sampling period:                          00000001 Seconds.\n    \
        Power reading state is:                   activated\n";

    #[test]
    fn parses_dcmi() {
        assert_eq!(parse_dcmi(DCMI), Ok(220.0));
        assert!(parse_dcmi(&DCMI.replace("activated", "deactivated")).is_err());
        assert!(parse_dcmi("Error: no response").is_err());
    }

    #[test]
    fn fake_ipmitool_script() {
        let t = tempfile::tempdir().unwrap();
        let script = t.path().join("ipmitool");
        std::fs::write(
            &script,
            format!("#!/bin/sh\n[ \"$1 $2 $3\" = \"dcmi power reading\" ] || exit 1\ncat <<'X'\n{DCMI}X\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut argv = default_ipmi_cmd();
        argv[0] = script.display().to_string();
        let mut s = IpmiSource::open(argv).unwrap();
        assert_eq!(s.read().unwrap(), Reading::Watts(220.0));

        // A BMC that is not there: a clear error, no number.
        let e = IpmiSource::open(vec![
            "sh".into(),
            "-c".into(),
            "echo 'Could not open device at /dev/ipmi0' >&2; exit 1".into(),
        ])
        .unwrap_err();
        assert!(e.note().contains("/dev/ipmi0"), "{}", e.note());
    }

    #[test]
    fn power_command() {
        let mut s = CommandSource::open("echo 'power: 87.5 W (outlet 3)'").unwrap();
        assert_eq!(s.read().unwrap(), Reading::Watts(87.5));
        let e = CommandSource::open("echo n/a").unwrap_err();
        assert!(e.to_string().contains("no number"), "{e}");
    }
}
