//! The scheduler: one thread per (worker, target) stream, each keeping `qd` I/Os in flight on
//! its own [`Queue`], recording every completion's latency into per-stream histograms.
//!
//! Iometer's model is "each worker drives every target with `qd` outstanding I/Os". sanbench
//! keeps that load shape but gives every (worker, target) pair its own thread, so that a slow
//! target never delays the completions of a fast one on the same worker.
//!
//! Timing: the clock is read once per loop iteration, right after `reap` returns. That instant
//! is the completion time of the whole batch just reaped and the submission time of the batch
//! submitted next (so latency includes the generator's own time, never hides it). Only I/Os that
//! complete inside the measured window `[start + ramp, start + ramp + time)` are counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use sanbench_stats::LatencyHistogram;

use crate::arena::{Arena, ALIGN};
use crate::engine::{Completion, Io, Op, Queue, QueueConfig, Target, TargetInfo};
use crate::error::EngineError;
use crate::gen::Generator;
use crate::spec::Workload;
use crate::units::format_size;

/// Size of the rotating pool of random bytes that writes take their data from.
const WRITE_POOL: usize = 1 << 20;

/// Everything one run needs.
pub struct RunPlan {
    pub workload: Workload,
    pub targets: Vec<Arc<dyn Target>>,
    /// Longest wait for any completion before a queue gives up.
    pub io_timeout: Duration,
    pub seed: u64,
    /// Set from outside (Ctrl-C) to end the run early; the window then ends where it stopped.
    pub stop: Arc<AtomicBool>,
}

/// Called by the scheduler's coordinating thread; monitors hook in here.
pub trait Observer: Sync {
    /// Ramp-up is over: the measured window starts now.
    fn window_started(&self) {}
    /// The measured window ends now.
    fn window_ended(&self) {}
    /// About once a second.
    fn progress(&self, _p: &Progress) {}
}

/// A do-nothing observer.
pub struct NoObserver;
impl Observer for NoObserver {}

#[derive(Clone, Debug)]
pub struct Progress {
    pub elapsed: Duration,
    pub ramping: bool,
    pub remaining: Duration,
    /// Completions and bytes in the last second, all targets.
    pub iops: f64,
    pub bytes_per_s: f64,
}

/// Counts of one direction of one target.
#[derive(Clone, Debug, Default)]
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    pub hist: LatencyHistogram,
}

impl DirStats {
    fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.hist.merge(&o.hist);
    }
}

/// One second of the measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Second {
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub lat_sum_ns: u128,
}

impl Second {
    fn add(&mut self, o: &Second) {
        self.read_ios += o.read_ios;
        self.write_ios += o.write_ios;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.lat_sum_ns += o.lat_sum_ns;
    }
}

