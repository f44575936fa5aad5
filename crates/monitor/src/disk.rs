//! Block-device counters from `/proc/diskstats` (docs/MEASURE.md, "Bottleneck"): utilization
//! and mean queue over a window, as iostat computes `%util` and `aqu-sz`.
//!
//! Each line is `major minor name` and then the kernel's counters
//! (Documentation/admin-guide/iostats.rst): reads completed, merged, sectors, ms; writes
//! completed, merged, sectors, ms; I/Os in progress; **ms doing I/O** (field 10, `io_ticks`:
//! wall time with at least one I/O in flight); **weighted ms doing I/O** (field 11,
//! `time_in_queue`: the sum over I/Os of their time in flight); then discards and flushes on
//! newer kernels. Over a window, `Δio_ticks / window` is the utilization and
//! `Δtime_in_queue / window` the mean number in flight. Utilization near 100 % says the device
//! always had work, not that it could do no more: a device that serves many I/Os in parallel
//! (NVMe, an array) can be at 100 % and still have headroom, which is why the queue goes
//! beside it.

use crate::error::{MonitorError, Result};
use crate::fsutil::{read_into, under};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Cumulative counters of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCounters {
    /// Reads and writes completed.
    pub ios: u64,
    /// Milliseconds with at least one I/O in flight.
    pub io_ticks_ms: u64,
    /// Milliseconds of I/O in flight, summed over I/Os.
    pub time_in_queue_ms: u64,
}

/// One device's line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskLine {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub counters: DiskCounters,
}

/// One reading of `/proc/diskstats`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskSnapshot {
    pub disks: Vec<DiskLine>,
}

/// Parses `/proc/diskstats`. Lines need at least the 14 fields every kernel since 2.6 writes.
pub fn parse_diskstats(text: &str, out: &mut DiskSnapshot) -> std::result::Result<(), String> {
    out.disks.clear();
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 14 {
            return Err(format!("short line ({} fields): {line:?}", f.len()));
        }
        let num = |i: usize| -> std::result::Result<u64, String> {
            f[i].parse::<u64>()
                .map_err(|_| format!("bad counter {:?} for {}", f[i], f[2]))
        };
        let id = |i: usize| -> std::result::Result<u32, String> {
            f[i].parse::<u32>()
                .map_err(|_| format!("bad device number {:?} in {line:?}", f[i]))
        };
        out.disks.push(DiskLine {
            major: id(0)?,
            minor: id(1)?,
            name: f[2].to_string(),
            counters: DiskCounters {
                ios: num(3)?.saturating_add(num(7)?),
                io_ticks_ms: num(12)?,
                time_in_queue_ms: num(13)?,
            },
        });
    }
    Ok(())
}

/// Reads `/proc/diskstats` under a root with a reused buffer.
#[derive(Debug)]
pub struct DiskReader {
    path: PathBuf,
    buf: String,
}

impl DiskReader {
    pub fn new(root: &Path) -> Self {
        DiskReader {
            path: under(root, "/proc/diskstats"),
            buf: String::with_capacity(4096),
        }
    }

    pub fn snapshot(&mut self) -> Result<DiskSnapshot> {
        read_into(&self.path, &mut self.buf)?;
        let mut s = DiskSnapshot::default();
        parse_diskstats(&self.buf, &mut s).map_err(|r| MonitorError::parse(&self.path, r))?;
        Ok(s)
    }
}

/// One device over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskUsage {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    /// I/Os completed in the window.
    pub ios: u64,
    /// Share of the window with I/O in flight, percent (iostat's %util).
    pub util_pct: f64,
    /// Mean I/Os in flight (iostat's aqu-sz).
    pub avg_queue: f64,
}

/// Every device that did I/O in the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskReport {
    pub disks: Vec<DiskUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl DiskReport {
    /// The devices present at both ends that completed I/O or were busy in between.
    pub fn between(a: &DiskSnapshot, b: &DiskSnapshot, window_s: f64) -> DiskReport {
        let ms = (window_s * 1000.0).max(1e-9);
        let disks = b
            .disks
            .iter()
            .filter_map(|d| {
                let e = a
                    .disks
                    .iter()
                    .find(|x| x.major == d.major && x.minor == d.minor)?;
                let (c, p) = (&d.counters, &e.counters);
                let ios = c.ios.saturating_sub(p.ios);
                let ticks = c.io_ticks_ms.saturating_sub(p.io_ticks_ms);
                if ios == 0 && ticks == 0 {
                    return None;
                }
                Some(DiskUsage {
                    name: d.name.clone(),
                    major: d.major,
                    minor: d.minor,
                    ios,
                    util_pct: (ticks as f64 / ms * 100.0).min(100.0),
                    avg_queue: c.time_in_queue_ms.saturating_sub(p.time_in_queue_ms) as f64 / ms,
                })
            })
            .collect();
        DiskReport { disks, note: None }
    }

    /// The device with this number, if it did I/O in the window.
    pub fn device(&self, major: u32, minor: u32) -> Option<&DiskUsage> {
        self.disks
            .iter()
            .find(|d| d.major == major && d.minor == minor)
    }
}

