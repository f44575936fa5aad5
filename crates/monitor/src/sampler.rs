//! The monitor the run loop drives: idle baseline, background sampling, exact window bounds.
//!
//! ```text
//! let mut m = Monitor::new(cfg)?;   // opens sources, never fails for a missing meter
//! m.baseline()?;                    // idle CPU and power, before any I/O
//! let h = m.start()?;               // background thread: per-interval series
//! ... ramp-up ...
//! h.window_start();                 // snapshots taken here, on the caller's thread
//! ... measured window ...
//! h.window_end();
//! let report = h.finish()?;         // serde → the run's `cpu`, `net`, `power` blocks
//! ```
//!
//! Window bounds are snapshotted on the caller's thread so they coincide with the engine's
//! window; the background thread only adds the per-interval series and keeps thread/process
//! tracking current (threads that vanish mid-window count up to their last reading). Power
//! sources that are slow to read (commands) are not read at the bounds: their readings on either
//! side are interpolated (see `power::sampler`).
//!
//! Overhead: one tick reads `/proc/stat`, lists `/proc` and reads the stat files of tracked
//! processes into reused buffers; `examples/overhead.rs` measures it.

use crate::cpu::{usage, StatReader, StatSnapshot};
use crate::disk::{DiskReader, DiskReport, DiskSnapshot};
use crate::error::Result;
use crate::fsutil::clk_tck;
use crate::net::{NetReader, NetReport, NetSnapshot};
use crate::power::Idle;
use crate::power::{self, PowerChoice, PowerOptions, PowerReport, PowerSampler};
use crate::procs::{default_kernel_patterns, ProcessTracker, WatchSpec};
use sanbench_stats::poison::{self, lock};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod report;
pub use report::{Baseline, CpuReport, MonitorReport, SeriesPoint};

/// The sampler's thread (`examples/overhead.rs` reads its CPU time by this name).
pub const SAMPLER_THREAD_NAME: &str = "sanbench-mon";

#[derive(Clone, Debug)]
pub struct MonitorConfig {
    /// Where `/proc` and `/sys` live; `/` on a real host.
    pub root: PathBuf,
    /// Background sampling period (default 1 s).
    pub interval: Duration,
    /// `--watch NAME|PID` arguments.
    pub watch: Vec<String>,
    /// Glob patterns for kernel threads (default [`default_kernel_patterns`]).
    pub kernel_patterns: Vec<String>,
    pub power: PowerChoice,
    /// Options for the power sources; `None` → [`PowerOptions::for_host`].
    pub power_options: Option<PowerOptions>,
    /// How long [`Monitor::baseline`] samples the idle host (default 5 s).
    pub baseline: Duration,
    /// USER_HZ; `None` → `sysconf(_SC_CLK_TCK)`. Tests on fixture trees set it.
    pub clk_tck: Option<u64>,
    /// The process counted as `self`; `None` → this process.
    pub self_pid: Option<u32>,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            root: PathBuf::from("/"),
            interval: Duration::from_secs(1),
            watch: Vec::new(),
            kernel_patterns: default_kernel_patterns(),
            power: PowerChoice::Auto,
            power_options: None,
            baseline: Duration::from_secs(5),
            clk_tck: None,
            self_pid: None,
        }
    }
}

struct Bound {
    t: f64,
    stat: Option<StatSnapshot>,
    net: Option<NetSnapshot>,
    disk: Option<DiskSnapshot>,
}

struct Core {
    origin: Instant,
    clk_tck: u64,
    stat: StatReader,
    /// The last reading (stamped: the series' points are busy over the window since, less
    /// idle; cpu.rs).
    prev: StatSnapshot,
    scratch: StatSnapshot,
    have_prev: bool,
    tracker: ProcessTracker,
    net: NetReader,
    disk: DiskReader,
    /// Its own lock: a slow source (a command taking a second) must not hold up the window
    /// bounds, which only need the CPU state.
    power: Arc<Mutex<Option<PowerSampler>>>,
    power_fast: bool,
    power_note: Option<String>,
    series: Vec<SeriesPoint>,
    baseline: Option<(f64, f64, f64)>,
    /// A baseline measured by an earlier monitor (compare reuses one per target).
    reused: Option<Baseline>,
    start: Option<Bound>,
    /// False while the window start is the implicit one taken by `Monitor::start`.
    explicit_start: bool,
    end: Option<Bound>,
    notes: Vec<String>,
}