/// What the run measured on one target, all workers merged.
#[derive(Clone, Debug)]
pub struct TargetRun {
    pub info: TargetInfo,
    pub read: DirStats,
    pub write: DirStats,
    pub series: Vec<Second>,
    /// I/Os kept in flight on this target (workers × qd).
    pub outstanding: u64,
    /// Per-queue engine facts (completion paths, negotiated per-connection values).
    pub queue_stats: Vec<std::collections::BTreeMap<String, serde_json::Value>>,
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct RunOutput {
    pub started_at: SystemTime,
    /// Length of the measured window actually run (shorter than planned when stopped early).
    pub window: Duration,
    pub stopped_early: bool,
    pub targets: Vec<TargetRun>,
}

/// A run that failed: which stream, and why.
#[derive(Debug, thiserror::Error)]
#[error("{target} (worker {worker}): {error}")]
pub struct RunError {
    pub target: String,
    pub worker: usize,
    #[source]
    pub error: EngineError,
}

impl RunError {
    pub fn is_usage(&self) -> bool {
        self.error.is_usage()
    }
}

/// Checks the workload against each target's geometry and returns the span to use per target.
pub fn check_plan(plan: &RunPlan) -> Result<Vec<u64>, RunError> {
    plan.workload.validate().map_err(|e| RunError {
        target: "spec".into(),
        worker: 0,
        error: EngineError::Invalid(e),
    })?;
    let mut spans = Vec::new();
    for t in &plan.targets {
        let info = t.info();
        let bad = |msg: String| RunError {
            target: info.uri.clone(),
            worker: 0,
            error: EngineError::Invalid(format!("{}: {msg}", info.uri)),
        };
        let span = plan.workload.span.unwrap_or(info.size);
        if span > info.size {
            return Err(bad(format!(
                "size {} is larger than the target ({})",
                format_size(span),
                format_size(info.size)
            )));
        }
        let max_bs = plan.workload.max_bs();
        if span < max_bs {
            return Err(bad(format!(
                "the target ({}) is smaller than the largest transfer ({})",
                format_size(span),
                format_size(max_bs)
            )));
        }
        if info.read_only && plan.workload.has_writes() {
            return Err(bad("the target is read-only but the workload writes".into()));
        }
        let block = info.block_size.max(1) as u64;
        for s in &plan.workload.segments {
            for (what, v, used) in [
                ("read size", s.read_bs, s.read_pct > 0.0),
                ("write size", s.write_bs, s.read_pct < 100.0),
                ("alignment", s.align.unwrap_or(block), true),
            ] {
                if used && v % block != 0 {
                    return Err(bad(format!(
                        "{what} {} is not a multiple of the block size {}",
                        format_size(v),
                        format_size(block)
                    )));
                }
            }
        }
        if let Some(mt) = info.max_transfer {
            if max_bs > mt as u64 {
                return Err(bad(format!(
                    "transfer size {} exceeds the target's maximum {}",
                    format_size(max_bs),
                    format_size(mt as u64)
                )));
            }
        }
        spans.push(span);
    }
    Ok(spans)
}

struct Live {
    ios: AtomicU64,
    bytes: AtomicU64,
}

struct StreamOut {
    target: usize,
    read: DirStats,
    write: DirStats,
    series: Vec<Second>,
    stats: std::collections::BTreeMap<String, serde_json::Value>,
}

struct Shared {
    start: OnceLock<Instant>,
    abort: AtomicBool,
    stop: Arc<AtomicBool>,
    first_error: Mutex<Option<RunError>>,
    /// Set once the coordinator has closed the window (the observer took its end readings).
    window_closed: Mutex<bool>,
    window_closed_cv: Condvar,
}

/// Held by every stream thread and dropped last: the thread does not exit until the window's
/// end readings are taken. A thread that is gone by then takes its CPU time with it (the
/// kernel keeps per-thread run time only for live threads), and a monitor would report the
/// stream's time only up to its last periodic reading: under CPU contention the coordinator
/// wakes late and this was seen to halve a stream's reported CPU.
struct OutliveWindow(Arc<Shared>);

impl Drop for OutliveWindow {
    fn drop(&mut self) {
        let mut closed = lock(&self.0.window_closed);
        // The coordinator always closes the window; the bound only guards against a bug
        // turning into a hang.
        let give_up = Instant::now() + Duration::from_secs(30);
        while !*closed {
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            closed = self
                .0
                .window_closed_cv
                .wait_timeout(closed, give_up - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn close_window(&self) {
        *lock(&self.window_closed) = true;
        self.window_closed_cv.notify_all();
    }

    fn fail(&self, e: RunError) {
        let mut g = lock(&self.first_error);
        if g.is_none() {
            *g = Some(e);
        }
        self.abort.store(true, Ordering::Relaxed);
    }
}

/// Runs the plan to completion.
pub fn run(plan: &RunPlan, observer: &dyn Observer) -> Result<RunOutput, RunError> {
    let spans = check_plan(plan)?;
    let w = &plan.workload;
    let ramp_ns = w.ramp.as_nanos() as u64;
    let end_ns = ramp_ns + w.time.as_nanos() as u64;
    let n_streams = w.workers as usize * plan.targets.len();
    let barrier = Arc::new(Barrier::new(n_streams + 1));
    let shared = Arc::new(Shared {
        start: OnceLock::new(),
        abort: AtomicBool::new(false),
        stop: plan.stop.clone(),
        first_error: Mutex::new(None),
        window_closed: Mutex::new(false),
        window_closed_cv: Condvar::new(),
    });
    let lives: Vec<Arc<Live>> = (0..n_streams)
        .map(|_| {
            Arc::new(Live {
                ios: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
            })
        })
        .collect();
    let started_at = SystemTime::now();

    let outs = thread::scope(|scope| {
        let mut handles = Vec::new();
        for worker in 0..w.workers as usize {
            for (ti, target) in plan.targets.iter().enumerate() {
                let ctx = StreamCtx {
                    worker,
                    target_idx: ti,
                    target: target.clone(),
                    workload: w,
                    span: spans[ti],
                    seed: plan.seed,
                    io_timeout: plan.io_timeout,
                    ramp_ns,
                    end_ns,
                    barrier: barrier.clone(),
                    shared: shared.clone(),
                    live: lives[worker * plan.targets.len() + ti].clone(),
                };
                let h = thread::Builder::new()
                    .name(format!("sb-w{worker}-t{ti}"))
                    .spawn_scoped(scope, move || stream(ctx))
                    .expect("spawn stream thread");
                handles.push(h);
            }
        }
        // All queues opened (or failed to).
        barrier.wait();
        let t0 = Instant::now();
        let _ = shared.start.set(t0);
        barrier.wait();
        if !shared.abort.load(Ordering::Relaxed) {
            coordinate(t0, ramp_ns, end_ns, &shared, &lives, observer);
        }
        shared.close_window();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect::<Vec<_>>()
    });
    if let Some(e) = shared
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        return Err(e);
    }
    let elapsed_ns = shared
        .start
        .get()
        .map(|t| t.elapsed().as_nanos() as u64)
        .unwrap_or(0);
    let stopped_early = plan.stop.load(Ordering::Relaxed) && elapsed_ns < end_ns;
    let window = Duration::from_nanos(elapsed_ns.clamp(ramp_ns, end_ns) - ramp_ns);

    let mut targets: Vec<TargetRun> = plan
        .targets
        .iter()
        .map(|t| TargetRun {
            info: t.info().clone(),
            read: DirStats::default(),
            write: DirStats::default(),
            series: Vec::new(),
            outstanding: w.workers as u64 * w.qd as u64,
            queue_stats: Vec::new(),
        })
        .collect();
    for o in outs {
        let t = &mut targets[o.target];
        t.read.merge(&o.read);
        t.write.merge(&o.write);
        if t.series.len() < o.series.len() {
            t.series.resize(o.series.len(), Second::default());
        }
        for (a, b) in t.series.iter_mut().zip(&o.series) {
            a.add(b);
        }
        t.queue_stats.push(o.stats);
    }
    let whole_secs = (window.as_nanos() / 1_000_000_000) as usize;
    for t in &mut targets {
        // Keep whole seconds only; a partial last second would read as a dip.
        t.series.truncate(whole_secs.max(1));
    }
    Ok(RunOutput {
        started_at,
        window,
        stopped_early,
        targets,
    })
}

fn coordinate(
    t0: Instant,
    ramp_ns: u64,
    end_ns: u64,
    shared: &Shared,
    lives: &[Arc<Live>],
    observer: &dyn Observer,
) {
    let mut in_window = ramp_ns == 0;
    if in_window {
        observer.window_started();
    }
    let mut last_tick = 0u64;
    let (mut last_ios, mut last_bytes) = (0u64, 0u64);
    loop {
        let now = t0.elapsed().as_nanos() as u64;
        if shared.abort.load(Ordering::Relaxed) || shared.stop.load(Ordering::Relaxed) {
            break;
        }
        if !in_window && now >= ramp_ns {
            in_window = true;
            observer.window_started();
        }
        if now >= end_ns {
            break;
        }
        if now - last_tick >= 1_000_000_000 {
            let ios: u64 = lives.iter().map(|l| l.ios.load(Ordering::Relaxed)).sum();
            let bytes: u64 = lives.iter().map(|l| l.bytes.load(Ordering::Relaxed)).sum();
            let dt = (now - last_tick) as f64 / 1e9;
            observer.progress(&Progress {
                elapsed: Duration::from_nanos(now),
                ramping: now < ramp_ns,
                remaining: Duration::from_nanos(end_ns - now),
                iops: (ios - last_ios) as f64 / dt,
                bytes_per_s: (bytes - last_bytes) as f64 / dt,
            });
            last_tick = now;
            last_ios = ios;
            last_bytes = bytes;
        }
        let next_event = if in_window { end_ns } else { ramp_ns };
        let sleep_ns = (next_event - now)
            .min(last_tick + 1_000_000_000 - now.min(last_tick + 1_000_000_000))
            .clamp(100_000, 50_000_000);
        thread::sleep(Duration::from_nanos(sleep_ns));
    }
    if in_window {
        observer.window_ended();
    }
}

struct StreamCtx<'a> {
    worker: usize,
    target_idx: usize,
    target: Arc<dyn Target>,
    workload: &'a Workload,
    span: u64,
    seed: u64,
    io_timeout: Duration,
    ramp_ns: u64,
    end_ns: u64,
    barrier: Arc<Barrier>,
    shared: Arc<Shared>,
    live: Arc<Live>,
}

/// Arena layout of one stream: a private region per tag for reads, one shared pool of random
/// bytes for writes.
struct Layout {
    read_slot: usize,
    pool_base: usize,
    total: usize,
}

fn layout(w: &Workload, depth: u32) -> Layout {
    let max_read = w
        .segments
        .iter()
        .filter(|s| s.read_pct > 0.0)
        .map(|s| s.read_bs)
        .max()
        .unwrap_or(0) as usize;
    let max_write = w
        .segments
        .iter()
        .filter(|s| s.read_pct < 100.0)
        .map(|s| s.write_bs)
        .max()
        .unwrap_or(0) as usize;
    let read_slot = max_read.next_multiple_of(ALIGN);
    let pool_base = read_slot * depth as usize;
    let pool = if max_write > 0 {
        WRITE_POOL + max_write.next_multiple_of(ALIGN)
    } else {
        0
    };
    Layout {
        read_slot,
        pool_base,
        total: pool_base + pool,
    }
}

fn stream(ctx: StreamCtx<'_>) -> Option<StreamOut> {
    // Declared first, dropped last: after the queue is closed, on every return path.
    let _outlive = OutliveWindow(ctx.shared.clone());
    let w = ctx.workload;
    let depth = w.qd;
    let lay = layout(w, depth);
    let arena = Arc::new(Arena::new(lay.total));
    arena.fill_random(ctx.seed ^ (ctx.worker as u64) << 20 ^ ctx.target_idx as u64);
    let info = ctx.target.info();
    let uri = info.uri.clone();
    let fail = |e: EngineError| {
        ctx.shared.fail(RunError {
            target: uri.clone(),
            worker: ctx.worker,
            error: e,
        })
    };
    let cfg = QueueConfig {
        worker: ctx.worker,
        depth,
        max_len: w.max_bs() as u32,
        arena: arena.clone(),
        io_timeout: ctx.io_timeout,
    };
    let queue = ctx.target.open_queue(&cfg);
    ctx.barrier.wait();
    ctx.barrier.wait();
    let mut queue = match queue {
        Ok(q) => q,
        Err(e) => {
            fail(e);
            return None;
        }
    };
    if ctx.shared.abort.load(Ordering::Relaxed) {
        return None;
    }
    let t0 = *ctx.shared.start.get()?;
    let mut gen = Generator::new(
        w,
        ctx.span,
        info.block_size as u64,
        ctx.worker as u32,
        ctx.seed ^ ((ctx.target_idx as u64) << 48),
    );
    let mut s = StreamState::new(depth, w.time);
    let result = s
        .drive(&mut *queue, &mut gen, &ctx, t0, &lay)
        .and_then(|_| s.drain(&mut *queue))
        .and_then(|_| queue.close());
    if let Err(e) = result {
        // I/O may still be in flight on a failed queue and waiting for it could take another
        // timeout: keep its buffers alive for the rest of the process instead.
        std::mem::forget(arena);
        fail(e);
        return None;
    }
    Some(StreamOut {
        target: ctx.target_idx,
        read: s.read,
        write: s.write,
        series: s.series,
        stats: queue.stats(),
    })
}

struct StreamState {
    free: Vec<u32>,
    op: Vec<Op>,
    len: Vec<u32>,
    offset: Vec<u64>,
    submit_ns: Vec<u64>,
    batch: Vec<Io>,
    done: Vec<Completion>,
    inflight: usize,
    write_seq: usize,
    read: DirStats,
    write: DirStats,
    series: Vec<Second>,
}

impl StreamState {
    fn new(depth: u32, time: Duration) -> StreamState {
        let d = depth as usize;
        StreamState {
            free: (0..depth).rev().collect(),
            op: vec![Op::Read; d],
            len: vec![0; d],
            offset: vec![0; d],
            submit_ns: vec![0; d],
            batch: Vec::with_capacity(d),
            done: Vec::with_capacity(d),
            inflight: 0,
            write_seq: 0,
            read: DirStats::default(),
            write: DirStats::default(),
            series: vec![Second::default(); time.as_secs() as usize + 2],
        }
    }

