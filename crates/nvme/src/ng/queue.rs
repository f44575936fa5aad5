//! One worker's ring on the namespace. An I/O may take several commands, and a command may
//! carry several I/Os: a Write Zeroes longer than the controller's limit goes as several
//! commands at once, and the trims of one submit go as one Dataset Management command with a
//! range each (as the NVMe/TCP initiator sends them). Each I/O counts its commands still out
//! and completes with the first failure when the last one does.
//!
//! A CQE's user data is the I/O's tag, and for a DSM command, above it, the slot of its range
//! list (which names the tags it carries).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use sanbench_io::engine::{Completion, Io, Op, Queue, QueueConfig};
use sanbench_io::params::CommandTally;
use sanbench_io::{Arena, EngineError};

use super::cmd::{self, PassthruCmd};
use super::NgTarget;
use crate::wire::cmd::DsmRange;

/// A DSM command's ranges and the trims they belong to, kept until it completes.
#[derive(Default)]
struct DsmSlot {
    ranges: Vec<DsmRange>,
    tags: Vec<u32>,
}

pub struct NgQueue {
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    _file: Arc<File>,
    arena: Arc<Arena>,
    nsid: u32,
    lbads: u8,
    /// Blocks per Write Zeroes; ranges per DSM, blocks per range and per DSM.
    zeroes_blocks: u64,
    dsm_ranges: usize,
    dsm_range_blocks: u64,
    dsm_blocks: u64,
    /// Per tag: commands still out, and the first failure's errno.
    pending: Vec<(u32, i32)>,
    /// DSM commands' slots (user data's upper half is the index + 1), and the free ones.
    slots: Vec<DsmSlot>,
    free: Vec<usize>,
    timeout: types::Timespec,
    timeout_secs: f64,
    /// Failures, trims and write-zeroes, for the result's parameters.
    tally: CommandTally,
    /// I/Os that completed without reaching the device (not whole blocks).
    early: Vec<Completion>,
    /// The CQEs of one `take`, kept for the next.
    cqes: Vec<(u64, i32)>,
}

impl NgQueue {
    pub(super) fn open(t: &NgTarget, cfg: &QueueConfig) -> Result<NgQueue, EngineError> {
        let entries = cfg.depth.next_power_of_two().max(8);
        let ring = IoUring::<squeue::Entry128, cqueue::Entry32>::builder()
            .build(entries)
            .map_err(|e| {
                EngineError::Invalid(format!(
                    "{}: io_uring with 128-byte SQEs and 32-byte CQEs (Linux 5.19+): {e}",
                    t.info.uri
                ))
            })?;
        ring.submitter()
            .register_files(&[t.file.as_raw_fd()])
            .map_err(|e| EngineError::sys("io_uring register_files", e))?;
        // No fixed buffer: Linux 6.1's blk_rq_map_user_bvec counts every page from the I/O's
        // start to the end of the registered buffer against the queue's max_segments (the
        // iterator io_import_fixed builds keeps all the buffer's bvecs), so with an arena of
        // more than ~127 pages every command failed with EINVAL (seen in the test guest on
        // QEMU's NVMe controller). The user-address path pins the I/O's own pages.
        let d = cfg.io_timeout;
        let o = &t.offers;
        Ok(NgQueue {
            ring,
            _file: t.file.clone(),
            arena: cfg.arena.clone(),
            nsid: t.nsid,
            lbads: t.geo.lbads,
            zeroes_blocks: o.write_zeroes_blocks(t.geo.lbads),
            dsm_ranges: o.dsm_ranges().clamp(1, cmd::MAX_DSM_RANGES),
            dsm_range_blocks: o.dsm_range_blocks().clamp(1, u64::from(u32::MAX)),
            dsm_blocks: o.dsm_blocks().max(1),
            pending: vec![(0, 0); cfg.depth as usize],
            slots: Vec::new(),
            free: Vec::new(),
            timeout: types::Timespec::new()
                .sec(d.as_secs())
                .nsec(d.subsec_nanos()),
            timeout_secs: d.as_secs_f64(),
            tally: CommandTally::default(),
            early: Vec::new(),
            cqes: Vec::new(),
        })
    }

