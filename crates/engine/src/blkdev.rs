//! What the kernel says about a file or block device that decides how I/O to it must be shaped:
//! its size and block sizes (BLKGETSIZE64, BLKSSZGET, BLKPBSZGET) and the alignment O_DIRECT
//! needs (statx `STATX_DIOALIGN`, Linux 6.1+).
//!
//! O_DIRECT used to assume 512 bytes everywhere. That is wrong both ways: a filesystem on a
//! 4 KiB-sector disk refuses 512-byte direct I/O (EINVAL mid-run), and a 4 KiB-physical disk
//! accepts 512-byte writes only by reading and rewriting the whole physical block inside the
//! device, which a benchmark then reports as the device's write speed. So:
//!
//! * files opened with O_DIRECT align to what statx reports (`stx_dio_offset_align`), falling
//!   back to 512 when the kernel does not report it;
//! * block devices align to their physical block when the workload writes (no read-modify-write
//!   in the device) and to their logical block (the floor the kernel enforces) when it only
//!   reads.
//!
//! Which source gave the alignment goes into the result's parameters.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Alignment assumed for O_DIRECT when the kernel does not say (what sanbench always used).
pub const FALLBACK_DIO_ALIGN: u32 = 512;

/// Size of a block device in bytes (BLKGETSIZE64 = _IOR(0x12, 114, size_t), its number
/// composed by rustix rather than written by hand).
pub fn size64(f: &File) -> std::io::Result<u64> {
    use rustix::ioctl::{opcode, Getter};
    const BLKGETSIZE64: rustix::ioctl::Opcode = opcode::read::<u64>(0x12, 114);
    // SAFETY: BLKGETSIZE64 writes exactly one u64, the Getter's output type.
    Ok(unsafe { rustix::ioctl::ioctl(f, Getter::<BLKGETSIZE64, u64>::new()) }?)
}

/// Logical block size (BLKSSZGET): the smallest unit the device addresses.
pub fn logical_block(f: &File) -> std::io::Result<u32> {
    Ok(rustix::fs::ioctl_blksszget(f)?.max(512))
}

/// Physical block size (BLKPBSZGET): the unit the device writes without read-modify-write.
pub fn physical_block(f: &File) -> std::io::Result<u32> {
    Ok(rustix::fs::ioctl_blkpbszget(f)?.max(512))
}

/// O_DIRECT alignment of an open file, as statx reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DioAlign {
    /// Offsets and lengths must be multiples of this.
    pub offset: u32,
    /// Buffers must start at multiples of this.
    pub mem: u32,
}

/// `Ok(Some)` when the kernel reports STATX_DIOALIGN for the file, `Ok(None)` when it does not
/// (kernels before 6.1, filesystems that do not fill it in, or a file without direct I/O
/// support, which reports 0).
pub fn dio_align(f: &File) -> std::io::Result<Option<DioAlign>> {
    // SAFETY: statx is plain old data; all-zero is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty path with AT_EMPTY_PATH names the open fd; `stx` lives across the call.
    let r = unsafe {
        libc::statx(
            f.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        // ENOSYS: no statx at all (very old kernels or seccomp); that is "not reported".
        return match e.raw_os_error() {
            Some(libc::ENOSYS) => Ok(None),
            _ => Err(e),
        };
    }
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return Ok(None);
    }
    Ok(Some(DioAlign {
        offset: stx.stx_dio_offset_align,
        mem: stx.stx_dio_mem_align,
    }))
}

/// The block size a target reports (offsets and lengths must be multiples of it), and where it
/// came from (for the result's parameters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alignment {
    pub block: u32,
    pub source: String,
    /// Buffer alignment O_DIRECT needs, when the kernel says.
    pub mem: Option<u32>,
}

/// Alignment for a regular file: 1 through the page cache; with O_DIRECT, what statx reports,
/// else [`FALLBACK_DIO_ALIGN`].
pub fn file_alignment(f: &File, direct: bool) -> std::io::Result<Alignment> {
    if !direct {
        return Ok(Alignment {
            block: 1,
            source: "page cache (any alignment)".into(),
            mem: None,
        });
    }
    Ok(match dio_align(f)? {
        Some(a) => Alignment {
            block: a.offset,
            source: "statx STATX_DIOALIGN".into(),
            mem: Some(a.mem),
        },
        None => Alignment {
            block: FALLBACK_DIO_ALIGN,
            source: format!(
                "default {FALLBACK_DIO_ALIGN} (the kernel does not report STATX_DIOALIGN)"
            ),
            mem: None,
        },
    })
}

/// Alignment for a block device from its block sizes: the physical block when the workload
/// writes, the logical block (the floor) when it only reads, never below what statx reports
/// for O_DIRECT. Buffered: 1 (the page cache takes any alignment).
pub fn device_alignment(
    logical: u32,
    physical: Option<u32>,
    dio: Option<DioAlign>,
    direct: bool,
    writes: bool,
) -> Alignment {
    if !direct {
        return Alignment {
            block: 1,
            source: "page cache (any alignment)".into(),
            mem: None,
        };
    }
    let floor = logical.max(dio.map_or(0, |d| d.offset));
    let floor_src = if floor > logical {
        "statx STATX_DIOALIGN"
    } else {
        "BLKSSZGET (logical block)"
    };
    let (block, source) = match physical {
        Some(p) if writes && p > floor && p % floor == 0 => (
            p,
            "BLKPBSZGET (physical block: writes below it are read-modify-write in the device)"
                .to_string(),
        ),
        _ => (floor, floor_src.to_string()),
    };
    Alignment {
        block,
        source,
        mem: dio.map(|d| d.mem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_align_writes_to_the_physical_block_and_reads_to_the_logical() {
        let w = device_alignment(512, Some(4096), None, true, true);
        assert_eq!(w.block, 4096);
        assert!(w.source.starts_with("BLKPBSZGET"), "{}", w.source);
        let r = device_alignment(512, Some(4096), None, true, false);
        assert_eq!(r.block, 512);
        assert!(r.source.starts_with("BLKSSZGET"), "{}", r.source);
        // The logical block is the floor whatever the physical one claims.
        assert_eq!(
            device_alignment(4096, Some(512), None, true, true).block,
            4096
        );
        assert_eq!(device_alignment(4096, None, None, true, true).block, 4096);
        // statx can raise the floor.
        let d = Some(DioAlign {
            offset: 4096,
            mem: 4,
        });
        let s = device_alignment(512, Some(512), d, true, false);
        assert_eq!((s.block, s.mem), (4096, Some(4)));
        assert_eq!(s.source, "statx STATX_DIOALIGN");
        assert_eq!(
            device_alignment(512, Some(4096), None, false, true).block,
            1
        );
    }

    #[test]
    fn direct_files_take_statx_alignment() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, [0u8; 4096]).unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(file_alignment(&f, false).unwrap().block, 1);
        let a = file_alignment(&f, true).unwrap();
        // This kernel (6.1+) on ext4 reports it; elsewhere the fallback is what must show.
        match dio_align(&f).unwrap() {
            Some(d) => {
                assert_eq!(a.block, d.offset);
                assert!(d.offset.is_power_of_two() && d.offset >= 512, "{d:?}");
                assert_eq!(a.source, "statx STATX_DIOALIGN");
            }
            None => {
                assert_eq!(a.block, FALLBACK_DIO_ALIGN);
                assert!(a.source.contains("does not report"), "{}", a.source);
            }
        }
    }
}
