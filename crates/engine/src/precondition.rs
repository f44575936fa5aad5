//! Preconditioning: before a measured cell, the target's span holds written, incompressible
//! data, or the result says that it may not.
//!
//! A sparse target (a RAM disk allocated as written, a sparse file, a thin LUN) answers a read of
//! never-written space with zeros without touching its medium, and allocates on the first write
//! inside the measured window: both make figures that are about the store's state, not about the
//! transport. SNIA's PTS therefore purges, then writes the span (twice, in 128 KiB sequential
//! writes) before measuring; sanbench does the same, with one rule about whose data it is:
//!
//! * `auto` (the default) fills the span once (sequential 1 MiB writes at depth, stamped unique
//!   data) only where writing destroys nothing: `mem:`, a file sanbench created, and
//!   sanbench's own NBD and iSCSI servers (their export description / SCSI vendor id say so,
//!   [`overwritable`]); skipped when the target reports the span as written. Anything else (a
//!   block device, an existing file, someone's NBD export or LUN) is only checked: its holes are
//!   reported where the target can tell ([`Target::allocation`]) and the result says its state.
//! * `fill` or `N` (passes) write the span whatever it is, under the write-safety check the CLI
//!   applies to any writing workload; `none` leaves it alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::arena::Arena;
use crate::engine::{Completion, Io, Op, Target, TargetInfo};
use crate::error::EngineError;
use crate::run::{stamp_slot, Layout};
use crate::stamp::{DataSpec, Stamper};
use crate::sweep::{check_completion, next_piece, open_queue, piece_size, submit_and_reap};
use crate::units::format_size;

/// `--precondition auto|none|fill|N`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Auto,
    None,
    /// N passes over the span, asked for (`fill` = 1).
    Passes(u32),
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "auto" => Ok(Mode::Auto),
            "none" => Ok(Mode::None),
            "fill" => Ok(Mode::Passes(1)),
            n => match n.parse::<u32>() {
                Ok(k) if (1..=100).contains(&k) => Ok(Mode::Passes(k)),
                _ => Err(format!(
                    "'{s}' is not a precondition mode (auto, none, fill, or a number of passes 1-100)"
                )),
            },
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Auto => f.write_str("auto"),
            Mode::None => f.write_str("none"),
            Mode::Passes(1) => f.write_str("fill"),
            Mode::Passes(n) => write!(f, "{n}"),
        }
    }
}

impl Mode {
    /// Whether this mode may write to targets that are not sanbench's own (the CLI then opens
    /// them for writing, through the write-safety check).
    pub fn writes_anything(self) -> bool {
        matches!(self, Mode::Passes(_))
    }
}

/// How the span is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FillPlan {
    pub passes: u32,
    /// Bytes per write (capped by the target's maximum transfer).
    pub bs: u32,
    pub depth: u32,
    /// Trim/unmap the span first (the PTS's purge), where the target supports it.
    pub purge: bool,
}

impl FillPlan {
    /// One pass of 1 MiB sequential writes at depth 8.
    pub fn fill(passes: u32) -> FillPlan {
        FillPlan {
            passes,
            bs: 1 << 20,
            depth: 8,
            purge: false,
        }
    }

    /// SNIA PTS: purge, then workload-independent preconditioning, 2x the span in 128 KiB
    /// sequential writes.
    pub fn pts() -> FillPlan {
        FillPlan {
            passes: 2,
            bs: 128 << 10,
            depth: 8,
            purge: true,
        }
    }
}

pub use sanbench_doc::precondition::{Report, SpanState};

/// Why `auto` may write this target, or `None` when it must not.
pub fn overwritable(info: &TargetInfo) -> Option<&'static str> {
    let param = |k: &str| info.params.get(k).and_then(|v| v.as_str()).unwrap_or("");
    match info.engine.as_str() {
        "mem" => Some("an in-process RAM disk"),
        "io_uring" | "sync"
            if info.params.get("created").and_then(|v| v.as_bool()) == Some(true) =>
        {
            Some("a file sanbench created")
        }
        "nbd"
            if param("description")
                .to_ascii_lowercase()
                .contains("sanbench") =>
        {
            Some("sanbench's own NBD server")
        }
        "iscsi" if param("vendor").trim().eq_ignore_ascii_case("SANBENCH") => {
            Some("sanbench's own iSCSI target")
        }
        "nvme" if param("model").trim() == "SANBENCH" => Some("sanbench's own NVMe/TCP target"),
        _ => None,
    }
}

/// The outcome of one fill.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Filled {
    pub bytes: u64,
    pub seconds: f64,
    pub bs: u64,
    pub purged: bool,
}

