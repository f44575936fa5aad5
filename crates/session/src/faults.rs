//! `--fault AT:LINK:ACTION` on `run` and `compare`: lab faults fired during the measured
//! window, recorded in the result, undone after the run.
//!
//! The schedule is read and checked before any I/O ([`Faults::prepare`]: the lab, its links,
//! every AT inside the window, root and `tc`), so a typo never costs a run. A thread started
//! when the window starts (the scheduler's `Observer::window_started`) fires each fault at
//! its time through the lab crate (the same `tc` commands as `sanbench lab fault`) and
//! records when it took effect; the window's end stops it. After the run, whatever the
//! schedule left changed (a link down, lossy, slow) is set back to what it was before the run,
//! with a warning line, so the next run or cell starts as this one did. The lab file follows
//! every change, so `lab status` tells the truth even if sanbench is killed mid-run.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sanbench_engine::poison;
use sanbench_engine::result::{rfc3339, FaultRecord};
use sanbench_lab::cmd::{preflight, System};
use sanbench_lab::fault::{self, Scheduled};
use sanbench_lab::{Impairment, LabState};

use crate::error::{usage, CliError};
use sanbench_lab::LabError;

/// A checked schedule and the lab it acts on, shared by every run of one command.
pub struct Faults {
    path: PathBuf,
    schedule: Vec<Scheduled>,
    state: Mutex<LabState>,
}

impl Faults {
    /// Reads `--fault` values (`None` when there are none) and checks them against the lab at
    /// `lab` (default: the lab's default file) and each window (`(name, length)`: the run, or
    /// every workload of a comparison). Every error is bad usage (exit 2) and comes before
    /// any I/O.
    pub fn prepare(
        items: &[String],
        lab: Option<&Path>,
        windows: &[(String, Duration)],
    ) -> Result<Option<Arc<Faults>>, CliError> {
        let schedule = fault::parse_schedule(items).map_err(lab_err)?;
        if schedule.is_empty() {
            return Ok(None);
        }
        preflight(false).map_err(lab_err)?;
        let path = lab
            .map(Path::to_path_buf)
            .unwrap_or_else(sanbench_lab::default_path);
        let state = fault::load_lab(&path).map_err(lab_err)?;
        for (what, w) in windows {
            fault::check_schedule(&schedule, &state, &path, *w, what).map_err(lab_err)?;
        }
        for s in &schedule {
            let l = state
                .links
                .iter()
                .find(|l| l.info.name == s.link)
                .ok_or_else(|| usage(format!("--fault {s}: no link '{}'", s.link)))?;
            if !Path::new("/sys/class/net").join(&l.host_if).exists() {
                return Err(usage(format!(
                    "--fault {s}: link {}'s interface {} does not exist: is the lab at {} up? \
                     ('sanbench lab status')",
                    s.link,
                    l.host_if,
                    path.display()
                )));
            }
        }
        Ok(Some(Arc::new(Faults {
            path,
            schedule,
            state: Mutex::new(state),
        })))
    }

    /// Applies one fault and records the link's new state in the lab file.
    fn fire(&self, s: &Scheduled) -> Result<(), String> {
        let mut st = poison::lock(&self.state);
        let l = fault::find_link(&mut st, &s.link, &self.path).map_err(|e| e.to_string())?;
        fault::apply(&System, l, s.action).map_err(|e| e.to_string())?;
        st.save(&self.path).map_err(|e| e.to_string())
    }

    /// Every link's impairment now.
    fn snapshot(&self) -> Vec<(String, Impairment)> {
        poison::lock(&self.state)
            .links
            .iter()
            .map(|l| (l.info.name.clone(), l.impairment.clone()))
            .collect()
    }

