//! Opens passthrough targets (`nvme-ng:`, `sg:`, `bsg:`) through the crate of their command set, and
//! applies the block devices' safety rules to the device underneath: commands sent past the
//! block layer destroy a filesystem just as well, so a workload that writes is refused when
//! the namespace's or disk's block device is mounted, claimed, or holds a filesystem or
//! partition table (crates/engine/src/safety.rs), unless `--force`; and when no block device
//! can be found to check, it is refused too, saying so.

use std::path::Path;
use std::sync::Arc;

use sanbench_engine::file::FileOptions;
use sanbench_engine::{EngineError, Target};
use sanbench_units::target::Passthrough;

use crate::error::CliError;

/// The parameter naming the block device behind a passthrough target (`/dev/nvme0n1`,
/// `/dev/sdb`): the safety check reads it, and the manifest labels its transport.
pub const BLOCK_DEVICE: &str = "block_device";

/// Opens `path` as a `kind` passthrough target.
pub fn open(
    uri: &str,
    kind: Passthrough,
    path: &Path,
    opts: &FileOptions,
) -> Result<Arc<dyn Target>, CliError> {
    let t: Arc<dyn Target> = match kind {
        Passthrough::NvmeNg => Arc::new(sanbench_nvme::ng::NgTarget::open(uri, path, opts.writes)?),
        Passthrough::Sg => Arc::new(sanbench_iscsi::sg::SgTarget::open(uri, path, opts.writes)?),
        Passthrough::Bsg => Arc::new(sanbench_iscsi::sg::SgTarget::open_as(
            sanbench_iscsi::sg::Interface::Bsg,
            uri,
            path,
            opts.writes,
        )?),
    };
    if opts.writes && !opts.force {
        check(
            path,
            t.info().params.get(BLOCK_DEVICE).and_then(|v| v.as_str()),
        )?;
    }
    Ok(t)
}

/// Refuses writes through `path` when its block device `block` holds data, or when there is
/// no block device to tell.
fn check(path: &Path, block: Option<&str>) -> Result<(), EngineError> {
    let shown = path.display();
    let Some(block) = block else {
        return Err(EngineError::Refused(format!(
            "refusing to write through {shown}: no block device of it was found in sysfs, so \
             sanbench cannot tell whether it holds a filesystem (use --force to write anyway)"
        )));
    };
    sanbench_engine::safety::check_writable(Path::new(block)).map_err(|e| match e {
        EngineError::Refused(why) => EngineError::Refused(format!(
            "{shown} is the passthrough device of {block}: {why}"
        )),
        e => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_block_device_to_check_is_a_refusal() {
        let e = check(Path::new("/dev/ng9n9"), None).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert!(e.to_string().contains("--force"), "{e}");
    }

    #[test]
    fn a_block_device_holding_a_filesystem_refuses() {
        // A regular file standing in for the block device passes (safety checks devices
        // only); the refusal path is tested in the guest (tests/passthrough_guest.rs).
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("b");
        std::fs::write(&f, [0u8; 4096]).unwrap();
        check(Path::new("/dev/ng9n9"), Some(f.to_str().unwrap())).unwrap();
        let e = check(Path::new("/dev/ng9n9"), Some("/nonexistent/dev")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/dev"), "{e}");
    }
}
