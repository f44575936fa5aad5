//! A stream makes what it needs before the clock starts, so nothing it does inside the window
//! waits on its own set-up. Its statistics alone (twelve latency histograms, about 270 KiB
//! each, and one more per path of a multipath target) took 1-1.5 ms in a release build when a
//! stream made them after the start barrier: an open loop's first arrivals were that late in
//! every run with no ramp; a path's, made at its first completion or at the first interval
//! edge, stalled a multipath stream inside the window. Time on a busy machine says little,
//! so this counts instead: the large allocations stream threads make inside the window (none).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sanbench_engine::run::sync::PhaseSync;
use sanbench_engine::spec::Workload;
use sanbench_engine::{
    run, Completion, EngineError, Io, NoObserver, Queue, QueueConfig, RunPlan, Target, TargetInfo,
};

/// The window is open: the coordinator's [`PhaseSync::start`] returned and its `end_now` has
/// not yet said the end. Tests of this file run one at a time ([`ONE_AT_A_TIME`]).
static OPEN: AtomicBool = AtomicBool::new(false);
/// Allocations of [`LARGE`] bytes or more by a stream thread while the window is open.
static LARGE_IN_WINDOW: AtomicUsize = AtomicUsize::new(0);
const LARGE: usize = 64 << 10;
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread is a stream's (it opened a queue).
    static STREAM: Cell<bool> = const { Cell::new(false) };
}

fn note(size: usize) {
    if size >= LARGE && OPEN.load(Ordering::SeqCst) && STREAM.try_with(Cell::get).unwrap_or(false) {
        LARGE_IN_WINDOW.fetch_add(1, Ordering::SeqCst);
    }
}

struct Counting;

// SAFETY: every call is passed on to the system allocator unchanged; `note` only reads
// atomics and a const-initialised thread-local (neither allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        System.realloc(p, l, new)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Completes every I/O at once; marks the thread that opens a queue as a stream's.
struct Instant0 {
    info: TargetInfo,
}

struct Instant0Queue {
    done: Vec<u32>,
}

impl Target for Instant0 {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        STREAM.with(|c| c.set(true));
        Ok(Box::new(Instant0Queue {
            done: Vec::with_capacity(cfg.depth as usize),
        }))
    }
}

impl Queue for Instant0Queue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        self.done.extend(ios.iter().map(|io| io.tag));
        Ok(())
    }
    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        out.extend(self.done.drain(..).map(|tag| Completion { tag, result: 0 }));
        Ok(())
    }
}

/// Says when the window opens (the coordinator calls `start` just before the clock starts)
/// and when it ends.
struct Window;

impl PhaseSync for Window {
    fn start(&self) -> Result<(), EngineError> {
        OPEN.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn end_now(&self, due: bool) -> Result<bool, EngineError> {
        if due {
            OPEN.store(false, Ordering::SeqCst);
        }
        Ok(due)
    }
}

/// Runs `t` (two workers, QD 4, no ramp, a 50 ms window cut at 40 ms: one interval edge
/// inside it, and the next 30 ms past the end, so a coordinator held up near the end does
/// not bring a second) and returns the large allocations its streams made inside the window.
fn large_in_window(t: Arc<dyn Target>) -> usize {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    LARGE_IN_WINDOW.store(0, Ordering::SeqCst);
    let w = Workload::from_toml(
        "qd = 4\nworkers = 2\nramp = \"0s\"\ntime = \"50ms\"\n\
         [[segment]]\nbs = \"4k\"\nread = 70\nrandom = 100\n",
    )
    .unwrap();
    let plan = RunPlan {
        sync: Some(Arc::new(Window)),
        log_interval: Duration::from_millis(40),
        ..RunPlan::new(w, vec![t])
    };
    let out = run(&plan, &NoObserver).unwrap();
    assert!(!OPEN.load(Ordering::SeqCst), "the window ended");
    assert!(out.targets[0].read.ios > 0, "the run did I/O");
    LARGE_IN_WINDOW.load(Ordering::SeqCst)
}

fn instant(uri: &str) -> Instant0 {
    Instant0 {
        info: TargetInfo {
            uri: uri.into(),
            size: 64 << 20,
            block_size: 512,
            ..TargetInfo::default()
        },
    }
}

#[test]
fn a_stream_makes_its_state_before_the_clock_starts() {
    let n = large_in_window(Arc::new(instant("instant:")));
    assert_eq!(
        n, 0,
        "streams allocated >= {LARGE} bytes {n} times inside the window"
    );
}

#[test]
fn a_multipath_stream_has_its_paths_figures_before_the_clock_starts() {
    use sanbench_engine::multipath::{MultipathTarget, Opener, Options, Policy, LU_ID, MULTI_CONN};
    let openers: Vec<Opener> = (0..2)
        .map(|i| {
            let o: Opener = Arc::new(move || {
                let mut t = instant(&format!("instant:p{i}"));
                t.info.params.insert(LU_ID.into(), "one-lu".into());
                t.info.params.insert(MULTI_CONN.into(), true.into());
                Ok(Arc::new(t) as Arc<dyn Target>)
            });
            o
        })
        .collect();
    let options = Options {
        policy: Policy::RoundRobin,
        ..Options::default()
    };
    let t = MultipathTarget::new("instant:multipath", openers, options).unwrap();
    let n = large_in_window(Arc::new(t));
    assert_eq!(
        n, 0,
        "streams allocated >= {LARGE} bytes {n} times inside the window"
    );
}