impl Core {
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    /// One background sample of the CPU side: busy since the last tick, process tracking.
    /// Returns `(t, busy %)` for the series.
    fn tick_cpu(&mut self) -> Option<(f64, f64)> {
        let t = self.now();
        let busy = match self.stat.read(&mut self.scratch) {
            Ok(()) => {
                let b = self.have_prev.then(|| {
                    usage(&self.prev, &self.scratch, self.clk_tck)
                        .total
                        .busy_pct
                });
                std::mem::swap(&mut self.prev, &mut self.scratch);
                self.have_prev = true;
                b
            }
            Err(e) => {
                self.note(e.note());
                None
            }
        };
        // After the window, tracking no longer changes the report: skip the /proc walk.
        if self.end.is_none() {
            self.tracker.sample();
        }
        busy.map(|b| (t, b))
    }

    /// A full tick on one thread (before the background thread exists).
    fn tick(&mut self) {
        let cpu = self.tick_cpu();
        let watts = sample_power(&self.power);
        self.push_point(cpu, watts);
    }

    fn push_point(&mut self, cpu: Option<(f64, f64)>, watts: Option<f64>) {
        if let Some((t_s, busy_pct)) = cpu {
            self.series.push(SeriesPoint {
                t_s,
                busy_pct,
                watts,
            });
        }
    }

