//! How the sg engine carries out an I/O: the commands of each op (READ/WRITE(16), SYNCHRONIZE
//! CACHE(16), UNMAP, WRITE SAME(16), several where one command's limit is smaller than the
//! I/O), the jobs a submit becomes (its trims as one UNMAP), and each job sent with `SG_IO`
//! on the calling thread.

use std::fs::File;

use sanbench_io::engine::{Io, Op};
use sanbench_io::Arena;

use super::io_hdr::dir;
use super::{sg_io, Geometry};
use crate::initiator::discard::TrimBy;
use crate::scsi::cdb::{Cdb, CdbLen};

/// The commands that carry out `io`, in order (one but for a trim or a write-zeroes longer
/// than one command may cover), or the errno of an I/O that is not whole blocks.
pub(crate) fn commands(geo: &Geometry, io: &Io) -> Result<Vec<Cdb>, i32> {
    let b = u64::from(geo.block);
    if !io.offset.is_multiple_of(b) || !u64::from(io.len).is_multiple_of(b) {
        return Err(-libc::EINVAL);
    }
    let lba = io.offset / b;
    let blocks = u64::from(io.len) / b;
    let chunks = |max: u64, make: &dyn Fn(u64, u64) -> Cdb| {
        let mut out = Vec::new();
        let mut at = lba;
        while at < lba + blocks {
            let n = (lba + blocks - at).min(max.max(1));
            out.push(make(at, n));
            at += n;
        }
        out
    };
    Ok(match io.op {
        Op::Read => vec![Cdb::Read {
            len: CdbLen::L16,
            lba,
            blocks: blocks as u32,
            protect: 0,
            dpo: false,
            fua: false,
        }],
        Op::Write => vec![Cdb::Write {
            len: CdbLen::L16,
            lba,
            blocks: blocks as u32,
            protect: 0,
            dpo: false,
            fua: io.fua,
            verify: false,
        }],
        Op::Flush => vec![Cdb::SynchronizeCache {
            sixteen: true,
            lba: 0,
            blocks: 0,
            immed: false,
        }],
        Op::WriteZeroes => chunks(geo.disc.write_same_blocks(), &|lba, n| Cdb::WriteSame {
            sixteen: true,
            lba,
            blocks: n as u32,
            protect: 0,
            anchor: false,
            unmap: false,
            ndob: false,
        }),
        Op::Trim => match geo.disc.trim {
            // One descriptor per UNMAP (8 bytes of header, 16 of descriptor); the pool
            // encodes each command's range from `unmap_ranges`.
            Some(TrimBy::Unmap) => unmap_ranges(geo, io)
                .iter()
                .map(|_| Cdb::Unmap {
                    anchor: false,
                    param_len: 24,
                })
                .collect(),
            Some(TrimBy::WriteSameUnmap) => match geo.disc.granules(lba, blocks) {
                // Only whole unmap granules go out; a trim smaller than one is done, as
                // the iSCSI initiator does it.
                None => Vec::new(),
                Some((lba, blocks)) => {
                    let mut out = Vec::new();
                    let mut at = lba;
                    let max = geo.disc.write_same_blocks();
                    while at < lba + blocks {
                        let n = (lba + blocks - at).min(max);
                        out.push(Cdb::WriteSame {
                            sixteen: true,
                            lba: at,
                            blocks: n as u32,
                            protect: 0,
                            anchor: false,
                            unmap: true,
                            ndob: false,
                        });
                        at += n;
                    }
                    out
                }
            },
            None => return Err(-libc::EOPNOTSUPP),
        },
    })
}

/// The (LBA, blocks) ranges of a trim's UNMAP commands, one per command, in the order of
/// [`commands`]: whole unmap granules only, each within the MAXIMUM UNMAP LBA COUNT.
pub(crate) fn unmap_ranges(geo: &Geometry, io: &Io) -> Vec<(u64, u64)> {
    let b = u64::from(geo.block);
    let Some((lba, blocks)) = geo.disc.granules(io.offset / b, u64::from(io.len) / b) else {
        return Vec::new();
    };
    let max = geo.disc.unmap_lbas().min(u64::from(u32::MAX));
    let mut out = Vec::new();
    let mut at = lba;
    while at < lba + blocks {
        let n = (lba + blocks - at).min(max);
        out.push((at, n));
        at += n;
    }
    out
}

/// The I/Os of one submission as the jobs the queue's threads carry out, in order: trims that
/// UNMAP carries go together, a descriptor each, up to `max_descriptors` and the MAXIMUM UNMAP
/// LBA COUNT in all (as the iSCSI initiator sends a submit's trims); any other I/O, a trim
/// larger than one UNMAP may name, or one of no whole granule goes alone.
pub(crate) fn jobs(geo: &Geometry, max_descriptors: usize, ios: &[Io]) -> Vec<Vec<Io>> {
    let mut out: Vec<Vec<Io>> = Vec::with_capacity(ios.len());
    if geo.disc.trim != Some(TrimBy::Unmap) {
        out.extend(ios.iter().map(|io| vec![*io]));
        return out;
    }
    let max_l = geo.disc.unmap_lbas();
    let mut group: Vec<Io> = Vec::new();
    let mut sum = 0u64;
    for io in ios {
        let one = if io.op == Op::Trim {
            match unmap_ranges(geo, io)[..] {
                [(_, n)] => Some(n),
                _ => None,
            }
        } else {
            None
        };
        let Some(blocks) = one else {
            out.push(vec![*io]);
            continue;
        };
        if group.len() >= max_descriptors.max(1) || sum + blocks > max_l {
            out.push(std::mem::take(&mut group));
            sum = 0;
        }
        group.push(*io);
        sum += blocks;
    }
    if !group.is_empty() {
        out.push(group);
    }
    out
}

