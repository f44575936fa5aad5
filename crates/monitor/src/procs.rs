//! CPU time of processes, threads and kernel threads, grouped (docs/MEASURE.md, "CPU").
//!
//! `/proc/PID/stat` and `/proc/PID/task/TID/stat` give user and system time in USER_HZ ticks
//! ([`stat`] parses them); [`groups`] holds what is grouped and reported; this file is the
//! tracker that reads them over a window.
//!
//! Groups:
//! * `self`: sanbench's own process.
//! * `watch:SPEC`: processes whose pid equals SPEC, or whose comm equals SPEC (several processes
//!   may match, e.g. every `tgtd`).
//! * `kernel`: processes (kernel threads are processes of their own) whose comm matches one of
//!   the kernel patterns, plus threads *inside* self/watched processes that match (io_uring's
//!   `iou-wrk-*`/`iou-sqp-*` are threads of the process that created the ring). That second part
//!   is also inside its process group; the report gives it separately as `overlap_cpu_s`.
//!
//! Accounting: a process's own `/proc/PID/stat` already includes threads that exited, so process
//! groups subtract whole-process times and vanished threads are not lost. Whatever is first seen
//! mid-window counts from zero when its start time (field 22) is after the window start, and from
//! its first reading otherwise (e.g. a kworker that took a storage workqueue's name). Whatever
//! vanishes counts up to its last reading. kworkers are shared by all workqueues and their comm
//! names the last workqueue served, so once a kworker is seen with a storage name its CPU counts
//! from then on: an upper bound for kernel work, documented as such.

use crate::fsutil::{glob_match, read_into, under};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod groups;
mod others;
mod stat;

pub use groups::{default_kernel_patterns, GroupReport, GroupThread, ThreadReport, WatchSpec};
pub use others::{OtherProcesses, Others, NOTABLE_PCT as OTHERS_NOTABLE_PCT};
pub use stat::{parse_task_stat, TaskStat};

/// `(utime, stime)` at the window start (or first sight) and at the last reading.
#[derive(Clone, Copy, Debug, Default)]
struct Acct {
    first: (u64, u64),
    last: (u64, u64),
    in_window: bool,
}

impl Acct {
    fn delta(&self) -> (u64, u64) {
        (
            self.last.0.saturating_sub(self.first.0),
            self.last.1.saturating_sub(self.first.1),
        )
    }
}

#[derive(Debug)]
struct ThreadEntry {
    name: String,
    acct: Acct,
    /// Run time and run-queue wait from `schedstat` in ns (exact, where the kernel has it):
    /// the per-thread utime/stime of `stat` are scaled estimates that can lag by a large
    /// share over a short window on a busy host, so a thread's `cpu_s` comes from here when
    /// available, and its `wait_s` (runnable, waiting for a CPU) only from here.
    exec: Option<Acct>,
    kernel_match: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Ignored,
    /// A kworker whose name did not match yet: re-read every sample.
    Recheck,
    /// Index into the process groups (self, watches).
    Process(usize),
    Kernel,
}

#[derive(Debug)]
struct ProcEntry {
    class: Class,
    name: String,
    /// Other names a kernel thread had while the window was open: a kworker takes the name of
    /// the workqueue it last served, and one per-CPU high-priority kworker serves kblockd,
    /// nvme_tcp_wq and ib-comp-wq alike, so its name alone does not say whose work it did.
    seen_as: Vec<String>,
    starttime: u64,
    seen: u64,
    alive: bool,
    acct: Acct,
    threads: HashMap<u32, ThreadEntry>,
}

/// The most other names kept per kernel thread.
const SEEN_AS_MAX: usize = 8;

/// Tracks the CPU of the groups across samples; owned by the sampler.
#[derive(Debug)]
pub struct ProcessTracker {
    proc_dir: PathBuf,
    self_pid: u32,
    watch: Vec<WatchSpec>,
    patterns: Vec<String>,
    entries: HashMap<u32, ProcEntry>,
    generation: u64,
    /// Window start in ticks since boot, from `/proc/uptime`.
    window_start_ticks: Option<u64>,
    window_open: bool,
    clk_tck: u64,
    buf: String,
    path: PathBuf,
    /// This pass reads every process ([`ProcessTracker::sample_full`]).
    full: bool,
    last_full: Option<std::time::Instant>,
}

/// The longest time between two full passes while a window is open.
const FULL_PASS_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

impl ProcessTracker {
    pub fn new(
        root: &Path,
        self_pid: u32,
        watch: Vec<WatchSpec>,
        patterns: Vec<String>,
        clk_tck: u64,
    ) -> Self {
        ProcessTracker {
            proc_dir: under(root, "/proc"),
            self_pid,
            watch,
            patterns,
            entries: HashMap::new(),
            generation: 0,
            window_start_ticks: None,
            window_open: false,
            clk_tck: clk_tck.max(1),
            buf: String::with_capacity(512),
            path: PathBuf::with_capacity(64),
            full: true,
            last_full: None,
        }
    }