    /// Queues one command for `tag` (and a DSM slot's, `slot` + 1 above it).
    fn push_cmd(&mut self, c: &PassthruCmd, user_data: u64) -> Result<(), EngineError> {
        let op = opcode::UringCmd80::new(types::Fixed(0), cmd::NVME_URING_CMD_IO)
            .cmd(c.to_uring_bytes());
        let sqe = op.build().user_data(user_data);
        loop {
            // SAFETY: the SQE points into the arena or at a DSM slot's ranges, both of which
            // outlive the ring's use of them (the slot is freed at its completion; the
            // scheduler reaps every I/O before dropping the queue).
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            self.ring
                .submit()
                .map_err(|e| EngineError::sys("io_uring_enter", e))?;
        }
    }

    /// Completes `io` at once with `errno`: not a command the device could take.
    fn refuse(&mut self, io: &Io, errno: i32) {
        self.tally.failed(format!(
            "{} of {} bytes at {} is not whole blocks of {} or is longer than one command",
            io.op.name(),
            io.len,
            io.offset,
            1u32 << self.lbads
        ));
        self.early.push(Completion {
            tag: io.tag,
            result: errno,
        });
    }

    /// Queues the command(s) of a read, write, flush or write-zeroes.
    fn push(&mut self, io: &Io) -> Result<(), EngineError> {
        let moves = io.op.moves_data();
        let addr = if moves {
            assert!(io.buf + io.len as usize <= self.arena.len(), "arena region");
            // SAFETY: in bounds (asserted); the region belongs to this I/O until it completes.
            unsafe { self.arena.as_ptr().add(io.buf) as u64 }
        } else {
            0
        };
        let mask = (1u64 << self.lbads) - 1;
        if io.op == Op::WriteZeroes && io.offset & mask == 0 && u64::from(io.len) & mask == 0 {
            // Within the controller's Write Zeroes limit: as many commands as it takes, all
            // out at once.
            let (mut at, end) = (
                io.offset >> self.lbads,
                (io.offset + u64::from(io.len)) >> self.lbads,
            );
            if at == end {
                self.refuse(io, -libc::EINVAL);
                return Ok(());
            }
            self.tally.write_zeroes += 1;
            while at < end {
                let n = (end - at).min(self.zeroes_blocks);
                let c = cmd::io_cmd(
                    Op::WriteZeroes,
                    self.nsid,
                    self.lbads,
                    at << self.lbads,
                    (n << self.lbads) as u32,
                    false,
                    0,
                )
                .expect("whole blocks within NLB");
                self.pending[io.tag as usize].0 += 1;
                self.tally.write_zeroes_commands += 1;
                self.push_cmd(&c, u64::from(io.tag))?;
                at += n;
            }
            return Ok(());
        }
        match cmd::io_cmd(
            io.op, self.nsid, self.lbads, io.offset, io.len, io.fua, addr,
        ) {
            Ok(c) => {
                self.pending[io.tag as usize].0 += 1;
                self.push_cmd(&c, u64::from(io.tag))
            }
            Err(e) => {
                self.refuse(io, e.errno());
                Ok(())
            }
        }
    }

    /// Sends the DSM command of `slot`, counting it for each of its trims.
    fn send_dsm(&mut self, slot: usize) -> Result<(), EngineError> {
        let s = &self.slots[slot];
        for &t in &s.tags {
            self.pending[t as usize].0 += 1;
        }
        let c = cmd::dsm_cmd(self.nsid, s.ranges.len(), s.ranges.as_ptr() as u64);
        self.tally.trim_commands += 1;
        self.push_cmd(&c, ((slot as u64 + 1) << 32) | u64::from(s.tags[0]))
    }

