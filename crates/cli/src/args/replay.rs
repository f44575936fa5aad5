//! `sanbench replay`'s arguments (the command itself: replay_cmd.rs).

use std::path::PathBuf;

use clap::Args;
use sanbench_engine::units::{Bytes, Dur};

use super::EngineArgs;

/// `sanbench replay`.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Formats: fio iolog v2/v3 (write_iolog), blkparse text output (its Q \
events), the SNIA IOTTA / MSR Cambridge CSV. Timed replays measure response time from each \
I/O's trace time (no coordinated omission) and report the issue lag against it; a replay that \
could not keep up says so, by what held its late I/Os (host_limited: this host; qd_limited: \
the target or --qd; overlap_limited: --verify's overlapping I/Os).
Exit codes: 0 replayed, 1 the replay failed, 2 bad usage or a bad trace (its line named), 3 \
data did not verify (--verify)."
)]
pub struct ReplayArgs {
    /// The trace file.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Targets (any URI `run` takes); each replays the whole trace.
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,
    /// The trace's format: auto (from its first bytes), fio, blkparse, blktrace or msr.
    #[arg(long, default_value = "auto", value_name = "FORMAT")]
    pub format: String,
    /// Time scaling: 2 replays twice as fast as recorded, 0.5 at half speed.
    #[arg(long, default_value_t = 1.0, value_name = "X", conflicts_with = "afap")]
    pub speed: f64,
    /// Where the trace's offsets land: none (as recorded; refused past the target's end),
    /// scale (the trace's range stretched onto the target's span) or modulo (wrapped).
    #[arg(long, default_value = "none", value_name = "MAP")]
    pub offset_map: String,
    /// As fast as possible: the trace's times ignored, --qd I/Os in flight.
    #[arg(long)]
    pub afap: bool,
    /// Most I/Os in flight per target (timed: a cap; the I/Os it holds back keep their trace
    /// time, so the wait counts).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub qd: u32,
    /// Stop after this long even if the trace is not done (default: a timed replay's
    /// scaled duration and half again plus 10 s; --afap one hour).
    #[arg(long, value_name = "DURATION")]
    pub time_limit: Option<Dur>,
    /// Size of a file target that does not exist yet (default: the trace's extent).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<Bytes>,
    /// Write the run document (with each target's `replay` block) to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Verify the data: every replayed write stamped, every read checked (as run --verify;
    /// an I/O that overlaps one in flight waits for it). Exit code 3 when data did not verify.
    #[arg(long)]
    pub verify: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}
