//! Trace replay (`sanbench replay`): what a run needs to replay a trace instead of drawing
//! I/Os from an access specification, and what it measured.
//!
//! The trace is read by the stream itself, one record at a time from a [`TraceSource`]
//! (each stream opens its own reader: a file read twice is cheaper than a shared cursor, and
//! memory stays flat, the reader's buffer bounding the read-ahead), its offsets placed by the
//! [`Mapping`] fitted before the run from the trace's [`Summary`] (one pass, counts only).
//! Timed, each I/O's intended time is its trace time since the first record over `speed`,
//! and the open loop's accounting does the rest (response time from the intended time, issue
//! lag, no coordinated omission: run/replay.rs); as fast as possible, `qd` I/Os are kept in
//! flight as the closed loop does. Each target replays the whole trace on one stream.

use std::sync::Arc;
use std::time::Duration;

use sanbench_doc::replay::{LateIos, OpCounts, Replay as ReplayDoc, LAG_P99_GOAL_US};
use sanbench_stats::LatencyHistogram;
/// The trace formats (crates/trace), for the commands above the engine.
pub use sanbench_trace as trace;
pub use sanbench_trace::{OffsetMap, Summary, TraceError, TraceOp, TraceRecord};

use crate::error::EngineError;
use crate::spec::{Segment, Workload};

/// A trace's records, read on demand.
pub type Records = Box<dyn Iterator<Item = Result<TraceRecord, TraceError>> + Send>;

/// Opens a trace from its start (once per stream).
pub trait TraceSource: Send + Sync {
    fn open(&self) -> Result<Records, EngineError>;
}

/// A replay the run performs instead of its workload's generator.
#[derive(Clone)]
pub struct Replay {
    pub source: Arc<dyn TraceSource>,
    /// The one pass over the trace made before the run.
    pub summary: Summary,
    /// Time scaling (2: twice as fast as recorded); ignored when `afap`.
    pub speed: f64,
    /// As fast as possible: `qd` in flight, the trace's times ignored.
    pub afap: bool,
    pub map: OffsetMap,
    /// The trace as named and its format, for the result.
    pub trace: String,
    pub format: String,
}

impl Replay {
    /// The workload a replay runs as: one stream per target, `qd` slots of the trace's
    /// largest I/O, the shares of its ops (which open targets for writing and check that
    /// they trim), and, timed, the trace's rate (so the run accounts as an open loop). `limit`
    /// bounds the window: a timed replay's is the trace's scaled duration and a margin.
    pub fn workload(&self, qd: u32, limit: Option<Duration>) -> Result<Workload, String> {
        let s = &self.summary;
        let n = s.records();
        if n == 0 {
            return Err("the trace holds no reads, writes or trims".into());
        }
        if !(self.speed.is_finite() && self.speed > 0.0) {
            return Err(format!("speed {} must be a positive number", self.speed));
        }
        let pct = |op: TraceOp| 100.0 * s.ops_of(op) as f64 / n as f64;
        let mut read_pct = pct(TraceOp::Read);
        // A share that rounds to all reads would open the target read-only.
        if s.ops_of(TraceOp::Read) < n {
            read_pct = read_pct.min(100.0 - 1e-9);
        }
        let trim_pct = pct(TraceOp::Trim).min(100.0 - read_pct);
        let scaled = Duration::from_secs_f64(s.duration_ns() as f64 / 1e9 / self.speed);
        let time = match (limit, self.afap) {
            (Some(t), _) => t,
            // Time to catch up on a late start and to drain the last I/Os.
            (None, false) => scaled + scaled / 2 + Duration::from_secs(10),
            (None, true) => Duration::from_secs(3600),
        };
        // The slots' size: the largest I/O, rounded up to 4 KiB so that the plan's check of
        // sizes against a target's block (512 B or 4 KiB) passes; the I/Os keep the trace's.
        let slot = (s.max_len as u64).div_ceil(4096) * 4096;
        let w = Workload {
            name: Some("replay".into()),
            segments: vec![Segment {
                weight: 1,
                read_bs: slot,
                write_bs: slot,
                read_pct,
                random_pct: 100.0,
                align: None,
                trim_pct,
                write_zeroes_pct: 0.0,
            }],
            qd,
            workers: 1,
            ramp: Duration::ZERO,
            time,
            span: None,
            flush_every: 0,
            fua_pct: 0.0,
            rate: (!self.afap).then(|| (s.rate().unwrap_or(1.0) * self.speed).clamp(1.0, 1e9)),
            arrival: sanbench_doc::spec::Arrival::Fixed,
        };
        w.validate()?;
        Ok(w)
    }

    /// The largest power of two every replayed offset and length is a multiple of on a
    /// target of `block`-byte blocks (a map places offsets on whole blocks): the granule a
    /// verified replay can keep its generations in.
    pub fn align(&self, block: u64) -> u64 {
        let offsets = match self.map {
            OffsetMap::None => self.summary.offset_align(),
            _ => block.max(1),
        };
        self.summary.len_align().min(offsets)
    }
}

