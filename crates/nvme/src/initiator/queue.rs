//! One worker's I/O queue: its own connection, commands pipelined up to the queue depth with
//! the scheduler's tag as the command id. Writes up to the controller's in-capsule size (IOCCSZ)
//! travel in the capsule; larger ones wait for R2Ts and go out as H2CData straight from the
//! arena; reads land from C2HData straight into the arena. Trims are Dataset Management
//! (deallocate) with their ranges in the capsule: the trims of one submit share a command, up
//! to 256 ranges (NVM Command Set §3.2.3) or what the in-capsule size holds; the first trim's
//! command id carries it and the others complete with it. Write Zeroes sets DEAC when the
//! namespace's DLFEAT says deallocated blocks read zeros; one longer than a command may cover
//! (NLB's 16 bits, and the MDTS as Linux's host limits Write Zeroes without WZSL) goes as a
//! chain of commands on its command id, each sent when the one before succeeded, so the
//! queue never has more commands out than its depth. A path-related status completes the
//! I/O with [`PATH_ERROR`] and asks the admin thread to read the ANA state again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sanbench_io::{
    Arena, Completion, EngineError, Io, Op, Queue, QueueConfig, SocketLayer, PATH_ERROR,
};

use super::admin::{Ana, Qid};
use super::engine_err;
use crate::host::conn::{Connection, Event};
use crate::wire::cmd::{io, rw_sqe, Command, DataPtr, DsmRange, Rw, DSM_RANGE_LEN};
use crate::wire::status::Status;
use zerocopy::IntoBytes;

const EIO: i32 = 5;

/// Where a queue leads: the namespace, its block size, the controller's address (for
/// messages), its ANA state, and the queue id held.
pub(crate) struct Path {
    pub nsid: u32,
    pub block: u32,
    pub peer: String,
    pub ana: Option<Arc<Ana>>,
    pub qid: Qid,
    pub deac: bool,
    /// Blocks one Write Zeroes command may cover ([`max_zeroes_blocks`]).
    pub zeroes_blocks: u32,
}

/// Blocks one Write Zeroes may cover on a controller whose MDTS is `mdts_bytes` (`None`: no
/// limit) with `block`-byte blocks: NLB's 16 bits, and the MDTS, by which Linux's host
/// bounds Write Zeroes when the controller reports no Write Zeroes Size Limit.
pub(crate) fn max_zeroes_blocks(mdts_bytes: Option<u32>, block: u32) -> u32 {
    let by_mdts = mdts_bytes.map_or(u32::MAX, |m| (m / block.max(1)).max(1));
    MAX_WRITE_ZEROES_BLOCKS.min(by_mdts)
}

/// Ranges one Dataset Management command may carry (NR is 8 bits, 0's based).
const MAX_DSM_RANGES: usize = 256;
/// Blocks one Write Zeroes may cover (NLB is 16 bits, 0's based).
const MAX_WRITE_ZEROES_BLOCKS: u32 = 1 << 16;
/// Write Zeroes' Deallocate bit (CDW12 bit 25).
const DEAC: u32 = 1 << 25;
const NO_LEAD: u16 = u16::MAX;

pub(crate) struct NvmeQueue {
    conn: Connection,
    ana: Option<Arc<Ana>>,
    /// Given back to the controller's pool when the queue is dropped.
    _qid: Qid,
    /// Completions with a path-related status.
    path_errors: u64,
    arena: Arc<Arena>,
    nsid: u32,
    block: u64,
    /// In flight, by command id (= tag).
    slots: Vec<Option<Io>>,
    inflight: usize,
    timeout: Duration,
    peer: String,
    in_capsule_writes: u64,
    r2t_writes: u64,
    failed_status: Option<Status>,
    deac: bool,
    /// Ranges per Dataset Management command.
    dsm_ranges: usize,
    /// Per command id: the trim whose DSM command also carries this one's range, or NO_LEAD.
    follow: Vec<u16>,
    followers: usize,
    dsm_commands: u64,
    /// Blocks per Write Zeroes command.
    zeroes_blocks: u32,
    /// Per command id: the next block of a chained Write Zeroes still to send, or NO_CHAIN.
    chain: Vec<u64>,
    write_zeroes_commands: u64,
    /// Why io_uring was asked for and not used by this queue.
    socket_fallback: Option<String>,
}

