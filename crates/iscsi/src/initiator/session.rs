//! One iSCSI session (one connection) as an engine [`Queue`] (RFC 7143 §3.2, §4.2, §11).
//!
//! * Commands are numbered inside the CmdSN window: a command goes out only while
//!   `CmdSN <= MaxCmdSN` (§4.2.2.1); the rest wait in a local queue that drains whenever a
//!   response moves MaxCmdSN on.
//! * ITT = the scheduler's tag, so a response finds its task by index, with no map.
//! * Writes carry immediate data and unsolicited Data-Out up to FirstBurstLength when
//!   negotiated (§4.2.5.2); each R2T is answered at once by its Data-Out sequence.
//! * Data-In payloads go straight from the receive buffer into the arena region of the I/O;
//!   DataSN is checked per command, and a Data-In with the S bit completes it (phase collapse).
//! * Everything a batch produces is appended to one output buffer and sent with one
//!   non-blocking `send`; the I/O loop itself lives in [`super::pump`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use sanbench_io::{Arena, Completion, EngineError, Io, Op};

use super::discard::Discard;
use super::link::{Link, LoggedIn, RecvBuf};
use crate::scsi::cdb::op;
use crate::scsi::sense::{key, status, Sense};
use crate::wire::bhs::encode_lun;
use crate::wire::framer::{encode_pdu_with, FrameConfig};
use crate::wire::keys::SessionParams;
use crate::wire::pdu::{DataOut, ScsiCommand};

mod discard;
mod receive;

pub(crate) use discard::Chain;

/// Reserved ITT (§11.2.1).
pub(crate) const NO_TAG: u32 = 0xffff_ffff;
/// ITTs above the tag space for our own NOP-Out pings and the Logout.
pub(crate) const PING_ITT: u32 = 0x8000_0000;
pub(crate) const LOGOUT_ITT: u32 = 0x8000_0001;
const MAX_UA_RETRIES: u8 = 3;

/// Serial number arithmetic (RFC 1982) on 32-bit sequence numbers.
pub(crate) fn sn_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < 1 << 31
}
fn sn_le(a: u32, b: u32) -> bool {
    a == b || sn_lt(a, b)
}

/// Where a command's Data-Out comes from: the I/O's arena region, the task's own UNMAP
/// parameter list, or zeros (WRITE SAME's one block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Src {
    #[default]
    Arena,
    Param,
    Zero,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    In,
    Out,
    None,
}

/// A command waiting for (or about to get) a CmdSN.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cmd {
    pub tag: u32,
    pub cdb: [u8; 16],
    pub dir: Dir,
    /// Offset of the Data-Out in `src`.
    pub buf: usize,
    pub len: u32,
    pub src: Src,
    /// Accept fewer Data-In bytes than `len` (INQUIRY and friends); reads must be whole.
    pub allow_short: bool,
    /// Times this command was re-issued after a UNIT ATTENTION.
    pub retries: u8,
}

#[derive(Clone, Copy, Debug, Default)]
struct Task {
    active: bool,
    dir: Option<Dir>,
    buf: usize,
    len: u32,
    src: Src,
    got: u32,
    next_data_sn: u32,
    next_r2t_sn: u32,
    allow_short: bool,
    cdb: [u8; 16],
    retries: u8,
}

/// Counters reported by `stats()`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Counters {
    pub commands: u64,
    pub data_in_pdus: u64,
    pub data_out_pdus: u64,
    pub r2ts: u64,
    pub window_waits: u64,
    pub check_conditions: u64,
    pub unit_attentions: u64,
    pub other_status: u64,
    pub last_sense: Option<Sense>,
    pub last_status: Option<u8>,
    pub nop_in_answered: u64,
    pub pings: u64,
    pub async_events: u64,
    pub sends: u64,
    pub recvs: u64,
}

