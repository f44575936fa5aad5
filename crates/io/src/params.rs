//! A target's engine-specific facts (`TargetInfo::params`, `Queue::stats`): the result
//! document's one extension map (open flags, negotiated protocol parameters, which completion
//! path ran), and the keys of it that other crates read, named once here.

use std::collections::BTreeMap;

/// Engine-specific facts by name, as the result records them. Values are JSON because each
/// engine names its own; a fact another crate reads gets a key constant below.
pub type Params = BTreeMap<String, serde_json::Value>;

/// The `TargetInfo::params` key under which an engine names the logical unit it reached
/// (iSCSI: the VPD 0x83 designator; NVMe: NSID and namespace identifiers; NBD: export name
/// and size). Paths are one target only when it is equal.
pub const LU_ID: &str = "lu_id";
/// `true` when a block the target trimmed reads back zeros (iSCSI LBPRZ over whole unmap
/// granules, NVMe DLFEAT): what `--verify` expects after a trim.
pub const TRIM_READS_ZEROS: &str = "trim_reads_zeros";

/// The queue statistics' key of the last failure the device reported, in its own terms (an
/// NVMe status, a SCSI status with decoded sense): a failed run's error line quotes it.
pub const LAST_FAILURE: &str = "last_failure";

/// The `TargetInfo::params` key an engine sets to `false` when the target does not allow
/// I/O over several connections at once (NBD without CAN_MULTI_CONN).
pub const MULTI_CONN: &str = "can_multi_conn";

/// The `TargetInfo::params` key under which a multipath target lists its paths' URIs (the
/// run sizes each stream's per-path statistics from it before the clock starts).
pub const PATHS: &str = "multipath.paths";

/// What a passthrough queue's commands came to, as its statistics name it: `failed_commands`
/// and the [`LAST_FAILURE`] line, and the trims and write-zeroes done with the commands sent
/// for them (`trims`/`trim_commands`, `write_zeroes`/`write_zeroes_commands`, present once
/// any ran).
#[derive(Clone, Debug, Default)]
pub struct CommandTally {
    pub failed_commands: u64,
    pub last_failure: Option<String>,
    pub trims: u64,
    pub trim_commands: u64,
    pub write_zeroes: u64,
    pub write_zeroes_commands: u64,
}

impl CommandTally {
    /// A command failed, as `why` says.
    pub fn failed(&mut self, why: String) {
        self.failed_commands += 1;
        self.last_failure = Some(why);
    }

    /// Adds the tally to a queue's statistics.
    pub fn record(&self, m: &mut Params) {
        m.insert("failed_commands".into(), self.failed_commands.into());
        if self.trims > 0 {
            m.insert("trims".into(), self.trims.into());
            m.insert("trim_commands".into(), self.trim_commands.into());
        }
        if self.write_zeroes > 0 {
            m.insert("write_zeroes".into(), self.write_zeroes.into());
            m.insert(
                "write_zeroes_commands".into(),
                self.write_zeroes_commands.into(),
            );
        }
        if let Some(s) = &self.last_failure {
            m.insert(LAST_FAILURE.into(), s.clone().into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_names_only_what_ran() {
        let mut t = CommandTally::default();
        let mut m = Params::new();
        t.record(&mut m);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["failed_commands"]);
        t.trims = 8;
        t.trim_commands = 1;
        t.failed("MEDIUM ERROR".into());
        t.failed("NOT READY".into());
        let mut m = Params::new();
        t.record(&mut m);
        assert_eq!(m["failed_commands"], 2);
        assert_eq!(m["trims"], 8);
        assert_eq!(m["trim_commands"], 1);
        assert_eq!(m[LAST_FAILURE], "NOT READY", "the last one is kept");
        assert!(!m.contains_key("write_zeroes"));
    }
}