const NO_CHAIN: u64 = u64::MAX;

impl NvmeQueue {
    pub fn new(
        conn: Connection,
        socket_fallback: Option<String>,
        cfg: &QueueConfig,
        path: Path,
    ) -> Self {
        let Path {
            nsid,
            block,
            peer,
            ana,
            qid,
            deac,
            zeroes_blocks,
        } = path;
        let depth = cfg.depth.max(1) as usize;
        let dsm_ranges = MAX_DSM_RANGES
            .min(conn.in_capsule / DSM_RANGE_LEN)
            .min(depth)
            .max(1);
        NvmeQueue {
            conn,
            ana,
            _qid: qid,
            path_errors: 0,
            arena: cfg.arena.clone(),
            nsid,
            block: block.max(1) as u64,
            slots: vec![None; cfg.depth.max(1) as usize],
            inflight: 0,
            timeout: cfg.io_timeout,
            peer,
            in_capsule_writes: 0,
            r2t_writes: 0,
            failed_status: None,
            deac,
            dsm_ranges,
            follow: vec![NO_LEAD; depth],
            followers: 0,
            dsm_commands: 0,
            zeroes_blocks: zeroes_blocks.max(1),
            chain: vec![NO_CHAIN; depth],
            write_zeroes_commands: 0,
            socket_fallback,
        }
    }

    /// Sends the Write Zeroes of `io` from block `slba` on, as much as one command covers;
    /// what is left waits in `chain` for this one's success.
    fn send_zeroes(&mut self, io: &Io, slba: u64) {
        let end = (io.offset + io.len as u64) / self.block;
        let nlb = (end - slba).min(self.zeroes_blocks as u64) as u32;
        let rw = Rw {
            nsid: self.nsid,
            slba,
            nlb,
            fua: false,
        };
        let cid = io.tag as u16;
        let mut s = rw_sqe(io::WRITE_ZEROES, cid, rw, DataPtr::Transport { len: 0 });
        if self.deac {
            s.cdw12.set(s.cdw12.get() | DEAC);
        }
        self.conn.send_cmd(s, &[]);
        self.write_zeroes_commands += 1;
        self.chain[io.tag as usize] = if slba + (nlb as u64) < end {
            slba + nlb as u64
        } else {
            NO_CHAIN
        };
    }

    fn err(&self, e: crate::host::HostError) -> EngineError {
        engine_err(&self.peer, e, self.timeout)
    }

    fn protocol(&self, reason: String) -> EngineError {
        EngineError::Protocol {
            peer: self.peer.clone(),
            reason,
        }
    }

    fn slot(&self, cid: u16) -> Result<Io, EngineError> {
        self.slots
            .get(cid as usize)
            .copied()
            .flatten()
            .ok_or_else(|| {
                self.protocol(format!("a PDU for command {cid}, which is not in flight"))
            })
    }

    fn complete(&mut self, cid: u16, result: i32, out: &mut Vec<Completion>) {
        if let Some(io) = self.slots.get_mut(cid as usize).and_then(Option::take) {
            self.inflight -= 1;
            out.push(Completion {
                tag: io.tag,
                result,
            });
        }
        if self.followers > 0 {
            for i in 0..self.follow.len() {
                if self.follow[i] == cid {
                    self.follow[i] = NO_LEAD;
                    self.followers -= 1;
                    if let Some(io) = self.slots[i].take() {
                        self.inflight -= 1;
                        out.push(Completion {
                            tag: io.tag,
                            result,
                        });
                    }
                }
            }
        }
    }

    /// One Dataset Management (deallocate) command for `group`'s ranges, on the first's
    /// command id.
    fn send_dsm(&mut self, group: &[(u16, DsmRange)]) {
        let Some(&(lead, _)) = group.first() else {
            return;
        };
        let s = Command::Dsm {
            nsid: self.nsid,
            nr: group.len() as u32,
            deallocate: true,
        }
        .to_sqe(lead, DataPtr::Transport { len: 0 });
        let mut data = Vec::with_capacity(group.len() * DSM_RANGE_LEN);
        for (_, r) in group {
            data.extend_from_slice(r.as_bytes());
        }
        self.conn.send_cmd(s, &data);
        self.dsm_commands += 1;
        for &(cid, _) in &group[1..] {
            self.follow[cid as usize] = lead;
            self.followers += 1;
        }
    }

