//! The disk behind a SCSI generic device, from sysfs: `/sys/class/scsi_generic/sgN/device` is
//! the SCSI device (`H:C:T:L`), whose `block/` directory names its disk (`sdX`) when sd has
//! bound it. Writes past the block layer must still respect what that disk holds, and the
//! manifest labels the transport by it.

use std::path::Path;

/// The block device found for a generic device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDev {
    /// `/dev/NAME`.
    pub dev: String,
    /// What one command may move: `queue/max_hw_sectors_kb` and `max_segments` pages.
    pub max_hw_bytes: Option<u32>,
}

/// The disk of the generic device `path` under `root` (`/` or a fixture tree), or `None`.
pub fn block_device_of(root: &Path, path: &Path) -> Option<BlockDev> {
    block_device_in(root, "scsi_generic", path)
}

/// The disk of `path`, a device of the sysfs class `class` (`scsi_generic`, or `bsg` whose
/// devices are named `H:C:T:L`, as the SCSI device is), or `None`.
pub fn block_device_in(root: &Path, class: &str, path: &Path) -> Option<BlockDev> {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let name = real.file_name()?.to_str()?.to_string();
    let dev = root
        .join("sys/class")
        .join(class)
        .join(&name)
        .join("device");
    let disk = std::fs::read_dir(dev.join("block"))
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .min()?;
    let queue = root.join("sys/block").join(&disk).join("queue");
    let num = |f: &str| {
        std::fs::read_to_string(queue.join(f))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    // SG_IO maps the request as it is, never split: it must fit the disk's sectors and
    // segments (a page a segment: the arena's pages need not be contiguous, and a write's
    // data may start mid-page, so one segment is kept for that).
    let hw = num("max_hw_sectors_kb").map(|kb| kb * 1024);
    let segs = num("max_segments").map(|n| n.saturating_sub(1).max(1) * 4096);
    let max = match (hw, segs) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Some(BlockDev {
        dev: format!("/dev/{disk}"),
        max_hw_bytes: max.map(|m| m.min(u64::from(u32::MAX)) as u32),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, p: &str, v: &str) {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    }

    #[test]
    fn finds_the_disk_and_its_command_limit() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("sys/class/scsi_generic/sg1/device/block/sdb")).unwrap();
        put(r, "sys/block/sdb/queue/max_hw_sectors_kb", "32767\n");
        put(r, "sys/block/sdb/queue/max_segments", "128\n");
        let b = block_device_of(r, Path::new("/dev/sg1")).unwrap();
        assert_eq!(
            (b.dev.as_str(), b.max_hw_bytes),
            ("/dev/sdb", Some(127 * 4096))
        );
        // The same disk through its bsg device, named as the SCSI device.
        std::fs::create_dir_all(r.join("sys/class/bsg/1:0:0:0/device/block/sdb")).unwrap();
        let b = block_device_in(r, "bsg", Path::new("/dev/bsg/1:0:0:0")).unwrap();
        assert_eq!(b.dev, "/dev/sdb");
        // A generic device without a disk (a tape, an enclosure, sd not bound).
        std::fs::create_dir_all(r.join("sys/class/scsi_generic/sg2/device")).unwrap();
        assert_eq!(block_device_of(r, Path::new("/dev/sg2")), None);
    }
}