/// Decides and (where allowed) performs the preconditioning of one target's span. `plan` is
/// how the span is written when it is (a PTS plan, which purges, is never skipped because the
/// span reports written: its point is a known state).
#[allow(clippy::too_many_arguments)]
pub fn prepare(
    target: &dyn Target,
    span: u64,
    mode: Mode,
    plan: FillPlan,
    data: &DataSpec,
    io_timeout: Duration,
    stop: &AtomicBool,
    verify: Option<&crate::verify::Verifier>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Report, Option<Filled>), EngineError> {
    let info = target.info();
    let mut rep = Report {
        mode: mode.to_string(),
        ..Report::default()
    };
    let done = |rep: &mut Report, f: &Filled, passes: u32| {
        rep.state = SpanState::Preconditioned;
        rep.preconditioned = true;
        rep.passes = passes;
        rep.block_size = f.bs;
        rep.bytes = f.bytes;
        rep.seconds = f.seconds;
        rep.purged = f.purged;
        rep.note = format!(
            "preconditioned: {} written ({} pass{} of {} sequential writes{}) in {:.2} s",
            format_size(f.bytes),
            passes,
            if passes == 1 { "" } else { "es" },
            format_size(f.bs),
            if f.purged { ", after a purge" } else { "" },
            f.seconds
        );
    };
    let plan = match mode {
        Mode::None => None,
        Mode::Passes(_) => Some(plan),
        Mode::Auto => overwritable(info).map(|_| plan),
    };
    // A failed query is not a failed run: the span's state is then unknown, and the note says
    // why.
    let (alloc, alloc_err) = match target.allocation(0, span) {
        Ok(a) => (a, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let written = alloc
        .as_ref()
        .is_some_and(|a| a.unwritten_bytes == 0 && a.checked_bytes >= span);
    // A new verification session fills even a span reported written: then every block's
    // generation is known, instead of only the ones the run writes.
    let new_session = verify.is_some_and(|v| !v.resumed);
    match plan {
        Some(p) if mode != Mode::Auto || !written || p.purge || new_session => {
            let f = fill(target, span, &p, data, io_timeout, stop, verify, progress)?;
            done(&mut rep, &f, p.passes);
            Ok((rep, Some(f)))
        }
        _ => {
            rep.allocation = alloc.clone();
            rep.state = match &alloc {
                Some(a) if a.unwritten_bytes > 0 => SpanState::Holes,
                Some(_) if written => SpanState::ReportedWritten,
                _ => SpanState::Unknown,
            };
            let why_not = match (mode, overwritable(info)) {
                (Mode::None, _) => "--precondition none".to_string(),
                (_, Some(_)) => "it reports the span as written".to_string(),
                _ => format!(
                    "sanbench does not write on its own to {}; --precondition fill does",
                    describe(info)
                ),
            };
            rep.note = match (&rep.state, &alloc) {
                (SpanState::Holes, Some(a)) => format!(
                    "not preconditioned ({why_not}): {} reports {} of {} unwritten ({:.1} %); reads there return zeros without touching the medium",
                    a.method,
                    format_size(a.unwritten_bytes),
                    format_size(a.checked_bytes),
                    100.0 * a.unwritten_bytes as f64 / a.checked_bytes.max(1) as f64
                ),
                (SpanState::ReportedWritten, Some(a)) => format!(
                    "not preconditioned ({why_not}); {} reports the span as written",
                    a.method
                ),
                _ => format!("not preconditioned ({why_not}): the span may hold never-written space"),
            };
            if let Some(e) = alloc_err {
                rep.note.push_str(&format!(
                    " (asking the target which part is written failed: {e})"
                ));
            }
            Ok((rep, None))
        }
    }
}

fn describe(info: &TargetInfo) -> &'static str {
    match info.engine.as_str() {
        "nbd" => "another server's NBD export",
        "iscsi" => "another target's LUN",
        "io_uring" | "sync"
            if info.params.get("kind").and_then(|v| v.as_str()) == Some("block device") =>
        {
            "a block device"
        }
        "io_uring" | "sync" => "an existing file",
        _ => "this target",
    }
}

/// Writes the span `plan.passes` times with stamped, unique data (sequential, one queue at
/// `plan.depth`), after trimming it when `plan.purge` asks. `progress(done, total)` is called
/// about every 64 writes. Under verification the fill stamps the verifier's run id and units
/// with generation 1, and the whole map says generation 1 once the span is written.
#[allow(clippy::too_many_arguments)]
pub fn fill(
    target: &dyn Target,
    span: u64,
    plan: &FillPlan,
    data: &DataSpec,
    io_timeout: Duration,
    stop: &AtomicBool,
    verify: Option<&crate::verify::Verifier>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Filled, EngineError> {
    let (block, bs) = piece_size(target.info(), plan.bs as u64, span);
    let depth = plan.depth.max(1);
    let lay = Layout::new(0, bs, depth);
    let arena = Arc::new(Arena::new(lay.total));
    let run_id = match verify {
        Some(v) => v.run_id,
        None => crate::stamp::new_run_id()
            .map_err(|e| EngineError::sys("getrandom for the fill's id failed", e))?,
    };
    arena.fill_random(run_id);
    // SAFETY: the arena is not shared with any engine yet.
    crate::stamp::fill_pool(
        unsafe { arena.slice_mut(lay.pool_base, lay.pool_len) },
        run_id,
    );
    let gen = u32::from(verify.is_some());
    let mut q = open_queue(target, depth, bs, &arena, io_timeout)?;
    let mut stamper = Stamper::new(data, run_id, 0);
    if let Some(v) = verify {
        stamper = stamper.with_unit(v.unit as usize);
    }
    let t0 = Instant::now();
    let purged = plan.purge && purge(&mut *q, span, depth)?;
    let total = span * plan.passes as u64;
    let mut written = 0u64;
    let mut free: Vec<u32> = (0..depth).rev().collect();
    let mut done: Vec<Completion> = Vec::with_capacity(depth as usize);
    let mut offset_of = vec![0u64; depth as usize];
    let mut batch = Vec::with_capacity(depth as usize);
    let mut inflight = 0usize;
    let mut since_progress = 0u32;
    for _ in 0..plan.passes {
        let mut off = 0u64;
        while off < span || inflight > 0 {
            batch.clear();
            while off < span && !stop.load(Ordering::Relaxed) {
                let Some((tag, len)) = next_piece(&mut free, &mut off, span, bs, block) else {
                    break;
                };
                // SAFETY: the tag was free, so its slot is not in flight.
                let buf = unsafe {
                    stamp_slot(
                        &arena,
                        &lay,
                        &mut stamper,
                        tag as usize,
                        off,
                        len as u32,
                        |_| gen,
                    )
                };
                offset_of[tag as usize] = off;
                batch.push(Io {
                    fua: false,
                    tag,
                    op: Op::Write,
                    offset: off,
                    len: len as u32,
                    buf,
                });
                off += len;
            }
            if !submit_and_reap(&mut *q, &batch, &mut inflight, &mut done)? {
                break;
            }
            for c in &done {
                check_completion("precondition write", offset_of[c.tag as usize], c)?;
                free.push(c.tag);
            }
            written += done.len() as u64 * bs;
            since_progress += done.len() as u32;
            if since_progress >= 64 {
                since_progress = 0;
                progress(written.min(total), total);
            }
        }
        if stop.load(Ordering::Relaxed) {
            return Err(EngineError::Invalid(
                "preconditioning stopped before the span was written".into(),
            ));
        }
    }
    if let Some(v) = verify {
        // The fill's data is the verification's durable baseline: flush it, then record it.
        let flush = Io {
            fua: false,
            tag: 0,
            op: Op::Flush,
            offset: 0,
            len: 0,
            buf: 0,
        };
        q.submit(&[flush])?;
        done.clear();
        q.reap(1, &mut done)?;
        let flushed = done.first().is_some_and(|c| c.result >= 0);
        v.map.set_all(1);
        if flushed {
            v.map.set_all_durable(1);
            v.map.sync_durable();
        }
    }
    q.close()?;
    progress(total, total);
    Ok(Filled {
        bytes: total,
        seconds: t0.elapsed().as_secs_f64(),
        bs,
        purged,
    })
}

/// Trims the span in 1 GiB pieces; `false` (and no error) when the target cannot trim.
fn purge(q: &mut dyn crate::engine::Queue, span: u64, depth: u32) -> Result<bool, EngineError> {
    const PIECE: u64 = 1 << 30;
    let mut off = 0u64;
    let mut done = Vec::with_capacity(depth as usize);
    while off < span {
        let len = (span - off).min(PIECE) as u32;
        let io = Io {
            fua: false,
            tag: 0,
            op: Op::Trim,
            offset: off,
            len,
            buf: 0,
        };
        match q.submit(&[io]) {
            Ok(()) => {}
            Err(EngineError::Unsupported(_)) => return Ok(false),
            Err(e) => return Err(e),
        }
        done.clear();
        q.reap(1, &mut done)?;
        if done.iter().any(|c| c.result < 0) {
            return Ok(false);
        }
        off += len as u64;
    }
    Ok(true)
}

#[cfg(test)]
#[path = "precondition_tests.rs"]
mod tests;