    /// Handles one received PDU.
    fn event(&mut self, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let ev = match self.conn.recv() {
            Ok(e) => e,
            Err(e) => return Err(self.err(e)),
        };
        match ev {
            Event::Resp(q) => {
                let cid = q.command_id.get();
                let st = Status::from_field(q.status.get());
                let io = self.slot(cid)?;
                let next = self.chain[cid as usize];
                if next != NO_CHAIN {
                    self.chain[cid as usize] = NO_CHAIN;
                    if st.is_success() {
                        // The chain's next command, on the same command id.
                        self.send_zeroes(&io, next);
                        self.conn.flush().map_err(|e| self.err(e))?;
                        return Ok(());
                    }
                }
                let result = if st.is_success() {
                    0
                } else if st.is_path_error() {
                    // Not carried out through this controller: the state changed, read it.
                    self.path_errors += 1;
                    if let Some(a) = &self.ana {
                        a.mark_stale();
                    }
                    PATH_ERROR
                } else {
                    -EIO
                };
                if !st.is_success() {
                    self.failed_status = Some(st);
                }
                self.complete(cid, result, out);
            }
            Event::Data {
                cid,
                offset,
                data,
                success,
            } => {
                let end = offset as u64 + data.len() as u64;
                let io = match self.slots.get(cid as usize).copied().flatten() {
                    Some(io) if io.op == Op::Read && end <= io.len as u64 => io,
                    _ => {
                        return Err(EngineError::Protocol {
                            peer: self.peer.clone(),
                            reason: format!(
                                "C2HData [{offset}, {end}) for command {cid}, not a read in flight \
                                 that long"
                            ),
                        })
                    }
                };
                // SAFETY: the scheduler gives each in-flight I/O its own arena region and
                // this read owns [buf, buf + len) until it completes.
                let dst = unsafe { self.arena.slice_mut(io.buf + offset as usize, data.len()) };
                dst.copy_from_slice(data);
                if success {
                    self.complete(cid, 0, out);
                }
            }
            Event::R2t {
                cid,
                ttag,
                offset,
                len,
            } => {
                let io = self.slot(cid)?;
                let end = offset as u64 + len as u64;
                if io.op != Op::Write || end > io.len as u64 || len == 0 {
                    return Err(self.protocol(format!(
                        "R2T [{offset}, {end}) for command {cid} of {} bytes",
                        io.len
                    )));
                }
                // SAFETY: a write's region is only read while it is in flight.
                let src = unsafe { self.arena.slice(io.buf + offset as usize, len as usize) };
                self.conn.send_h2c(cid, ttag, offset, src);
                self.conn.flush().map_err(|e| self.err(e))?;
            }
        }
        Ok(())
    }
}

