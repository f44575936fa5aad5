//! The live progress line: once a second, the last second's IOPS and MB/s, the p99 of the
//! intervals that finished since the line before (`--log-interval`), the time left and, for
//! runs of a minute or more, the ETA. The only place that knows how progress is drawn.
//!
//! `--progress auto` (the default) rewrites the line in place on a terminal (stderr, or
//! stdout when only it is one and it carries no JSON) and prints nothing otherwise, so
//! redirected output is as it was; `lines` appends one line a second to stderr, terminal or
//! not; `never` and `--quiet` print nothing. The p99 comes from the run's interval sink: the
//! line merges each finished interval's histogram on the run's coordinating thread (nothing on
//! a stream's path), and only when it draws.

use crate::events::{Event, Events};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Where the progress line goes (`--progress`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgressMode {
    /// Rewritten in place once a second on a terminal (stderr, or stdout when only it is
    /// one); nothing otherwise.
    #[default]
    Auto,
    /// One line a second appended to stderr, terminal or not (for logs of long runs).
    Lines,
    /// None.
    Never,
}

/// The live line and the incremental result (`--progress`, `--save-every`), typed.
#[derive(Clone, Copy, Debug)]
pub struct LiveOptions {
    pub progress: ProgressMode,
    /// While the window runs, the result is rewritten this often.
    pub save_every: Duration,
}

impl Default for LiveOptions {
    /// The line on a terminal, the result rewritten every minute.
    fn default() -> LiveOptions {
        LiveOptions {
            progress: ProgressMode::Auto,
            save_every: Duration::from_secs(60),
        }
    }
}

use sanbench_engine::poison;
use sanbench_engine::run::{IntervalRecord, IntervalSink};
use sanbench_engine::Progress;
use sanbench_stats::LatencyHistogram;

use sanbench_units::fmt::latency_ns as latency;

/// Where the line goes, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Out {
    None,
    /// Rewritten in place with `\r`.
    InPlace(Stream),
    /// Appended, one line at a time.
    Lines(Stream),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// The latency of the intervals finished since the line was last drawn.
struct Lat {
    since: LatencyHistogram,
    /// The p99 shown (kept while no interval finishes: intervals longer than a second).
    p99_ns: Option<u64>,
}

pub struct ProgressLine {
    out: Out,
    drawn: AtomicBool,
    /// Characters of the last line drawn in place (a shorter one is padded over it).
    width: AtomicUsize,
    lat: Mutex<Lat>,
    /// Lines mode: when the last fill line was printed (at most one a second).
    last_fill: Mutex<Option<Instant>>,
}

impl ProgressLine {
    /// In place on stderr when it is a terminal (commands without `--progress`).
    pub fn new(quiet: bool) -> ProgressLine {
        ProgressLine::with_mode(quiet, ProgressMode::Auto, true)
    }

    /// `stdout_taken`: stdout carries a document (`--json -`) and never gets the line.
    pub fn with_mode(quiet: bool, mode: ProgressMode, stdout_taken: bool) -> ProgressLine {
        let out = match mode {
            _ if quiet => Out::None,
            ProgressMode::Never => Out::None,
            ProgressMode::Lines => Out::Lines(Stream::Stderr),
            ProgressMode::Auto if std::io::stderr().is_terminal() => Out::InPlace(Stream::Stderr),
            ProgressMode::Auto if !stdout_taken && std::io::stdout().is_terminal() => {
                Out::InPlace(Stream::Stdout)
            }
            ProgressMode::Auto => Out::None,
        };
        ProgressLine {
            out,
            drawn: AtomicBool::new(false),
            width: AtomicUsize::new(0),
            lat: Mutex::new(Lat {
                since: LatencyHistogram::new(),
                p99_ns: None,
            }),
            last_fill: Mutex::new(None),
        }
    }

    /// The interval sink that feeds the line's p99; `None` when nothing is drawn, so that a
    /// run without the line pays nothing for it.
    pub fn sink(self: &Arc<Self>) -> Option<Arc<dyn IntervalSink>> {
        (self.out != Out::None).then(|| self.clone() as Arc<dyn IntervalSink>)
    }

    fn emit(&self, text: &str) {
        let (stream, in_place) = match self.out {
            Out::None => return,
            Out::InPlace(s) => (s, true),
            Out::Lines(s) => (s, false),
        };
        let line = if in_place {
            let n = text.chars().count();
            let pad = self.width.swap(n, Ordering::Relaxed).saturating_sub(n);
            format!("\r{text}{:pad$}", "")
        } else {
            format!("{text}\n")
        };
        let _ = match stream {
            Stream::Stderr => {
                let mut e = std::io::stderr().lock();
                e.write_all(line.as_bytes()).and_then(|_| e.flush())
            }
            Stream::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(line.as_bytes()).and_then(|_| o.flush())
            }
        };
        self.drawn.store(in_place, Ordering::Relaxed);
    }

    pub fn draw(&self, p: &Progress) {
        if self.out == Out::None {
            return;
        }
        let p99 = {
            let mut l = poison::lock(&self.lat);
            if l.since.count() > 0 {
                l.p99_ns = Some(l.since.quantile(0.99));
                l.since.reset();
            }
            l.p99_ns
        };
        self.emit(&line(p, p99, SystemTime::now()));
    }

    /// A line of preconditioning progress: "[fill NAME  45 %] 230.0 MiB of 512.0 MiB".
    pub fn draw_fill(&self, name: &str, done: u64, total: u64) {
        if let Out::Lines(_) = self.out {
            let mut last = poison::lock(&self.last_fill);
            if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) && done < total {
                return;
            }
            *last = Some(Instant::now());
        }
        let pct = 100.0 * done as f64 / total.max(1) as f64;
        self.emit(&format!(
            "[precondition {name} {pct:>3.0} %] {} of {}",
            sanbench_engine::units::format_size(done),
            sanbench_engine::units::format_size(total)
        ));
    }

    /// Takes the line off the terminal (before other output) and forgets the p99: the next
    /// run (a comparison's next cell) starts its own.
    pub fn clear(&self) {
        {
            let mut l = poison::lock(&self.lat);
            l.since.reset();
            l.p99_ns = None;
        }
        if self.drawn.swap(false, Ordering::Relaxed) {
            let n = self.width.swap(0, Ordering::Relaxed);
            let blank = format!("\r{:n$}\r", "");
            let _ = match self.out {
                Out::InPlace(Stream::Stdout) => {
                    let mut o = std::io::stdout().lock();
                    o.write_all(blank.as_bytes()).and_then(|_| o.flush())
                }
                _ => {
                    let mut e = std::io::stderr().lock();
                    e.write_all(blank.as_bytes()).and_then(|_| e.flush())
                }
            };
        }
    }
}

