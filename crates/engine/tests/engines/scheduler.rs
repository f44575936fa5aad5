//! The scheduler over fake targets: a silent or failing target ends the run, two targets are
//! reported apart, the stop flag and a late window end are honoured, and a target of known
//! service time on a manual clock gives exact figures.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sanbench_engine::mem::MemTarget;
use sanbench_engine::spec::{Segment, Workload};
use sanbench_engine::{
    run, Completion, EngineError, Io, NoObserver, Queue, QueueConfig, RunPlan, Target, TargetInfo,
};

use crate::manual_clock::Due;

fn workload(read_pct: f64, secs: f64) -> Workload {
    Workload {
        name: None,
        segments: vec![Segment {
            weight: 1,
            read_bs: 4096,
            write_bs: 4096,
            read_pct,
            random_pct: 100.0,
            align: None,
            trim_pct: 0.0,
            write_zeroes_pct: 0.0,
        }],
        qd: 4,
        workers: 2,
        ramp: Duration::ZERO,
        time: Duration::from_secs_f64(secs),
        span: None,
        flush_every: 0,
        fua_pct: 0.0,
        rate: None,
        arrival: sanbench_engine::run::pacer::Arrival::Fixed,
    }
}

/// A target whose queues accept I/O and never complete it, or fail every I/O.
struct Broken {
    info: TargetInfo,
    fail: bool,
}

struct BrokenQueue {
    fail: bool,
    pending: Vec<Completion>,
    timeout: Duration,
}

impl Target for Broken {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(BrokenQueue {
            fail: self.fail,
            pending: Vec::new(),
            timeout: cfg.io_timeout,
        }))
    }
}

impl Queue for BrokenQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        if self.fail {
            self.pending.extend(ios.iter().map(|io| Completion {
                tag: io.tag,
                result: -libc_eio(),
            }));
        }
        Ok(())
    }
    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        if self.pending.is_empty() {
            std::thread::sleep(self.timeout);
            return Err(EngineError::Timeout {
                peer: "broken".into(),
                secs: self.timeout.as_secs_f64(),
            });
        }
        out.append(&mut self.pending);
        Ok(())
    }
}

fn libc_eio() -> i32 {
    5
}

fn broken(fail: bool) -> Arc<dyn Target> {
    Arc::new(Broken {
        info: TargetInfo {
            uri: "broken:".into(),
            engine: "test".into(),
            size: 1 << 30,
            block_size: 512,
            max_transfer: None,
            read_only: false,
            params: BTreeMap::new(),
        },
        fail,
    })
}

fn plan(targets: Vec<Arc<dyn Target>>, secs: f64, timeout: Duration) -> RunPlan {
    RunPlan {
        workload: workload(70.0, secs),
        targets,
        io_timeout: timeout,
        seed: 1,
        data: Default::default(),
        stop: Arc::new(AtomicBool::new(false)),
        run_id: None,
        verify: Vec::new(),
        clock: None,
        sync: None,
        raw_latencies: false,
        log_interval: Duration::from_secs(1),
        intervals: None,
        max_intervals: sanbench_engine::run::summaries::MAX_SUMMARIES,
        saves: None,
        stream_cpus: Vec::new(),
        replay: None,
    }
}