/// A logged-in session driving I/O for one queue.
pub struct Session {
    pub(crate) link: Link,
    pub(crate) rx: RecvBuf,
    pub(crate) rx_cfg: FrameConfig,
    pub(crate) tx_cfg: FrameConfig,
    pub(crate) out: Vec<u8>,
    pub(crate) sent: usize,
    /// The last send found the socket full: wait for writability too.
    pub(crate) blocked: bool,
    /// Commands encoded into `out` and not yet handed to the socket.
    pub(crate) unsent_cmds: usize,
    /// `out` holds something that must not wait (Data-Out for an R2T, NOP-Out, Logout).
    pub(crate) urgent: bool,
    /// Coalesce up to this many new commands while more than half the depth is on the wire.
    pub(crate) submit_batch: usize,
    pub(crate) params: SessionParams,
    pub(crate) tsih: u16,
    arena: Arc<Arena>,
    lun: u64,
    block_size: u32,
    tasks: Vec<Task>,
    pub(crate) inflight: usize,
    pending: VecDeque<Cmd>,
    pub(crate) done: Vec<Completion>,
    pub(crate) cmd_sn: u32,
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
    pub(crate) exp_stat_sn: u32,
    pub(crate) io_timeout: Duration,
    pub(crate) ping_outstanding: bool,
    pub(crate) logged_out: bool,
    pub(crate) counters: Counters,
    /// What the LUN offers for trims and write-zeroes (`set_discard`).
    pub(crate) disc: Discard,
    /// Each task's UNMAP parameter list, `slot` bytes apart; empty without trims.
    plist: Vec<u8>,
    slot: usize,
    /// Per tag: the task whose UNMAP also carries this I/O's descriptor, or NO_TAG.
    follow: Vec<u32>,
    /// I/Os that complete with another task's UNMAP.
    followers: usize,
    /// Per tag: what is left of a trim or zeroing after the command in flight.
    chain: Vec<Chain>,
    /// Why io_uring was asked for and not used by this session.
    pub(crate) socket_fallback: Option<String>,
}

/// The bytes of `len` at `off` of a command's Data-Out source; zeros where the source is
/// shorter (cannot happen: `build` sizes every command from its source).
fn fill(dst: &mut [u8], arena: &Arena, plist: &[u8], src: Src, off: usize) {
    match src {
        // SAFETY: a write's source region: only read, and inside the arena (checked in
        // `build`); the scheduler keeps it unchanged until the I/O completes.
        Src::Arena => dst.copy_from_slice(unsafe { arena.slice(off, dst.len()) }),
        Src::Param => match plist.get(off..off + dst.len()) {
            Some(b) => dst.copy_from_slice(b),
            None => dst.fill(0),
        },
        Src::Zero => dst.fill(0),
    }
}

impl Session {
    /// Moves the session's sends and receives onto io_uring; a ring that fails to open
    /// leaves it on the poll loop, which its stats say (`socket_fallback`).
    pub(crate) fn use_ring(&mut self, shared: Option<&sanbench_io::SharedRing>) {
        self.socket_fallback = self.link.use_ring(shared).err();
    }

    pub(crate) fn new(
        li: LoggedIn,
        arena: Arc<Arena>,
        depth: u32,
        lun: u16,
        block_size: u32,
        io_timeout: Duration,
        submit_batch: u32,
    ) -> Result<Session, EngineError> {
        let p = li.outcome.params.clone();
        let rx_cfg = FrameConfig {
            header_digest: p.header_digest,
            data_digest: p.data_digest,
            max_recv_data_segment_length: p.our_max_recv_data_segment_length,
        };
        let tx_cfg = FrameConfig {
            max_recv_data_segment_length: p.peer_max_recv_data_segment_length.max(512),
            ..rx_cfg
        };
        // A short read timeout lets the wait loop check its deadline and send a keep-alive
        // ping; it never delays data, which wakes the read at once. 1 % of the timeout: a
        // multipath path (whose timeout is `path_timeout`) that falls silent while it is the
        // only busy one fails within 1 % of it.
        let tick = (io_timeout / 100).clamp(Duration::from_millis(5), Duration::from_secs(1));
        li.link
            .stream
            .set_read_timeout(Some(tick))
            .map_err(|e| li.link.lost(format!("socket setup: {e}")))?;
        Ok(Session {
            socket_fallback: None,
            rx_cfg,
            tx_cfg,
            out: Vec::with_capacity(1 << 20),
            sent: 0,
            blocked: false,
            unsent_cmds: 0,
            urgent: false,
            submit_batch: submit_batch.max(1) as usize,
            tsih: li.outcome.tsih,
            arena,
            lun: encode_lun(lun),
            block_size: block_size.max(1),
            tasks: vec![Task::default(); depth.max(1) as usize],
            inflight: 0,
            pending: VecDeque::with_capacity(depth as usize),
            done: Vec::with_capacity(depth as usize),
            cmd_sn: li.outcome.exp_cmd_sn,
            exp_cmd_sn: li.exp_cmd_sn,
            max_cmd_sn: li.max_cmd_sn,
            exp_stat_sn: li.outcome.next_stat_sn,
            io_timeout,
            ping_outstanding: false,
            logged_out: false,
            counters: Counters::default(),
            disc: Discard::default(),
            plist: Vec::new(),
            slot: 0,
            follow: Vec::new(),
            followers: 0,
            chain: Vec::new(),
            params: p,
            link: li.link,
            rx: li.rx,
        })
    }

    pub(crate) fn set_block_size(&mut self, bs: u32) {
        self.block_size = bs.max(1);
    }

    /// Data-In bytes received by the last command with `tag`.
    pub(crate) fn got(&self, tag: u32) -> u32 {
        self.tasks.get(tag as usize).map_or(0, |t| t.got)
    }