/// The block device a path's I/O reaches, as `(major, minor)`: the device itself for a block
/// device node, the device holding the file system otherwise. `None` for file systems without
/// one (tmpfs, overlay, NFS: major 0) and paths that cannot be read.
pub fn device_of(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() {
        m.rdev()
    } else {
        m.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    (major != 0).then_some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "   7       0 loop0 41346 0 347104 2058 49846 0 398576 1063 0 2196 3197 0 0 0 0 26 75\n\
                     254       0 vda 2110511 44418 78529162 2907393 303928 275873 268944032 1697344 0 251840 4677327 174689 44 191643968 67079 31778 5510\n\
                     254       1 vda1 10 0 80 5 0 0 0 0 0 5 5\n";
    // Ten seconds later: vda 9.5 s busy with 30,000 ms of I/O in flight; loop0 idle.
    const B: &str = "   7       0 loop0 41346 0 347104 2058 49846 0 398576 1063 0 2196 3197 0 0 0 0 26 75\n\
                     254       0 vda 2130511 44418 78529162 2907393 313928 275873 268944032 1697344 31 261340 4707327 174689 44 191643968 67079 31778 5510\n\
                     254       1 vda1 10 0 80 5 0 0 0 0 0 5 5\n";

    #[test]
    fn util_and_queue_over_a_window() {
        let (mut a, mut b) = (DiskSnapshot::default(), DiskSnapshot::default());
        parse_diskstats(A, &mut a).unwrap();
        parse_diskstats(B, &mut b).unwrap();
        assert_eq!(a.disks.len(), 3);
        assert_eq!(a.disks[1].name, "vda");
        assert_eq!(a.disks[1].counters.io_ticks_ms, 251840);
        let r = DiskReport::between(&a, &b, 10.0);
        // Idle devices are left out.
        assert_eq!(r.disks.len(), 1);
        let d = r.device(254, 0).unwrap();
        assert_eq!(d.ios, 30_000);
        assert!((d.util_pct - 95.0).abs() < 1e-9);
        assert!((d.avg_queue - 3.0).abs() < 1e-9);
        assert!(r.device(7, 0).is_none());
    }

    #[test]
    fn reads_the_fixture_under_its_root() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/host"));
        let s = DiskReader::new(root).snapshot().unwrap();
        let names: Vec<&str> = s.disks.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["loop0", "vda", "nbd0"]);
        // nbd0's line is the short (pre-4.18) form: 14 fields, no discards.
        assert_eq!(s.disks[2].counters.io_ticks_ms, 40);
        assert_eq!((s.disks[2].major, s.disks[2].minor), (43, 0));
        assert!(DiskReader::new(Path::new("/nonexistent"))
            .snapshot()
            .is_err());
    }

    #[test]
    fn bad_lines_are_errors_not_panics() {
        let mut s = DiskSnapshot::default();
        assert!(parse_diskstats("254 0 vda 1 2 3\n", &mut s).is_err());
        assert!(parse_diskstats("x 0 vda 1 2 3 4 5 6 7 8 9 10 11\n", &mut s).is_err());
        assert!(parse_diskstats("254 0 vda 1 2 3 4 5 6 7 8 9 -1 11\n", &mut s).is_err());
        assert!(parse_diskstats("\n\n", &mut s).is_ok());
    }

    #[test]
    fn a_file_on_tmpfs_has_no_device_and_a_real_path_may() {
        assert_eq!(device_of(Path::new("/nonexistent/x")), None);
        if let Ok(m) = std::fs::metadata("/dev/shm") {
            use std::os::unix::fs::MetadataExt;
            // tmpfs: anonymous device, major 0.
            if libc::major(m.dev()) == 0 {
                assert_eq!(device_of(Path::new("/dev/shm")), None);
            }
        }
    }
}
