//! Modeled power for hosts without a meter (VMs, CI): `idle + (max − idle) × utilization`,
//! the linear model of Kepler/Scaphandre-style estimators.
//!
//! Utilization is the system-wide busy share from `/proc/stat` between two reads: the time
//! between them less idle, as every host CPU figure (crate::cpu: busy ticks miss or multiply
//! short bursts). Every figure derived from this source carries `modeled: true`; it
//! estimates, it does not measure.

use super::{PowerSource, Reading};
use crate::cpu::{usage, StatReader, StatSnapshot};
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The model's two constants, in watts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    pub idle_w: f64,
    pub max_w: f64,
}

impl ModelParams {
    /// A rough default from the CPU count: 20 W + 2 W per CPU at idle, plus 8 W per CPU at full
    /// load (a small server's order of magnitude). Only meaningful as a label-carrying estimate;
    /// pass measured values from a spec sheet or a past metered run when you have them.
    pub fn default_for_cpus(cpus: usize) -> ModelParams {
        let n = cpus.max(1) as f64;
        ModelParams {
            idle_w: 20.0 + 2.0 * n,
            max_w: 20.0 + 10.0 * n,
        }
    }

    /// Watts at `utilization` (0..=1, clamped).
    pub fn watts(&self, utilization: f64) -> f64 {
        self.idle_w + (self.max_w - self.idle_w) * utilization.clamp(0.0, 1.0)
    }
}

#[derive(Debug)]
pub struct ModelSource {
    params: ModelParams,
    reader: StatReader,
    prev: StatSnapshot,
    cur: StatSnapshot,
    clk_tck: u64,
}

impl ModelSource {
    pub fn open(root: &Path, params: ModelParams) -> Result<ModelSource> {
        let mut reader = StatReader::new(root);
        let prev = reader.snapshot()?;
        Ok(ModelSource {
            params,
            reader,
            prev,
            cur: StatSnapshot::default(),
            clk_tck: crate::fsutil::clk_tck(),
        })
    }

    pub fn params(&self) -> ModelParams {
        self.params
    }
}

impl PowerSource for ModelSource {
    fn name(&self) -> &str {
        "model"
    }

    fn fast(&self) -> bool {
        true
    }

    fn modeled(&self) -> bool {
        true
    }

    /// Watts at the utilization since the previous read (since boot for the first one).
    fn read(&mut self) -> Result<Reading> {
        self.reader.read(&mut self.cur)?;
        let u = utilization(&self.prev, &self.cur, self.clk_tck);
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(Reading::Watts(self.params.watts(u)))
    }
}

/// The busy share (0..=1) between two reads; since boot when no tick elapsed.
fn utilization(prev: &StatSnapshot, cur: &StatSnapshot, clk_tck: u64) -> f64 {
    if cur.total.since(&prev.total).total() > 0 {
        usage(prev, cur, clk_tck).total.busy_pct / 100.0
    } else {
        let t = cur.total;
        t.busy() as f64 / t.total().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short bursts the busy ticks never saw: 2 cores for 1 s at USER_HZ 100 are 200 ticks, of
    /// which 150 idle and no busy tick: 25 % busy, not 0.
    #[test]
    fn utilization_is_the_window_less_idle() {
        let snap = |idle: u64, user: u64| {
            let mut s = StatSnapshot::default();
            let text = format!(
                "cpu {user} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {user} 0 0 {} 0 0 0 0 0 0\n\
                 cpu1 0 0 0 {} 0 0 0 0 0 0\n",
                idle / 2,
                idle - idle / 2
            );
            crate::cpu::parse_proc_stat(&text, &mut s).unwrap();
            s
        };
        let apart = |s: f64, mut b: StatSnapshot, a: &mut StatSnapshot| {
            a.at = Some(std::time::Instant::now());
            b.at = a.at.map(|t| t + std::time::Duration::from_secs_f64(s));
            b
        };
        let mut a = snap(1000, 0);
        let b = apart(1.0, snap(1150, 0), &mut a);
        assert!((utilization(&a, &b, 100) - 0.25).abs() < 1e-9);
        // Unstamped (parsed text): the ticks' own share, none busy.
        let (a0, b0) = (snap(1000, 0), snap(1150, 0));
        assert_eq!(utilization(&a0, &b0, 100), 0.0);
        // Ticks far from the window (a fixture's): their own share.
        let c = apart(10.0, snap(1150, 50), &mut a);
        assert!((utilization(&a, &c, 100) - 50.0 / 200.0).abs() < 1e-9);
    }

    #[test]
    fn linear_model_from_fixture_stat() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        let stat = t.path().join("proc/stat");
        std::fs::write(&stat, "cpu 100 0 0 100 0 0 0 0 0 0\n").unwrap();
        let p = ModelParams {
            idle_w: 50.0,
            max_w: 150.0,
        };
        let mut m = ModelSource::open(t.path(), p).unwrap();
        assert!(m.modeled());
        // +75 busy, +25 idle → 75 % → 50 + 100 × 0.75.
        std::fs::write(&stat, "cpu 175 0 0 125 0 0 0 0 0 0\n").unwrap();
        assert_eq!(m.read().unwrap(), Reading::Watts(125.0));
        // No ticks elapsed: falls back to the since-boot share (175/300).
        let w = match m.read().unwrap() {
            Reading::Watts(w) => w,
            r => panic!("{r:?}"),
        };
        assert!((w - (50.0 + 100.0 * 175.0 / 300.0)).abs() < 1e-9);
        let d = ModelParams::default_for_cpus(2);
        assert_eq!((d.idle_w, d.max_w), (24.0, 40.0));
    }
}