    fn take_slot(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.slots.push(DsmSlot::default());
            self.slots.len() - 1
        })
    }

    /// The trims of one submit as DSM commands of as many ranges as the limits allow; a trim
    /// longer than one range goes as several ranges, and over several commands where one
    /// would not hold it.
    fn push_trims(&mut self, trims: &[Io]) -> Result<(), EngineError> {
        let mask = (1u64 << self.lbads) - 1;
        let chunk = self.dsm_range_blocks.min(self.dsm_blocks);
        let mut slot: Option<usize> = None;
        let mut sum = 0u64;
        for io in trims {
            if io.offset & mask != 0 || u64::from(io.len) & mask != 0 || io.len == 0 {
                self.refuse(io, -libc::EINVAL);
                continue;
            }
            self.tally.trims += 1;
            let (mut at, end) = (
                io.offset >> self.lbads,
                (io.offset + u64::from(io.len)) >> self.lbads,
            );
            while at < end {
                let n = (end - at).min(chunk);
                if let Some(s) = slot {
                    if self.slots[s].ranges.len() == self.dsm_ranges || sum + n > self.dsm_blocks {
                        self.send_dsm(s)?;
                        slot = None;
                    }
                }
                let s = *slot.get_or_insert_with(|| {
                    sum = 0;
                    self.take_slot()
                });
                let sl = &mut self.slots[s];
                sl.ranges.push(DsmRange::new(at, n as u32));
                if sl.tags.last() != Some(&io.tag) {
                    sl.tags.push(io.tag);
                }
                sum += n;
                at += n;
            }
        }
        match slot {
            Some(s) => self.send_dsm(s),
            None => Ok(()),
        }
    }

    /// One command of `tag` done with `errno`: the I/O completes with its last.
    fn settle(&mut self, tag: u32, errno: i32, out: &mut Vec<Completion>) -> usize {
        let p = &mut self.pending[tag as usize];
        if p.1 == 0 {
            p.1 = errno;
        }
        p.0 = p.0.saturating_sub(1);
        if p.0 > 0 {
            return 0;
        }
        out.push(Completion { tag, result: p.1 });
        p.1 = 0;
        1
    }

    fn take(&mut self, out: &mut Vec<Completion>) -> usize {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        let mut n = 0;
        for &(ud, res) in &cqes {
            if res != 0 {
                self.tally.failed(match cmd::completion_status(res) {
                    Some(s) => format!("NVMe status {s}"),
                    None => std::io::Error::from_raw_os_error(-res).to_string(),
                });
            }
            let errno = cmd::completion_errno(res);
            match (ud >> 32) as usize {
                0 => n += self.settle(ud as u32, errno, out),
                s => {
                    let mut tags = std::mem::take(&mut self.slots[s - 1].tags);
                    for &t in &tags {
                        n += self.settle(t, errno, out);
                    }
                    tags.clear();
                    let sl = &mut self.slots[s - 1];
                    sl.tags = tags;
                    sl.ranges.clear();
                    self.free.push(s - 1);
                }
            }
        }
        cqes.clear();
        self.cqes = cqes;
        n
    }
}

impl Queue for NgQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let mut trims = Vec::new();
        for io in ios {
            if io.op == Op::Trim {
                trims.push(*io);
            } else {
                self.push(io)?;
            }
        }
        self.push_trims(&trims)
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let mut got = self.early.len();
        out.append(&mut self.early);
        loop {
            if got < min {
                // One CQE at a time: a CQE may complete several I/Os (a DSM's trims) or
                // none (one of a Write Zeroes' commands), so the count of I/Os wanted says
                // nothing of the CQEs to wait for.
                let args = types::SubmitArgs::new().timespec(&self.timeout);
                match self.ring.submitter().submit_with_args(1, &args) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                        if self.ring.completion().is_empty() {
                            return Err(EngineError::Timeout {
                                peer: "nvme-ng".into(),
                                secs: self.timeout_secs,
                            });
                        }
                    }
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {
                    }
                    Err(e) => return Err(EngineError::sys("io_uring_enter", e)),
                }
            } else if !self.ring.submission().is_empty() {
                self.ring
                    .submit()
                    .map_err(|e| EngineError::sys("io_uring_enter", e))?;
            }
            got += self.take(out);
            if got >= min {
                break;
            }
        }
        Ok(())
    }

    fn reap_until(
        &mut self,
        deadline: std::time::Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        let rest = deadline.saturating_duration_since(std::time::Instant::now());
        if !rest.is_zero() && self.early.is_empty() && self.ring.completion().is_empty() {
            let ts = types::Timespec::new()
                .sec(rest.as_secs())
                .nsec(rest.subsec_nanos());
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(EngineError::sys("io_uring_enter", e)),
            }
        }
        self.reap(0, out)
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert("fixed_buffers".into(), false.into());
        self.tally.record(&mut m);
        m
    }
}