/// What one target's replay issued (counted at submission, every I/O, in the window or not).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ReplayRun {
    pub ops: [u64; 3],
    pub bytes: [u64; 3],
    /// First and last submission, ns on the run's clock.
    pub first_submit_ns: Option<u64>,
    pub last_submit_ns: u64,
    /// Every record of the trace was issued.
    pub complete: bool,
    /// Timed: I/Os due while every slot was busy.
    pub held_by_qd: u64,
    /// Verified: I/Os that waited for an overlapping I/O in flight to complete.
    pub held_by_overlap: u64,
    /// Timed: I/Os issued more than the lag's goal after their time, by what held them
    /// ([`LateIos`]: this host, every slot busy, an overlapping I/O in flight).
    pub late: [u64; 3],
    /// FNV-1a over the issued I/Os in order ([`ReplayDoc::issued_digest`]).
    pub digest: u64,
    /// The replay's settings and the trace's summary, for the result.
    pub trace: String,
    pub format: String,
    pub afap: bool,
    pub speed: f64,
    pub map: String,
    pub qd: u32,
    pub trace_ops: [u64; 3],
    pub trace_bytes: [u64; 3],
    pub trace_ns: u64,
    pub recorded_iops: Option<f64>,
}

/// [`ReplayRun::late`]'s causes.
pub const LATE_HOST: usize = 0;
pub const LATE_QD: usize = 1;
pub const LATE_OVERLAP: usize = 2;

/// The lag beyond which an I/O counts as late (the goal of its p99), ns.
pub const LATE_NS: u64 = (LAG_P99_GOAL_US * 1000.0) as u64;

/// FNV-1a's 64-bit offset basis and prime.
pub const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Adds one issued I/O to a digest.
#[inline]
pub fn digest_add(mut h: u64, op: TraceOp, offset: u64, len: u32) -> u64 {
    let mut eat = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    };
    eat(op.index() as u8);
    offset.to_le_bytes().into_iter().for_each(&mut eat);
    (len as u64).to_le_bytes().into_iter().for_each(&mut eat);
    h
}

impl ReplayRun {
    pub fn new(r: &Replay, qd: u32) -> ReplayRun {
        ReplayRun {
            digest: FNV_BASIS,
            trace: r.trace.clone(),
            format: r.format.clone(),
            afap: r.afap,
            speed: r.speed,
            map: r.map.name().into(),
            qd,
            trace_ops: r.summary.ops,
            trace_bytes: r.summary.bytes,
            trace_ns: r.summary.duration_ns(),
            recorded_iops: r.summary.rate(),
            ..ReplayRun::default()
        }
    }

    /// The result's block, with the issue lag of every op (timed) and the median service
    /// time (ns) of every op.
    pub fn doc(&self, lag: Option<&LatencyHistogram>, service_p50_ns: f64) -> ReplayDoc {
        let issued: u64 = self.ops.iter().sum();
        let first = self.first_submit_ns.unwrap_or(self.last_submit_ns);
        let secs = self.last_submit_ns.saturating_sub(first) as f64 / 1e9;
        let achieved = (issued >= 2 && secs > 0.0).then(|| (issued - 1) as f64 / secs);
        let target = (!self.afap)
            .then(|| self.recorded_iops.map(|r| r * self.speed))
            .flatten();
        let mut d = ReplayDoc {
            trace: self.trace.clone(),
            format: self.format.clone(),
            mode: if self.afap { "afap" } else { "timed" }.into(),
            speed: self.speed,
            offset_map: self.map.clone(),
            qd: self.qd,
            trace_ops: OpCounts::from_array(self.trace_ops),
            trace_bytes: OpCounts::from_array(self.trace_bytes),
            replayed_ops: OpCounts::from_array(self.ops),
            replayed_bytes: OpCounts::from_array(self.bytes),
            complete: self.complete,
            trace_seconds: self.trace_ns as f64 / 1e9,
            replay_seconds: secs,
            recorded_iops: self.recorded_iops,
            target_iops: target,
            achieved_iops: achieved,
            rate_ratio: match (achieved, target) {
                (Some(a), Some(t)) if t > 0.0 => Some(a / t),
                _ => None,
            },
            issue_lag_us: lag
                .filter(|_| !self.afap)
                .map(sanbench_doc::latency::LatencyUs::from_hist),
            issue_lag_goal_us: LAG_P99_GOAL_US,
            held_by_qd: self.held_by_qd,
            held_by_overlap: self.held_by_overlap,
            late_ios: (!self.afap).then_some(LateIos {
                host: self.late[LATE_HOST],
                qd: self.late[LATE_QD],
                overlap: self.late[LATE_OVERLAP],
            }),
            needed_slots: target.map(|t| t * service_p50_ns / 1e9),
            host_limited: false,
            qd_limited: false,
            overlap_limited: false,
            note: None,
            issued_digest: format!("{:016x}", self.digest),
        };
        d.judge();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_fnv_1a_over_the_ios_in_order() {
        // FNV-1a of the empty input is the basis; order changes the digest.
        let a = digest_add(
            digest_add(FNV_BASIS, TraceOp::Read, 0, 512),
            TraceOp::Write,
            4096,
            512,
        );
        let b = digest_add(
            digest_add(FNV_BASIS, TraceOp::Write, 4096, 512),
            TraceOp::Read,
            0,
            512,
        );
        assert_ne!(a, b);
        // One byte: FNV-1a("\0") = basis ^ 0, times the prime.
        let mut h = FNV_BASIS;
        for byte in [0u8; 17] {
            h = (h ^ byte as u64).wrapping_mul(FNV_PRIME);
        }
        assert_eq!(digest_add(FNV_BASIS, TraceOp::Read, 0, 0), h);
    }
}
