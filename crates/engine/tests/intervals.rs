//! `--log-interval`: the window cut into intervals. Merging every interval gives the window's
//! histograms exactly, interval counts add up to the I/Os counted independently, and a stall
//! shows in exactly the intervals it covered.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sanbench_engine::mem::MemTarget;
use sanbench_engine::run::clock::{Clock, Manual};
use sanbench_engine::run::Interval;
use sanbench_engine::{
    run, Completion, EngineError, Io, NoObserver, Queue, QueueConfig, Target, TargetInfo,
};
use sanbench_stats::LatencyHistogram;

#[path = "support/manual_clock.rs"]
mod manual_clock;
mod support;
use manual_clock::Due;
use support::{plan, Keep};

#[test]
fn merged_intervals_are_the_window_exactly() {
    let a: Arc<dyn Target> = Arc::new(MemTarget::new("mem:a", 16 << 20).unwrap());
    let b: Arc<dyn Target> = Arc::new(MemTarget::new("mem:b", 16 << 20).unwrap());
    let keep = Arc::new(Keep::default());
    let mut p = plan(vec![a, b], 100, 300, Duration::from_millis(10));
    p.raw_latencies = true;
    p.intervals = Some(keep.clone());
    let out = run(&p, &NoObserver).unwrap();
    let got = keep.0.lock().unwrap();
    for (ti, t) in out.targets.iter().enumerate() {
        let mine: Vec<_> = got.iter().filter(|g| g.0 == ti).collect();
        // In order, each once, inside the window, and the result summarizes the same ones.
        assert!(mine.windows(2).all(|w| w[0].1 < w[1].1));
        // (Fewer than 30 on a loaded host: an interval without a completion is not emitted.)
        assert!(mine.len() >= 3, "{} intervals", mine.len());
        assert_eq!(mine.len(), t.intervals.len());
        let mut merged = Interval::default();
        for (_, k, start, len, iv) in &mine {
            assert_eq!(*start, k * 10_000_000);
            assert!(*len <= 10_000_000 && start + len <= out.window.as_nanos() as u64);
            merged.merge(iv);
        }
        assert_eq!(merged.read.hist.buckets(), t.read.hist.buckets());
        assert_eq!(merged.write.hist.buckets(), t.write.hist.buckets());
        assert_eq!(merged.read.ios, t.read.ios);
        // Independent counts: the raw latencies the streams kept, and the per-second series.
        let ios = merged.read.ios + merged.write.ios;
        assert_eq!(ios, t.raw_ns.len() as u64);
        assert_eq!(ios, t.series[0].read_ios + t.series[0].write_ios);
        let mut raw = LatencyHistogram::new();
        t.raw_ns.iter().for_each(|&v| raw.record(v));
        let mut both = merged.read.hist.clone();
        both.merge(&merged.write.hist);
        assert_eq!(both.buckets(), raw.buckets());
        let sum: u64 = t.intervals.iter().map(|s| s.read_ios + s.write_ios).sum();
        assert_eq!(sum, ios);
    }
    // All targets together: every interval of every target, once.
    let all: u64 = out
        .all_intervals
        .iter()
        .map(|s| s.read_ios + s.write_ios)
        .sum();
    let each: u64 = out.targets.iter().map(|t| t.read.ios + t.write.ios).sum();
    assert_eq!(all, each);
    let max = out
        .all_intervals
        .iter()
        .map(|s| s.max_us)
        .fold(0.0, f64::max);
    let own = out
        .targets
        .iter()
        .map(|t| t.intervals.iter().map(|s| s.max_us).fold(0.0, f64::max));
    assert_eq!(max, own.fold(0.0, f64::max));
}

#[test]
fn a_log_interval_below_10ms_is_refused() {
    let a: Arc<dyn Target> = Arc::new(MemTarget::new("mem:a", 1 << 20).unwrap());
    let err = run(
        &plan(vec![a], 0, 100, Duration::from_millis(5)),
        &NoObserver,
    )
    .unwrap_err();
    assert!(err.is_usage(), "{err}");
}

/// Completes every I/O `service` after submission on a clock the test owns, except that
/// nothing completes inside `stall` (ns since the start): completions due then come at its end.
struct Stalls {
    info: TargetInfo,
    clock: Arc<Manual>,
    stall: (u64, u64),
}

struct StallsQueue {
    stall: (u64, u64),
    due: Due,
}

impl Target for Stalls {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, _cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(StallsQueue {
            stall: self.stall,
            due: Due::new(self.clock.clone()),
        }))
    }
}

const SERVICE: u64 = 100_000;

impl Queue for StallsQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let now = self.due.now();
        let mut due = now + SERVICE;
        if (self.stall.0..self.stall.1).contains(&due) {
            due = self.stall.1;
        }
        for io in ios {
            self.due.push(due, io.tag);
        }
        Ok(())
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        self.due.reap(min, out);
        Ok(())
    }
}