impl IntervalSink for ProgressLine {
    fn interval(&self, r: &IntervalRecord<'_>) {
        poison::lock(&self.lat).since.merge(r.latency);
    }
}

/// The terminal's rendering of a command's events.
impl Events for ProgressLine {
    fn event(&self, e: &Event<'_>) {
        match e {
            Event::Progress(p) => self.draw(p),
            Event::Interval(r) => self.interval(r),
            Event::Fill {
                target,
                done,
                total,
            } => self.draw_fill(target, *done, *total),
            Event::Ended => self.clear(),
        }
    }

    fn wants_intervals(&self) -> bool {
        self.out != Out::None
    }
}

/// "45s", "16m40s", "2h05m" (units::fmt::span).
pub use sanbench_units::fmt::span;

/// Local time of day (the weekday too when it is more than 20 hours away).
fn clock(at: SystemTime, ahead: Duration) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as libc::time_t;
    // SAFETY: localtime_r reads `secs` and fills the struct we pass; both live across the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return "?".into();
    }
    let hm = format!("{:02}:{:02}", tm.tm_hour, tm.tm_min);
    if ahead > Duration::from_secs(20 * 3600) {
        const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
        format!("{} {hm}", DAYS[tm.tm_wday.rem_euclid(7) as usize])
    } else {
        hm
    }
}

/// The line's text: "[run 1m05s, 23h58m left, ETA Thu 14:32]  123k IOPS  500.0 MB/s  p99 1.23 ms".
pub fn line(p: &Progress, p99_ns: Option<u64>, now: SystemTime) -> String {
    let phase = if p.ramping { "ramp" } else { "run" };
    let eta = if p.remaining >= Duration::from_secs(60) {
        format!(", ETA {}", clock(now + p.remaining, p.remaining))
    } else {
        String::new()
    };
    // Time left rounds up: a run never says "0s left" while it runs.
    let left =
        Duration::from_secs(p.remaining.as_secs() + u64::from(p.remaining.subsec_nanos() > 0));
    format!(
        "[{phase} {}, {} left{eta}] {:>8} IOPS {:>9.1} MB/s  p99 {}",
        span(p.elapsed),
        span(left),
        sanbench_units::fmt::si(p.iops),
        p.bytes_per_s / 1e6,
        p99_ns.map_or("-".into(), latency)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(elapsed: u64, remaining: u64) -> Progress {
        Progress {
            elapsed: Duration::from_secs(elapsed),
            ramping: false,
            remaining: Duration::from_secs(remaining),
            iops: 123_456.0,
            bytes_per_s: 505_700_000.0,
        }
    }

    #[test]
    fn the_line_says_rate_p99_time_left_and_eta() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let l = line(&at(65, 86_335), Some(1_234_000), now);
        assert!(l.starts_with("[run 1m05s, 23h58m left, ETA "), "{l}");
        assert!(l.contains("IOPS") && l.contains("505.7 MB/s"), "{l}");
        assert!(l.ends_with("p99 1.23 ms"), "{l}");
        // A day ahead names the weekday; the ETA is the local time of now + remaining.
        let eta = &l[l.find("ETA ").unwrap() + 4..l.find(']').unwrap()];
        assert_eq!(
            eta,
            clock(
                now + Duration::from_secs(86_335),
                Duration::from_secs(86_335)
            )
        );
        assert_eq!(eta.len(), "Thu 14:32".len(), "{eta}");
        // Short runs: no ETA; no interval finished yet: no p99.
        let l = line(&at(3, 7), None, now);
        assert!(l.starts_with("[run 3s, 7s left]"), "{l}");
        assert!(l.ends_with("p99 -"), "{l}");
        assert_eq!(latency(850_000), "850 µs");
        assert_eq!(latency(3_440), "3.4 µs");
        assert_eq!(latency(420), "420 ns");
        assert_eq!(latency(0), "0 ns");
        assert_eq!(latency(2_100_000_000), "2.10 s");
        assert_eq!(span(Duration::from_secs(3 * 3600 + 7 * 60 + 5)), "3h07m");
    }

    #[test]
    fn quiet_and_never_draw_nothing_and_take_no_intervals() {
        for (quiet, mode) in [(true, ProgressMode::Lines), (false, ProgressMode::Never)] {
            let p = Arc::new(ProgressLine::with_mode(quiet, mode, false));
            assert_eq!(p.out, Out::None);
            assert!(p.sink().is_none());
        }
        let p = Arc::new(ProgressLine::with_mode(false, ProgressMode::Lines, false));
        assert_eq!(p.out, Out::Lines(Stream::Stderr));
        assert!(p.sink().is_some());
    }
}
