//! System-wide CPU time from `/proc/stat` (docs/MEASURE.md, "CPU (Linux procfs)").
//!
//! Each `cpu`/`cpuN` line holds cumulative USER_HZ ticks in the order
//! `user nice system idle iowait irq softirq steal guest guest_nice` (proc(5)). `guest` and
//! `guest_nice` are already included in `user` and `nice`, so they are not added to the total.
//! busy = total − idle − iowait − steal: iowait is idle time with I/O outstanding, not work, and
//! steal is time the hypervisor gave another guest while this one wanted to run, not work done
//! here (it is reported beside busy as `steal_pct`, so a noisy neighbour stays visible without
//! inflating the CPU a run is charged with, and with it every efficiency figure).
//!
//! Percentages over a window are shares of the elapsed ticks of the same line: for the `cpu` line
//! 100 % means every core busy for the whole window; for `cpuN` lines 100 % means that core busy.
//! Counters are subtracted with saturation because some kernels let `iowait` step backwards.
//!
//! **Busy time is the window less idle, not the busy ticks.** The busy fields (user, system,
//! irq, softirq) are samples: the scheduler tick charges a whole tick to whatever runs when it
//! fires. On a tickless kernel (NO_HZ, every distribution's default) the tick stops while a core
//! idles and the idle and iowait fields are measured exactly instead (proc/stat.c takes them
//! from the nohz idle clock), so short bursts of work between idle spells, the shape of I/O at
//! low queue depth and of an open loop, are missed or charged many times over, whichever way
//! their phase falls against the tick: a process spinning 100 µs in every 500 µs (1.0 CPU-s in
//! 5 s, its own runtime 1.36 s) showed 0.06 s of busy ticks; 100 µs in every 1,000 µs (0.71 s)
//! showed 5.49 s. So when the window's length is known, a line's elapsed ticks are that length
//! × USER_HZ (× cores for the aggregate) and busy = elapsed − idle − iowait − steal: 1.38 s and
//! 0.72 s for those two. The busy fields then only split it (user, system, irq, softirq scaled
//! to add up to busy), and `tick_busy_pct` keeps what the ticks alone said. On a kernel that
//! ticks through idle every tick lands somewhere, the fields add up to the window, and the two
//! agree.

use crate::error::{MonitorError, Result};
use crate::fsutil::read_into;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Cumulative ticks of one `/proc/stat` cpu line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTicks {
    /// All ticks of the line; guest time is inside user/nice already and is not added again.
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    /// total − idle − iowait − steal.
    pub fn busy(&self) -> u64 {
        self.total() - self.idle - self.iowait - self.steal
    }

    /// Field-wise `self − earlier`, saturating at zero.
    pub fn since(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
            guest: self.guest.saturating_sub(earlier.guest),
            guest_nice: self.guest_nice.saturating_sub(earlier.guest_nice),
        }
    }
}

/// One reading of `/proc/stat`: the all-CPU line and each online core.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatSnapshot {
    pub total: CpuTicks,
    /// `(N, ticks)` for each `cpuN` line, in file order. Offline cores have no line.
    pub cores: Vec<(u32, CpuTicks)>,
    /// When it was read ([`StatReader`] stamps it as the file is read); `None` for parsed
    /// text. Two stamped snapshots give their window's length, which busy is measured
    /// against ([`usage`]).
    pub at: Option<Instant>,
}

impl StatSnapshot {
    /// Seconds from `earlier`'s reading to this one's, when both were stamped.
    pub fn secs_since(&self, earlier: &StatSnapshot) -> Option<f64> {
        Some(self.at?.checked_duration_since(earlier.at?)?.as_secs_f64())
    }
}