#[test]
fn a_silent_target_ends_the_run_with_a_timeout() {
    let t0 = Instant::now();
    let err = run(
        &plan(vec![broken(false)], 30.0, Duration::from_millis(300)),
        &NoObserver,
    )
    .expect_err("the run must fail");
    assert!(matches!(err.error, EngineError::Timeout { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "no hang");
    assert!(!err.is_usage());
}

#[test]
fn a_failed_io_ends_the_run_naming_the_offset() {
    let err = run(
        &plan(vec![broken(true)], 30.0, Duration::from_secs(5)),
        &NoObserver,
    )
    .expect_err("the run must fail");
    match &err.error {
        EngineError::Io { op, source, .. } => {
            assert!(*op == "read" || *op == "write");
            assert_eq!(source.raw_os_error(), Some(5));
        }
        e => panic!("unexpected {e}"),
    }
    assert!(err.to_string().contains("offset"), "{err}");
}

#[test]
fn a_run_over_two_targets_reports_each_and_excludes_ramp() {
    let a: Arc<dyn Target> = Arc::new(MemTarget::new("mem:a", 16 << 20).unwrap());
    let b: Arc<dyn Target> = Arc::new(MemTarget::new("mem:b", 16 << 20).unwrap());
    let mut p = plan(vec![a, b], 1.0, Duration::from_secs(5));
    p.workload.ramp = Duration::from_millis(500);
    let out = run(&p, &NoObserver).unwrap();
    assert_eq!(out.targets.len(), 2);
    assert!((out.window.as_secs_f64() - 1.0).abs() < 1e-9);
    for t in &out.targets {
        assert!(t.read.ios > 1000 && t.write.ios > 100, "{t:?}");
        assert_eq!(t.outstanding, 8);
        assert_eq!(t.series.len(), 1);
        let per_s = t.series[0].read_ios + t.series[0].write_ios;
        assert_eq!(
            per_s,
            t.read.ios + t.write.ios,
            "the series covers the window"
        );
        let share = t.read.ios as f64 / (t.read.ios + t.write.ios) as f64;
        assert!((share - 0.70).abs() < 0.02, "{share}");
    }
}

#[test]
fn the_stop_flag_ends_the_run_early() {
    let a: Arc<dyn Target> = Arc::new(MemTarget::new("mem:a", 16 << 20).unwrap());
    let p = plan(vec![a], 60.0, Duration::from_secs(5));
    let stop = p.stop.clone();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let out = run(&p, &NoObserver).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(out.stopped_early);
    assert!(out.window < Duration::from_secs(2));
}

/// Lists this process's stream threads of a three-target run (named `sb-wW-t2`; the other
/// tests here run at most two targets) when the window ends, after a late wake-up.
struct LateObserver(std::sync::Mutex<Vec<String>>);

impl sanbench_engine::run::Observer for LateObserver {
    fn window_ended(&self) {
        // A coordinator that wakes late on a busy host: the streams have stopped by now.
        std::thread::sleep(Duration::from_millis(300));
        let names = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
            .map(|s| s.trim().to_string())
            .filter(|n| sanbench_engine::run::is_stream_thread(n, Some(2)))
            .collect();
        *self.0.lock().unwrap() = names;
    }
}

/// The monitor reads each stream thread's CPU time at the window's end; a thread that has
/// exited by then takes its time with it. So every stream thread outlives the window's end
/// readings, however late the coordinator takes them.
#[test]
fn stream_threads_outlive_the_window_end() {
    let targets: Vec<Arc<dyn Target>> = (0..3)
        .map(|i| Arc::new(MemTarget::new(&format!("mem:{i}"), 16 << 20).unwrap()) as _)
        .collect();
    let p = plan(targets, 0.3, Duration::from_secs(5));
    let obs = LateObserver(Default::default());
    run(&p, &obs).unwrap();
    let mut seen = obs.0.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, ["sb-w0-t2", "sb-w1-t2"]);
}

/// A target whose I/O on tag t takes `delay` x (1 + t): the tags fall out of step, so a drain
/// after Ctrl-C waits for I/O submitted up to `delay` x depth earlier.
struct Slow {
    info: TargetInfo,
    delay: Duration,
}

struct SlowQueue {
    delay: Duration,
    pending: Vec<(Instant, u32)>,
}

impl Target for Slow {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(
        &self,
        _cfg: &sanbench_engine::QueueConfig,
    ) -> Result<Box<dyn sanbench_engine::Queue>, sanbench_engine::EngineError> {
        Ok(Box::new(SlowQueue {
            delay: self.delay,
            pending: Vec::new(),
        }))
    }
}

impl sanbench_engine::Queue for SlowQueue {
    fn submit(&mut self, ios: &[sanbench_engine::Io]) -> Result<(), sanbench_engine::EngineError> {
        let now = Instant::now();
        self.pending
            .extend(ios.iter().map(|io| (now + self.delay * io.tag, io.tag)));
        self.pending.sort();
        Ok(())
    }
    fn reap(
        &mut self,
        min: usize,
        out: &mut Vec<sanbench_engine::Completion>,
    ) -> Result<(), sanbench_engine::EngineError> {
        if min > 0 {
            if let Some(&(t, _)) = self.pending.first() {
                std::thread::sleep((t + self.delay).saturating_duration_since(Instant::now()));
            }
        }
        let now = Instant::now();
        let (done, rest): (Vec<_>, Vec<_>) = self
            .pending
            .drain(..)
            .partition(|(t, _)| now >= *t + self.delay);
        self.pending = rest;
        out.extend(
            done.into_iter()
                .map(|(_, tag)| sanbench_engine::Completion { tag, result: 0 }),
        );
        Ok(())
    }
}

#[test]
fn a_stopped_run_s_window_ends_at_the_stop_not_after_the_drain() {
    let slow: Arc<dyn Target> = Arc::new(Slow {
        info: TargetInfo {
            uri: "slow:".into(),
            engine: "test".into(),
            size: 64 << 20,
            block_size: 512,
            ..TargetInfo::default()
        },
        delay: Duration::from_millis(150),
    });
    let p = plan(vec![slow], 60.0, Duration::from_secs(5));
    let stop = p.stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let t0 = Instant::now();
    let out = run(&p, &NoObserver).unwrap();
    assert!(out.stopped_early);
    // The stop is seen at the next completion (within 150 ms); the drain of what is still in
    // flight (up to 600 ms, QD 4) must not be in the window.
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1300),
        "no drain to exclude: {took:?}"
    );
    assert!(
        out.window <= Duration::from_millis(1200),
        "window {:?} includes the drain (run took {took:?})",
        out.window
    );
    let ios = out.targets[0].read.ios + out.targets[0].write.ios;
    assert!(ios > 0);
}

