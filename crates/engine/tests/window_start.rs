//! Where a run's window starts: a stream makes what it needs before the clock starts, so its
//! first I/O does not wait on its own set-up. Its statistics alone (twelve latency
//! histograms, about 270 KiB each) took 1-1.5 ms in a release build when a stream made them
//! after the start barrier: an open loop's first arrivals were that late in every run with no
//! ramp. Time on a busy machine says little, so this counts instead: the large allocations a
//! stream thread makes between the clock's start and its first submitted I/O (none).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use sanbench_engine::run::sync::PhaseSync;
use sanbench_engine::spec::Workload;
use sanbench_engine::{
    run, Completion, EngineError, Io, NoObserver, Queue, QueueConfig, RunPlan, Target, TargetInfo,
};

/// The clock has started (the coordinator's [`PhaseSync::start`] returned).
static STARTED: AtomicBool = AtomicBool::new(false);
/// Allocations of [`LARGE`] bytes or more by a stream thread after the start, before its
/// first I/O.
static LARGE_AFTER_START: AtomicUsize = AtomicUsize::new(0);
const LARGE: usize = 64 << 10;

thread_local! {
    /// This thread is a stream's (it opened a queue) and has not submitted yet.
    static BEFORE_FIRST_IO: Cell<bool> = const { Cell::new(false) };
}

fn note(size: usize) {
    if size >= LARGE
        && STARTED.load(Ordering::SeqCst)
        && BEFORE_FIRST_IO.try_with(Cell::get).unwrap_or(false)
    {
        LARGE_AFTER_START.fetch_add(1, Ordering::SeqCst);
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

/// Completes every I/O at once; marks its stream thread until the first submit.
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
        BEFORE_FIRST_IO.with(|c| c.set(true));
        Ok(Box::new(Instant0Queue {
            done: Vec::with_capacity(cfg.depth as usize),
        }))
    }
}

impl Queue for Instant0Queue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        BEFORE_FIRST_IO.with(|c| c.set(false));
        self.done.extend(ios.iter().map(|io| io.tag));
        Ok(())
    }
    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        out.extend(self.done.drain(..).map(|tag| Completion { tag, result: 0 }));
        Ok(())
    }
}

/// Says when the clock starts (the coordinator calls `start` just before it does).
struct Start;

impl PhaseSync for Start {
    fn start(&self) -> Result<(), EngineError> {
        STARTED.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn end_now(&self, due: bool) -> Result<bool, EngineError> {
        Ok(due)
    }
}

#[test]
fn a_stream_makes_its_state_before_the_clock_starts() {
    let w = Workload::from_toml(
        "qd = 4\nworkers = 2\nramp = \"0s\"\ntime = \"50ms\"\n\
         [[segment]]\nbs = \"4k\"\nread = 70\nrandom = 100\n",
    )
    .unwrap();
    let t: Arc<dyn Target> = Arc::new(Instant0 {
        info: TargetInfo {
            uri: "instant:".into(),
            size: 64 << 20,
            block_size: 512,
            ..TargetInfo::default()
        },
    });
    let plan = RunPlan {
        sync: Some(Arc::new(Start)),
        ..RunPlan::new(w, vec![t])
    };
    let out = run(&plan, &NoObserver).unwrap();
    assert!(STARTED.load(Ordering::SeqCst));
    assert!(out.targets[0].read.ios > 0, "the run did I/O");
    assert_eq!(
        LARGE_AFTER_START.load(Ordering::SeqCst),
        0,
        "a stream allocated >= {LARGE} bytes after the clock started, before its first I/O"
    );
}