/// Parses the cpu lines of `/proc/stat` into `out`, reusing its core vector.
pub fn parse_proc_stat(text: &str, out: &mut StatSnapshot) -> std::result::Result<(), String> {
    out.cores.clear();
    out.at = None;
    let mut saw_total = false;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            // cpu lines come first; stop at the first other line.
            if saw_total {
                break;
            }
            continue;
        };
        let mut it = rest.split_ascii_whitespace();
        let id = if rest.starts_with(' ') {
            None
        } else {
            let tok = it.next().ok_or("cpu line without fields")?;
            Some(
                tok.parse::<u32>()
                    .map_err(|_| format!("bad cpu id in {line:?}"))?,
            )
        };
        let mut v = [0u64; 10];
        let mut n = 0;
        for (slot, tok) in v.iter_mut().zip(&mut it) {
            *slot = tok
                .parse::<u64>()
                .map_err(|_| format!("bad counter {tok:?} in {line:?}"))?;
            n += 1;
        }
        // Kernels before 2.6.11 lack steal, before 2.6.24 guest: missing fields stay zero, but
        // fewer than the first four means this is not a cpu line at all.
        if n < 4 {
            return Err(format!("cpu line with {n} fields: {line:?}"));
        }
        let t = CpuTicks {
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v[7],
            guest: v[8],
            guest_nice: v[9],
        };
        match id {
            None => {
                out.total = t;
                saw_total = true;
            }
            Some(id) => out.cores.push((id, t)),
        }
    }
    if !saw_total {
        return Err("no aggregate `cpu` line".into());
    }
    Ok(())
}

/// Reads `/proc/stat` under a root with one reused buffer.
#[derive(Debug)]
pub struct StatReader {
    path: PathBuf,
    buf: String,
}

impl StatReader {
    pub fn new(root: &Path) -> Self {
        StatReader {
            path: crate::fsutil::under(root, "/proc/stat"),
            buf: String::with_capacity(8192),
        }
    }

    /// Reads and stamps a snapshot: `at` is the middle of the file's read (the kernel fills
    /// the counters as it reads), so a window between two reads is within a few
    /// microseconds of the counters'.
    pub fn read(&mut self, out: &mut StatSnapshot) -> Result<()> {
        let before = Instant::now();
        read_into(&self.path, &mut self.buf)?;
        let after = Instant::now();
        parse_proc_stat(&self.buf, out).map_err(|r| MonitorError::parse(&self.path, r))?;
        out.at = Some(before + after.duration_since(before) / 2);
        Ok(())
    }

    pub fn snapshot(&mut self) -> Result<StatSnapshot> {
        let mut s = StatSnapshot::default();
        self.read(&mut s)?;
        Ok(s)
    }
}

/// How far a line's ticks may stray from the window's length (as shares of it) for the window
/// to stand for them: sampling has been seen to lose 14 % of a window and to add 48 % to one
/// (the module's notes); counters that do not move at all are no measurement.
const TICKS_NEAR: (f64, f64) = (0.5, 2.0);

/// The ticks a line's shares are of: the window's length (`elapsed`, in ticks) when known and
/// the counted `ticks` come near it, else the counted ticks. Ticks far from the window (a
/// fixture's counters that never move, a clock read far from its snapshot) are no window to
/// subtract idle from.
fn window_ticks(ticks: f64, elapsed: Option<f64>) -> f64 {
    elapsed
        .filter(|e| e.is_finite() && *e > 0.0)
        .filter(|e| (e * TICKS_NEAR.0..=e * TICKS_NEAR.1).contains(&ticks))
        .unwrap_or(ticks)
}

pub use sanbench_doc::host::{CoreUsage, CpuBreakdown};