    pub(crate) fn depth(&self) -> usize {
        self.tasks.len()
    }

    pub(crate) fn arena(&self) -> &Arena {
        &self.arena
    }

    /// In flight plus waiting for the window.
    pub(crate) fn outstanding(&self) -> usize {
        self.inflight + self.pending.len() + self.followers
    }

    /// Builds the command for one engine I/O, or the errno to complete it with at once.
    pub(crate) fn build(&mut self, io: &Io) -> Result<Cmd, i32> {
        let bs = self.block_size as u64;
        let rw = matches!(io.op, Op::Read | Op::Write);
        if rw
            && (io.len == 0 || !io.offset.is_multiple_of(bs) || !(io.len as u64).is_multiple_of(bs))
        {
            return Err(-libc::EINVAL);
        }
        if rw
            && io
                .buf
                .checked_add(io.len as usize)
                .is_none_or(|e| e > self.arena.len())
        {
            return Err(-libc::EINVAL);
        }
        let lba = io.offset / bs;
        let blocks = io.len as u64 / bs;
        let mut cdb = [0u8; 16];
        let dir = match io.op {
            Op::Read | Op::Write => {
                let read = io.op == Op::Read;
                if lba > u32::MAX as u64 || blocks > u16::MAX as u64 {
                    cdb[0] = if read { op::READ16 } else { op::WRITE16 };
                    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
                    cdb[10..14].copy_from_slice(&(blocks as u32).to_be_bytes());
                } else {
                    cdb[0] = if read { op::READ10 } else { op::WRITE10 };
                    cdb[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
                    cdb[7..9].copy_from_slice(&(blocks as u16).to_be_bytes());
                }
                if !read && io.fua {
                    // FUA: the write is on the medium when the target reports it done.
                    cdb[1] |= 0x08;
                }
                if read {
                    Dir::In
                } else {
                    Dir::Out
                }
            }
            Op::Flush => {
                cdb[0] = op::SYNCHRONIZE_CACHE10;
                Dir::None
            }
            Op::Trim | Op::WriteZeroes => return self.discard_cmd(io),
        };
        Ok(Cmd {
            tag: io.tag,
            cdb,
            dir,
            buf: io.buf,
            len: if dir == Dir::None { 0 } else { io.len },
            src: Src::Arena,
            allow_short: false,
            retries: 0,
        })
    }

    /// Queues a command: issued now when the window is open and nothing waits before it.
    pub(crate) fn enqueue(&mut self, cmd: Cmd) -> Result<(), EngineError> {
        let t = self
            .tasks
            .get(cmd.tag as usize)
            .ok_or_else(|| EngineError::Invalid(format!("tag {} above queue depth", cmd.tag)))?;
        if t.active
            || self.pending.iter().any(|p| p.tag == cmd.tag)
            || self
                .follow
                .get(cmd.tag as usize)
                .is_some_and(|&l| l != NO_TAG)
        {
            return Err(EngineError::Invalid(format!(
                "tag {} already in flight",
                cmd.tag
            )));
        }
        if self.pending.is_empty() && sn_le(self.cmd_sn, self.max_cmd_sn) {
            self.issue(cmd);
        } else {
            self.counters.window_waits += 1;
            self.pending.push_back(cmd);
        }
        Ok(())
    }

    /// Issues queued commands while the window allows.
    fn drain_pending(&mut self) {
        while sn_le(self.cmd_sn, self.max_cmd_sn) {
            match self.pending.pop_front() {
                Some(c) => self.issue(c),
                None => break,
            }
        }
    }

    fn issue(&mut self, c: Cmd) {
        let p = &self.params;
        let (imm, unsol) = if c.dir == Dir::Out {
            let peer_max = self.tx_cfg.max_recv_data_segment_length;
            let fb = p.first_burst_length.min(c.len);
            let imm = if p.immediate_data {
                fb.min(peer_max)
            } else {
                0
            };
            (imm, if p.initial_r2t { imm } else { fb })
        } else {
            (0, 0)
        };
        let cmd = ScsiCommand {
            immediate: false,
            final_: unsol == imm,
            read: c.dir == Dir::In,
            write: c.dir == Dir::Out,
            attr: 1,
            lun: self.lun,
            itt: c.tag,
            expected_data_len: c.len,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
            cdb: c.cdb,
        };
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        self.tasks[c.tag as usize] = Task {
            active: true,
            dir: Some(c.dir),
            buf: c.buf,
            len: c.len,
            src: c.src,
            got: 0,
            next_data_sn: 0,
            next_r2t_sn: 0,
            allow_short: c.allow_short,
            cdb: c.cdb,
            retries: c.retries,
        };
        self.inflight += 1;
        self.unsent_cmds += 1;
        self.counters.commands += 1;
        let h = cmd.to_bytes();
        let (arena, plist) = (&self.arena, &self.plist);
        encode_pdu_with(&mut self.out, &h, &[], imm as usize, &self.tx_cfg, |dst| {
            fill(dst, arena, plist, c.src, c.buf)
        });
        if unsol > imm {
            self.data_out(c.tag, NO_TAG, imm, unsol);
        }
    }

    /// Appends the Data-Out PDUs for bytes `from..to` of task `tag`'s buffer.
    fn data_out(&mut self, tag: u32, ttt: u32, from: u32, to: u32) {
        let (buf, src) = (self.tasks[tag as usize].buf, self.tasks[tag as usize].src);
        let max = self.tx_cfg.max_recv_data_segment_length;
        let mut off = from;
        let mut data_sn = 0;
        while off < to {
            let n = (to - off).min(max);
            let d = DataOut {
                final_: off + n == to,
                lun: self.lun,
                itt: tag,
                ttt,
                exp_stat_sn: self.exp_stat_sn,
                data_sn,
                buffer_offset: off,
            };
            let h = d.to_bytes();
            let (arena, plist) = (&self.arena, &self.plist);
            // Bounds: checked against the task length in `on_r2t` and the source in `build`.
            encode_pdu_with(&mut self.out, &h, &[], n as usize, &self.tx_cfg, |dst| {
                fill(dst, arena, plist, src, buf + off as usize)
            });
            off += n;
            data_sn += 1;
            self.counters.data_out_pdus += 1;
        }
    }

    fn update_sn(&mut self, exp: u32, max: u32) {
        // §4.2.2.1: ignore a window that ends before it starts.
        if sn_lt(max, exp.wrapping_sub(1)) {
            return;
        }
        if sn_lt(self.max_cmd_sn, max) {
            self.max_cmd_sn = max;
        }
        if sn_lt(self.exp_cmd_sn, exp) {
            self.exp_cmd_sn = exp;
        }
    }

    fn got_stat_sn(&mut self, stat_sn: u32) {
        let next = stat_sn.wrapping_add(1);
        if sn_lt(self.exp_stat_sn, next) {
            self.exp_stat_sn = next;
        }
    }

    fn task(&mut self, itt: u32, what: &str) -> Result<&mut Task, EngineError> {
        match self.tasks.get_mut(itt as usize) {
            Some(t) if t.active => Ok(t),
            _ => Err(self.link.proto(format!("{what} for unknown ITT {itt:#x}"))),
        }
    }

    fn complete(&mut self, tag: u32, response: u8, st: u8, sense: Option<Sense>) {
        let t = &mut self.tasks[tag as usize];
        let short = t.dir == Some(Dir::In) && !t.allow_short && t.got != t.len;
        t.active = false;
        let t = *t;
        // A UNIT ATTENTION (a new I_T nexus after power on or reset, a capacity change) says
        // nothing about this command: it was not executed. Re-issue it, as the Linux SCSI
        // layer does, a bounded number of times.
        if st == status::CHECK_CONDITION
            && sense.is_some_and(|s| s.key == key::UNIT_ATTENTION)
            && t.retries < MAX_UA_RETRIES
        {
            self.counters.unit_attentions += 1;
            self.counters.last_sense = sense;
            self.inflight -= 1;
            let cmd = Cmd {
                tag,
                cdb: t.cdb,
                dir: t.dir.unwrap_or(Dir::None),
                buf: t.buf,
                len: t.len,
                src: t.src,
                allow_short: t.allow_short,
                retries: t.retries + 1,
            };
            self.requeue(cmd);
            return;
        }
        use crate::wire::codes::scsi_response::COMMAND_COMPLETED as DONE;
        let result = match (response, st) {
            (DONE, status::GOOD) if !short => 0,
            (DONE, status::GOOD) => -libc::EIO,
            (DONE, status::CHECK_CONDITION) => {
                self.counters.check_conditions += 1;
                self.counters.last_sense = sense;
                -libc::EIO
            }
            (DONE, status::BUSY | status::TASK_SET_FULL) => -libc::EBUSY,
            _ => -libc::EIO,
        };
        if st != status::GOOD {
            self.counters.last_status = Some(st);
            if st != status::CHECK_CONDITION {
                self.counters.other_status += 1;
            }
        }
        self.inflight -= 1;
        self.finish(tag, result);
    }

    /// Issues a command now when the window allows, else after those waiting.
    fn requeue(&mut self, cmd: Cmd) {
        if self.pending.is_empty() && sn_le(self.cmd_sn, self.max_cmd_sn) {
            self.issue(cmd);
        } else {
            self.pending.push_back(cmd);
        }
    }
}