#[test]
fn a_stall_shows_in_exactly_the_intervals_it_covered() {
    let clock = Arc::new(Manual::new());
    let ramp = 200_000_000;
    // 300 ms without completions from 0.35 s into the window: intervals of 100 ms 3 (half),
    // 4 and 5 (none), 6 (the stalled I/Os complete at its start, 300 ms late).
    let stall = (ramp + 350_000_000, ramp + 650_000_000);
    let t: Arc<dyn Target> = Arc::new(Stalls {
        info: TargetInfo {
            uri: "stalls:".into(),
            engine: "test".into(),
            size: 64 << 20,
            block_size: 512,
            ..TargetInfo::default()
        },
        clock: clock.clone(),
        stall,
    });
    let mut p = plan(vec![t], 200, 1000, Duration::from_millis(100));
    p.workload.workers = 1;
    p.clock = Some(clock);
    let out = run(&p, &NoObserver).unwrap();
    let iv = &out.targets[0].intervals;
    // Intervals 4 and 5 saw no completion at all: they are not there.
    let idx: Vec<u64> = iv.iter().map(|s| (s.t * 10.0).round() as u64).collect();
    assert_eq!(idx, vec![0, 1, 2, 3, 6, 7, 8, 9], "{iv:?}");
    for s in iv {
        let k = (s.t * 10.0).round() as u64;
        let ios = s.read_ios + s.write_ios;
        match k {
            // Four I/Os every 100 µs.
            0..=2 | 7..=9 => {
                assert_eq!(ios, 4000, "{s:?}");
                assert_eq!(s.max_us, 100.0, "{s:?}");
            }
            3 => assert_eq!(ios, 2000, "{s:?}"),
            6 => {
                // Sent at 349.9 ms, completed at 650 ms.
                assert_eq!(s.max_us, 300_100.0, "{s:?}");
                assert_eq!(ios, 2000, "{s:?}");
                assert!(s.p99_us <= 100.1, "{s:?}");
            }
            _ => unreachable!(),
        }
    }
}

/// Completes every I/O [`PACED_SERVICE`] after submission on the test's clock, spinning a
/// little real time per reap so that the run's coordinator (which sleeps in real time) keeps
/// up with a simulated window many times longer than the test. With `hold`, the clock does
/// not pass that end before the run has heard it.
struct Paced {
    info: TargetInfo,
    clock: Arc<Manual>,
    hold: Option<Arc<EndAt>>,
}

struct PacedQueue {
    due: Due,
    hold: Option<Arc<EndAt>>,
}

const PACED_SERVICE: u64 = 1_000_000;

impl Target for Paced {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, _cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(PacedQueue {
            due: Due::new(self.clock.clone()),
            hold: self.hold.clone(),
        }))
    }
}

impl Queue for PacedQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let due = self.due.now() + PACED_SERVICE;
        for io in ios {
            self.due.push(due, io.tag);
        }
        Ok(())
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_micros(40) {
            std::hint::spin_loop();
        }
        self.due.reap_holding(min, out, |t| {
            if let Some(end) = &self.hold {
                end.hold_before(t);
            }
        });
        Ok(())
    }
}

/// Ends the window at `end_ns` on the test's clock, whatever the plan says (a window that
/// runs longer than planned, as a synchronized one may).
struct EndAt {
    clock: Arc<Manual>,
    end_ns: u64,
    heard: std::sync::atomic::AtomicBool,
}