/// Breakdown of the ticks `d` that elapsed in a window (already a difference) whose length
/// in ticks of this line (`elapsed`: seconds × USER_HZ, × cores for the aggregate) is
/// known, or `None` (the ticks' total stands for it).
pub fn breakdown_of_delta(d: &CpuTicks, elapsed: Option<f64>) -> CpuBreakdown {
    let ticks = d.total() as f64;
    let total = window_ticks(ticks, elapsed);
    if total <= 0.0 {
        return CpuBreakdown::default();
    }
    let not_busy = (d.idle + d.iowait + d.steal) as f64;
    let busy = (total - not_busy).max(0.0);
    let tick_busy = d.busy() as f64;
    // The busy fields split `busy` in the ticks' proportions.
    let scale = if tick_busy > 0.0 {
        busy / tick_busy
    } else {
        0.0
    };
    // A share of the window, never past it (x of x can round to 100.00000000000001 %).
    let pct = |x: f64| (x * 100.0 / total).clamp(0.0, 100.0);
    CpuBreakdown {
        busy_pct: pct(busy),
        tick_busy_pct: Some(if ticks > 0.0 {
            tick_busy * 100.0 / ticks
        } else {
            0.0
        }),
        user_pct: pct(d.user as f64 * scale),
        nice_pct: pct(d.nice as f64 * scale),
        system_pct: pct(d.system as f64 * scale),
        irq_pct: pct(d.irq as f64 * scale),
        softirq_pct: pct(d.softirq as f64 * scale),
        steal_pct: pct(d.steal as f64),
        iowait_pct: pct(d.iowait as f64),
        idle_pct: pct(d.idle as f64),
    }
}

/// System-wide CPU use between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Share of all cores (100 % = every core busy all the time).
    #[serde(flatten)]
    pub total: CpuBreakdown,
    /// Busy CPU-seconds summed over all cores: `busy_pct` of the window's core-seconds.
    pub busy_cpu_s: f64,
    /// Cores seen in both snapshots.
    pub cores: usize,
    pub per_core: Vec<CoreUsage>,
}

