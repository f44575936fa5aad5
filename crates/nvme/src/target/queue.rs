//! The state of one connection (one queue pair) that the admin and I/O command handlers share
//! with the connection's loop (`conn.rs`): [`Conn`], the queue a Connect bound it to
//! ([`Queue`]), how a connection ends ([`End`]), the writes waiting for their data
//! ([`PendingWrite`]), and the replies every handler sends (CapsuleResp, C2HData, R2T).

use std::collections::HashMap;
use std::io;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zerocopy::little_endian::{U16, U32};

use super::ctrl::{Ctrl, Shared};
use crate::wire::header::{flags, pdu_type, zeroed, CapsuleResp, CommonHeader, Cqe, DataHdr, R2t};
use crate::wire::pdu::{encode_head, encode_pdu, RxConfig, TxConfig};
use crate::wire::status::Status;
use crate::wire::{fes, WireError};
use sanbench_blockstore::counters::Op;
use sanbench_blockstore::delay::DueQueue;
use sanbench_blockstore::out::Out;

/// Why a connection ended other than by the host closing it.
#[derive(Debug)]
pub(crate) enum End {
    Closed,
    Io(io::Error),
    Fatal { fes: u16, fei: u32, what: String },
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Closed => write!(f, "closed"),
            End::Io(e) => write!(f, "{e}"),
            End::Fatal { fes, fei, what } => write!(f, "{what} (C2HTermReq FES {fes} FEI {fei})"),
        }
    }
}

impl From<io::Error> for End {
    fn from(e: io::Error) -> End {
        End::Io(e)
    }
}

pub(crate) fn fatal(fes: u16, fei: u32, what: impl Into<String>) -> End {
    End::Fatal {
        fes,
        fei,
        what: what.into(),
    }
}

impl From<WireError> for End {
    fn from(e: WireError) -> End {
        let (fes, fei) = e.fes();
        fatal(fes, fei, e.to_string())
    }
}

/// The queue a Connect bound this connection to.
pub(crate) struct Queue {
    pub qid: u16,
    /// Entries (1-based).
    pub size: u16,
    pub ctrl: Arc<Ctrl>,
    /// The host disabled SQ flow control at Connect: a successful read ends with its last
    /// C2HData flagged SUCCESS and no CapsuleResp.
    pub sqflow_off: bool,
}

/// One connection. The command handlers use its `pub` fields and the reply methods below;
/// the `pub(super)` fields are the loop's (`conn.rs`, `conn/delayed.rs`).
pub(crate) struct Conn {
    pub(super) s: TcpStream,
    pub sh: Arc<Shared>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) rx: RxConfig,
    pub(super) tx: TxConfig,
    pub(super) out: Out,
    pub q: Option<Queue>,
    pub(super) sqhd: u16,
    pub pending: HashMap<u16, PendingWrite>,
    pub(super) next_ttag: u16,
    /// Asynchronous Event Requests held, by command id, oldest first: the next event (an ANA
    /// change of this connection's port) completes the first.
    pub aers: std::collections::VecDeque<u16>,
    /// The port (0-based) this connection came in through.
    pub port: usize,
    /// With a delay: I/O completions held until due (`conn/delayed.rs`).
    pub(super) held: Option<DueQueue<Vec<u8>>>,
    /// When the bytes read last arrived: the PDUs they complete were received then.
    pub(super) arrived: Instant,
    /// R2Ts sent: an I/O command that sent one is not complete yet.
    pub(super) r2ts: u64,
    /// `serve --metrics-listen`: this connection's I/O counters.
    pub metrics: Option<sanbench_blockstore::counters::ConnCounters>,
}

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
    /// What it counts as when it completes (`serve --metrics-listen`).
    pub counted: Option<(usize, Op, u64)>,
    pub cid: u16,
    pub off: u64,
    pub len: usize,
    pub buf: Vec<u8>,
    pub kind: Kind,
}

impl Conn {
    pub fn set_read_timeout(&self, d: Duration) -> io::Result<()> {
        self.s.set_read_timeout(Some(d))
    }

