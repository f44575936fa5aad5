//! Energy over a window from any [`PowerSource`].
//!
//! The sampler keeps a cumulative-energy function E(t) at each sample time:
//! * counters (RAPL): E is the counter minus its first value; between samples E is linear;
//! * watts: E grows by the trapezoid `(w₀ + w₁) / 2 × Δt`; between samples power is linear, so
//!   E is quadratic and evaluated exactly.
//!
//! Energy over `[a, b]` is `E(b) − E(a)`, defined only when samples bracket both bounds: a
//! window not covered (source failed, too few samples) yields `None` and a note, never an
//! extrapolated number.

use super::{PowerSource, Reading};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    /// Seconds since the sampler's origin.
    t: f64,
    /// Cumulative joules at `t`.
    e: f64,
    /// Watts at `t` (for counters: average since the previous sample).
    w: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Energy,
    Watts,
}

pub use sanbench_doc::host::PowerReport;

#[derive(Debug)]
pub struct PowerSampler {
    source: Box<dyn PowerSource>,
    origin: Instant,
    kind: Option<Kind>,
    first_counter: f64,
    points: Vec<Point>,
    failed: Option<String>,
}

impl PowerSampler {
    pub fn new(source: Box<dyn PowerSource>, origin: Instant) -> PowerSampler {
        PowerSampler {
            source,
            origin,
            kind: None,
            first_counter: 0.0,
            points: Vec::with_capacity(4096),
            failed: None,
        }
    }

    pub fn source_name(&self) -> &str {
        self.source.name()
    }

    pub fn modeled(&self) -> bool {
        self.source.modeled()
    }

    pub fn fast(&self) -> bool {
        self.source.fast()
    }

    /// Time of the newest reading, seconds since the origin.
    pub fn last_t(&self) -> Option<f64> {
        self.points.last().map(|p| p.t)
    }

    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Reads the source now and returns the current watts for the per-second series. After the
    /// first failure the source is not read again: a gap would otherwise be bridged by an
    /// interpolation nobody measured.
    pub fn sample(&mut self) -> Option<f64> {
        if self.failed.is_some() {
            return None;
        }
        let r = self.source.read();
        let t = self.origin.elapsed().as_secs_f64();
        match r {
            Ok(r) => self.push(t, r),
            Err(e) => {
                self.failed = Some(format!(
                    "{} failed at t={t:.1} s: {}",
                    self.source.name(),
                    e.note()
                ));
                None
            }
        }
    }

    fn push(&mut self, t: f64, r: Reading) -> Option<f64> {
        let kind = match r {
            Reading::EnergyJ(_) => Kind::Energy,
            Reading::Watts(_) => Kind::Watts,
        };
        if *self.kind.get_or_insert(kind) != kind {
            self.failed = Some(format!("{} changed reading kind", self.source.name()));
            return None;
        }
        let prev = self.points.last().copied();
        let p = match (r, prev) {
            (Reading::Watts(w), None) => Point {
                t,
                e: 0.0,
                w: Some(w),
            },
            (Reading::Watts(w), Some(p)) => Point {
                t,
                e: p.e + (p.w.unwrap_or(w) + w) / 2.0 * (t - p.t).max(0.0),
                w: Some(w),
            },
            (Reading::EnergyJ(j), None) => {
                self.first_counter = j;
                Point { t, e: 0.0, w: None }
            }
            (Reading::EnergyJ(j), Some(p)) => {
                let e = j - self.first_counter;
                let dt = t - p.t;
                Point {
                    t,
                    e,
                    w: (dt > 0.0).then(|| (e - p.e) / dt),
                }
            }
        };
        self.points.push(p);
        p.w
    }

    /// Seconds since the origin for an instant (for window bounds).
    pub fn at(&self, i: Instant) -> f64 {
        i.saturating_duration_since(self.origin).as_secs_f64()
    }

    /// E(t), or `None` when `t` lies outside the sampled span.
    fn energy_at(&self, t: f64) -> Option<f64> {
        let pts = &self.points;
        let first = pts.first()?;
        let last = pts.last()?;
        if t < first.t - 1e-9 || t > last.t + 1e-9 {
            return None;
        }
        let i = pts.partition_point(|p| p.t <= t);
        if i == 0 {
            return Some(first.e);
        }
        if i >= pts.len() {
            return Some(last.e);
        }
        let (p, q) = (pts[i - 1], pts[i]);
        let dt = q.t - p.t;
        if dt <= 0.0 {
            return Some(p.e);
        }
        let s = t - p.t;
        Some(match (self.kind, p.w, q.w) {
            (Some(Kind::Watts), Some(w0), Some(w1)) => {
                w0 * s + (w1 - w0) * s * s / (2.0 * dt) + p.e
            }
            _ => p.e + (q.e - p.e) * s / dt,
        })
    }

    /// Joules over `[a, b]` (seconds since origin), or why not.
    pub fn energy_between(&self, a: f64, b: f64) -> Result<f64, String> {
        if b <= a {
            return Err("empty window".into());
        }
        match (self.energy_at(a), self.energy_at(b)) {
            (Some(ea), Some(eb)) => Ok(eb - ea),
            _ => Err(match &self.failed {
                Some(f) => f.clone(),
                None => format!(
                    "{} samples do not cover {a:.1}..{b:.1} s",
                    self.source.name()
                ),
            }),
        }
    }