/// Usage between `prev` and `cur`. When both were stamped as they were read
/// ([`StatReader::read`]), busy is the window between them less idle (see the module's
/// notes); parsed text (a fixture) has only its ticks. Cores present in only one snapshot
/// (hot-plugged) are left out of `per_core`; the aggregate line covers whatever was online,
/// and falls back to its ticks' total when the cores changed.
pub fn usage(prev: &StatSnapshot, cur: &StatSnapshot, clk_tck: u64) -> CpuUsage {
    let hz = clk_tck.max(1) as f64;
    let per_core_ticks = cur
        .secs_since(prev)
        .filter(|e| e.is_finite() && *e > 0.0)
        .map(|e| e * hz);
    let d = cur.total.since(&prev.total);
    let per_core: Vec<CoreUsage> = cur
        .cores
        .iter()
        .filter_map(|(id, t)| {
            let (_, p) = prev.cores.iter().find(|(pid, _)| pid == id)?;
            Some(CoreUsage {
                cpu: *id,
                pct: breakdown_of_delta(&t.since(p), per_core_ticks),
            })
        })
        .collect();
    let same_cores = per_core.len() == cur.cores.len() && per_core.len() == prev.cores.len();
    let all_ticks = per_core_ticks
        .filter(|_| same_cores && !per_core.is_empty())
        .map(|e| e * per_core.len() as f64);
    let total = breakdown_of_delta(&d, all_ticks);
    let ticks = window_ticks(d.total() as f64, all_ticks);
    CpuUsage {
        busy_cpu_s: total.busy_pct / 100.0 * ticks / hz,
        total,
        cores: per_core.len(),
        per_core,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  100 10 50 1000 20 5 5 0 30 0\n\
                     cpu0 60 5 25 500 10 3 2 0 30 0\n\
                     cpu1 40 5 25 500 10 2 3 0 0 0\n\
                     intr 12345 0 0\nctxt 99\n";
    const B: &str = "cpu  400 10 150 1200 40 15 25 10 130 0\n\
                     cpu0 260 5 75 550 20 8 12 10 130 0\n\
                     cpu1 140 5 75 650 20 7 13 0 0 0\n\
                     intr 12345 0 0\n";

    #[test]
    fn parse_and_exact_delta() {
        let (mut a, mut b) = (StatSnapshot::default(), StatSnapshot::default());
        parse_proc_stat(A, &mut a).unwrap();
        parse_proc_stat(B, &mut b).unwrap();
        assert_eq!(a.cores.len(), 2);
        assert_eq!(a.total.guest, 30);
        // Δ total line: user 300 nice 0 system 100 idle 200 iowait 20 irq 10 softirq 20 steal 10
        // total = 660 (guest 100 not added), busy = 660 − 200 − 20 − 10 (steal) = 430.
        let u = usage(&a, &b, 100);
        assert!((u.total.busy_pct - 430.0 * 100.0 / 660.0).abs() < 1e-9);
        assert!((u.total.user_pct - 300.0 * 100.0 / 660.0).abs() < 1e-9);
        assert!((u.total.system_pct - 100.0 * 100.0 / 660.0).abs() < 1e-9);
        assert!((u.total.irq_pct - 10.0 * 100.0 / 660.0).abs() < 1e-9);
        assert!((u.total.softirq_pct - 20.0 * 100.0 / 660.0).abs() < 1e-9);
        assert!((u.total.steal_pct - 10.0 * 100.0 / 660.0).abs() < 1e-9);
        assert!((u.total.iowait_pct - 20.0 * 100.0 / 660.0).abs() < 1e-9);
        assert!((u.busy_cpu_s - 4.3).abs() < 1e-12);
        // cpu0: Δ user 200 system 50 idle 50 iowait 10 irq 5 softirq 10 steal 10 → total 335,
        // busy 265 (steal is not work done here).
        assert_eq!(u.per_core[0].cpu, 0);
        assert!((u.per_core[0].pct.busy_pct - 265.0 * 100.0 / 335.0).abs() < 1e-9);
        // cpu1: Δ user 100 system 50 idle 150 iowait 10 irq 5 softirq 10 → total 325, busy 165.
        assert!((u.per_core[1].pct.busy_pct - 165.0 * 100.0 / 325.0).abs() < 1e-9);
    }

    /// A window 3.35 s long on 2 cores at USER_HZ 100: 335 ticks a core, 670 in all. The ticks
    /// of B − A add up to 660 (cpu0 335, cpu1 325): cpu1's busy ticks missed 10, which the
    /// window less idle puts back; the busy fields split busy in their proportions.
    #[test]
    fn busy_is_the_window_less_idle_when_its_length_is_known() {
        let (mut a, mut b) = (StatSnapshot::default(), StatSnapshot::default());
        parse_proc_stat(A, &mut a).unwrap();
        parse_proc_stat(B, &mut b).unwrap();
        // Stamped as a StatReader would: 3.35 s apart.
        a.at = Some(Instant::now());
        b.at = a.at.map(|t| t + std::time::Duration::from_secs_f64(3.35));
        let u = usage(&a, &b, 100);
        // 670 − idle 200 − iowait 20 − steal 10 = 440 busy of 670.
        assert!((u.total.busy_pct - 440.0 * 100.0 / 670.0).abs() < 1e-9);
        assert!((u.busy_cpu_s - 4.4).abs() < 1e-9);
        assert!((u.total.tick_busy_pct.unwrap() - 430.0 * 100.0 / 660.0).abs() < 1e-9);
        // user 300 of the 430 busy ticks: 300/430 of the 440.
        let user = 300.0 / 430.0 * 440.0 * 100.0 / 670.0;
        assert!((u.total.user_pct - user).abs() < 1e-9);
        assert!((u.total.idle_pct - 200.0 * 100.0 / 670.0).abs() < 1e-9);
        // cpu0's ticks were complete: unchanged. cpu1: 335 − 150 − 10 = 175 busy, not 165.
        assert!((u.per_core[0].pct.busy_pct - 265.0 * 100.0 / 335.0).abs() < 1e-9);
        assert!((u.per_core[1].pct.busy_pct - 175.0 * 100.0 / 335.0).abs() < 1e-9);
        assert!((u.per_core[1].pct.tick_busy_pct.unwrap() - 165.0 * 100.0 / 325.0).abs() < 1e-9);
        // Ticks charged many times over (a burst always under the tick): the window caps them.
        let idle_only = CpuTicks {
            idle: 900,
            user: 400,
            ..CpuTicks::default()
        };
        let c = breakdown_of_delta(&idle_only, Some(1000.0));
        assert!((c.busy_pct - 10.0).abs() < 1e-9, "{c:?}");
        assert!((c.user_pct - 10.0).abs() < 1e-9, "{c:?}");
        assert!((c.tick_busy_pct.unwrap() - 400.0 * 100.0 / 1300.0).abs() < 1e-9);
        // Busy with no busy tick at all: busy stands, the split has nothing to go by.
        let unseen = CpuTicks {
            idle: 800,
            ..CpuTicks::default()
        };
        let c = breakdown_of_delta(&unseen, Some(1000.0));
        assert!((c.busy_pct - 20.0).abs() < 1e-9);
        assert_eq!(
            (c.user_pct, c.system_pct, c.tick_busy_pct),
            (0.0, 0.0, Some(0.0))
        );
        // A core busy the whole window is 100 %, never a rounding above it (an MPI test
        // read 100.00000000000001 % on a host kept busy by three ranks on two cores).
        for k in 0..1000 {
            let e = 100.0 + k as f64 * 0.137;
            let all_busy = CpuTicks {
                user: e as u64,
                ..CpuTicks::default()
            };
            let c = breakdown_of_delta(&all_busy, Some(e));
            assert!(c.busy_pct <= 100.0 && c.user_pct <= 100.0, "{e}: {c:?}");
        }
        // More idle than the window (clock skew between the reads): never below zero.
        let c = breakdown_of_delta(&unseen, Some(700.0));
        assert_eq!(c.busy_pct, 0.0);
        // Counters that did not move (a fixture) are not a window of idle.
        assert_eq!(
            breakdown_of_delta(&CpuTicks::default(), Some(1000.0)),
            CpuBreakdown::default()
        );
        let far = CpuTicks {
            idle: 300,
            user: 10,
            ..CpuTicks::default()
        };
        let c = breakdown_of_delta(&far, Some(1000.0));
        assert!((c.busy_pct - 10.0 * 100.0 / 310.0).abs() < 1e-9);
        // A core gone between the snapshots: the aggregate keeps its ticks' total.
        let mut fewer = b.clone();
        fewer.cores.pop();
        let u = usage(&a, &fewer, 100);
        assert!((u.total.busy_pct - 430.0 * 100.0 / 660.0).abs() < 1e-9);
    }

    #[test]
    fn iowait_going_backwards_saturates() {
        let a = CpuTicks {
            idle: 100,
            iowait: 50,
            ..Default::default()
        };
        let b = CpuTicks {
            idle: 200,
            iowait: 40,
            user: 100,
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!(d.iowait, 0);
        assert_eq!(d.busy(), 100);
    }

    #[test]
    fn rejects_garbage() {
        let mut s = StatSnapshot::default();
        assert!(parse_proc_stat("", &mut s).is_err());
        assert!(parse_proc_stat("cpu 1 2\n", &mut s).is_err());
        assert!(parse_proc_stat("cpu 1 2 x 4\n", &mut s).is_err());
        assert!(parse_proc_stat("cpuX 1 2 3 4\n", &mut s).is_err());
        // Old kernels with only four fields parse.
        parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\n", &mut s).unwrap();
        assert_eq!(s.total.busy(), 6);
    }

    #[test]
    fn real_proc_stat_parses() {
        let mut r = StatReader::new(Path::new("/"));
        let s = r.snapshot().unwrap();
        assert!(!s.cores.is_empty());
        assert!(s.total.total() > 0);
        // Stamped as read: the window between two reads is their time apart; parsed text
        // has none, and a snapshot parsed over a read one loses its stamp.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut t = r.snapshot().unwrap();
        let w = t.secs_since(&s).unwrap();
        assert!((0.02..5.0).contains(&w), "{w}");
        assert_eq!(s.secs_since(&t), None, "not backwards");
        parse_proc_stat(A, &mut t).unwrap();
        assert_eq!(t.at, None);
        assert_eq!(t.secs_since(&s), None);
    }
}