/// A target of exactly known service time on a clock the test owns: every I/O completes
/// `service` after its submission; reaping moves the clock to the next completion.
struct Exact {
    info: TargetInfo,
    service: u64,
    clock: Arc<sanbench_engine::run::clock::Manual>,
}

struct ExactQueue {
    service: u64,
    due: Due,
}

impl Target for Exact {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, _cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(ExactQueue {
            service: self.service,
            due: Due::new(self.clock.clone()),
        }))
    }
}

impl Queue for ExactQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let now = self.due.now();
        for io in ios {
            self.due.push(now + self.service, io.tag);
        }
        Ok(())
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        self.due.reap(min, out);
        Ok(())
    }
}

/// With a target of known service time on a clock the test drives, the scheduler's figures
/// are exact: every latency is the service time, and the window holds exactly the I/Os that
/// complete inside it.
#[test]
fn a_fake_target_on_a_manual_clock_gives_exact_figures() {
    use sanbench_engine::run::clock::Manual;
    let clock = Arc::new(Manual::new());
    let t: Arc<dyn Target> = Arc::new(Exact {
        info: TargetInfo {
            uri: "exact:".into(),
            engine: "test".into(),
            size: 64 << 20,
            block_size: 512,
            ..TargetInfo::default()
        },
        service: 100_000,
        clock: clock.clone(),
    });
    let mut p = plan(vec![t], 1.0, Duration::from_secs(5));
    p.workload.workers = 1;
    p.workload.qd = 4;
    p.workload.ramp = Duration::from_millis(500);
    p.clock = Some(clock.clone());
    let out = run(&p, &NoObserver).unwrap();
    let r = &out.targets[0];
    // Four I/Os every 100 µs; completions at k x 100 µs, counted for k x 100 µs in
    // [0.5 s, 1.5 s): k = 5000..14999, 10,000 batches of 4.
    assert_eq!(r.read.ios + r.write.ios, 40_000);
    let mut all = r.read.hist.clone();
    all.merge(&r.write.hist);
    assert_eq!(all.count(), 40_000);
    assert_eq!(all.mean_ns(), 100_000.0);
    let s = all.summary();
    assert_eq!((s.min, s.max), (100_000, 100_000));
    assert_eq!(out.window, Duration::from_secs(1));
    // One second per element of the series, 40,000 I/Os in it.
    assert_eq!(r.series.len(), 1);
    assert_eq!(r.series[0].read_ios + r.series[0].write_ios, 40_000);
}
