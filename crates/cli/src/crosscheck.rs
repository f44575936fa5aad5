//! `sanbench crosscheck`: the same workload by sanbench and by the fio job `--emit-fio` writes,
//! on the same target, interleaved (the first tool alternates per repetition, so drift falls
//! on both), and the figures side by side: IOPS, mean and p99 latency, their ratios, and
//! whether IOPS x mean latency agrees with the mean number of I/Os in flight (Little's law)
//! for each tool. Exit 0 when every ratio and both Little's-law deviations are within the
//! tolerance, 1 otherwise.
//!
//! fio's figures come from its JSON (`jobs[].read|write`: `iops`, `total_ios`, `lat_ns.mean`
//! (fio's total latency, from preparing the I/O: the one its configured depth is in flight
//! for) and `clat_ns.percentile` (from submission, as sanbench's latency runs). The p99 of a
//! mixed job joins fio's per-direction percentile tables weighted by their I/O counts (fio
//! reports no joint one), at the points `percentile_list` asks for.
//! fio's in-flight mean is its configured depth, iodepth x numjobs: exact for a closed loop,
//! not reported for an open one (rate_iops), where only sanbench's is checked.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::args::CrosscheckArgs;
use crate::error::{usage, CliError};
use crate::run_cmd::{measure, workload_from_args, Measure};

/// fio's percentile list for the joint p99 (at most 20 entries in fio).
const PERCENTILES: &str = "10:25:50:70:80:90:94:96:97:98:98.5:99:99.3:99.5:99.7:99.9:99.95:99.99";

/// One tool's figures in one repetition.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub iops: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    /// Mean I/Os in flight (measured by sanbench; configured for fio), if known.
    pub in_flight: Option<f64>,
}

impl Figures {
    /// |IOPS x mean latency - in flight| / in flight.
    pub fn little(&self) -> Option<f64> {
        self.in_flight
            .filter(|l| *l > 0.0)
            .map(|l| (self.iops * self.mean_us / 1e6 - l).abs() / l)
    }
}

/// Reads fio's JSON output. `depth`: iodepth x numjobs for a closed loop, else `None`.
pub fn fio_figures(json: &Value, depth: Option<f64>) -> Result<Figures, String> {
    let jobs = json["jobs"]
        .as_array()
        .filter(|j| !j.is_empty())
        .ok_or("fio's JSON has no jobs")?;
    let mut f = Figures::default();
    let mut ios = 0.0;
    let mut lat_sum = 0.0;
    // (I/O count, percentile table) per direction and job, for the joint p99.
    let mut tables: Vec<(f64, Vec<(f64, f64)>)> = Vec::new();
    for j in jobs {
        if j["error"].as_i64().is_some_and(|e| e != 0) {
            return Err(format!("fio's job failed with error {}", j["error"]));
        }
        for d in ["read", "write"] {
            let x = &j[d];
            let n = x["total_ios"].as_f64().unwrap_or(0.0);
            if n == 0.0 {
                continue;
            }
            f.iops += x["iops"].as_f64().unwrap_or(0.0);
            ios += n;
            lat_sum += x["lat_ns"]["mean"].as_f64().unwrap_or(0.0) * n;
            let pct = x["clat_ns"]["percentile"]
                .as_object()
                .ok_or("fio's JSON has no latency percentiles")?;
            let mut t: Vec<(f64, f64)> = pct
                .iter()
                .filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, v.as_f64()?)))
                .collect();
            t.sort_by(|a, b| a.0.total_cmp(&b.0));
            tables.push((n, t));
        }
    }
    if ios == 0.0 {
        return Err("fio completed no I/O".into());
    }
    f.mean_us = lat_sum / ios / 1e3;
    f.p99_us = joint_percentile(&tables, 99.0) / 1e3;
    f.in_flight = depth;
    Ok(f)
}

/// The smallest latency in the tables at which the count-weighted share of I/Os at or below
/// it reaches `p` percent (each table read as a step function of its percentiles).
pub fn joint_percentile(tables: &[(f64, Vec<(f64, f64)>)], p: f64) -> f64 {
    let total: f64 = tables.iter().map(|t| t.0).sum();
    let mut candidates: Vec<f64> = tables
        .iter()
        .flat_map(|t| t.1.iter().map(|e| e.1))
        .collect();
    candidates.sort_by(f64::total_cmp);
    for x in &candidates {
        let below: f64 = tables
            .iter()
            .map(|(n, t)| {
                let share = t
                    .iter()
                    .filter(|e| e.1 <= *x)
                    .map(|e| e.0)
                    .fold(0.0, f64::max);
                n * share
            })
            .sum();
        if below / total >= p - 1e-9 {
            return *x;
        }
    }
    candidates.last().copied().unwrap_or(0.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fmt_iops(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn fmt_pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |d| format!("{:.1} %", d * 100.0))
}

pub fn run(mut a: CrosscheckArgs) -> Result<(), CliError> {
    crate::fio_cmd::resolve_run(&mut a.run)?;
    if a.run.targets.len() != 1 {
        return Err(usage("crosscheck drives one target"));
    }
    if a.repeat == 0 {
        return Err(usage("--repeat must be at least 1"));
    }
    if !(a.tolerance >= 0.0 && a.tolerance.is_finite()) {
        return Err(usage("--tolerance is a percentage of at least 0"));
    }
    // I/O figures only: no idle baseline before every run.
    a.run.monitor.no_monitor = true;
    let w = workload_from_args(&a.run)?;
    let job = crate::fio_cmd::job_text(&a.run, &w)?;
    let (job_path, keep) = match &a.run.emit_fio {
        Some(p) => (p.clone(), true),
        None => (
            std::env::temp_dir().join(format!("sanbench-crosscheck-{}.fio", std::process::id())),
            false,
        ),
    };
    std::fs::write(&job_path, &job)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("writing {}: {e}", job_path.display())))?;
    let r = check(&a, &w, &job_path);
    if !keep {
        let _ = std::fs::remove_file(&job_path);
    }
    r
}

