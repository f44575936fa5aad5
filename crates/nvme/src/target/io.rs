//! I/O queue commands (NVM Command Set 1.0 §3): Read, Write, Flush, Write Zeroes, Dataset
//! Management (deallocate) on any active NSID (each namespace a range of the one store),
//! checked against the namespace's size and the largest transfer (MDTS) before the store is
//! touched, and refused with a path-related status while the connection's port is in an ANA
//! state that does not serve I/O (before any data is asked for).

use super::ctrl::{Shared, BLOCK};
use super::queue::{Conn, End, Kind, PendingWrite};
use crate::wire::ana::AnaState;
use crate::wire::cmd::{Command, DataPtr, DsmRange, Rw, DSM_RANGE_LEN};
use crate::wire::status::Status;
use sanbench_blockstore::counters::Op;

/// MDTS in 4 KiB pages as a power of two: 1 MiB per command.
pub const MDTS: u8 = 8;
pub const MAX_TRANSFER: u64 = 4096 << MDTS;

fn range(sh: &Shared, rw: &Rw) -> Result<(u64, u64), Status> {
    let base = sh.ns_base(rw.nsid).ok_or(Status::INVALID_NS)?;
    let end = rw
        .slba
        .checked_add(rw.nlb as u64)
        .ok_or(Status::LBA_RANGE)?;
    if end > sh.blocks {
        return Err(Status::LBA_RANGE);
    }
    Ok((base + rw.slba * BLOCK, rw.nlb as u64 * BLOCK))
}

/// The path-related status of an I/O command through a port in ANA state `s` (nvmet's
/// `nvmet_check_ana_state`): every namespace is in the one ANA group.
pub(crate) fn ana_status(s: AnaState) -> Option<Status> {
    match s {
        AnaState::Optimized | AnaState::NonOptimized => None,
        AnaState::Inaccessible => Some(Status::ANA_INACCESSIBLE),
        AnaState::PersistentLoss => Some(Status::ANA_PERSISTENT_LOSS),
        AnaState::Change => Some(Status::ANA_TRANSITION),
    }
}

/// How an I/O command was answered.
enum Reply {
    /// With this status (a completion is still to send).
    Status(Status),
    /// Completed by its last C2HData (success).
    Sent,
    /// An R2T went out: it completes when its data is in (`finish_write`).
    Later,
}

/// The counted op of an I/O command, its namespace's index and its bytes
/// (`serve --metrics-listen`).
fn counted(cmd: &Command) -> Option<(usize, Op, u64)> {
    let ns = |nsid: u32| nsid.saturating_sub(1) as usize;
    Some(match cmd {
        Command::Read(rw) => (ns(rw.nsid), Op::Read, rw.nlb as u64 * BLOCK),
        Command::Write(rw) => (ns(rw.nsid), Op::Write, rw.nlb as u64 * BLOCK),
        Command::WriteZeroes(rw) => (ns(rw.nsid), Op::Zero, rw.nlb as u64 * BLOCK),
        Command::Flush { nsid } => (ns(*nsid), Op::Flush, 0),
        Command::Dsm { nsid, .. } => (ns(*nsid), Op::Trim, 0),
        _ => return None,
    })
}

/// Counts a command's I/O, when it is one and counters are on.
pub(crate) fn count(c: &Conn, what: Option<(usize, Op, u64)>, ok: bool) {
    if let (Some(m), Some((ns, op, bytes))) = (&c.metrics, what) {
        m.io(ns, op, if ok { bytes } else { 0 }, ok);
    }
}

pub(crate) fn handle(
    c: &mut Conn,
    cid: u16,
    cmd: Command,
    dp: DataPtr,
    data: &[u8],
) -> Result<(), End> {
    let what = counted(&cmd);
    match execute(c, cid, cmd, dp, data)? {
        Reply::Status(st) => {
            count(c, what, st == Status::SUCCESS);
            c.resp(cid, st, 0)
        }
        Reply::Sent => {
            count(c, what, true);
            Ok(())
        }
        Reply::Later => Ok(()),
    }
}

