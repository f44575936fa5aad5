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
