//! The closed loop keeps the queue depth it is asked for on writes (issue 43, item 5): a tag
//! that completes goes back to the target at once, its write data made while it was in flight,
//! not stamped while its slot stands empty.
//!
//! The target here serves every I/O in a fixed time and measures, for each tag, the time from
//! handing the tag's completion back (the end of `reap`) to the tag's next submission: the lag
//! during which one of the asked I/Os is not in flight. Its median is judged against what one
//! stamp of the write's size costs on this machine, measured beside it: on a loaded machine a
//! stream can be preempted in any lag, but the median of a thousand lags is the loop's own
//! work, which without writes made ahead includes a stamp every time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sanbench_engine::spec::{Segment, Workload};
use sanbench_engine::stamp::{fill_pool, Stamp, Stamper, POOL, UNIT};
use sanbench_engine::{
    run, Arena, Completion, EngineError, Io, NoObserver, Op, Queue, QueueConfig, RunPlan, Target,
    TargetInfo,
};

const BS: u64 = 1 << 20;
const QD: u32 = 2;
const SERVICE: Duration = Duration::from_millis(2);

/// What the target saw: each resubmission's lag (ns) and any write whose buffer did not hold
/// that write's data, or shared bytes with another I/O in flight.
#[derive(Default)]
struct Seen {
    lags: Vec<u64>,
    wrong: Vec<String>,
}

struct Timed {
    info: TargetInfo,
    seen: Arc<Mutex<Seen>>,
}

struct TimedQueue {
    arena: Arc<Arena>,
    /// In flight: (due, tag, buffer, length).
    pending: Vec<(Instant, u32, usize, usize)>,
    /// When each tag's last completion was handed back.
    back: Vec<Option<Instant>>,
    seen: Arc<Mutex<Seen>>,
}

impl Target for Timed {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(TimedQueue {
            arena: cfg.arena.clone(),
            pending: Vec::new(),
            back: vec![None; cfg.depth as usize],
            seen: self.seen.clone(),
        }))
    }
}

impl TimedQueue {
    /// Whether the write's buffer holds its data: a valid stamp of its offset at every unit.
    fn stamped(&self, io: &Io) -> bool {
        // SAFETY: the buffer is this in-flight write's, only read by the target.
        let data = unsafe { self.arena.slice(io.buf, io.len as usize) };
        data.chunks(UNIT).enumerate().all(|(k, unit)| {
            Stamp::decode(unit).map(|s| s.offset) == Some(io.offset + (k * UNIT) as u64)
        })
    }
}

impl Queue for TimedQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let now = Instant::now();
        let mut wrong = Vec::new();
        for io in ios {
            if let Some(back) = self.back[io.tag as usize].take() {
                self.seen
                    .lock()
                    .unwrap()
                    .lags
                    .push((now - back).as_nanos() as u64);
            }
            let (b, n) = (io.buf, io.len as usize);
            if self
                .pending
                .iter()
                .any(|&(_, _, pb, pn)| b < pb + pn && pb < b + n)
            {
                wrong.push(format!(
                    "tag {} shares its buffer at {b} with an I/O in flight",
                    io.tag
                ));
            }
            if io.op == Op::Write && !self.stamped(io) {
                wrong.push(format!("write at {} sent without its data", io.offset));
            }
            self.pending.push((now + SERVICE, io.tag, b, n));
        }
        self.seen.lock().unwrap().wrong.extend(wrong);
        self.pending.sort_by_key(|p| p.0);
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        if min > 0 {
            if let Some(&(due, ..)) = self.pending.first() {
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        }
        let now = Instant::now();
        let n = self.pending.iter().take_while(|p| p.0 <= now).count();
        for (_, tag, ..) in self.pending.drain(..n) {
            out.push(Completion { tag, result: 0 });
            self.back[tag as usize] = Some(Instant::now());
        }
        Ok(())
    }
}

/// The least time one stamp of a `BS` write takes here (the loop's own work per write
/// without writes made ahead, at the least).
fn one_stamp() -> Duration {
    let mut pool = vec![0u8; POOL + UNIT];
    fill_pool(&mut pool, 7);
    let mut st = Stamper::new(&Default::default(), 7, 0);
    let mut buf = vec![0u8; BS as usize];
    (0..30)
        .map(|k| {
            let t = Instant::now();
            st.fill(&mut buf, k * BS, &pool);
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn workload(read_pct: f64) -> Workload {
    Workload {
        name: None,
        segments: vec![Segment {
            weight: 1,
            read_bs: BS,
            write_bs: BS,
            read_pct,
            random_pct: 0.0,
            align: None,
            trim_pct: 0.0,
            write_zeroes_pct: 0.0,
        }],
        qd: QD,
        workers: 1,
        ramp: Duration::ZERO,
        time: Duration::from_millis(1500),
        span: None,
        flush_every: 0,
        fua_pct: 0.0,
        rate: None,
        arrival: sanbench_engine::run::pacer::Arrival::Fixed,
    }
}

/// Runs `w` on the timed target; the lags and what went wrong.
fn lags_of(w: Workload) -> Seen {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let target: Arc<dyn Target> = Arc::new(Timed {
        info: TargetInfo {
            uri: "timed:".into(),
            engine: "test".into(),
            size: 1 << 30,
            block_size: 512,
            ..TargetInfo::default()
        },
        seen: seen.clone(),
    });
    let out = run(&RunPlan::new(w, vec![target]), &NoObserver).unwrap();
    let t = &out.targets[0];
    assert!(t.read.ios + t.write.ios > 100, "too few I/Os to judge");
    let mut s = std::mem::take(&mut *seen.lock().unwrap());
    s.lags.sort_unstable();
    s
}

#[test]
fn a_completed_write_s_tag_is_resubmitted_without_a_stamp_in_between() {
    let stamp = one_stamp();
    // Sequential writes, and a write-heavy mix (reads use their tag's own slot).
    for read_pct in [0.0, 30.0] {
        let s = lags_of(workload(read_pct));
        let median = Duration::from_nanos(s.lags[s.lags.len() / 2]);
        let p90 = Duration::from_nanos(s.lags[s.lags.len() * 9 / 10]);
        eprintln!(
            "{read_pct} % reads: {} resubmissions, lag median {median:?}, p90 {p90:?}; one stamp of {} KiB {stamp:?}",
            s.lags.len(),
            BS >> 10
        );
        assert!(
            s.wrong.is_empty(),
            "{read_pct} % reads: {:?}",
            &s.wrong[..s.wrong.len().min(5)]
        );
        assert!(
            median * 4 < stamp,
            "{read_pct} % reads: a completed tag waited {median:?} (median) for its next I/O, \
             against {stamp:?} for one stamp: its write data is made while its slot is empty"
        );
    }
}
