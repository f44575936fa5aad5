//! The block device of the namespace behind a generic device, from sysfs: the writes that
//! bypass the block layer must still respect what the block device holds (a mounted
//! filesystem, a partition table), and the manifest labels the transport underneath by it.
//!
//! `/sys/class/nvme-generic/ngXnY/device` is the controller (`nvmeX`); its directory holds the
//! namespace's disk: `nvmeXnZ` without native multipath, or the hidden path `nvmeScXnZ` with
//! it, whose head (the block device in use) is `nvmeSnZ`. A disk is this namespace's when its
//! `nsid` attribute says so.

use std::path::{Path, PathBuf};

/// The block device found for a generic device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDev {
    /// `/dev/NAME`.
    pub dev: String,
    /// What the kernel lets one passthrough command move ([`max_command_bytes`]).
    pub max_hw_bytes: Option<u32>,
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// `nvme0c1n2` → `nvme0n2` (the multipath head of a hidden path disk).
fn head_of(name: &str) -> Option<String> {
    let rest = name.strip_prefix("nvme")?;
    let (subsys, rest) = rest.split_once('c')?;
    let (_, ns) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(subsys) && digits(ns)).then(|| format!("nvme{subsys}n{ns}"))
}

/// The block device of namespace `nsid` behind the generic device `path`, under `root` (`/`,
/// or a fixture tree); `None` when sysfs shows none.
pub fn block_device_of(root: &Path, path: &Path, nsid: u32) -> Option<BlockDev> {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let name = real.file_name()?.to_str()?.to_string();
    let sys = |p: &str| root.join(p.trim_start_matches('/'));
    let ctrl: PathBuf = sys("/sys/class/nvme-generic").join(&name).join("device");
    let mut found = None;
    for e in std::fs::read_dir(&ctrl).ok()?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if !n.starts_with("nvme") || !n.contains('n') {
            continue;
        }
        let ns = read(&e.path().join("nsid")).and_then(|s| s.parse::<u32>().ok());
        if ns != Some(nsid) {
            continue;
        }
        found = Some(head_of(&n).unwrap_or(n));
        break;
    }
    let disk = found?;
    Some(BlockDev {
        dev: format!("/dev/{disk}"),
        max_hw_bytes: max_command_bytes(&sys("/sys/block").join(&disk).join("queue")),
    })
}

/// The most one passthrough command may move, from a disk's `queue/` attributes: the request
/// is mapped as it is, never split, so it must fit both `max_hw_sectors_kb` and
/// `max_segments` pages (a 4 KiB page a segment: the arena's pages need not be contiguous,
/// and a write's data may start mid-page in the stamping pool, so one segment is kept for
/// that); QEMU's NVMe controller has 512 KiB of MDTS but 127 segments, and a 508 KiB write
/// from mid-page fails with EINVAL.
pub fn max_command_bytes(queue: &Path) -> Option<u32> {
    let num = |f: &str| read(&queue.join(f)).and_then(|s| s.parse::<u64>().ok());
    let hw = num("max_hw_sectors_kb").map(|kb| kb * 1024);
    let segs = num("max_segments").map(|n| n.saturating_sub(1).max(1) * 4096);
    let m = match (hw, segs) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    Some(m.min(u64::from(u32::MAX)) as u32)
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
    fn heads_of_hidden_paths() {
        assert_eq!(head_of("nvme0c1n2").as_deref(), Some("nvme0n2"));
        assert_eq!(head_of("nvme0n2"), None);
        assert_eq!(head_of("nvmec1n"), None);
    }

    #[test]
    fn finds_the_namespace_disk_with_and_without_multipath() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        // ng0n1 on controller nvme0, which has namespaces 1 and 2 (the second as a hidden
        // path of subsystem 3).
        put(r, "sys/class/nvme-generic/ng0n1/device/nvme0n1/nsid", "1\n");
        put(
            r,
            "sys/class/nvme-generic/ng0n1/device/nvme3c0n2/nsid",
            "2\n",
        );
        put(r, "sys/block/nvme0n1/queue/max_hw_sectors_kb", "512\n");
        let b = block_device_of(r, Path::new("/dev/ng0n1"), 1).unwrap();
        assert_eq!(b.dev, "/dev/nvme0n1");
        assert_eq!(b.max_hw_bytes, Some(512 * 1024));
        // QEMU's controller: 512 KiB, but 127 segments.
        put(r, "sys/block/nvme0n1/queue/max_segments", "127\n");
        let b = block_device_of(r, Path::new("/dev/ng0n1"), 1).unwrap();
        assert_eq!(b.max_hw_bytes, Some(126 * 4096));
        let b = block_device_of(r, Path::new("/dev/ng0n1"), 2).unwrap();
        assert_eq!((b.dev.as_str(), b.max_hw_bytes), ("/dev/nvme3n2", None));
        assert_eq!(block_device_of(r, Path::new("/dev/ng0n1"), 9), None);
        assert_eq!(block_device_of(r, Path::new("/dev/ng7n1"), 1), None);
    }
}
