//! The one trait every transport implements.
//!
//! The shape follows fio's `ioengine_ops` (setup, queue, getevents, cleanup) split in two:
//!
//! * a [`Target`] is what a URI names once it has been opened: it knows its size and the
//!   parameters negotiated with it (an NBD export's flags, an iSCSI session's burst lengths), and
//!   it opens queues;
//! * a [`Queue`] is one worker's private channel to the target (an io_uring, an NBD connection,
//!   an iSCSI session). The scheduler hands it batches of [`Io`]s with [`Queue::submit`] and
//!   collects [`Completion`]s with [`Queue::reap`], in any order.
//!
//! Data lives in an [`Arena`](crate::Arena) that the scheduler allocates once per queue and passes
//! at open time; an `Io` names a region of it by offset. That lets io_uring register the arena as
//! a fixed buffer, lets network engines read payloads straight into it, and keeps the per-I/O
//! path free of allocation. The scheduler never has two I/Os in flight on overlapping regions of
//! the arena (each tag owns one slot).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::arena::Arena;
use crate::error::EngineError;

/// What an I/O does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    /// Make earlier writes durable (NBD FLUSH, SCSI SYNCHRONIZE CACHE, fsync).
    Flush,
    /// Discard a range (NBD TRIM, SCSI UNMAP). Engines without it report `Unsupported`.
    Trim,
    /// Zero a range without sending data (NBD WRITE_ZEROES, SCSI WRITE SAME, NVMe Write
    /// Zeroes, fallocate ZERO_RANGE); it reads back as zeros. Engines without it report
    /// `Unsupported`.
    #[serde(rename = "write_zeroes")]
    WriteZeroes,
}

impl Op {
    /// A read or a write: the ops whose bytes cross the wire and count in IOPS and MB/s.
    #[inline(always)]
    pub fn moves_data(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }

    /// The op's name in results and messages.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Trim => "trim",
            Op::WriteZeroes => "write_zeroes",
        }
    }
}

/// One I/O request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Io {
    /// The scheduler's slot number, unique among the I/Os in flight on one queue; it comes back
    /// in the [`Completion`]. Always `< depth`.
    pub tag: u32,
    pub op: Op,
    /// Byte offset on the target.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
    /// Offset of the data in the queue's arena (source for writes, destination for reads).
    pub buf: usize,
    /// A write that must be on stable storage when it completes (NBD_CMD_FLAG_FUA, the SCSI
    /// FUA bit, RWF_DSYNC); ignored for other operations.
    pub fua: bool,
}

/// The outcome of one I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub tag: u32,
    /// 0 on success, otherwise a negative errno-like code (engines map protocol errors to
    /// errno: NBD_EIO → -EIO, SCSI MEDIUM ERROR → -EIO, ...).
    pub result: i32,
}

/// The result of a completion that failed on its path, not on the medium: -ENOLINK, the
/// errno Linux's block layer gives a transport status (`BLK_STS_TRANSPORT`). Engines report
/// it for statuses the protocol calls path related (NVMe SCT 3h: ANA inaccessible,
/// persistent loss, transition), where the target did not carry the I/O out through this
/// path and another path may. A multipath target takes the path out and sends the I/O
/// again on another; a single-path run counts it as an error like any other.
pub const PATH_ERROR: i32 = -libc::ENOLINK;

/// A path's asymmetric access state as the target reports it (NVMe ANA; SCSI ALUA has the
/// same states), best first. The names are those Linux shows in `ana_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum AccessState {
    Optimized,
    NonOptimized,
    Inaccessible,
    PersistentLoss,
    /// Changing (NVMe "ANA change"): no I/O until it settles.
    Change,
}

impl AccessState {
    pub fn name(self) -> &'static str {
        match self {
            AccessState::Optimized => "optimized",
            AccessState::NonOptimized => "non-optimized",
            AccessState::Inaccessible => "inaccessible",
            AccessState::PersistentLoss => "persistent-loss",
            AccessState::Change => "change",
        }
    }
}

/// Parameters for opening one queue.
#[derive(Clone)]
pub struct QueueConfig {
    /// Worker index (0-based), for engines that label connections.
    pub worker: usize,
    /// Most I/Os the scheduler will keep in flight on this queue.
    pub depth: u32,
    /// Largest single transfer the scheduler will ask for.
    pub max_len: u32,
    /// Data buffers; the queue keeps the `Arc` for as long as it may touch them.
    pub arena: Arc<Arena>,
    /// How long `reap` may wait without any completion before it fails with
    /// [`EngineError::Timeout`]: a dead or silent peer ends the run, never hangs it.
    pub io_timeout: Duration,
    /// The io_uring a network initiator's socket joins when its layer is io_uring (a
    /// multipath queue passes one to all of its paths, so that one `io_uring_enter` serves
    /// them all); `None`, or an engine on the poll loop: no sharing. An engine that cannot
    /// attach (no slot left, an older kernel) uses a ring of its own.
    pub socket_ring: Option<crate::sockring::SharedRing>,
}