    fn drive(
        &mut self,
        q: &mut dyn Queue,
        gen: &mut Generator,
        ctx: &StreamCtx<'_>,
        t0: Instant,
        lay: &Layout,
    ) -> Result<(), EngineError> {
        let mut now = t0.elapsed().as_nanos() as u64;
        loop {
            self.batch.clear();
            while let Some(tag) = self.free.pop() {
                let p = gen.plan();
                let t = tag as usize;
                let buf = match p.op {
                    Op::Write => {
                        // Rotate through the pool in page steps so successive writes differ.
                        self.write_seq = self.write_seq.wrapping_add(1);
                        lay.pool_base + (self.write_seq * 7 * ALIGN) % WRITE_POOL
                    }
                    _ => t * lay.read_slot,
                };
                self.op[t] = p.op;
                self.len[t] = p.len;
                self.offset[t] = p.offset;
                self.submit_ns[t] = now;
                self.batch.push(Io {
                    tag,
                    op: p.op,
                    offset: p.offset,
                    len: p.len,
                    buf,
                });
            }
            if !self.batch.is_empty() {
                self.inflight += self.batch.len();
                q.submit(&self.batch)?;
            }
            self.done.clear();
            q.reap(1, &mut self.done)?;
            now = t0.elapsed().as_nanos() as u64;
            if now >= ctx.end_ns
                || ctx.shared.abort.load(Ordering::Relaxed)
                || ctx.shared.stop.load(Ordering::Relaxed)
            {
                // Completions at or after the end are outside the window.
                self.retire_uncounted()?;
                return Ok(());
            }
            let in_window = now >= ctx.ramp_ns;
            let sec = if in_window {
                ((now - ctx.ramp_ns) / 1_000_000_000) as usize
            } else {
                0
            };
            let mut bytes = 0u64;
            for i in 0..self.done.len() {
                let c = self.done[i];
                let t = c.tag as usize;
                if c.result < 0 {
                    return Err(self.io_error(c));
                }
                let len = self.len[t] as u64;
                bytes += len;
                if in_window {
                    let lat = now - self.submit_ns[t];
                    let last = self.series.len() - 1;
                    let b = &mut self.series[sec.min(last)];
                    b.lat_sum_ns += lat as u128;
                    let d = if self.op[t] == Op::Write {
                        b.write_ios += 1;
                        b.write_bytes += len;
                        &mut self.write
                    } else {
                        b.read_ios += 1;
                        b.read_bytes += len;
                        &mut self.read
                    };
                    d.ios += 1;
                    d.bytes += len;
                    d.hist.record(lat);
                }
                self.free.push(c.tag);
            }
            self.inflight -= self.done.len();
            ctx.live
                .ios
                .fetch_add(self.done.len() as u64, Ordering::Relaxed);
            ctx.live.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn io_error(&self, c: Completion) -> EngineError {
        let t = c.tag as usize;
        EngineError::Io {
            op: match self.op[t] {
                Op::Read => "read",
                Op::Write => "write",
                Op::Flush => "flush",
                Op::Trim => "trim",
            },
            offset: self.offset[t],
            source: std::io::Error::from_raw_os_error(-c.result),
        }
    }

    fn retire_uncounted(&mut self) -> Result<(), EngineError> {
        for i in 0..self.done.len() {
            let c = self.done[i];
            if c.result < 0 {
                return Err(self.io_error(c));
            }
            self.free.push(c.tag);
        }
        self.inflight -= self.done.len();
        self.done.clear();
        Ok(())
    }

    /// Waits for every I/O still in flight, so no engine writes into the arena after the run.
    fn drain(&mut self, q: &mut dyn Queue) -> Result<(), EngineError> {
        while self.inflight > 0 {
            self.done.clear();
            q.reap(1, &mut self.done)?;
            if self.done.is_empty() {
                continue;
            }
            self.retire_uncounted()?;
        }
        Ok(())
    }
}