fn execute(c: &mut Conn, cid: u16, cmd: Command, dp: DataPtr, data: &[u8]) -> Result<Reply, End> {
    if let Some(st) = ana_status(c.sh.ana.get(c.port)) {
        return Ok(Reply::Status(st));
    }
    let st = match cmd {
        Command::Read(rw) | Command::Write(rw) => {
            let (off, len) = match range(&c.sh, &rw) {
                Ok(r) => r,
                Err(st) => return Ok(Reply::Status(st)),
            };
            if len > MAX_TRANSFER {
                return Ok(Reply::Status(Status::INVALID_FIELD));
            }
            if dp.len() as u64 != len {
                return Ok(Reply::Status(Status::SGL_INVALID_DATA));
            }
            let read = matches!(cmd, Command::Read(_));
            match (read, dp) {
                (true, DataPtr::Transport { .. }) => {
                    let sh = c.sh.clone();
                    let success = c.q.as_ref().is_some_and(|q| q.sqflow_off);
                    let r = c.c2h_with(cid, len as usize, success, |out, at, n| {
                        out.store(&sh.store, off + at as u64, n)
                    });
                    match r {
                        // The last C2HData completed the command.
                        Ok(()) if success => return Ok(Reply::Sent),
                        Ok(()) => Status::SUCCESS,
                        Err(_) => Status::INTERNAL,
                    }
                }
                (true, DataPtr::InCapsule { .. }) => Status::SGL_INVALID_TYPE,
                (false, DataPtr::InCapsule { .. }) => match c.sh.store.write(off, data, rw.fua) {
                    Ok(()) => Status::SUCCESS,
                    Err(_) => Status::INTERNAL,
                },
                (false, DataPtr::Transport { .. }) => {
                    let w = PendingWrite {
                        counted: counted(&cmd),
                        cid,
                        off,
                        len: len as usize,
                        buf: Vec::new(),
                        kind: Kind::Write { fua: rw.fua },
                    };
                    return c.r2t(cid, w).map(|()| Reply::Later);
                }
            }
        }
        Command::Flush { nsid } if c.sh.ns_active(nsid) || nsid == u32::MAX => {
            match c.sh.store.flush() {
                Ok(()) => Status::SUCCESS,
                Err(_) => Status::INTERNAL,
            }
        }
        Command::WriteZeroes(rw) => match range(&c.sh, &rw) {
            Ok((off, len)) => match c.sh.store.zero(off, len, false) {
                Ok(()) => Status::SUCCESS,
                Err(_) => Status::INTERNAL,
            },
            Err(st) => st,
        },
        Command::Dsm {
            nsid,
            nr,
            deallocate,
        } if c.sh.ns_active(nsid) => {
            let len = nr as usize * DSM_RANGE_LEN;
            if dp.len() as usize != len {
                return Ok(Reply::Status(Status::SGL_INVALID_DATA));
            }
            match dp {
                DataPtr::InCapsule { .. } => dsm(&c.sh, nsid, data, deallocate),
                DataPtr::Transport { .. } => {
                    let w = PendingWrite {
                        counted: counted(&cmd),
                        cid,
                        off: 0,
                        len,
                        buf: Vec::new(),
                        kind: Kind::Dsm { nsid, deallocate },
                    };
                    return c.r2t(cid, w).map(|()| Reply::Later);
                }
            }
        }
        Command::Flush { .. } | Command::Dsm { .. } => Status::INVALID_NS,
        _ => Status::INVALID_OPCODE,
    };
    Ok(Reply::Status(st))
}

/// Deallocates each range (16 bytes: attributes, NLB, SLBA); every range is checked first.
fn dsm(sh: &Shared, nsid: u32, ranges: &[u8], deallocate: bool) -> Status {
    let mut parsed = Vec::new();
    for r in DsmRange::parse_all(ranges) {
        let rw = Rw {
            nsid,
            slba: r.slba.get(),
            nlb: r.nlb.get(),
            fua: false,
        };
        match range(sh, &rw) {
            Ok(x) => parsed.push(x),
            Err(st) => return st,
        }
    }
    if deallocate {
        for (off, len) in parsed {
            if len > 0 && sh.store.trim(off, len).is_err() {
                return Status::INTERNAL;
            }
        }
    }
    Status::SUCCESS
}

/// Carries out a command whose data has all arrived.
pub(crate) fn finish_write(sh: &Shared, w: &PendingWrite) -> Status {
    match w.kind {
        Kind::Write { fua } => match sh.store.write(w.off, &w.buf, fua) {
            Ok(()) => Status::SUCCESS,
            Err(_) => Status::INTERNAL,
        },
        Kind::Dsm { nsid, deallocate } => dsm(sh, nsid, &w.buf, deallocate),
    }
}
