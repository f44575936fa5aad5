//! Long runs (issue 25): the result written while the window runs, so that a run killed at
//! hour 20 of 24 (SIGKILL, a power cut) leaves a readable result of its first 20 hours.
//!
//! The engine forms the result so far: its coordinator (engine run/collect.rs), the only place
//! the run's intervals are aggregated, takes a snapshot every `--save-every` of window time at
//! an instant every target has emitted up to, with the same constructor as the final result
//! (totals, summaries per target, per path and for all targets, the seconds), and hands it to
//! the plan's [`SaveSink`]: this [`Partial`], which passes it over a channel to a writer
//! thread. The writer turns the newest it has into a document marked `"complete": false` and
//! writes it atomically (a temporary file renamed over the old one: a reader sees the last
//! whole document, never half of one). The command's own final write replaces it with the
//! finished document.
//!
//! An MPI run saves nothing part-way: only rank 0 has every rank's figures, and only once the
//! ranks have sent them at the end (the callers pass no saver under a job).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sanbench_engine::poison;
use sanbench_engine::run::{SaveSink, Saves};
use sanbench_engine::{RunOutput, RunPlan};

use crate::error::CliError;

/// Turns the result so far into a document and writes it (on the writer thread).
pub type Write = Box<dyn Fn(RunOutput) -> Result<(), CliError> + Send>;

pub struct Partial {
    every: Duration,
    tx: Mutex<Option<Sender<RunOutput>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Partial {
    /// Starts the writer for a plan; `None` when no save would come before the window's end
    /// (`--save-every 0`, or a window no longer than it): the plan then takes no snapshot.
    pub fn start(every: Duration, plan: &RunPlan, write: Write) -> Option<Arc<Partial>> {
        if !saves(every, plan.workload.time) {
            return None;
        }
        let (tx, rx) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("sb-save".into())
            .spawn(move || writer(rx, write))
            .ok()?;
        Some(Arc::new(Partial {
            every,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        }))
    }

    /// What the plan's `saves` holds: snapshots every `--save-every`, handed to this writer.
    pub fn saves(self: &Arc<Self>) -> Saves {
        Saves {
            every: self.every,
            to: self.clone(),
        }
    }

    /// Waits for the last save to be written; after it, nothing more is written (the
    /// command's final document comes next).
    pub fn finish(&self) {
        drop(poison::lock(&self.tx).take());
        if let Some(h) = poison::lock(&self.writer).take() {
            let _ = h.join();
        }
    }
}

impl SaveSink for Partial {
    /// On the run's coordinating thread: only a send.
    fn save(&self, out: RunOutput) {
        if let Some(tx) = poison::lock(&self.tx).as_ref() {
            let _ = tx.send(out);
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
