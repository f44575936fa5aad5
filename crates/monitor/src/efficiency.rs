//! Work per CPU and per joule (docs/MEASURE.md, "CPU" derived figures and "Power" method).
//!
//! All CPU figures use **system-wide** busy time minus the idle baseline, as the studies did
//! (Perfmon, top): transport work runs in kworkers, softirqs and io_uring workers outside the
//! benchmark process. "CPU %" is the share of *all* cores (100 % = every core busy), Iometer's
//! convention for CPU effectiveness; "% of one core" is IBM's unit. Power figures use energy
//! above idle. Every ratio is `None` when its denominator is missing or not positive.

use crate::sampler::MonitorReport;

/// An idle baseline busier than this (% of all cores) means the host was not idle before the
/// run. A quiet host idles at a few percent (daemons, the monitor itself); more than this is
/// other work, which the run then competes with and displaces, so "busy minus baseline" no
/// longer measures the run: on a host 99.8 % busy beforehand a saturating run shows as 0.2 %
/// CPU and an absurd IOPS per CPU %. Such figures are flagged (`host_not_idle`), left out of
/// findings, and warned about.
pub const NOT_IDLE_BASELINE_PCT: f64 = 10.0;

pub use sanbench_doc::Efficiency;

fn ratio(n: f64, d: Option<f64>) -> Option<f64> {
    d.filter(|d| *d > 0.0 && d.is_finite())
        .map(|d| n / d)
        .filter(|r| r.is_finite())
}