    /// Sets every link back to `before`; one warning line per link that the run left changed.
    fn restore(&self, before: &[(String, Impairment)]) -> Vec<String> {
        let mut st = poison::lock(&self.state);
        let mut lines = Vec::new();
        for (name, was) in before {
            let Some(l) = st.links.iter_mut().find(|l| &l.info.name == name) else {
                continue;
            };
            if &l.impairment == was {
                continue;
            }
            let now = l.impairment.describe();
            lines.push(match fault::set(&System, l, was) {
                Ok(()) => format!(
                    "warning: the fault schedule left link {name} {now}; set back to {} after \
                     the run",
                    was.describe()
                ),
                Err(e) => format!("warning: the fault schedule left link {name} {now}: {e}"),
            });
        }
        if let Err(e) = st.save(&self.path) {
            lines.push(format!("warning: {e}"));
        }
        lines
    }
}

/// The faults of one run: the links' state before it, the thread firing the schedule, the
/// records.
pub struct FaultRun {
    faults: Arc<Faults>,
    before: Vec<(String, Impairment)>,
    firing: Mutex<Option<Firing>>,
    records: Mutex<Vec<FaultRecord>>,
}

struct Firing {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Vec<FaultRecord>>,
}

impl FaultRun {
    pub fn new(faults: &Arc<Faults>) -> FaultRun {
        FaultRun {
            before: faults.snapshot(),
            faults: faults.clone(),
            firing: Mutex::new(None),
            records: Mutex::new(Vec::new()),
        }
    }

    /// The measured window starts now: every AT counts from here.
    pub fn window_started(&self) {
        let t0 = Instant::now();
        let f = self.faults.clone();
        let (stop, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sanbench-faults".into())
            .spawn(move || fire_all(&f, t0, &rx));
        match thread {
            Ok(thread) => *poison::lock(&self.firing) = Some(Firing { stop, thread }),
            Err(e) => {
                // No thread, no faults: said in the result rather than silently.
                let mut r = poison::lock(&self.records);
                for s in &self.faults.schedule {
                    r.push(record(s, t0, Some(format!("not fired: {e}"))));
                }
            }
        }
    }

    /// The window ends now: faults not yet due are not fired.
    pub fn window_ended(&self) {
        if let Some(f) = poison::lock(&self.firing).take() {
            let _ = f.stop.send(());
            let fired = f.thread.join().unwrap_or_default();
            poison::lock(&self.records).extend(fired);
        }
    }

    /// After the run (finished or failed): stops the thread if the window never closed, sets
    /// every changed link back, and returns what fired. Warnings go to stderr, one line each.
    pub fn finish(self) -> Vec<FaultRecord> {
        self.window_ended();
        let records = std::mem::take(&mut *poison::lock(&self.records));
        for r in records.iter().filter(|r| r.error.is_some()) {
            eprintln!(
                "sanbench: warning: fault {}:{} at {:.0} ms failed: {}",
                r.link,
                r.action,
                r.offset_ms,
                r.error.as_deref().unwrap_or("")
            );
        }
        for l in self.faults.restore(&self.before) {
            eprintln!("sanbench: {l}");
        }
        records
    }
}

/// The firing thread: each fault at `t0 + AT`, until the schedule ends or `stop` says the
/// window has.
fn fire_all(f: &Faults, t0: Instant, stop: &mpsc::Receiver<()>) -> Vec<FaultRecord> {
    let mut out = Vec::with_capacity(f.schedule.len());
    for s in &f.schedule {
        let wait = (t0 + s.at).saturating_duration_since(Instant::now());
        match stop.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
        let err = f.fire(s).err();
        out.push(record(s, t0, err));
    }
    out
}

fn record(s: &Scheduled, t0: Instant, error: Option<String>) -> FaultRecord {
    let now = SystemTime::now();
    FaultRecord {
        at: rfc3339(now),
        at_unix_ms: now
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64,
        offset_ms: t0.elapsed().as_secs_f64() * 1e3,
        link: s.link.clone(),
        action: s.action.to_string(),
        error,
    }
}

/// A lab error as the CLI's: bad input (exit 2) or a failure.
pub fn lab_err(e: LabError) -> CliError {
    if e.is_usage() {
        usage(e.to_string())
    } else {
        CliError::Failed(anyhow::Error::new(e))
    }
}