    fn note(&mut self, n: String) {
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    /// Snapshots for a window bound. A fast power source is read first and its reading's time
    /// *is* the bound, so counters are differenced at exactly the bound, not interpolated;
    /// `/proc/stat` and `/proc/net/dev` follow within microseconds.
    fn bound(&mut self) -> Bound {
        let mut t = None;
        if self.power_fast {
            let mut p = lock(&self.power);
            if let Some(p) = p.as_mut() {
                p.sample();
                if p.failed().is_none() {
                    t = p.last_t();
                }
            }
        }
        let t = t.unwrap_or_else(|| self.now());
        let stat = self.stat.snapshot().map_err(|e| self.note(e.note())).ok();
        let net = self.net.snapshot().map_err(|e| self.note(e.note())).ok();
        // Not every system has /proc/diskstats (containers may hide it): no note, no figure.
        let disk = self.disk.snapshot().ok();
        Bound { t, stat, net, disk }
    }

    fn window_start(&mut self) {
        if self.explicit_start || self.end.is_some() {
            return;
        }
        self.explicit_start = true;
        self.tracker.window_start();
        self.start = Some(self.bound());
    }

    fn window_end(&mut self) {
        if self.start.is_none() {
            self.window_start();
        }
        if self.end.is_some() {
            return;
        }
        let b = self.bound();
        self.tracker.window_end();
        self.end = Some(b);
    }

    fn report(&mut self) -> MonitorReport {
        self.window_end();
        // A slow power source was not read at the end bound: one more reading covers it.
        let mut power = lock(&self.power);
        if let Some(p) = power.as_mut() {
            let end_t = self.end.as_ref().map_or(0.0, |b| b.t);
            if !matches!(p.last_t(), Some(t) if t >= end_t) {
                p.sample();
            }
        }
        let (s, e) = (self.start.take(), self.end.take());
        let (s, e) = (s.expect("window started"), e.expect("window ended"));
        let window_s = (e.t - s.t).max(0.0);

        let mut cpu = CpuReport {
            clk_tck: self.clk_tck,
            groups: self.tracker.report(window_s),
            others: Some(self.tracker.others(window_s)),
            ..Default::default()
        };
        let threads = self.tracker.threads();
        let disks = match (&s.disk, &e.disk) {
            (Some(a), Some(b)) => DiskReport::between(a, b, window_s),
            _ => DiskReport {
                note: Some("/proc/diskstats unavailable".into()),
                ..Default::default()
            },
        };
        match (&s.stat, &e.stat) {
            (Some(a), Some(b)) => {
                let u = usage(a, b, self.clk_tck);
                cpu.cores = u.cores;
                cpu.busy_pct = u.total.busy_pct;
                cpu.busy_cpu_s = u.busy_cpu_s;
                cpu.breakdown = u.total;
                cpu.per_core = u.per_core;
            }
            _ => cpu.note = Some("system-wide CPU unavailable (see notes)".into()),
        }
        let busy_idle = self
            .baseline
            .map(|(_, _, busy)| busy)
            .or(self.reused.map(|b| b.busy_pct));
        if let Some(busy) = busy_idle {
            cpu.baseline_busy_pct = Some(busy);
            cpu.busy_above_idle_pct = Some((cpu.busy_pct - busy).max(0.0));
        }
        if !self.notes.is_empty() {
            let all = self.notes.join("; ");
            cpu.note = Some(
                cpu.note
                    .take()
                    .map_or(all.clone(), |n| format!("{n}: {all}")),
            );
        }

        let net = match (&s.net, &e.net) {
            (Some(a), Some(b)) => crate::net::between(a, b),
            _ => NetReport {
                note: Some("network counters unavailable".into()),
                ..Default::default()
            },
        };

        let power = match power.as_ref() {
            Some(p) => {
                let idle = match (self.baseline, self.reused) {
                    (Some((a, b, _)), _) => Some(Idle::Interval(a, b)),
                    (None, Some(r)) => r.idle_w.map(Idle::Watts),
                    _ => None,
                };
                let mut r = p.report_idle(s.t, e.t, idle);
                if let Some(n) = &self.power_note {
                    r.note = Some(match r.note {
                        Some(x) => format!("{x}; {n}"),
                        None => n.clone(),
                    });
                }
                r
            }
            None => PowerReport {
                source: "none".into(),
                note: self.power_note.clone(),
                ..Default::default()
            },
        };
        MonitorReport {
            window_s,
            window_start_s: s.t,
            window_end_s: e.t,
            cpu,
            net,
            power,
            series: std::mem::take(&mut self.series),
            disks,
            threads,
        }
    }
}

/// A configured monitor, before sampling starts.
pub struct Monitor {
    core: Core,
    cfg: MonitorConfig,
}

impl Monitor {
    /// Opens the readers and the power source. A power source that cannot be opened is not an
    /// error: the report says why (`power.note`) and carries no power figures. Only a missing
    /// `/proc/stat` or a bad choice made explicitly by the user fails.
    pub fn new(cfg: MonitorConfig) -> Result<Monitor> {
        let origin = Instant::now();
        let tck = cfg.clk_tck.unwrap_or_else(clk_tck);
        let mut stat = StatReader::new(&cfg.root);
        let prev = stat.snapshot()?;
        let opts = cfg
            .power_options
            .clone()
            .unwrap_or_else(|| PowerOptions::for_host(&cfg.root));
        let (power, power_note) = match power::open(&cfg.root, &cfg.power, &opts) {
            Ok((src, why)) => (
                src.map(|s| PowerSampler::new(s, origin)),
                (!why.is_empty()).then(|| format!("not used: {}", why.join("; "))),
            ),
            Err(e) if e.is_usage() => return Err(e),
            Err(e) => (None, Some(e.note())),
        };
        let power_fast = power.as_ref().is_some_and(|p| p.fast());
        let watch = cfg.watch.iter().map(|w| WatchSpec::parse(w)).collect();
        let tracker = ProcessTracker::new(
            &cfg.root,
            cfg.self_pid.unwrap_or_else(std::process::id),
            watch,
            cfg.kernel_patterns.clone(),
            tck,
        );
        let core = Core {
            origin,
            clk_tck: tck,
            stat,
            prev,
            scratch: StatSnapshot::default(),
            have_prev: true,
            tracker,
            net: NetReader::new(&cfg.root),
            disk: DiskReader::new(&cfg.root),
            power: Arc::new(Mutex::new(power)),
            power_fast,
            power_note,
            series: Vec::with_capacity(4096),
            baseline: None,
            reused: None,
            start: None,
            explicit_start: false,
            end: None,
            notes: Vec::new(),
        };
        Ok(Monitor { core, cfg })
    }

    /// Name of the power source in use, and whether it is modeled.
    pub fn power_source(&self) -> Option<(String, bool)> {
        lock(&self.core.power)
            .as_ref()
            .map(|p| (p.source_name().to_string(), p.modeled()))
    }

