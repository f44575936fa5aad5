//! I/O queue commands (NVM Command Set 1.0 §3): Read, Write, Flush, Write Zeroes, Dataset
//! Management (deallocate) on any active NSID (each namespace a range of the one store),
//! checked against the namespace's size and the largest transfer (MDTS) before the store is
//! touched, and refused with a path-related status while the connection's port is in an ANA
//! state that does not serve I/O (before any data is asked for).

use super::conn::{Conn, End};
use super::ctrl::{Shared, BLOCK};
use crate::wire::ana::AnaState;
use crate::wire::cmd::{Command, DataPtr, DsmRange, Rw, DSM_RANGE_LEN};
use crate::wire::status::Status;

/// MDTS in 4 KiB pages as a power of two: 1 MiB per command.
pub const MDTS: u8 = 8;
pub const MAX_TRANSFER: u64 = 4096 << MDTS;

/// What an R2T's data is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Write {
        fua: bool,
    },
    /// Dataset Management ranges.
    Dsm {
        nsid: u32,
        deallocate: bool,
    },
}

/// A command waiting for its data from H2CData PDUs.
pub(crate) struct PendingWrite {
    pub cid: u16,
    pub off: u64,
    pub len: usize,
    pub buf: Vec<u8>,
    pub kind: Kind,
}

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

pub(crate) fn handle(
    c: &mut Conn,
    cid: u16,
    cmd: Command,
    dp: DataPtr,
    data: &[u8],
) -> Result<(), End> {
    if let Some(st) = ana_status(c.sh.ana.get(c.port)) {
        return c.resp(cid, st, 0);
    }
    let st = match cmd {
        Command::Read(rw) | Command::Write(rw) => {
            let (off, len) = match range(&c.sh, &rw) {
                Ok(r) => r,
                Err(st) => return c.resp(cid, st, 0),
            };
            if len > MAX_TRANSFER {
                return c.resp(cid, Status::INVALID_FIELD, 0);
            }
            if dp.len() as u64 != len {
                return c.resp(cid, Status::SGL_INVALID_DATA, 0);
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
                        Ok(()) if success => return Ok(()),
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
                        cid,
                        off,
                        len: len as usize,
                        buf: Vec::new(),
                        kind: Kind::Write { fua: rw.fua },
                    };
                    return c.r2t(cid, w);
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
                return c.resp(cid, Status::SGL_INVALID_DATA, 0);
            }
            match dp {
                DataPtr::InCapsule { .. } => dsm(&c.sh, nsid, data, deallocate),
                DataPtr::Transport { .. } => {
                    let w = PendingWrite {
                        cid,
                        off: 0,
                        len,
                        buf: Vec::new(),
                        kind: Kind::Dsm { nsid, deallocate },
                    };
                    return c.r2t(cid, w);
                }
            }
        }
        Command::Flush { .. } | Command::Dsm { .. } => Status::INVALID_NS,
        _ => Status::INVALID_OPCODE,
    };
    c.resp(cid, st, 0)
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