/// Efficiency of `ios` I/Os moving `bytes` in `seconds` (the engine's window), with the host
/// figures of `report` (the same window). `pacing_cpu_s`: an open loop's spin for its
/// schedule (the result's `pacing_cpu_s`), left out of the CPU figures above idle: it is the
/// generator's waiting, not work the I/O needed, and it grows with the idle time between
/// arrivals, not with the I/Os (at 8,000 I/Os per second on this project's VM it was most of
/// the CPU per I/O).
pub fn efficiency(
    ios: u64,
    bytes: u64,
    seconds: f64,
    report: &MonitorReport,
    pacing_cpu_s: Option<f64>,
) -> Efficiency {
    let cpu = &report.cpu;
    let have_cpu = cpu.cores > 0 && report.window_s > 0.0;
    let pacing_s = pacing_cpu_s.filter(|p| p.is_finite() && *p >= 0.0);
    let pacing_pct = have_cpu
        .then(|| pacing_s.map(|p| p / (cpu.cores as f64 * report.window_s) * 100.0))
        .flatten();
    // Pacing that leaves nothing (or less) is a misreading, not an I/O that cost no CPU: no
    // figure then.
    let paced = pacing_s.is_some_and(|p| p > 0.0);
    let left = |x: f64| (!paced || x > 0.0).then_some(x.max(0.0));
    let cpu_pct = have_cpu
        .then(|| left(cpu.busy_above_idle_pct.unwrap_or(cpu.busy_pct) - pacing_pct.unwrap_or(0.0)))
        .flatten();
    // CPU-seconds above idle: the baseline's busy share of all cores over the window removed,
    // and the pacing.
    let cpu_s = have_cpu
        .then(|| {
            let idle_s =
                cpu.baseline_busy_pct.unwrap_or(0.0) / 100.0 * cpu.cores as f64 * report.window_s;
            left(cpu.busy_cpu_s - idle_s - pacing_s.unwrap_or(0.0))
        })
        .flatten();
    let ok_secs = (seconds > 0.0).then_some(seconds);
    let iops = ok_secs.map(|s| ios as f64 / s);
    let mbps = ok_secs.map(|s| bytes as f64 / 1e6 / s);
    let n_ios = (ios > 0).then_some(ios as f64);
    // Energy above idle smaller than 0.1 % of the window's energy is inside what the meter can
    // resolve (a constant reading gives a floating-point residue): no per-watt figure rather
    // than an absurd one.
    let joules = report.power.joules_above_idle.filter(|j| {
        let total = report.power.joules.unwrap_or(0.0).abs();
        *j > 1e-3 * total && *j > 1e-9
    });
    Efficiency {
        cpu_pct,
        cpu_baseline_subtracted: cpu.baseline_busy_pct.is_some(),
        host_not_idle: cpu
            .baseline_busy_pct
            .is_some_and(|b| b > NOT_IDLE_BASELINE_PCT),
        iops_per_cpu_pct: iops.and_then(|i| ratio(i, cpu_pct)),
        mb_per_s_per_cpu_pct: mbps.and_then(|m| ratio(m, cpu_pct)),
        cpu_us_per_io: cpu_s.and_then(|c| ratio(c * 1e6, n_ios)),
        cpu_us_per_io_gross: have_cpu
            .then_some(cpu.busy_cpu_s)
            .and_then(|c| ratio(c * 1e6, n_ios)),
        core_pct_per_1000_iops: cpu_s
            .zip(iops)
            .and_then(|(c, i)| ratio(c / report.window_s * 100.0, Some(i / 1000.0))),
        iops_per_watt: (ios > 0).then(|| ratio(ios as f64, joules)).flatten(),
        mb_per_s_per_watt: (bytes > 0)
            .then(|| ratio(bytes as f64 / 1e6, joules))
            .flatten(),
        power_modeled: report.power.modeled,
        pacing_cpu_pct: pacing_pct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::PowerReport;
    use crate::sampler::CpuReport;

    fn report() -> MonitorReport {
        MonitorReport {
            window_s: 10.0,
            cpu: CpuReport {
                cores: 4,
                busy_pct: 30.0,
                busy_cpu_s: 12.0, // 30 % of 4 cores × 10 s
                baseline_busy_pct: Some(5.0),
                busy_above_idle_pct: Some(25.0),
                ..Default::default()
            },
            power: PowerReport {
                source: "rapl".into(),
                joules: Some(1500.0),
                joules_above_idle: Some(500.0),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn figures_exact() {
        // 1,000,000 I/Os of 4 KB (4096 B) in 10 s: 100k IOPS, 409.6 MB/s.
        let e = efficiency(1_000_000, 4_096_000_000, 10.0, &report(), None);
        assert_eq!(e.cpu_pct, Some(25.0));
        assert!(e.cpu_baseline_subtracted);
        assert_eq!(e.iops_per_cpu_pct, Some(4000.0));
        assert!((e.mb_per_s_per_cpu_pct.unwrap() - 409.6 / 25.0).abs() < 1e-9);
        // Above idle: 12 − 0.05 × 4 × 10 = 10 CPU-s → 10 µs per I/O; gross 12 µs.
        assert!((e.cpu_us_per_io.unwrap() - 10.0).abs() < 1e-9);
        assert!((e.cpu_us_per_io_gross.unwrap() - 12.0).abs() < 1e-9);
        // 10 CPU-s / 10 s = 100 % of one core, for 100 kIOPS → 1 % per 1000 IOPS.
        assert!((e.core_pct_per_1000_iops.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(e.iops_per_watt, Some(2000.0));
        assert!((e.mb_per_s_per_watt.unwrap() - 4096.0 / 500.0).abs() < 1e-9);
        assert!(!e.power_modeled);
        assert!(!e.host_not_idle);
    }

    #[test]
    fn an_open_loops_pacing_is_left_out_of_the_figures_above_idle() {
        // As figures_exact, with 4 CPU-s of the 12 spent spinning for the schedule: 10 % of
        // the 4 cores over 10 s.
        let e = efficiency(1_000_000, 4_096_000_000, 10.0, &report(), Some(4.0));
        assert!((e.pacing_cpu_pct.unwrap() - 10.0).abs() < 1e-9);
        assert!((e.cpu_pct.unwrap() - 15.0).abs() < 1e-9);
        assert!((e.iops_per_cpu_pct.unwrap() - 100_000.0 / 15.0).abs() < 1e-6);
        // 12 − 2 idle − 4 pacing = 6 CPU-s → 6 µs per I/O; gross is all busy time still.
        assert!((e.cpu_us_per_io.unwrap() - 6.0).abs() < 1e-9);
        assert!((e.cpu_us_per_io_gross.unwrap() - 12.0).abs() < 1e-9);
        assert!((e.core_pct_per_1000_iops.unwrap() - 0.6).abs() < 1e-9);
        // Power is the meter's: the spin drew it too.
        assert_eq!(e.iops_per_watt, Some(2000.0));
        // More pacing than busy time (a misreading) never goes below zero: no figure.
        let e = efficiency(1_000_000, 4_096_000_000, 10.0, &report(), Some(50.0));
        assert_eq!((e.cpu_pct, e.iops_per_cpu_pct), (None, None));
        assert_eq!((e.cpu_us_per_io, e.core_pct_per_1000_iops), (None, None));
        // A closed loop: nothing taken out, and nothing said.
        let e = efficiency(1_000_000, 4_096_000_000, 10.0, &report(), None);
        assert_eq!(e.pacing_cpu_pct, None);
    }

    #[test]
    fn a_busy_baseline_flags_the_figures_above_idle() {
        // Another job kept the host 99.8 % busy before the run; the run then shows 0.2 % above
        // idle. The figures stay (scripts read them) but carry the flag.
        let mut r = report();
        r.cpu.busy_pct = 100.0;
        r.cpu.busy_cpu_s = 40.0;
        r.cpu.baseline_busy_pct = Some(99.8);
        r.cpu.busy_above_idle_pct = Some(0.2);
        let e = efficiency(1_000_000, 4_096_000_000, 10.0, &r, None);
        assert!(e.host_not_idle);
        assert_eq!(e.iops_per_cpu_pct, Some(100_000.0 / 0.2));
        for (b, flagged) in [(NOT_IDLE_BASELINE_PCT, false), (10.5, true), (2.0, false)] {
            r.cpu.baseline_busy_pct = Some(b);
            assert_eq!(
                efficiency(1000, 4096, 10.0, &r, None).host_not_idle,
                flagged,
                "{b}"
            );
        }
        // No baseline at all is not a busy one (the figures are gross, and say so).
        r.cpu.baseline_busy_pct = None;
        assert!(!efficiency(1000, 4096, 10.0, &r, None).host_not_idle);
    }

    #[test]
    fn none_when_not_computable() {
        let mut r = report();
        r.power.joules_above_idle = None;
        r.cpu.busy_above_idle_pct = Some(0.0);
        let e = efficiency(1000, 4096, 10.0, &r, None);
        assert_eq!(e.iops_per_watt, None);
        assert_eq!(e.iops_per_cpu_pct, None);
        let e = efficiency(0, 0, 0.0, &MonitorReport::default(), None);
        assert_eq!(e, Efficiency::default());
        r.power.joules_above_idle = Some(-3.0);
        assert_eq!(efficiency(1000, 4096, 10.0, &r, None).iops_per_watt, None);
    }
}