    fn classify(&self, pid: u32, comm: &str) -> Class {
        if pid == self.self_pid {
            return Class::Process(0);
        }
        if let Some(i) = self.watch.iter().position(|w| w.matches(pid, comm)) {
            return Class::Process(i + 1);
        }
        if self.patterns.iter().any(|p| glob_match(p, comm)) {
            return Class::Kernel;
        }
        if comm.starts_with("kworker/") {
            return Class::Recheck;
        }
        Class::Ignored
    }

    fn kernel_match(&self, comm: &str) -> bool {
        self.patterns.iter().any(|p| glob_match(p, comm))
    }

    /// Marks the window start: takes a reading and makes it the zero of every group.
    pub fn window_start(&mut self) {
        self.window_start_ticks = self.uptime_ticks();
        self.window_open = true;
        self.sample_full(true);
        for e in self.entries.values_mut() {
            e.acct.first = e.acct.last;
            e.acct.in_window = e.alive;
            e.seen_as.clear();
            for t in e.threads.values_mut() {
                t.acct.first = t.acct.last;
                if let Some(x) = t.exec.as_mut() {
                    x.first = x.last;
                }
                t.acct.in_window = e.alive;
            }
        }
        // Forget what died before the window.
        self.entries.retain(|_, e| e.alive);
    }

    /// Takes the final reading; later samples no longer change the window's figures.
    pub fn window_end(&mut self) {
        self.sample_full(true);
        self.window_open = false;
    }

    fn uptime_ticks(&mut self) -> Option<u64> {
        self.path.clear();
        self.path.push(&self.proc_dir);
        self.path.push("uptime");
        let path = std::mem::take(&mut self.path);
        let r = read_into(&path, &mut self.buf).ok();
        self.path = path;
        r?;
        let secs: f64 = self.buf.split_ascii_whitespace().next()?.parse().ok()?;
        Some((secs * self.clk_tck as f64) as u64)
    }

    /// One pass over `/proc`: finds new processes, updates tracked ones, marks vanished ones.
    /// Outside a window it only keeps the classification current.
    pub fn sample(&mut self) {
        self.sample_full(false);
    }

    /// [`sample`](Self::sample); `force` reads every process. Processes in no group are read
    /// on a full pass only: every 8th outside a window; in a window (their CPU is the load
    /// beside the measurement, others.rs) at its bounds and at least every
    /// [`FULL_PASS_EVERY`], about 10 µs a process, so a short `--monitor-interval` does not
    /// multiply the cost.
    fn sample_full(&mut self, force: bool) {
        self.generation += 1;
        let gen = self.generation;
        let now = std::time::Instant::now();
        self.full = force
            || if self.window_open {
                self.last_full
                    .is_none_or(|t| now.duration_since(t) >= FULL_PASS_EVERY)
            } else {
                gen & 7 == 0
            };
        if self.full {
            self.last_full = Some(now);
        }
        let Ok(dir) = std::fs::read_dir(&self.proc_dir) else {
            return;
        };
        for ent in dir.flatten() {
            let name = ent.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            self.visit(pid, gen);
        }
        for e in self.entries.values_mut() {
            if e.seen != gen {
                e.alive = false;
            }
        }
        // Pids that disappeared and were never tracked need no memory, unless they ran in the
        // window (their CPU up to their last reading is the window's; window_start forgets
        // them).
        self.entries.retain(|_, e| {
            e.seen == gen
                || matches!(e.class, Class::Process(_) | Class::Kernel)
                || e.acct.in_window
        });
    }

    /// The first two fields of `/proc/PID/task/TID/schedstat`: time on a CPU and time
    /// runnable but waiting in a run queue, in ns.
    fn read_schedstat(&mut self, pid: u32, tid: u32) -> Option<(u64, u64)> {
        let mut p = std::mem::take(&mut self.path);
        p.clear();
        p.push(&self.proc_dir);
        p.push(format!("{pid}/task/{tid}/schedstat"));
        let r = read_into(&p, &mut self.buf).ok();
        self.path = p;
        r?;
        let mut it = self.buf.split_ascii_whitespace();
        let run = it.next()?.parse().ok()?;
        let wait = it.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        Some((run, wait))
    }

    fn read_stat(&mut self, pid: u32, tid: Option<u32>) -> bool {
        use std::fmt::Write;
        let mut s = String::new();
        std::mem::swap(&mut s, &mut self.buf);
        s.clear();
        let _ = match tid {
            None => write!(s, "{pid}/stat"),
            Some(t) => write!(s, "{pid}/task/{t}/stat"),
        };
        self.path.clear();
        self.path.push(&self.proc_dir);
        self.path.push(&s);
        let ok = read_into(&self.path, &mut s).is_ok();
        std::mem::swap(&mut s, &mut self.buf);
        ok
    }

