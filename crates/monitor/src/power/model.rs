//! Modeled power for hosts without a meter (VMs, CI): `idle + (max − idle) × utilization`,
//! the linear model of Kepler/Scaphandre-style estimators.
//!
//! Utilization is the system-wide busy share from `/proc/stat` between two reads. Every figure
//! derived from this source carries `modeled: true`; it estimates, it does not measure.

use super::{PowerSource, Reading};
use crate::cpu::{StatReader, StatSnapshot};
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
        let d = self.cur.total.since(&self.prev.total);
        let u = if d.total() > 0 {
            d.busy() as f64 / d.total() as f64
        } else {
            let t = self.cur.total;
            t.busy() as f64 / t.total().max(1) as f64
        };
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(Reading::Watts(self.params.watts(u)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