    /// Average watts over `[a, b]`.
    pub fn avg_between(&self, a: f64, b: f64) -> Result<f64, String> {
        self.energy_between(a, b).map(|j| j / (b - a))
    }

    /// The report for window `[a, b]` with the idle baseline `idle` = `[a0, b0]`.
    pub fn report(&self, a: f64, b: f64, idle: Option<(f64, f64)>) -> PowerReport {
        self.report_idle(a, b, idle.map(|(a0, b0)| Idle::Interval(a0, b0)))
    }

    /// The report for window `[a, b]` with an idle baseline measured here or earlier.
    pub fn report_idle(&self, a: f64, b: f64, idle: Option<Idle>) -> PowerReport {
        let mut notes = Vec::new();
        let joules = self.energy_between(a, b).map_err(|e| notes.push(e)).ok();
        let idle_w = match idle {
            Some(Idle::Interval(a0, b0)) => self
                .avg_between(a0, b0)
                .map_err(|e| notes.push(format!("idle baseline: {e}")))
                .ok(),
            Some(Idle::Watts(w)) => Some(w),
            None => {
                notes.push("no idle baseline measured".into());
                None
            }
        };
        let avg_w = joules.map(|j| j / (b - a));
        if let (Some(f), true) = (&self.failed, joules.is_some()) {
            notes.push(format!("after the window: {f}"));
        }
        notes.dedup();
        PowerReport {
            source: self.source.name().to_string(),
            modeled: self.source.modeled(),
            idle_w,
            avg_w,
            joules,
            joules_above_idle: joules.zip(idle_w).map(|(j, i)| j - i * (b - a)),
            w_above_idle: avg_w.zip(idle_w).map(|(w, i)| w - i),
            samples: self
                .points
                .iter()
                .filter(|p| p.t >= a - 1e-9 && p.t <= b + 1e-9)
                .count(),
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        }
    }
}

/// Where the idle power comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Idle {
    /// Average over this interval of the monitor's own time axis.
    Interval(f64, f64),
    /// Measured earlier (a baseline reused across runs on the same target).
    Watts(f64),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{MonitorError, Result};

    /// Replays a script of readings; `None` is a failure.
    #[derive(Debug)]
    struct Script(Vec<Option<Reading>>, usize);

    impl PowerSource for Script {
        fn name(&self) -> &str {
            "script"
        }
        fn read(&mut self) -> Result<Reading> {
            let r = self.0.get(self.1).copied().flatten();
            self.1 += 1;
            r.ok_or_else(|| MonitorError::Unavailable("meter unplugged".into()))
        }
    }

    fn sampler(v: Vec<Option<Reading>>, times: &[f64]) -> PowerSampler {
        let mut s = PowerSampler::new(Box::new(Script(v, 0)), Instant::now());
        for &t in times {
            let r = s.source.read();
            match r {
                Ok(r) => {
                    s.push(t, r);
                }
                Err(e) => s.failed = Some(e.note()),
            }
        }
        s
    }

    #[test]
    fn trapezoid_and_exact_window_interpolation() {
        use Reading::Watts;
        // 100 W rising linearly to 200 W over 10 s, then flat.
        let s = sampler(
            vec![Some(Watts(100.0)), Some(Watts(200.0)), Some(Watts(200.0))],
            &[0.0, 10.0, 20.0],
        );
        assert_eq!(s.energy_between(0.0, 10.0).unwrap(), 1500.0);
        // ∫ from 5 to 15 s: 5 s rising 150→200 (875 J) + 5 s at 200 W (1000 J).
        assert!((s.energy_between(5.0, 15.0).unwrap() - 1875.0).abs() < 1e-9);
        assert!(s.energy_between(5.0, 25.0).is_err());
        let r = s.report(10.0, 20.0, Some((0.0, 10.0)));
        assert_eq!(r.joules, Some(2000.0));
        assert_eq!(r.idle_w, Some(150.0));
        assert_eq!(r.avg_w, Some(200.0));
        assert_eq!(r.joules_above_idle, Some(500.0));
        assert_eq!(r.w_above_idle, Some(50.0));
        assert_eq!(r.samples, 2);
        assert!(r.note.is_none());
    }

    #[test]
    fn counters() {
        use Reading::EnergyJ;
        let s = sampler(
            vec![
                Some(EnergyJ(1000.0)),
                Some(EnergyJ(1050.0)),
                Some(EnergyJ(1250.0)),
            ],
            &[0.0, 1.0, 3.0],
        );
        assert_eq!(s.energy_between(0.0, 3.0).unwrap(), 250.0);
        assert_eq!(s.energy_between(1.0, 2.0).unwrap(), 100.0);
        assert_eq!(s.points[2].w, Some(100.0));
    }

    #[test]
    fn failure_mid_run_gives_note_and_none() {
        use Reading::Watts;
        let s = sampler(
            vec![
                Some(Watts(100.0)),
                Some(Watts(100.0)),
                None,
                Some(Watts(100.0)),
            ],
            &[0.0, 1.0, 2.0],
        );
        let r = s.report(0.5, 3.0, Some((0.0, 1.0)));
        assert_eq!(r.joules, None);
        assert_eq!(r.avg_w, None);
        assert_eq!(r.joules_above_idle, None);
        assert_eq!(r.idle_w, Some(100.0));
        assert!(r.note.unwrap().contains("meter unplugged"));
        let r = s.report(0.0, 1.0, None);
        assert_eq!(r.joules, Some(100.0));
        assert!(r.note.unwrap().contains("no idle baseline"));
    }
}