/// Facts about an opened target that the run reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetInfo {
    /// The URI as the user wrote it.
    pub uri: String,
    /// Engine family: "null", "mem", "io_uring", "sync", "nbd", "iscsi", "nvme".
    pub engine: String,
    /// Usable size in bytes.
    pub size: u64,
    /// Logical block size: offsets and lengths must be multiples of it (1 when any will do).
    pub block_size: u32,
    /// Largest transfer in one request, when the target limits it.
    pub max_transfer: Option<u32>,
    pub read_only: bool,
    /// Engine-specific facts: open flags, negotiated protocol parameters, device transport.
    pub params: crate::params::Params,
}

/// What a target reports about which part of a range holds written data (holes read as zeros
/// without touching the medium, so a read test over them measures nothing real).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Allocation {
    /// How the target was asked: "SEEK_DATA", "st_blocks", "NBD base:allocation",
    /// "GET LBA STATUS".
    pub method: String,
    /// Bytes of the range the answer covers (a target may answer for less than asked).
    pub checked_bytes: u64,
    /// Bytes of those reported as never written (holes, deallocated, unmapped).
    pub unwritten_bytes: u64,
}

/// An opened target: a factory for per-worker queues.
pub trait Target: Send + Sync {
    fn info(&self) -> &TargetInfo;

    /// Which part of `[offset, offset + len)` holds written data, where the target can tell
    /// (`Ok(None)` when it cannot). Called outside any measured window; engines may open a
    /// short-lived connection for it.
    fn allocation(&self, _offset: u64, _len: u64) -> Result<Option<Allocation>, EngineError> {
        Ok(None)
    }

    /// After a window with trims or write-zeroes: what the target holds of the range (space
    /// given back shows as unwritten). By default what [`allocation`](Self::allocation)
    /// says; a target whose `allocation` cannot tell written data from touched memory (the
    /// `mem:` RAM disk, populated up front) answers here alone. Outside any window.
    fn allocation_after_discards(
        &self,
        offset: u64,
        len: u64,
    ) -> Result<Option<Allocation>, EngineError> {
        self.allocation(offset, len)
    }

    /// Called by the scheduler before every run's queues open (so before each measured cell of a
    /// comparison): targets read through a cache they control drop the span from it (files:
    /// fdatasync + posix_fadvise DONTNEED over the span, as fio's invalidate=1) unless the user
    /// asked to keep it. Returns what was done, for the result's parameters (`None`: nothing).
    fn invalidate_cache(&self, _span: u64) -> Result<Option<String>, EngineError> {
        Ok(None)
    }

    /// Whether the target carries `op` out (a trim, a write-zeroes: the engine has it and the
    /// target offered it). The run refuses a workload with an op its target lacks before any
    /// I/O. Reads, writes and flushes every engine has.
    fn supports(&self, op: Op) -> bool {
        op.moves_data() || op == Op::Flush
    }

    /// Opens one queue (connection, ring, session). Called once per worker before the run starts;
    /// the time it takes is not part of the measurement.
    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError>;

    /// The access state this path's target reports for the logical unit as last learnt
    /// (NVMe: the ANA log page, read again when an I/O comes back with a path-related status
    /// or a change notice arrives), `None` when it reports none. Cheap: a multipath queue
    /// asks it between reaps.
    fn access_state(&self) -> Option<AccessState> {
        None
    }

    /// Asks the target again now and returns the state (a multipath reconnection does,
    /// before the path carries I/O again). May wait on the target: never called on a
    /// stream's path.
    fn refresh_access_state(&self) -> Result<Option<AccessState>, EngineError> {
        Ok(self.access_state())
    }
}

/// The stream's side of a fused I/O (see [`Queue::submit_fused`]): it produces a write's data
/// and takes a read's, at the place where an engine that moves bytes in this process keeps
/// them, so those bytes are touched once instead of once in the arena and once by the engine.
pub trait DataPath {
    /// Writes the data of write `io` into `dst` (`io.len` bytes where the target keeps them).
    /// Byte for byte what the stream would have put in the I/O's arena region.
    fn fill(&mut self, io: &Io, dst: &mut [u8]);