impl EndAt {
    /// Waits (real time) before moving the clock to `t` past the end until the end is heard:
    /// the window ends there however late the coordinator, which sleeps in real time, looks.
    fn hold_before(&self, t: u64) {
        let give_up = Instant::now() + Duration::from_secs(10);
        while t > self.end_ns
            && !self.heard.load(std::sync::atomic::Ordering::SeqCst)
            && Instant::now() < give_up
        {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

impl sanbench_engine::run::sync::PhaseSync for EndAt {
    fn start(&self) -> Result<(), EngineError> {
        Ok(())
    }
    fn end_now(&self, _due: bool) -> Result<bool, EngineError> {
        let end = self.clock.now_ns() >= self.end_ns;
        self.heard.store(end, std::sync::atomic::Ordering::SeqCst);
        Ok(end)
    }
}

#[test]
fn a_long_window_keeps_at_most_the_cap_of_summaries_with_exact_counts() {
    let cap = 16;
    let run_for = |planned_ms: u64, end_ms: Option<u64>| {
        let clock = Arc::new(Manual::new());
        let end = end_ms.map(|e| {
            Arc::new(EndAt {
                clock: clock.clone(),
                end_ns: e * 1_000_000,
                heard: Default::default(),
            })
        });
        let t: Arc<dyn Target> = Arc::new(Paced {
            info: TargetInfo {
                uri: "paced:".into(),
                engine: "test".into(),
                size: 64 << 20,
                block_size: 512,
                ..TargetInfo::default()
            },
            clock: clock.clone(),
            hold: end.clone(),
        });
        let keep = Arc::new(Keep::default());
        let mut p = plan(vec![t], 0, planned_ms, Duration::from_millis(10));
        p.workload.workers = 1;
        p.workload.qd = 4;
        p.clock = Some(clock.clone());
        p.max_intervals = cap;
        p.intervals = Some(keep.clone());
        if let Some(e) = end {
            p.sync = Some(e);
        }
        let out = run(&p, &NoObserver).unwrap();
        let n = keep.0.lock().unwrap().len();
        (out, n)
    };
    // Planned: 300 intervals of 10 ms summarized at 22 intervals (220 ms) each, exactly.
    let (out, emitted) = run_for(3_000, None);
    let t0 = &out.targets[0];
    assert!(emitted >= 290, "the sink had {emitted} intervals");
    assert!(t0.intervals.len() <= cap, "{}", t0.intervals.len());
    assert_eq!(t0.intervals_step_ns, 220_000_000);
    assert!(t0.intervals.iter().all(|s| !s.merged));
    let ios = t0.read.ios + t0.write.ios;
    let sum: u64 = t0.intervals.iter().map(|s| s.read_ios + s.write_ios).sum();
    assert_eq!(sum, ios);
    // Four I/Os per millisecond, every one 1 ms: full summaries hold 22 × 40 of them.
    assert_eq!(t0.intervals[1].read_ios + t0.intervals[1].write_ios, 880);
    assert!(
        t0.intervals.iter().all(|s| s.max_us == 1000.0),
        "{:?}",
        t0.intervals
    );
    // A window that runs on past twice its plan: still within the cap, the step doubled,
    // counts exact. It ends at 6.8 s: at a step of 0.44 s the cap's 16th summary starts at
    // 6.6 s, so the last summary reaches the cap as the window ends and is merged then.
    let (out, emitted) = run_for(3_000, Some(6_800));
    let t0 = &out.targets[0];
    assert!(emitted >= 670, "the sink had {emitted} intervals");
    assert!(t0.intervals.len() <= cap, "{}", t0.intervals.len());
    // (The clock waits at 6.8 s for the end to be heard; the stream may still count a few
    // ms on before it sees it: the step is the planned one doubled as often as the cap
    // needed, 0.88 s unless the window ran past 7.04 s.)
    let doubled = t0.intervals_step_ns / 220_000_000;
    assert_eq!(t0.intervals_step_ns % 220_000_000, 0);
    assert!(doubled >= 2 && doubled.is_power_of_two(), "{doubled}");
    let last = t0.intervals.last().unwrap();
    let (end, w) = (last.t + last.len, out.window.as_secs_f64());
    assert!((end - w).abs() < 1e-9, "{last:?} {w}");
    let ios = t0.read.ios + t0.write.ios;
    let sum: u64 = t0.intervals.iter().map(|s| s.read_ios + s.write_ios).sum();
    assert_eq!(sum, ios);
    // Exactly those of 1 ms, 2 ms, ... before the window's end: IOPS is I/Os / window.
    let w_ns = out.window.as_nanos() as u64;
    assert_eq!(ios, 4 * ((w_ns - 1) / PACED_SERVICE), "window {w_ns} ns");
    assert!(ios >= 6_700 * 4, "{ios}");
    assert!(t0.intervals.iter().any(|s| s.merged));
    assert!(t0.intervals.iter().all(|s| s.max_us == 1000.0));
}

/// The run's clock as the fake target moves it, except for the coordinator's first reading
/// after it heard the synchronized end: that reading returns only once the stream has moved
/// the clock [`PREEMPTED`] further on, as if the coordinator were preempted between reading
/// the end's instant and publishing it (seen on a loaded host), while the stream counts on.
struct Preempted {
    inner: Arc<Manual>,
    coordinator: std::sync::OnceLock<std::thread::ThreadId>,
    heard: std::sync::atomic::AtomicBool,
    end_ns: u64,
}

const PREEMPTED: u64 = 50_000_000;

impl Clock for Preempted {
    fn now_ns(&self) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        let v = self.inner.now_ns();
        let mine = self.coordinator.get() == Some(&std::thread::current().id());
        if mine && self.heard.swap(false, SeqCst) {
            let give_up = Instant::now() + Duration::from_secs(10);
            while self.inner.now_ns() < v + PREEMPTED && Instant::now() < give_up {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        v
    }
}

impl sanbench_engine::run::sync::PhaseSync for Preempted {
    fn start(&self) -> Result<(), EngineError> {
        let _ = self.coordinator.set(std::thread::current().id());
        Ok(())
    }
    fn end_now(&self, _due: bool) -> Result<bool, EngineError> {
        let end = self.inner.now_ns() >= self.end_ns;
        self.heard.store(end, std::sync::atomic::Ordering::SeqCst);
        Ok(end)
    }
}

/// A synchronized run whose streams count past the instant the coordinator took for the end
/// (they see it late): the window reaches on to cover every I/O counted, so IOPS stays
/// I/Os / window exactly, and every interval, in the result and at the sink, lies within it.
#[test]
fn a_stream_that_sees_the_end_late_counts_nothing_past_the_window() {
    let inner = Arc::new(Manual::new());
    let sync = Arc::new(Preempted {
        inner: inner.clone(),
        coordinator: Default::default(),
        heard: Default::default(),
        end_ns: 100_000_000,
    });
    let t: Arc<dyn Target> = Arc::new(Paced {
        info: TargetInfo {
            uri: "paced:".into(),
            engine: "test".into(),
            size: 64 << 20,
            block_size: 512,
            ..TargetInfo::default()
        },
        clock: inner,
        hold: None,
    });
    let keep = Arc::new(Keep::default());
    let mut p = plan(vec![t], 0, 100, Duration::from_millis(10));
    p.workload.workers = 1;
    p.clock = Some(sync.clone());
    p.sync = Some(sync);
    p.intervals = Some(keep.clone());
    let out = run(&p, &NoObserver).unwrap();
    let (t0, w_ns) = (&out.targets[0], out.window.as_nanos() as u64);
    // Four I/Os complete at every whole millisecond of the fake clock: a window w long
    // counts exactly those of 1 ms, 2 ms, ... before w, whenever the end was heard.
    let ios = t0.read.ios + t0.write.ios;
    assert_eq!(ios, 4 * ((w_ns - 1) / PACED_SERVICE), "window {w_ns} ns");
    // (The streams counted on for the preemption's 50 ms past the instant read.)
    assert!(w_ns >= 100_000_000 + PREEMPTED, "window {w_ns} ns");
    let sum: u64 = t0.intervals.iter().map(|s| s.read_ios + s.write_ios).sum();
    assert_eq!(sum, ios);
    let w = out.window.as_secs_f64();
    let last = t0.intervals.last().unwrap();
    assert!((last.t + last.len - w).abs() < 1e-9, "{last:?} {w}");
    let kept = keep.0.lock().unwrap();
    assert!(kept.iter().all(|k| k.2 + k.3 <= w_ns), "window {w_ns} ns");
}

/// The per-second series: formed from the intervals by the coordinator when they fit whole
/// seconds (one per target, whatever the workers), kept by the streams when they do not;
/// either way each second's counts and latency sum add up to the window's, with the raw
/// latencies as the independent count, closed loop and open loop (response time) alike.
#[test]
fn the_per_second_series_adds_up_whoever_forms_it() {
    for (iv_ms, rate) in [
        (500, None),
        (300, None),
        (250, Some(20_000.0)),
        (700, Some(20_000.0)),
    ] {
        let t: Arc<dyn Target> = Arc::new(MemTarget::new("mem:s", 16 << 20).unwrap());
        let mut p = plan(vec![t], 50, 2_000, Duration::from_millis(iv_ms));
        p.raw_latencies = true;
        p.workload.rate = rate;
        let out = run(&p, &NoObserver).unwrap();
        let t = &out.targets[0];
        let whole = out.window.as_secs() as usize;
        assert_eq!(t.series.len(), whole.max(1), "{iv_ms} ms");
        let ios: u64 = t.series.iter().map(|s| s.read_ios + s.write_ios).sum();
        let bytes: u64 = t.series.iter().map(|s| s.read_bytes + s.write_bytes).sum();
        assert_eq!(ios, t.read.ios + t.write.ios, "{iv_ms} ms");
        // The raw latencies are the independent count while no stream reached their cap
        // (RAW_CAP, 4 Mi per stream: a fast machine's RAM disk passes it in 2 s).
        if t.raw_ns.len() < 1 << 22 {
            assert_eq!(ios, t.raw_ns.len() as u64, "{iv_ms} ms");
        }
        assert_eq!(bytes, t.read.bytes + t.write.bytes, "{iv_ms} ms");
        let lat: u128 = t.series.iter().map(|s| s.lat_sum_ns).sum();
        let want = if rate.is_some() {
            t.read.response.sum_ns() + t.write.response.sum_ns()
        } else {
            t.read.hist.sum_ns() + t.write.hist.sum_ns()
        };
        assert_eq!(lat, want, "{iv_ms} ms, rate {rate:?}");
        assert!(
            t.series.iter().all(|s| s.read_ios + s.write_ios > 0),
            "{iv_ms} ms"
        );
    }
}
