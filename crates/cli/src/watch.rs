//! Watching a run as it goes (issue 25): the run's intervals (`--log-interval`) go to the
//! histogram log (`--hist-log`, HdrHistogram's interval log format) as each one finishes, so
//! the log holds every interval's full histogram while the process holds none of them, and
//! into the live endpoint's counters (`--metrics-listen`, metrics.rs).
//!
//! One [`Watch`] lives for a whole command: in `compare` every cell's intervals go to the one
//! log, tagged with the cell (workload, round, target), timestamps counting from the first
//! cell's window.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use sanbench_engine::poison;
use sanbench_engine::run::{IntervalRecord, IntervalSink};
use sanbench_stats::hist_log;

use sanbench_metrics::expo::{Key, Registry};

use crate::args::WatchArgs;
use crate::error::{usage, CliError};

/// The histogram log of one command.
struct HistLog {
    path: PathBuf,
    out: Mutex<BufWriter<File>>,
    /// Where timestamps count from: the first window's start (the header is written then).
    base: OnceLock<SystemTime>,
    /// The first write error (reported once the run is over, not in the middle of it).
    failed: Mutex<Option<std::io::Error>>,
    /// The lines' compressor, kept from interval to interval.
    lines: Mutex<hist_log::Lines>,
}

/// What a run's intervals go to, and the labels of what runs now.
pub struct Watch {
    log: Option<HistLog>,
    /// Per target of the plan that runs now: its tag in the log (`None`: untagged).
    tags: Mutex<Vec<Option<String>>>,
    /// `--metrics-listen`: what the endpoint serves, and per target of the plan its series.
    metrics: Option<Arc<Registry>>,
    keys: Mutex<Vec<Key>>,
}

/// A tag HdrHistogram's log accepts: no commas, no whitespace.
fn tag(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

impl Watch {
    /// Opens what the flags ask for, before any I/O: a log that cannot be created is bad
    /// input (exit 2). `None` when nothing watches.
    pub fn open(a: &WatchArgs) -> Result<Option<Arc<Watch>>, CliError> {
        if a.hist_log.is_none() && a.metrics_listen.is_none() {
            return Ok(None);
        }
        let log = match &a.hist_log {
            None => None,
            Some(path) => {
                let f = File::create(path)
                    .map_err(|e| usage(format!("--hist-log {}: {e}", path.display())))?;
                Some(HistLog {
                    path: path.clone(),
                    out: Mutex::new(BufWriter::new(f)),
                    base: OnceLock::new(),
                    failed: Mutex::new(None),
                    lines: Mutex::new(hist_log::Lines::default()),
                })
            }
        };
        let metrics = match a.metrics_listen {
            None => None,
            Some(addr) => Some(crate::metrics::start(addr)?),
        };
        Ok(Some(Arc::new(Watch {
            log,
            tags: Mutex::new(Vec::new()),
            metrics,
            keys: Mutex::new(Vec::new()),
        })))
    }

    /// `run`: one target untagged, several tagged by their number (`t0`, `t1`, ...; the
    /// header names them).
    pub fn for_run(&self, uris: &[String]) {
        let tags = match uris.len() {
            1 => vec![None],
            _ => (0..uris.len()).map(|i| Some(format!("t{i}"))).collect(),
        };
        *poison::lock(&self.tags) = tags;
        *poison::lock(&self.keys) = uris
            .iter()
            .map(|u| Key {
                target: sanbench_engine::uri::redact(u),
                workload: None,
                round: None,
            })
            .collect();
        if let (Some(log), true) = (&self.log, uris.len() > 1) {
            let names: Vec<String> = uris
                .iter()
                .enumerate()
                .map(|(i, u)| format!("t{i} = {}", sanbench_engine::uri::redact(u)))
                .collect();
            log.comment(&names.join("\n"));
        }
    }

    /// `compare`: the cell that runs next (every copy of its target shares the tag).
    pub fn for_cell(&self, workload: &str, round: u32, target: &str, copies: usize) {
        let t = tag(&format!("{workload}/r{}/{target}", round + 1));
        *poison::lock(&self.tags) = vec![Some(t); copies];
        let key = Key {
            target: target.to_string(),
            workload: Some(workload.to_string()),
            round: Some(round + 1),
        };
        *poison::lock(&self.keys) = vec![key; copies];
    }

    /// Flushes the log; a write that failed fails the command (exit 1).
    pub fn finish(&self) -> Result<(), CliError> {
        let Some(log) = &self.log else { return Ok(()) };
        if log.base.get().is_none() {
            log.header(SystemTime::now());
        }
        let flushed = poison::lock(&log.out).flush();
        let err = poison::lock(&log.failed).take().or(flushed.err());
        match err {
            Some(e) => Err(CliError::Failed(anyhow::anyhow!(
                "--hist-log {}: {e}",
                log.path.display()
            ))),
            None => Ok(()),
        }
    }
}

impl HistLog {
    fn write(&self, text: &str) {
        let r = poison::lock(&self.out).write_all(text.as_bytes());
        if let Err(e) = r {
            poison::lock(&self.failed).get_or_insert(e);
        }
    }

    fn header(&self, base: SystemTime) -> SystemTime {
        *self.base.get_or_init(|| {
            let comments = vec![format!(
                "sanbench {} latency histograms per interval, in nanoseconds",
                env!("CARGO_PKG_VERSION")
            )];
            self.write(&hist_log::header(&comments, base));
            base
        })
    }

    fn comment(&self, text: &str) {
        // Comments before the header would precede #[StartTime]: held until it is written.
        let mut s = String::new();
        for l in text.lines() {
            s.push('#');
            s.push_str(l);
            s.push('\n');
        }
        self.header(SystemTime::now());
        self.write(&s);
    }
}

impl IntervalSink for Watch {
    fn interval(&self, r: &IntervalRecord<'_>) {
        if let Some(m) = &self.metrics {
            if let Some(k) = poison::lock(&self.keys).get(r.target) {
                crate::metrics::add(m, k, r);
            }
        }
        let Some(log) = &self.log else { return };
        let base = log.header(r.window_start);
        let since = r.window_start.duration_since(base).unwrap_or_default();
        let start = since + std::time::Duration::from_nanos(r.start_ns);
        let len = std::time::Duration::from_nanos(r.len_ns);
        let t = poison::lock(&self.tags).get(r.target).cloned().flatten();
        // Tags are sanitized above, so a line always forms.
        let line = poison::lock(&log.lines).line(r.latency, start, len, t.as_deref());
        if let Ok(line) = line {
            log.write(&line);
        }
    }
}

/// The plan's sink, when anything watches.
pub fn sink(w: &Option<Arc<Watch>>) -> Option<Arc<dyn IntervalSink>> {
    w.as_ref().map(|w| w.clone() as Arc<dyn IntervalSink>)
}