    /// Read `io` found `src` (`io.len` bytes of the target): copies them into `dst` (the I/O's
    /// arena region), checking them on the way when the stream verifies. `ahead` is what the
    /// engine reads next (the start of the batch's next read, or empty), for the path to
    /// prefetch while it works on this one: a hint, never read.
    fn read(&mut self, io: &Io, src: &[u8], dst: &mut [u8], ahead: &[u8]);
}

/// What [`Queue::readiness`] names.
pub struct Readiness<'a> {
    pub fd: std::os::fd::BorrowedFd<'a>,
    pub write: bool,
    /// The queue already holds completions (or received bytes the socket no longer shows,
    /// such as records decrypted inside a TLS session): `reap(0)` has something to give
    /// without the socket being readable, so a caller must not wait on it first.
    pub held: bool,
}

/// One worker's channel to a target.
pub trait Queue: Send {
    /// Hands over a batch of I/Os. Engines may start them at once or when `reap` is next called
    /// (one system call for the whole batch). The scheduler never exceeds the configured depth.
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError>;

    /// Appends completed I/Os to `out`, waiting until at least `min` have completed since the
    /// last call (or fewer when fewer are in flight). Completions may arrive in any order.
    /// Fails with [`EngineError::Timeout`] when nothing completes within the I/O timeout.
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError>;

    /// Appends what completes by `deadline`, returning as soon as anything has (or at the
    /// deadline with nothing): the open loop's wait, which must wake for a completion and for
    /// the next arrival alike without holding a core. Engines that can sleep on their
    /// completions (a ring, a socket) override it; the default polls `reap(0)`.
    fn reap_until(
        &mut self,
        deadline: std::time::Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        loop {
            let n = out.len();
            self.reap(0, out)?;
            if out.len() > n || std::time::Instant::now() >= deadline {
                return Ok(());
            }
            std::hint::spin_loop();
        }
    }

    /// Whether this queue moves the data of its I/Os itself, in this process, and so can let
    /// the stream produce write data and check read data during that one copy
    /// ([`submit_fused`](Self::submit_fused)). Asked once per stream; `false` (the default)
    /// keeps the ordinary path: writes stamped into the arena before `submit`, reads checked
    /// after `reap`.
    fn fuses_data(&self) -> bool {
        false
    }

    /// As [`submit`](Self::submit), with every write's data taken from `data.fill` and every
    /// read's bytes handed to `data.read` (which puts them in the arena), instead of the arena
    /// region being read or written directly. Called only when [`fuses_data`](Self::fuses_data)
    /// says so; the default ignores `data` and submits.
    fn submit_fused(&mut self, ios: &[Io], data: &mut dyn DataPath) -> Result<(), EngineError> {
        let _ = data;
        self.submit(ios)
    }

    /// The socket a caller waiting on several queues at once (multipath) polls for this one:
    /// readable means `reap(0)` has something to take, and `write` asks for writability too
    /// (a send found the socket full); `held` says `reap(0)` has something already. A caller
    /// reaps only queues that are held or whose socket is ready, so `reap(0)` takes what one
    /// receive gives and leaves the rest for the socket to show. `None` (the default): no
    /// such socket, the caller polls `reap(0)`.
    fn readiness(&self) -> Option<Readiness<'_>> {
        None
    }

    /// A queue over several paths (multipath): the path (an index into the target's paths)
    /// that carried the last completion of `tag` this queue returned, so that the stream can
    /// count its intervals per path. Asked only for completions just reaped; `None` (the
    /// default): one path, nothing to tell.
    fn completed_on(&self, tag: u32) -> Option<usize> {
        let _ = tag;
        None
    }

    /// [`completed_on`](Self::completed_on) for a batch just reaped, appended to `out` (0
    /// for a completion it says nothing of): one call per batch instead of one per
    /// completion, for a queue that can answer from a table.
    fn paths_of(&self, done: &[Completion], out: &mut Vec<u16>) {
        out.extend(
            done.iter()
                .map(|c| self.completed_on(c.tag).unwrap_or(0).min(u16::MAX as usize) as u16),
        );
    }

    /// Per-queue facts worth reporting (e.g. which completion path ran), merged into the
    /// result's engine parameters after the run.
    fn stats(&self) -> crate::params::Params {
        BTreeMap::new()
    }

    /// Starts what [`submit`](Self::submit) was given without waiting for any completion: the
    /// caller has work to do before it next reaps (the stream stamping its next writes ahead)
    /// and wants the batch in flight meanwhile. The default does nothing, for engines whose
    /// `submit` starts I/O itself or holds it on purpose (NBD's coalescing); a ring that
    /// submits in `reap` overrides it.
    fn commit(&mut self) -> Result<(), EngineError> {
        Ok(())
    }

    /// Ends the queue cleanly (NBD DISC, iSCSI logout) after all I/O has been reaped.
    fn close(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
}