impl Queue for NvmeQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        // Allocates only when the batch has trims.
        let mut trims: Vec<(u16, DsmRange)> = Vec::new();
        for io in ios {
            let cid = io.tag as u16;
            let Some(slot) = self.slots.get_mut(io.tag as usize) else {
                return Err(EngineError::Invalid(format!(
                    "tag {} above the queue depth",
                    io.tag
                )));
            };
            if slot.is_some() {
                return Err(EngineError::Invalid(format!(
                    "tag {} already in flight",
                    io.tag
                )));
            }
            if !io.offset.is_multiple_of(self.block) || !(io.len as u64).is_multiple_of(self.block)
            {
                return Err(EngineError::Invalid(format!(
                    "{} bytes at {} are not whole {}-byte blocks",
                    io.len, io.offset, self.block
                )));
            }
            let rw = Rw {
                nsid: self.nsid,
                slba: io.offset / self.block,
                nlb: (io.len as u64 / self.block) as u32,
                // `--fua`: the write is durable when the controller completes it.
                fua: io.op == Op::Write && io.fua,
            };
            *slot = Some(*io);
            self.inflight += 1;
            match io.op {
                Op::Read => {
                    let s = rw_sqe(io::READ, cid, rw, DataPtr::Transport { len: io.len });
                    self.conn.send_cmd(s, &[]);
                }
                Op::Write if io.len as usize <= self.conn.in_capsule => {
                    let s = rw_sqe(io::WRITE, cid, rw, DataPtr::Transport { len: io.len });
                    // SAFETY: the write's region is not written while it is in flight.
                    let src = unsafe { self.arena.slice(io.buf, io.len as usize) };
                    self.conn.send_cmd(s, src);
                    self.in_capsule_writes += 1;
                }
                Op::Write => {
                    let s = rw_sqe(io::WRITE, cid, rw, DataPtr::Transport { len: io.len });
                    self.conn.send_cmd(s, &[]);
                    self.r2t_writes += 1;
                }
                Op::Flush => {
                    let s = Command::Flush { nsid: self.nsid }
                        .to_sqe(cid, DataPtr::Transport { len: 0 });
                    self.conn.send_cmd(s, &[]);
                }
                Op::Trim => {
                    trims.push((cid, DsmRange::new(rw.slba, rw.nlb)));
                    if trims.len() == self.dsm_ranges {
                        self.send_dsm(&trims);
                        trims.clear();
                    }
                }
                Op::WriteZeroes => self.send_zeroes(io, rw.slba),
            }
        }
        self.send_dsm(&trims);
        self.conn.flush().map_err(|e| self.err(e))
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let start = out.len();
        let want = min.min(self.inflight);
        let mut filled = false;
        loop {
            while self.conn.has_pdu() {
                self.event(out)?;
            }
            if out.len() - start >= want && (want > 0 || self.inflight == 0) {
                return Ok(());
            }
            if want == 0 {
                // A poll: one read of what the socket has, without waiting. What is left
                // there shows as readable to a caller polling `readiness` (multipath), so a
                // second read would only find EAGAIN.
                if filled {
                    return Ok(());
                }
                filled = true;
                match self.conn.try_fill() {
                    Ok(true) => continue,
                    Ok(false) => return Ok(()),
                    Err(e) => return Err(self.err(e)),
                }
            }
            self.event(out)?;
        }
    }

    fn readiness(&self) -> Option<sanbench_io::Readiness<'_>> {
        Some(sanbench_io::Readiness {
            fd: self.conn.fd(),
            write: false,
            // On a ring: entries not yet submitted or no receive in the kernel make no
            // completion, so reap(0) has to enter first.
            held: self.conn.has_pdu() || (self.inflight > 0 && self.conn.ring_needs_look()),
        })
    }

    fn close(&mut self) -> Result<(), EngineError> {
        self.conn.mark_closed();
        Ok(())
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert("in_capsule_writes".into(), self.in_capsule_writes.into());
        m.insert("r2t_writes".into(), self.r2t_writes.into());
        m.insert("dsm_commands".into(), self.dsm_commands.into());
        m.insert(
            "write_zeroes_commands".into(),
            self.write_zeroes_commands.into(),
        );
        if let Some(st) = self.failed_status {
            m.insert("last_error_status".into(), st.to_string().into());
        }
        if self.path_errors > 0 {
            m.insert("path_errors".into(), self.path_errors.into());
        }
        let layer = if self.conn.ring().is_some() {
            SocketLayer::Uring
        } else {
            SocketLayer::Poll
        };
        m.insert("nvme_socket".into(), layer.name().into());
        if let Some(r) = self.conn.ring() {
            m.insert("nvme_ring_enters".into(), r.enters().into());
            m.insert("nvme_ring_setup".into(), r.mode().into());
            let kind = sanbench_io::sockring::ring_kind(r.shared());
            m.insert("nvme_socket_ring".into(), kind.into());
        }
        if let Some(f) = &self.socket_fallback {
            m.insert("nvme_socket_fallback".into(), f.as_str().into());
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_zeroes_commands_stay_within_nlb_and_the_mdts() {
        // NLB is 16 bits (0's based): 65,536 blocks at most, whatever the MDTS.
        assert_eq!(max_zeroes_blocks(None, 512), 1 << 16);
        assert_eq!(max_zeroes_blocks(Some(1 << 30), 512), 1 << 16);
        // An MDTS of 1 MiB: 2,048 blocks of 512 B, 256 of 4 KiB.
        assert_eq!(max_zeroes_blocks(Some(1 << 20), 512), 2048);
        assert_eq!(max_zeroes_blocks(Some(1 << 20), 4096), 256);
        // Never 0, even below one block.
        assert_eq!(max_zeroes_blocks(Some(256), 512), 1);
    }
}
