//! Long runs (issue 25): the result written while the window runs, so that a run killed at
//! hour 20 of 24 (SIGKILL, a power cut) leaves a readable result of its first 20 hours.
//!
//! [`Partial`] is an interval sink: each finished interval of each target is merged into
//! running totals (on the run's coordinating thread, one histogram merge per interval, nothing
//! on a stream's path), and every `--save-every` of window time, at an instant when every
//! target has handed in the same intervals, the totals so far become a [`RunOutput`] that a
//! writer thread turns into a document marked `"complete": false` and writes atomically (a
//! temporary file renamed over the old one: a reader sees the last whole document, never half
//! of one). The command's own final write replaces it with the finished document.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use sanbench_engine::poison;
use sanbench_engine::run::summaries::Series;
use sanbench_engine::run::{Interval, IntervalRecord, IntervalSink, TargetRun};
use sanbench_engine::{RunOutput, RunPlan};

use crate::error::CliError;

/// Turns the totals so far into a document and writes it (on the writer thread).
pub type Write = Box<dyn Fn(RunOutput) -> Result<(), CliError> + Send>;

/// Per target, what the run's output carries besides its counts.
struct Seed {
    info: sanbench_engine::TargetInfo,
    outstanding: u64,
    open_loop: Option<(f64, sanbench_engine::run::pacer::Arrival)>,
}

struct State {
    totals: Vec<Interval>,
    /// Bounded as the run's own (engine run/summaries.rs): a day at 10 ms keeps 4096 per
    /// target, not 8.6 million.
    summaries: Vec<Series>,
    series: Vec<Vec<sanbench_engine::run::Second>>,
    /// Per target: the end of its last interval handed in (ns into the window).
    done_ns: Vec<u64>,
    /// The next save is due once every target is this far.
    due_ns: u64,
}

pub struct Partial {
    every_ns: u64,
    /// The window's intervals fit whole seconds (a per-second series can be formed).
    per_second: bool,
    ramp: Duration,
    seeds: Vec<Seed>,
    state: Mutex<State>,
    tx: Mutex<Option<Sender<RunOutput>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Partial {
    /// Starts the writer for a plan; `None` when no save would come before the window's end
    /// (`--save-every 0`, or a window no longer than it): the run then merges nothing twice.
    pub fn start(every: Duration, plan: &RunPlan, write: Write) -> Option<Arc<Partial>> {
        if !saves(every, plan.workload.time) {
            return None;
        }
        let w = &plan.workload;
        let seeds: Vec<Seed> = plan
            .targets
            .iter()
            .map(|t| Seed {
                info: t.info().clone(),
                outstanding: u64::from(w.workers) * u64::from(w.qd),
                open_loop: w.rate.map(|r| (r, w.arrival)),
            })
            .collect();
        let n = seeds.len();
        let len_ns = plan.log_interval.as_nanos().max(1);
        let (tx, rx) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("sb-save".into())
            .spawn(move || writer(rx, write))
            .ok()?;
        Some(Arc::new(Partial {
            every_ns: every.as_nanos().min(u64::MAX as u128) as u64,
            per_second: 1_000_000_000 % len_ns == 0,
            ramp: w.ramp,
            seeds,
            state: Mutex::new(State {
                totals: vec![Interval::default(); n],
                summaries: (0..n)
                    .map(|_| {
                        let fine = plan.log_interval.as_nanos().min(u64::MAX as u128) as u64;
                        let planned = w.time.as_nanos().min(u64::MAX as u128) as u64;
                        Series::new(fine, planned, plan.max_intervals)
                    })
                    .collect(),
                series: vec![Vec::new(); n],
                done_ns: vec![0; n],
                due_ns: every.as_nanos().min(u64::MAX as u128) as u64,
            }),
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        }))
    }

    /// Waits for the last save to be written; after it, nothing more is written (the
    /// command's final document comes next).
    pub fn finish(&self) {
        drop(poison::lock(&self.tx).take());
        if let Some(h) = poison::lock(&self.writer).take() {
            let _ = h.join();
        }
    }

    fn snapshot(&self, st: &State, window_start: SystemTime, at_ns: u64) -> RunOutput {
        let targets = self
            .seeds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let tot = &st.totals[i];
                let (intervals, intervals_step_ns) = st.summaries[i].snapshot(at_ns);
                TargetRun {
                    info: s.info.clone(),
                    read: tot.read.clone(),
                    write: tot.write.clone(),
                    flush: tot.flush.clone(),
                    fua: tot.fua.clone(),
                    series: st.series[i].clone(),
                    outstanding: s.outstanding,
                    mean_outstanding: None,
                    queue_stats: Vec::new(),
                    verify: None,
                    open_loop: s.open_loop,
                    intervals,
                    intervals_step_ns,
                    path_intervals: Vec::new(),
                    raw_ns: Vec::new(),
                    timeline: Default::default(),
                }
            })
            .collect();
        let clock_started = window_start.checked_sub(self.ramp).unwrap_or(window_start);
        RunOutput {
            started_at: clock_started,
            window: Duration::from_nanos(at_ns),
            stopped_early: false,
            clock_started_at: clock_started,
            run_id: 0,
            targets,
            all_intervals: Vec::new(),
            all_intervals_step_ns: 0,
        }
    }
}

/// Whether a window of `time` gets any save every `every`.
pub fn saves(every: Duration, time: Duration) -> bool {
    !every.is_zero() && every < time
}

fn writer(rx: Receiver<RunOutput>, write: Write) {
    let mut warned = false;
    while let Ok(mut out) = rx.recv() {
        // Only the newest matters when the disk is slower than the saves.
        while let Ok(newer) = rx.try_recv() {
            out = newer;
        }
        if let Err(e) = write(out) {
            if !warned {
                let e = e.message();
                eprintln!("warning: --save-every: {e} (the final result is still written)");
                warned = true;
            }
        }
    }
}

impl IntervalSink for Partial {
    fn interval(&self, r: &IntervalRecord<'_>) {
        let mut st = poison::lock(&self.state);
        let t = r.target;
        if t >= st.totals.len() {
            return;
        }
        st.totals[t].merge(r.stats);
        st.summaries[t].push(r.index, r.start_ns, r.len_ns, &r.stats.counts(), r.latency);
        if self.per_second {
            let sec = (r.start_ns / 1_000_000_000) as usize;
            let series = &mut st.series[t];
            if series.len() <= sec {
                series.resize(sec + 1, Default::default());
            }
            let s = &mut series[sec];
            let (rd, wr) = (&r.stats.read, &r.stats.write);
            s.read_ios += rd.ios;
            s.write_ios += wr.ios;
            s.read_bytes += rd.bytes;
            s.write_bytes += wr.bytes;
            s.lat_sum_ns +=
                (rd.hist.mean_ns() * rd.ios as f64 + wr.hist.mean_ns() * wr.ios as f64) as u128;
        }
        st.done_ns[t] = r.start_ns + r.len_ns;
        // Saved only when every target has handed in the same intervals, so that one window
        // length is true of all of them.
        let at = st.done_ns[0];
        if at < st.due_ns || st.done_ns.iter().any(|&d| d != at) {
            return;
        }
        while st.due_ns <= at {
            st.due_ns = st.due_ns.saturating_add(self.every_ns);
        }
        let out = self.snapshot(&st, r.window_start, at);
        drop(st);
        if let Some(tx) = poison::lock(&self.tx).as_ref() {
            let _ = tx.send(out);
        }
    }
}