    /// Appends a CapsuleResp.
    pub fn resp(&mut self, cid: u16, st: Status, result: u64) -> Result<(), End> {
        let mut r: CapsuleResp = zeroed();
        r.ch = CommonHeader::new(pdu_type::CAPSULE_RESP);
        r.cqe = Cqe {
            result: result.into(),
            sq_head: self.sqhd.into(),
            sq_id: self.q.as_ref().map_or(0, |q| q.qid).into(),
            command_id: cid.into(),
            status: st.to_field().into(),
        };
        encode_pdu(self.out.buf(), &r, &[], &self.tx);
        Ok(())
    }

    /// Appends C2HData PDUs carrying `data` (at most `limit` bytes of it, the SGL's length),
    /// in pieces of at most 128 KiB, the last one flagged.
    pub fn c2h(&mut self, cid: u16, data: &[u8], limit: u32) {
        let data = &data[..data.len().min(limit as usize)];
        let _ = self.c2h_with(cid, data.len(), false, |out, at, n| {
            out.buf().extend_from_slice(&data[at..at + n]);
            Ok(())
        });
    }

    /// C2HData PDUs for `len` bytes that `fill(out, offset, n)` appends piece by piece (a
    /// store read referenced where it lies, or copied when a digest needs it); `success` flags
    /// the last one SUCCESS (the command's completion: no CapsuleResp follows). On an error
    /// the output is put back.
    pub fn c2h_with(
        &mut self,
        cid: u16,
        len: usize,
        success: bool,
        mut fill: impl FnMut(&mut Out, usize, usize) -> io::Result<()>,
    ) -> io::Result<()> {
        // Up to 1 MiB per C2HData PDU (Linux's nvmet sends one per command): in 128 KiB
        // pieces a 1 MiB read cost the target 1.24x the iSCSI target's CPU at 0.80x its IOPS.
        let piece = 1024 * 1024;
        let mark = self.out.mark();
        let mut off = 0;
        while off < len {
            let n = piece.min(len - off);
            let mut h: DataHdr = zeroed();
            h.ch = CommonHeader::new(pdu_type::C2H_DATA);
            if off + n == len {
                h.ch.flags = flags::LAST_PDU | if success { flags::SUCCESS } else { 0 };
            }
            h.command_id = U16::new(cid);
            h.data_offset = U32::new(off as u32);
            h.data_length = U32::new(n as u32);
            let digest = encode_head(self.out.buf(), &h, n, &self.tx);
            let at = self.out.buf().len();
            if let Err(e) = fill(&mut self.out, off, n) {
                self.out.truncate(mark);
                return Err(e);
            }
            if digest {
                // With digests `out` copies (zero_copy is off), so the data is in the buffer.
                let b = self.out.buf();
                debug_assert_eq!(b.len() - at, n);
                let c = crate::wire::crc32c(&b[at..]);
                b.extend_from_slice(&c.to_le_bytes());
            }
            off += n;
        }
        Ok(())
    }

    /// Registers a write whose data the host sends after an R2T for all of it.
    pub fn r2t(&mut self, cid: u16, w: PendingWrite) -> Result<(), End> {
        let qsize = self.q.as_ref().map_or(1, |q| q.size) as usize;
        if self.pending.len() >= qsize {
            // More writes in flight than the queue holds: the host overran its queue.
            return Err(fatal(
                fes::PDU_SEQUENCE_ERROR,
                0,
                "more commands than queue entries",
            ));
        }
        let mut ttag = self.next_ttag;
        while self.pending.contains_key(&ttag) {
            ttag = ttag.wrapping_add(1);
        }
        self.next_ttag = ttag.wrapping_add(1);
        let mut r: R2t = zeroed();
        r.ch = CommonHeader::new(pdu_type::R2T);
        r.command_id = U16::new(cid);
        r.ttag = U16::new(ttag);
        r.r2t_offset = U32::new(0);
        r.r2t_length = U32::new(w.len as u32);
        encode_pdu(self.out.buf(), &r, &[], &self.tx);
        self.r2ts += 1;
        self.pending.insert(ttag, w);
        Ok(())
    }
}
