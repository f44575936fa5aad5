//! How the sg engine carries out an I/O: the commands of each op (READ/WRITE(16), SYNCHRONIZE
//! CACHE(16), UNMAP, WRITE SAME(16), several where one command's limit is smaller than the
//! I/O), the jobs a submit becomes (its trims as one UNMAP), and each job sent with `SG_IO`
//! on the calling thread.

use std::fs::File;

use sanbench_io::engine::{Io, Op};
use sanbench_io::Arena;

use super::io_hdr::{dir, Outcome};
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

/// One command of a job, with its data: a region of the arena (a READ's or WRITE's), the
/// zero block (WRITE SAME), or a parameter list the command owns (UNMAP).
pub(crate) struct Cmd {
    pub cdb: Cdb,
    pub direction: i32,
    pub data: *mut u8,
    pub len: u32,
    /// An UNMAP's parameter list, which `data` points into (a box does not move with the
    /// command).
    _owned: Option<Box<[u8]>>,
}

// SAFETY: `data` names a region of the arena (which the queue holds an `Arc` of), the queue's
// zero block, or the command's own box; the command moves between threads only with the
// queue that holds all of them.
unsafe impl Send for Cmd {}

/// The commands of a job of [`jobs`], in the order they go: one I/O's (see [`commands`]), or
/// one UNMAP carrying the trims of a batch. Refused (not whole blocks, not offered): the
/// job's [`Done`], nothing sent.
///
/// The data pointers stay valid as long as the arena, `zero_block` and the returned commands
/// do; the scheduler gives each I/O exclusive use of its arena region while it is in flight.
pub(crate) fn plan(
    geo: &Geometry,
    arena: &Arena,
    zero_block: &[u8],
    job: &[Io],
) -> Result<Vec<Cmd>, Done> {
    let owned = |cdb: Cdb, mut list: Box<[u8]>| {
        let (data, len) = (list.as_mut_ptr(), list.len() as u32);
        Cmd {
            cdb,
            direction: dir::TO_DEV,
            data,
            len,
            _owned: Some(list),
        }
    };
    let io = match job {
        [io] => io,
        _ => {
            let ranges: Vec<(u64, u64)> = job.iter().flat_map(|io| unmap_ranges(geo, io)).collect();
            let mut plist = vec![0u8; 8 + 16 * ranges.len()];
            let n = crate::scsi::unmap::encode(&ranges, &mut plist);
            plist.truncate(n);
            let cdb = Cdb::Unmap {
                anchor: false,
                param_len: n as u16,
            };
            return Ok(vec![owned(cdb, plist.into_boxed_slice())]);
        }
    };
    let cdbs = commands(geo, io).map_err(|e| Done {
        errno: e,
        why: Some(format!(
            "{} of {} bytes at {}: not whole blocks of {} or not offered",
            io.op.name(),
            io.len,
            io.offset,
            geo.block
        )),
        commands: 0,
    })?;
    let ranges = if io.op == Op::Trim && geo.disc.trim == Some(TrimBy::Unmap) {
        unmap_ranges(geo, io)
    } else {
        Vec::new()
    };
    let mut out = Vec::with_capacity(cdbs.len());
    for (i, cdb) in cdbs.into_iter().enumerate() {
        let (direction, (data, len)) = match (io.op, &cdb) {
            // SAFETY (both arms): the scheduler gives this I/O exclusive use of its arena
            // region while it is in flight; a WRITE's is only read (TO_DEV).
            (Op::Read, _) => {
                let buf = unsafe { arena.slice_mut(io.buf, io.len as usize) };
                (dir::FROM_DEV, (buf.as_mut_ptr(), io.len))
            }
            (Op::Write, _) => {
                let buf = unsafe { arena.slice(io.buf, io.len as usize) };
                (dir::TO_DEV, (buf.as_ptr() as *mut u8, io.len))
            }
            (_, Cdb::WriteSame { .. }) => (
                dir::TO_DEV,
                (zero_block.as_ptr() as *mut u8, zero_block.len() as u32),
            ),
            (_, Cdb::Unmap { .. }) => {
                let mut plist = vec![0u8; 24];
                let n = crate::scsi::unmap::encode(&ranges[i..i + 1], &mut plist);
                plist.truncate(n);
                out.push(owned(cdb, plist.into_boxed_slice()));
                continue;
            }
            _ => (dir::NONE, (std::ptr::null_mut(), 0)),
        };
        out.push(Cmd {
            cdb,
            direction,
            data,
            len,
            _owned: None,
        });
    }
    Ok(out)
}

/// Whether command `cmd` of `job` failed, judged from what sending it with `call` gave: the
/// errno and the line for the queue's `last_failure`, or `None`.
pub(crate) fn failure(
    job: &[Io],
    cmd: &Cmd,
    call: &str,
    got: &std::io::Result<Outcome>,
) -> Option<(i32, String)> {
    let io = &job[0];
    let what = || match cmd.cdb {
        Cdb::Unmap { .. } if job.len() > 1 => {
            format!("UNMAP of {} trims from offset {}", job.len(), io.offset)
        }
        _ => format!("{} at offset {}", io.op.name(), io.offset),
    };
    match got {
        Err(e) => Some((
            -e.raw_os_error().unwrap_or(libc::EIO),
            format!("{}: {call}: {e}", what()),
        )),
        Ok(o) if !o.ok() => Some((o.errno(), format!("{}: {}", what(), o.describe()))),
        Ok(o) if o.resid > 0 && io.op.moves_data() && job.len() == 1 => Some((
            -libc::EIO,
            format!(
                "{}: {} of {} bytes not transferred",
                what(),
                o.resid,
                io.len
            ),
        )),
        Ok(_) => None,
    }
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
    let cmds = match plan(geo, arena, zero_block, job) {
        Ok(c) => c,
        Err(done) => return done,
    };
    for (i, cmd) in cmds.iter().enumerate() {
        let got = sg_io(
            f,
            geo.iface,
            &cmd.cdb,
            cmd.direction,
            (cmd.data, cmd.len),
            geo.timeout_ms,
        );
        if let Some((errno, why)) = failure(job, cmd, "SG_IO", &got) {
            return Done {
                errno,
                why: Some(why),
                commands: i as u32 + 1,
            };
        }
    }
    Done {
        commands: cmds.len() as u32,
        ..Done::default()
    }
}