fn fio_args(job: &Path) -> Vec<String> {
    vec![
        "--output-format=json".into(),
        format!("--percentile_list={PERCENTILES}"),
        job.display().to_string(),
    ]
}

fn run_fio(a: &CrosscheckArgs, job: &Path, depth: Option<f64>) -> Result<Figures, CliError> {
    let out = Command::new(&a.fio_bin)
        .args(fio_args(job))
        .output()
        .map_err(|e| usage(format!("cannot run {}: {e}", a.fio_bin.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before its JSON.
    let json: Option<Value> = text
        .find('{')
        .and_then(|i| serde_json::from_str(&text[i..]).ok());
    let err = String::from_utf8_lossy(&out.stderr);
    match json {
        Some(j) if out.status.success() => {
            fio_figures(&j, depth).map_err(|e| CliError::Failed(anyhow::anyhow!("fio: {e}")))
        }
        _ => Err(CliError::Failed(anyhow::anyhow!(
            "fio failed ({}): {}",
            out.status,
            err.lines().last().unwrap_or("no message")
        ))),
    }
}

fn run_sanbench(a: &CrosscheckArgs, first: bool) -> Result<Figures, CliError> {
    let (doc, _) = measure(
        &a.run,
        Measure {
            targets: &a.run.targets,
            quiet: true,
            sync: None,
            precondition: first,
            raw_latencies: false,
        },
    )?;
    let r = doc
        .results
        .first()
        .ok_or_else(|| CliError::Failed(anyhow::anyhow!("sanbench returned no result")))?;
    Ok(Figures {
        iops: r.iops,
        mean_us: r.latency_us.mean,
        p99_us: r.latency_us.p99,
        in_flight: Some(
            r.littles_law
                .mean_outstanding
                .unwrap_or(r.littles_law.outstanding as f64),
        ),
    })
}

fn check(a: &CrosscheckArgs, w: &sanbench_engine::Workload, job: &Path) -> Result<(), CliError> {
    let tol = a.tolerance / 100.0;
    // With --json -, the document alone goes to stdout and the table to stderr.
    let to_stdout = a.run.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    macro_rules! say {
        ($($t:tt)*) => {
            if to_stdout {
                eprintln!($($t)*)
            } else {
                outln!($($t)*)
            }
        };
    }
    // fio's in-flight mean: its configured depth in a closed loop (a sync engine keeps one).
    let depth = w.rate.is_none().then_some(w.qd as f64 * w.workers as f64);
    let target = sanbench_engine::uri::redact(&a.run.targets[0]);
    say!(
        "crosscheck: {} on {target}, {} repetitions interleaved, tolerance {} %",
        w.describe(),
        a.repeat,
        a.tolerance
    );
    say!("fio: {} {}", a.fio_bin.display(), fio_args(job).join(" "));
    say!(
        "{:>4}  {:<9} {:>10} {:>10} {:>10} {:>10} {:>11} {:>8}",
        "rep",
        "tool",
        "IOPS",
        "mean µs",
        "p99 µs",
        "in flight",
        "IOPS×mean",
        "Little"
    );
    let mut sb = Vec::new();
    let mut fio = Vec::new();
    for rep in 0..a.repeat {
        let sb_first = rep % 2 == 0;
        for tool in if sb_first { [0, 1] } else { [1, 0] } {
            let f = if tool == 0 {
                run_sanbench(a, rep == 0)?
            } else {
                run_fio(a, job, depth)?
            };
            say!(
                "{:>4}  {:<9} {:>10} {:>10.1} {:>10.1} {:>10} {:>11.2} {:>8}",
                rep + 1,
                if tool == 0 { "sanbench" } else { "fio" },
                fmt_iops(f.iops),
                f.mean_us,
                f.p99_us,
                f.in_flight.map_or("n/a".into(), |l| format!("{l:.2}")),
                f.iops * f.mean_us / 1e6,
                fmt_pct(f.little())
            );
            if tool == 0 {
                sb.push(f)
            } else {
                fio.push(f)
            }
        }
    }
    let m = |v: &[Figures], g: fn(&Figures) -> f64| median(v.iter().map(g).collect());
    let mut misses = Vec::new();
    let mut medians = serde_json::Map::new();
    say!("median   {:>12} {:>12} {:>8}", "sanbench", "fio", "ratio");
    for (what, g) in [
        ("IOPS", (|f: &Figures| f.iops) as fn(&Figures) -> f64),
        ("mean µs", |f: &Figures| f.mean_us),
        ("p99 µs", |f: &Figures| f.p99_us),
    ] {
        let (s, f) = (m(&sb, g), m(&fio, g));
        let ratio = s / f;
        let ok = (ratio - 1.0).abs() <= tol;
        medians.insert(
            what.replace(" µs", "_us").replace("IOPS", "iops"),
            serde_json::json!({"sanbench": s, "fio": f, "ratio": ratio, "ok": ok}),
        );
        if !ok {
            misses.push(format!("{what} {ratio:.2}x"));
        }
        let shown = |v: f64| {
            if what == "IOPS" {
                fmt_iops(v)
            } else {
                format!("{v:.1}")
            }
        };
        say!(
            "{what:<8} {:>12} {:>12} {:>7.3}x  {}",
            shown(s),
            shown(f),
            ratio,
            if ok { "ok" } else { "OUTSIDE" }
        );
    }
    for (who, v) in [("sanbench", &sb), ("fio", &fio)] {
        let devs: Vec<f64> = v.iter().filter_map(Figures::little).collect();
        let d = (!devs.is_empty()).then(|| median(devs));
        let ok = d.is_none_or(|d| d <= tol);
        medians.insert(
            format!("littles_law_{who}"),
            serde_json::json!({"deviation": d, "ok": ok}),
        );
        if !ok {
            misses.push(format!("Little's law for {who} {}", fmt_pct(d)));
        }
        let basis = if who == "fio" {
            "in flight: iodepth x numjobs"
        } else {
            "in flight: sampled"
        };
        say!(
            "Little's law, {who}: IOPS × mean vs mean in flight {} ({basis}){}",
            fmt_pct(d),
            match (d, ok) {
                (None, _) => "  (open loop: fio reports no in-flight mean)",
                (_, true) => "  ok",
                (_, false) => "  OUTSIDE",
            }
        );
    }
    if let Some(path) = &a.run.json {
        let reps = |v: &[Figures]| -> Vec<Value> {
            v.iter()
                .map(|f| {
                    serde_json::json!({"iops": f.iops, "mean_us": f.mean_us, "p99_us": f.p99_us,
                        "in_flight": f.in_flight, "littles_law": f.little()})
                })
                .collect()
        };
        let doc = serde_json::json!({
            "schema": "sanbench.crosscheck/1",
            "target": target,
            "spec": w,
            "spec_description": w.describe(),
            "fio_job": std::fs::read_to_string(job).unwrap_or_default(),
            "tolerance_pct": a.tolerance,
            "sanbench": reps(&sb),
            "fio": reps(&fio),
            "medians": medians,
            "agree": misses.is_empty(),
        });
        let text = format!("{doc:#}\n");
        if path.as_os_str() == "-" {
            crate::stdout::write_bytes(text.as_bytes());
        } else {
            std::fs::write(path, text).map_err(|e| {
                CliError::Failed(anyhow::anyhow!("writing {}: {e}", path.display()))
            })?;
        }
    }
    if misses.is_empty() {
        say!("verdict: sanbench and fio agree within {} %", a.tolerance);
        Ok(())
    } else {
        Err(CliError::Failed(anyhow::anyhow!(
            "crosscheck: outside the {} % tolerance: {}",
            a.tolerance,
            misses.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_json_figures() {
        let j: Value = serde_json::json!({"jobs": [{
            "error": 0,
            "read": {"iops": 700.0, "total_ios": 700, "lat_ns": {"mean": 10000.0},
                "clat_ns": {"percentile": {"50.000000": 9000, "99.000000": 20000}}},
            "write": {"iops": 300.0, "total_ios": 300, "lat_ns": {"mean": 20000.0},
                "clat_ns": {"percentile": {"50.000000": 15000, "99.000000": 40000}}}
        }]});
        let f = fio_figures(&j, Some(1.0)).unwrap();
        assert_eq!(f.iops, 1000.0);
        assert!((f.mean_us - 13.0).abs() < 1e-9);
        // 99 % of all I/Os: every read (<= 20 µs) and 99 % of writes are at or below 40 µs;
        // at 20 µs only 0.99 x 700 + 0.5 x 300 of 1000 are.
        assert_eq!(f.p99_us, 40.0);
        assert!((f.little().unwrap() - 0.987).abs() < 1e-9);
        assert!(fio_figures(&serde_json::json!({"jobs": []}), None).is_err());
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
    }
}