    /// Samples the idle host for the configured baseline duration (blocking) and keeps the
    /// result for the report. Call before any I/O starts.
    pub fn baseline(&mut self) -> Result<Baseline> {
        let c = &mut self.core;
        // Power is read just before the start and just after the end so that its samples
        // bracket the baseline interval even for slow sources.
        sample_power(&c.power);
        let a = c.now();
        let s0 = c.stat.snapshot()?;
        let end = Instant::now() + self.cfg.baseline;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(self.cfg.interval));
            sample_power(&c.power);
        }
        let s1 = c.stat.snapshot()?;
        let b = c.now();
        sample_power(&c.power);
        let busy = usage(&s0, &s1, c.clk_tck).total.busy_pct;
        // The series' first point then covers only the time after the baseline.
        c.prev = s1;
        c.have_prev = true;
        c.baseline = Some((a, b, busy));
        let idle_w = lock(&c.power)
            .as_ref()
            .and_then(|p| p.avg_between(a, b).ok());
        Ok(Baseline {
            seconds: b - a,
            busy_pct: busy,
            idle_w,
        })
    }

    /// Uses a baseline measured earlier on this host (by another monitor) instead of
    /// measuring one: `compare` measures each target's idle baseline once and reuses it.
    pub fn reuse_baseline(&mut self, b: Baseline) {
        self.core.reused = Some(b);
    }

    /// Starts the background sampler.
    pub fn start(self) -> Result<MonitorHandle> {
        let interval = self.cfg.interval.max(Duration::from_millis(10));
        let mut core = self.core;
        core.tick();
        // Until the run loop marks the window, it starts here.
        core.window_start();
        core.explicit_start = false;
        let shared = Arc::new(Shared {
            power: Arc::clone(&core.power),
            core: Mutex::new(core),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let s2 = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(SAMPLER_THREAD_NAME.into())
            .spawn(move || run(&s2, interval))
            .map_err(|e| crate::MonitorError::sys("spawn monitor thread", e))?;
        Ok(MonitorHandle {
            shared,
            thread: Some(thread),
        })
    }
}

struct Shared {
    core: Mutex<Core>,
    power: Arc<Mutex<Option<PowerSampler>>>,
    stop: Mutex<bool>,
    wake: Condvar,
}

/// Reads the power source, if any; returns watts for the series.
fn sample_power(p: &Mutex<Option<PowerSampler>>) -> Option<f64> {
    lock(p).as_mut().and_then(|p| p.sample())
}

/// The sampling loop: ticks on an absolute schedule so that the series does not drift.
fn run(s: &Shared, interval: Duration) {
    let mut next = Instant::now() + interval;
    loop {
        let mut stop = lock(&s.stop);
        loop {
            if *stop {
                return;
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            stop = poison::wait_timeout(&s.wake, stop, next - now);
        }
        drop(stop);
        // CPU side and power side under separate locks, never both at once: a slow power
        // command delays only the series, not the run loop's window bounds.
        let cpu = lock(&s.core).tick_cpu();
        let watts = sample_power(&s.power);
        lock(&s.core).push_point(cpu, watts);
        next += interval;
        // After a stall (suspended VM, slow ipmitool) skip missed ticks instead of bursting.
        let now = Instant::now();
        if next < now {
            next = now + interval;
        }
    }
}

/// The running monitor; the run loop calls the window methods at the engine's window bounds.
pub struct MonitorHandle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl MonitorHandle {
    /// Start of the measured window (after ramp-up). Takes the snapshots now.
    pub fn window_start(&self) {
        lock(&self.shared.core).window_start();
    }

    /// End of the measured window (before cool-down). Takes the snapshots now.
    pub fn window_end(&self) {
        lock(&self.shared.core).window_end();
    }

    /// The power source's last reading in the series: watts, the source's name, and whether
    /// it is modeled (`None` without a source or before its first reading).
    pub fn last_power(&self) -> Option<(f64, String, bool)> {
        let watts = lock(&self.shared.core)
            .series
            .last()
            .and_then(|p| p.watts)?;
        let p = lock(&self.shared.power);
        let s = p.as_ref()?;
        Some((watts, s.source_name().to_string(), s.modeled()))
    }

    /// Stops sampling and builds the report. Without `window_start` the window starts at
    /// [`Monitor::start`]; without `window_end` it ends here.
    pub fn finish(mut self) -> Result<MonitorReport> {
        self.stop();
        Ok(lock(&self.shared.core).report())
    }

    fn stop(&mut self) {
        *lock(&self.shared.stop) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MonitorHandle {
    fn drop(&mut self) {
        self.stop();
    }
}
