//! The live progress line: on a terminal only, rewritten in place once a second. The only place
//! that knows how progress is drawn.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use sanbench_engine::Progress;

pub struct ProgressLine {
    enabled: bool,
    drawn: AtomicBool,
}

impl ProgressLine {
    pub fn new(quiet: bool) -> ProgressLine {
        ProgressLine {
            enabled: !quiet && std::io::stderr().is_terminal(),
            drawn: AtomicBool::new(false),
        }
    }

    pub fn draw(&self, p: &Progress) {
        if !self.enabled {
            return;
        }
        let phase = if p.ramping { "ramp" } else { "run " };
        let line = format!(
            "\r[{phase} {:>5.0}s, {:>5.0}s left] {:>10} IOPS {:>9.1} MB/s ",
            p.elapsed.as_secs_f64(),
            p.remaining.as_secs_f64(),
            crate::output::si(p.iops),
            p.bytes_per_s / 1e6
        );
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(line.as_bytes());
        let _ = e.flush();
        self.drawn.store(true, Ordering::Relaxed);
    }

    /// A line of preconditioning progress: "[fill NAME  45 %] 230.0 MiB of 512.0 MiB".
    pub fn draw_fill(&self, name: &str, done: u64, total: u64) {
        if !self.enabled {
            return;
        }
        let pct = 100.0 * done as f64 / total.max(1) as f64;
        let line = format!(
            "\r[precondition {name} {pct:>3.0} %] {} of {} ",
            sanbench_engine::units::format_size(done),
            sanbench_engine::units::format_size(total)
        );
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(line.as_bytes());
        let _ = e.flush();
        self.drawn.store(true, Ordering::Relaxed);
    }

    pub fn clear(&self) {
        if self.drawn.swap(false, Ordering::Relaxed) {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r{:70}\r", "");
            let _ = e.flush();
        }
    }
}