    fn visit(&mut self, pid: u32, gen: u64) {
        let known = self.entries.get(&pid).map(|e| (e.class, e.starttime));
        // Unmatched processes are re-read only on a full pass (`sample`): cheap, and still
        // catches a process that was forked under one name and exec'd a watched program (or a
        // reused pid).
        if matches!(known, Some((Class::Ignored, _))) && !self.full {
            if let Some(e) = self.entries.get_mut(&pid) {
                e.seen = gen;
            }
            return;
        }
        if !self.read_stat(pid, None) {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        if let Some(st) = parse_task_stat(&buf) {
            self.update_process(pid, &st, known, gen);
        }
        self.buf = buf;
        if matches!(
            self.entries.get(&pid).map(|e| e.class),
            Some(Class::Process(_))
        ) {
            self.visit_threads(pid);
        }
    }

    fn update_process(
        &mut self,
        pid: u32,
        st: &TaskStat<'_>,
        known: Option<(Class, u64)>,
        gen: u64,
    ) {
        let class = match known {
            // Same pid and start time: the same process, keep its class (unless it may have been
            // renamed). A different start time means a reused pid: classify afresh.
            Some((c, start))
                if start == st.starttime && !matches!(c, Class::Recheck | Class::Ignored) =>
            {
                c
            }
            _ => self.classify(pid, st.comm),
        };
        let new_from_zero = self
            .window_start_ticks
            .is_some_and(|w| self.window_open && st.starttime >= w);
        let window_open = self.window_open;
        let cur = (st.utime, st.stime);
        let fresh = || ProcEntry {
            class,
            name: st.comm.to_string(),
            seen_as: Vec::new(),
            starttime: st.starttime,
            seen: gen,
            alive: true,
            acct: Acct {
                first: if new_from_zero { (0, 0) } else { cur },
                last: cur,
                in_window: window_open,
            },
            threads: HashMap::new(),
        };
        let e = self.entries.entry(pid).or_insert_with(&fresh);
        if e.starttime != st.starttime
            || (e.class != class && e.class == Class::Recheck)
            || (e.class == Class::Ignored && class != Class::Ignored)
        {
            *e = fresh();
        }
        e.seen = gen;
        e.alive = true;
        if e.name != st.comm {
            if window_open && e.seen_as.len() < SEEN_AS_MAX && !e.seen_as.contains(&e.name) {
                e.seen_as.push(e.name.clone());
            }
            e.name.clear();
            e.name.push_str(st.comm);
        }
        if window_open || !e.acct.in_window {
            e.acct.last = cur;
        }
    }

    fn visit_threads(&mut self, pid: u32) {
        let mut task_dir = std::mem::take(&mut self.path);
        task_dir.clear();
        task_dir.push(&self.proc_dir);
        task_dir.push(pid.to_string());
        task_dir.push("task");
        let tids: Vec<u32> = match std::fs::read_dir(&task_dir) {
            Ok(d) => d
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect(),
            Err(_) => Vec::new(),
        };
        self.path = task_dir;
        let window_open = self.window_open;
        let ws = self.window_start_ticks;
        for tid in tids {
            if !self.read_stat(pid, Some(tid)) {
                continue;
            }
            let buf = std::mem::take(&mut self.buf);
            if let Some(st) = parse_task_stat(&buf) {
                let kernel_match = self.kernel_match(st.comm);
                let cur = (st.utime, st.stime);
                let from_zero = ws.is_some_and(|w| window_open && st.starttime >= w);
                let exec_ns = self.read_schedstat(pid, tid);
                if let Some(e) = self.entries.get_mut(&pid) {
                    let t = e.threads.entry(tid).or_insert_with(|| ThreadEntry {
                        name: st.comm.to_string(),
                        acct: Acct {
                            first: if from_zero { (0, 0) } else { cur },
                            last: cur,
                            in_window: window_open,
                        },
                        exec: exec_ns.map(|ns| Acct {
                            first: if from_zero { (0, 0) } else { ns },
                            last: ns,
                            in_window: window_open,
                        }),
                        kernel_match,
                    });
                    if t.name != st.comm {
                        t.name.clear();
                        t.name.push_str(st.comm);
                        t.kernel_match |= kernel_match;
                    }
                    if window_open || !t.acct.in_window {
                        t.acct.last = cur;
                        match (t.exec.as_mut(), exec_ns) {
                            (Some(x), Some(ns)) => x.last = ns,
                            // A thread whose schedstat stopped reading falls back to stat.
                            (Some(_), None) => t.exec = None,
                            _ => {}
                        }
                    }
                }
            }
            self.buf = buf;
        }
    }

    /// Every thread of the process groups (self, watches) seen in the window, with its group
    /// and process: the bottleneck attribution looks at all of them, not only the busiest.
    pub fn threads(&self) -> Vec<GroupThread> {
        let tck = self.clk_tck as f64;
        let mut names = vec!["self".to_string()];
        names.extend(self.watch.iter().map(|w| w.label()));
        let mut out = Vec::new();
        for (pid, e) in &self.entries {
            let Class::Process(gi) = e.class else {
                continue;
            };
            if !e.acct.in_window {
                continue;
            }
            for (tid, t) in &e.threads {
                if !t.acct.in_window {
                    continue;
                }
                let (tu, ts) = t.acct.delta();
                out.push(GroupThread {
                    group: names.get(gi).cloned().unwrap_or_default(),
                    process: e.name.clone(),
                    pid: *pid,
                    tid: *tid,
                    name: t.name.clone(),
                    cpu_s: match &t.exec {
                        Some(x) => x.delta().0 as f64 / 1e9,
                        None => (tu + ts) as f64 / tck,
                    },
                    wait_s: t.exec.as_ref().map(|x| x.delta().1 as f64 / 1e9),
                });
            }
        }
        out.sort_by_key(|a| (a.pid, a.tid));
        out
    }

    /// Group reports for the window, `window_s` seconds long. Order: self, watches, kernel.
    pub fn report(&self, window_s: f64) -> Vec<GroupReport> {
        let tck = self.clk_tck as f64;
        let mut names = vec!["self".to_string()];
        names.extend(self.watch.iter().map(|w| w.label()));
        let mut groups: Vec<GroupReport> = names
            .into_iter()
            .map(|name| GroupReport {
                name,
                ..Default::default()
            })
            .collect();
        let mut kernel = GroupReport {
            name: "kernel".into(),
            overlap_cpu_s: Some(0.0),
            ..Default::default()
        };
        let mut tops: Vec<Vec<ThreadReport>> = vec![Vec::new(); groups.len() + 1];
        let ki = groups.len();
        for (pid, e) in &self.entries {
            if !e.acct.in_window {
                continue;
            }
            let gi = match e.class {
                Class::Process(i) => i,
                Class::Kernel => ki,
                _ => continue,
            };
            let (u, s) = e.acct.delta();
            let g = if gi == ki {
                &mut kernel
            } else {
                &mut groups[gi]
            };
            g.user_s += u as f64 / tck;
            g.system_s += s as f64 / tck;
            g.processes += 1;
            if e.class == Class::Kernel {
                g.threads += 1;
                tops[ki].push(ThreadReport {
                    pid: *pid,
                    tid: *pid,
                    name: e.name.clone(),
                    cpu_s: (u + s) as f64 / tck,
                    wait_s: None,
                    seen_as: e
                        .seen_as
                        .iter()
                        .filter(|n| **n != e.name)
                        .cloned()
                        .collect(),
                });
                continue;
            }
            for (tid, t) in &e.threads {
                if !t.acct.in_window {
                    continue;
                }
                groups[gi].threads += 1;
                let (tu, ts) = t.acct.delta();
                let r = ThreadReport {
                    pid: *pid,
                    tid: *tid,
                    name: t.name.clone(),
                    cpu_s: match &t.exec {
                        Some(x) => x.delta().0 as f64 / 1e9,
                        None => (tu + ts) as f64 / tck,
                    },
                    wait_s: t.exec.as_ref().map(|x| x.delta().1 as f64 / 1e9),
                    seen_as: Vec::new(),
                };
                if t.kernel_match {
                    kernel.user_s += tu as f64 / tck;
                    kernel.system_s += ts as f64 / tck;
                    kernel.threads += 1;
                    if let Some(o) = kernel.overlap_cpu_s.as_mut() {
                        *o += r.cpu_s;
                    }
                    tops[ki].push(r.clone());
                }
                tops[gi].push(r);
            }
        }
        groups.push(kernel);
        for (g, mut top) in groups.iter_mut().zip(tops) {
            g.cpu_s = g.user_s + g.system_s;
            g.pct_of_core = if window_s > 0.0 {
                g.cpu_s / window_s * 100.0
            } else {
                0.0
            };
            top.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s));
            top.truncate(8);
            g.top_threads = top;
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_self_process_is_tracked() {
        let me = std::process::id();
        let mut t = ProcessTracker::new(
            Path::new("/"),
            me,
            vec![],
            default_kernel_patterns(),
            crate::fsutil::clk_tck(),
        );
        t.window_start();
        t.window_end();
        let r = t.report(1.0);
        assert_eq!(r[0].name, "self");
        assert_eq!(r[0].processes, 1);
        assert!(r[0].threads >= 1);
        assert_eq!(r.last().unwrap().name, "kernel");
    }
}
