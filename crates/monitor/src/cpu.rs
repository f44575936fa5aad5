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

use crate::error::{MonitorError, Result};
use crate::fsutil::read_into;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
}

/// Parses the cpu lines of `/proc/stat` into `out`, reusing its core vector.
pub fn parse_proc_stat(text: &str, out: &mut StatSnapshot) -> std::result::Result<(), String> {
    out.cores.clear();
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

    pub fn read(&mut self, out: &mut StatSnapshot) -> Result<()> {
        read_into(&self.path, &mut self.buf)?;
        parse_proc_stat(&self.buf, out).map_err(|r| MonitorError::parse(&self.path, r))
    }

    pub fn snapshot(&mut self) -> Result<StatSnapshot> {
        let mut s = StatSnapshot::default();
        self.read(&mut s)?;
        Ok(s)
    }
}

/// Shares of elapsed time over a window, in percent (0..=100).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuBreakdown {
    /// (total − idle − iowait − steal) ÷ total.
    pub busy_pct: f64,
    pub user_pct: f64,
    pub nice_pct: f64,
    pub system_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    pub iowait_pct: f64,
    pub idle_pct: f64,
}

impl CpuBreakdown {
    /// Breakdown of the ticks `d` that elapsed in a window (already a difference).
    pub fn of_delta(d: &CpuTicks) -> CpuBreakdown {
        let total = d.total();
        if total == 0 {
            return CpuBreakdown::default();
        }
        let pct = |x: u64| x as f64 * 100.0 / total as f64;
        CpuBreakdown {
            busy_pct: pct(d.busy()),
            user_pct: pct(d.user),
            nice_pct: pct(d.nice),
            system_pct: pct(d.system),
            irq_pct: pct(d.irq),
            softirq_pct: pct(d.softirq),
            steal_pct: pct(d.steal),
            iowait_pct: pct(d.iowait),
            idle_pct: pct(d.idle),
        }
    }
}

/// One core's share over a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreUsage {
    pub cpu: u32,
    #[serde(flatten)]
    pub pct: CpuBreakdown,
}

/// System-wide CPU use between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Share of all cores (100 % = every core busy all the time).
    #[serde(flatten)]
    pub total: CpuBreakdown,
    /// Busy CPU-seconds summed over all cores: busy ticks ÷ USER_HZ.
    pub busy_cpu_s: f64,
    /// Cores seen in both snapshots.
    pub cores: usize,
    pub per_core: Vec<CoreUsage>,
}

/// Usage between `prev` and `cur`. Cores present in only one snapshot (hot-plugged) are left out
/// of `per_core`; the aggregate line covers whatever was online.
pub fn usage(prev: &StatSnapshot, cur: &StatSnapshot, clk_tck: u64) -> CpuUsage {
    let d = cur.total.since(&prev.total);
    let per_core: Vec<CoreUsage> = cur
        .cores
        .iter()
        .filter_map(|(id, t)| {
            let (_, p) = prev.cores.iter().find(|(pid, _)| pid == id)?;
            Some(CoreUsage {
                cpu: *id,
                pct: CpuBreakdown::of_delta(&t.since(p)),
            })
        })
        .collect();
    CpuUsage {
        total: CpuBreakdown::of_delta(&d),
        busy_cpu_s: d.busy() as f64 / clk_tck.max(1) as f64,
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
    }
}
