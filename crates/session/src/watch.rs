//! Watching a run as it goes (issue 25): the run's intervals (`--log-interval`) go to the
//! histogram log (`--hist-log`, HdrHistogram's interval log format) as each one finishes, so
//! the log holds every interval's full histogram while the process holds none of them, and
//! into the live endpoint's counters (`--metrics-listen`, metrics.rs).
//!
//! One [`Watch`] lives for a whole command: in `compare` every cell's intervals go to the one
//! log, tagged with the cell (workload, round, target), timestamps counting from the first
//! cell's window.
//!
//! Tags (HdrHistogram's `Tag=` per line): a target's line carries the target's tag (none for
//! a run of one target, `tN` for several, the cell in `compare`); a multipath target's paths
//! add one line each, `/pN` after the target's tag (`pN` alone when it has none), so a
//! target's paths add up to its own line; under MPI every line names its rank, `rankR` after
//! the target's tag and before the path's (`rank1`, `t0/rank1/p0`). The ranks other than 0
//! write their lines to a spool file with timestamps from the Unix epoch; rank 0 moves them
//! to its log's base time and appends them after each run (mpi/hist.rs).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use sanbench_engine::poison;
use sanbench_engine::run::{IntervalRecord, IntervalSink};
use sanbench_stats::hist_log;

use sanbench_metrics::registry::{Key, Registry};

use crate::error::{usage, CliError};

/// What to watch a run with (`--log-interval`, `--hist-log`, `--metrics-listen`), typed.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// The length of an interval of the result's `intervals` (at least 10 ms).
    pub log_interval: std::time::Duration,
    /// Where the interval histograms go (HdrHistogram's log format).
    pub hist_log: Option<PathBuf>,
    /// Where the Prometheus endpoint listens.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

impl Default for WatchOptions {
    /// One-second intervals, no log, no endpoint.
    fn default() -> WatchOptions {
        WatchOptions {
            log_interval: std::time::Duration::from_secs(1),
            hist_log: None,
            metrics_listen: None,
        }
    }
}

/// The histogram log of one command (or, on an MPI rank other than 0, its spool).
struct HistLog {
    path: PathBuf,
    out: Mutex<BufWriter<File>>,
    /// Where timestamps count from: the first window's start (the header is written then).
    base: OnceLock<SystemTime>,
    /// A spool: no header, timestamps from the Unix epoch.
    spool: bool,
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
    /// Under MPI: this process's rank (every line says it).
    rank: Option<u32>,
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

/// `a/b`, or whichever of them there is.
fn join(a: Option<&str>, b: Option<&str>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}/{b}")),
        (a, b) => a.or(b).map(str::to_string),
    }
}

impl Watch {
    /// Opens what the flags ask for, before any I/O: a log that cannot be created is bad
    /// input (exit 2). `None` when nothing watches. `rank`: this process's rank in an MPI
    /// job; the ranks other than 0 spool their log lines (rank 0 appends them) and serve no
    /// endpoint.
    pub fn open(a: &WatchOptions, rank: Option<u32>) -> Result<Option<Arc<Watch>>, CliError> {
        let spool = rank.is_some_and(|r| r > 0);
        let metrics_addr = a.metrics_listen.filter(|_| !spool);
        if a.hist_log.is_none() && metrics_addr.is_none() {
            return Ok(None);
        }
        let log = match &a.hist_log {
            None => None,
            Some(path) => {
                let (path, f) = if spool {
                    spool_file(rank.unwrap_or(0))?
                } else {
                    let f = File::create(path)
                        .map_err(|e| usage(format!("--hist-log {}: {e}", path.display())))?;
                    (path.clone(), f)
                };
                Some(HistLog {
                    path,
                    out: Mutex::new(BufWriter::new(f)),
                    base: OnceLock::new(),
                    spool,
                    failed: Mutex::new(None),
                    lines: Mutex::new(hist_log::Lines::default()),
                })
            }
        };
        let metrics = match metrics_addr {
            None => None,
            Some(addr) => Some(crate::metrics::start(addr)?),
        };
        let w = Arc::new(Watch {
            log,
            tags: Mutex::new(Vec::new()),
            rank,
            metrics,
            keys: Mutex::new(Vec::new()),
        });
        Ok(Some(w))
    }

