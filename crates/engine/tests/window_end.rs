//! Where a run's window ends: nothing completed at or after the end is counted, however late
//! a stream finds it, so IOPS is I/Os / window and no interval lies past the window. (A
//! synchronized run's stream that sees the end late: engine tests/intervals.rs.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use sanbench_engine::spec::Workload;
use sanbench_engine::{
    run, Completion, EngineError, Io, NoObserver, Queue, QueueConfig, RunPlan, Target, TargetInfo,
};

/// An open-loop plan (`rate` I/Os per second) of one stream at depth 1, 100 ms long.
fn open_loop(t: Arc<dyn Target>, rate: f64) -> RunPlan {
    let w = Workload::from_toml(&format!(
        "qd = 1\nramp = \"0s\"\ntime = \"100ms\"\nrate = {rate:?}\n\
         [[segment]]\nbs = \"4k\"\nread = 70\nrandom = 100\n"
    ))
    .unwrap();
    RunPlan {
        log_interval: Duration::from_millis(10),
        ..RunPlan::new(w, vec![t])
    }
}

/// Completes every I/O [`LATE_SERVICE`] after submission (real time), and wakes from every
/// wait [`OVERSLEEP`] late, as a stream's thread does on a loaded host: the open loop's
/// wait, due shortly before the window's end, returns past it with a completion.
struct Oversleeps {
    info: TargetInfo,
}

struct OversleepsQueue {
    pending: Vec<(Instant, u32)>,
}

const LATE_SERVICE: Duration = Duration::from_millis(110);
const OVERSLEEP: Duration = Duration::from_millis(30);

impl Target for Oversleeps {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, _cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(OversleepsQueue {
            pending: Vec::new(),
        }))
    }
}

impl OversleepsQueue {
    /// Sleeps until `at`, then hands over what is due.
    fn wake_at(&mut self, at: Instant, out: &mut Vec<Completion>) {
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let now = Instant::now();
        let done = self.pending.iter().filter(|(due, _)| *due <= now);
        out.extend(done.map(|&(_, tag)| Completion { tag, result: 0 }));
        self.pending.retain(|(due, _)| *due > now);
    }
}

impl Queue for OversleepsQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let due = Instant::now() + LATE_SERVICE;
        self.pending.extend(ios.iter().map(|io| (due, io.tag)));
        Ok(())
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let first = self.pending.iter().map(|p| p.0).min().filter(|_| min > 0);
        self.wake_at(first.unwrap_or_else(Instant::now), out);
        Ok(())
    }
    fn reap_until(
        &mut self,
        deadline: Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        let first = self.pending.iter().map(|p| p.0).min();
        self.wake_at(first.map_or(deadline, |f| f.min(deadline)) + OVERSLEEP, out);
        Ok(())
    }
}

/// The open loop counts a completion only when it was reaped before the window's end, as
/// the closed loop does: here the one I/O completes 10 ms after the end and is reaped 30 ms
/// after that; counted, it would fall in an interval past the window.
#[test]
fn the_open_loop_counts_no_completion_reaped_after_the_window() {
    let t: Arc<dyn Target> = Arc::new(Oversleeps {
        info: TargetInfo {
            uri: "oversleeps:".into(),
            engine: "test".into(),
            size: 64 << 20,
            block_size: 512,
            ..TargetInfo::default()
        },
    });
    // One arrival, at the window's start: the next is due at its end.
    let out = run(&open_loop(t, 10.0), &NoObserver).unwrap();
    let t0 = &out.targets[0];
    assert_eq!(out.window, Duration::from_millis(100));
    assert_eq!(t0.read.ios + t0.write.ios, 0, "{:?}", t0.intervals);
    let w = out.window.as_secs_f64();
    assert!(t0.intervals.iter().all(|s| s.t + s.len <= w + 1e-9));
}