/// What carrying out a job came to: 0 or the errno, the failure's line, and the commands
/// sent for it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Done {
    pub errno: i32,
    pub why: Option<String>,
    pub commands: u32,
}

/// Carries out a job of [`jobs`] on the calling thread: one I/O, or trims that go as one
/// UNMAP (they complete together, with its outcome).
pub(crate) fn do_job(
    f: &File,
    geo: &Geometry,
    arena: &Arena,
    zero_block: &[u8],
    job: &[Io],
) -> Done {
    match job {
        [io] => do_io(f, geo, arena, zero_block, io),
        _ => {
            let ranges: Vec<(u64, u64)> = job.iter().flat_map(|io| unmap_ranges(geo, io)).collect();
            let mut plist = vec![0u8; 8 + 16 * ranges.len()];
            let n = crate::scsi::unmap::encode(&ranges, &mut plist);
            let cdb = Cdb::Unmap {
                anchor: false,
                param_len: n as u16,
            };
            let (errno, why) = match sg_io(
                f,
                geo.iface,
                &cdb,
                dir::TO_DEV,
                (plist.as_mut_ptr(), n as u32),
                geo.timeout_ms,
            ) {
                Err(e) => (
                    -e.raw_os_error().unwrap_or(libc::EIO),
                    Some(format!("trim: SG_IO: {e}")),
                ),
                Ok(o) if !o.ok() => (
                    o.errno(),
                    Some(format!(
                        "UNMAP of {} ranges from offset {}: {}",
                        ranges.len(),
                        job[0].offset,
                        o.describe()
                    )),
                ),
                Ok(_) => (0, None),
            };
            Done {
                errno,
                why,
                commands: 1,
            }
        }
    }
}

/// Carries out `io` on the calling thread.
pub(crate) fn do_io(f: &File, geo: &Geometry, arena: &Arena, zero_block: &[u8], io: &Io) -> Done {
    let fail = |errno: i32, why: String, commands: usize| Done {
        errno,
        why: Some(why),
        commands: commands as u32,
    };
    let cdbs = match commands(geo, io) {
        Ok(c) => c,
        Err(e) => {
            return fail(
                e,
                format!(
                    "{} of {} bytes at {}: not whole blocks of {} or not offered",
                    io.op.name(),
                    io.len,
                    io.offset,
                    geo.block
                ),
                0,
            )
        }
    };
    let ranges = if io.op == Op::Trim && geo.disc.trim == Some(TrimBy::Unmap) {
        unmap_ranges(geo, io)
    } else {
        Vec::new()
    };
    let mut plist = [0u8; 24];
    for (i, cdb) in cdbs.iter().enumerate() {
        let (direction, data) = match (io.op, cdb) {
            (Op::Read, _) => {
                // SAFETY: the scheduler gives this I/O exclusive use of its arena region.
                let buf = unsafe { arena.slice_mut(io.buf, io.len as usize) };
                (dir::FROM_DEV, (buf.as_mut_ptr(), io.len))
            }
            (Op::Write, _) => {
                // SAFETY: write sources are only read (SG_IO with TO_DEV reads the buffer).
                let buf = unsafe { arena.slice(io.buf, io.len as usize) };
                (dir::TO_DEV, (buf.as_ptr() as *mut u8, io.len))
            }
            (_, Cdb::WriteSame { .. }) => (
                dir::TO_DEV,
                (zero_block.as_ptr() as *mut u8, zero_block.len() as u32),
            ),
            (_, Cdb::Unmap { .. }) => {
                let n = crate::scsi::unmap::encode(&ranges[i..i + 1], &mut plist);
                (dir::TO_DEV, (plist.as_mut_ptr(), n as u32))
            }
            _ => (dir::NONE, (std::ptr::null_mut(), 0)),
        };
        let sent = i + 1;
        match sg_io(f, geo.iface, cdb, direction, data, geo.timeout_ms) {
            Err(e) => {
                let errno = -e.raw_os_error().unwrap_or(libc::EIO);
                return fail(errno, format!("{}: SG_IO: {e}", io.op.name()), sent);
            }
            Ok(o) if !o.ok() => {
                let why = format!("{} at offset {}: {}", io.op.name(), io.offset, o.describe());
                return fail(o.errno(), why, sent);
            }
            Ok(o) if o.resid > 0 && io.op.moves_data() => {
                let why = format!(
                    "{} at offset {}: {} of {} bytes not transferred",
                    io.op.name(),
                    io.offset,
                    o.resid,
                    io.len
                );
                return fail(-libc::EIO, why, sent);
            }
            Ok(_) => {}
        }
    }
    Done {
        commands: cdbs.len() as u32,
        ..Done::default()
    }
}