    /// The registry the `--metrics-listen` endpoint serves, when this watch started one.
    pub fn metrics(&self) -> Option<&Arc<Registry>> {
        self.metrics.as_ref()
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

    /// Whether a histogram log (or its spool) is written.
    #[cfg(feature = "mpi")]
    pub fn logs(&self) -> bool {
        self.log.is_some()
    }

    /// Flushes the log; a write that failed fails the command (exit 1).
    pub fn finish(&self) -> Result<(), CliError> {
        let Some(log) = &self.log else { return Ok(()) };
        // Under MPI rank 0's base is set by mpi/hist.rs (its window's start, also when it
        // ran no I/O of its own).
        if log.base.get().is_none() && !log.spool && self.rank.is_none() {
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

    /// The spool's lines so far, and the spool emptied (ranks other than 0).
    #[cfg(feature = "mpi")]
    pub fn take_spool(&self) -> Result<Vec<u8>, CliError> {
        let Some(log) = self.log.as_ref().filter(|l| l.spool) else {
            return Ok(Vec::new());
        };
        use std::io::{Read, Seek};
        let fail = |e: std::io::Error| {
            CliError::Failed(anyhow::anyhow!(
                "--hist-log spool {}: {e}",
                log.path.display()
            ))
        };
        let mut out = poison::lock(&log.out);
        out.flush().map_err(fail)?;
        let f = out.get_mut();
        f.rewind().map_err(fail)?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).map_err(fail)?;
        f.set_len(0).map_err(fail)?;
        f.rewind().map_err(fail)?;
        Ok(bytes)
    }

    /// The log's base time, unless an interval set it already (rank 0 of an MPI job).
    #[cfg(feature = "mpi")]
    pub fn set_base(&self, base: SystemTime) {
        if let Some(log) = &self.log {
            log.header(base);
        }
    }

    /// Another rank's spooled lines (timestamps from the Unix epoch), moved to this log's
    /// base time and appended (rank 0). Lines that do not parse are dropped and counted.
    #[cfg(feature = "mpi")]
    pub fn append_spooled(&self, lines: &str) -> usize {
        let Some(log) = self.log.as_ref().filter(|l| !l.spool) else {
            return 0;
        };
        let base = log.header(SystemTime::now());
        let base_s = base
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let (mut text, mut dropped) = (String::new(), 0);
        for l in lines.lines().filter(|l| !l.is_empty()) {
            match hist_log::rebase(l, base_s) {
                Some(x) => text.push_str(&x),
                None => dropped += 1,
            }
        }
        log.write(&text);
        dropped
    }
}

/// A spool file of its own in the temp directory, removed at once (the handle keeps it).
fn spool_file(rank: u32) -> Result<(PathBuf, File), CliError> {
    let path = std::env::temp_dir().join(format!(
        "sanbench-hlog-{}-rank{rank}.spool",
        std::process::id()
    ));
    let f = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| usage(format!("--hist-log spool {}: {e}", path.display())))?;
    let _ = std::fs::remove_file(&path);
    Ok((path, f))
}

impl HistLog {
    fn write(&self, text: &str) {
        let r = poison::lock(&self.out).write_all(text.as_bytes());
        if let Err(e) = r {
            poison::lock(&self.failed).get_or_insert(e);
        }
    }

    /// The base time: the first window's start (written in the header then); a spool's is
    /// the Unix epoch, without a header.
    fn header(&self, base: SystemTime) -> SystemTime {
        if self.spool {
            return SystemTime::UNIX_EPOCH;
        }
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
        if self.spool {
            return;
        }
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
        let target = poison::lock(&self.tags).get(r.target).cloned().flatten();
        let rank = self.rank.map(|r| format!("rank{r}"));
        let t = join(target.as_deref(), rank.as_deref());
        // Tags are sanitized above, so a line always forms.
        let mut lines = poison::lock(&log.lines);
        let mut text = lines
            .line(r.latency, start, len, t.as_deref())
            .unwrap_or_default();
        for (i, p) in r.stats.paths.iter().enumerate() {
            let pt = join(t.as_deref(), Some(&format!("p{i}")));
            if let Ok(l) = lines.line(&p.latency, start, len, pt.as_deref()) {
                text.push_str(&l);
            }
        }
        log.write(&text);
    }
}

/// The plan's sink, when anything watches.
pub fn sink(w: &Option<Arc<Watch>>) -> Option<Arc<dyn IntervalSink>> {
    w.as_ref().map(|w| w.clone() as Arc<dyn IntervalSink>)
}
