//! `sanbench crosscheck`: the same workload by sanbench and by the fio job `--emit-fio` writes,
//! on the same target, interleaved (the first tool alternates per repetition, so drift falls
//! on both), and the figures side by side: IOPS, mean and p99 latency, their ratios, and
//! whether IOPS x mean latency agrees with the mean number of I/Os in flight (Little's law)
//! for each tool. Exit 0 when every ratio of the medians and both Little's-law deviations are
//! within the tolerance, 1 otherwise. Beside each median ratio, from two repetitions on, its
//! interval by `compare`'s model and whether it shows the ratio within the tolerance, outside
//! it, or neither (with the repetitions that would likely decide): medians within 15 % on a
//! machine whose identical runs differ 10-20 % are not yet evidence, and the line says so.
//!
//! fio's figures come from its JSON (`jobs[].read|write`: `iops`, `total_ios`, `lat_ns.mean`
//! (fio's total latency, from preparing the I/O: the one its configured depth is in flight
//! for) and `lat_ns.percentile` (fio runs with `--lat_percentiles=1`: the same span as
//! sanbench's latency, which starts before the submitting call; fio's `clat` for io_uring
//! starts after it, `sanbench_fio::json::table`). fio reports no joint p99 for a mixed job:
//! fio runs with `--output-format=json+`, whose `bins` are its latency histogram per
//! direction; joined over directions and jobs they give the joint p99 by fio's own rule
//! (`p99_method` "histogram"). From an fio without them, the per-direction percentile tables at the points
//! `percentile_list` asks for, weighted by their I/O counts ("percentile tables": an upper
//! bound, 10-20 % high on a 70/30 mix).
//! fio's in-flight mean is its configured depth, iodepth x numjobs: exact for a closed loop,
//! not reported for an open one (rate_iops), where only sanbench's is checked.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::compare::config::RepeatArg;
use crate::context::Context;
use crate::error::{usage, CliError};
use crate::measure::{measure, Measure};
use crate::run_config::RunConfig;
use anyhow::Context as _;
use sanbench_doc::crosscheck::{
    CrosscheckDoc, Little, Medians, Ratio, Repetition, CROSSCHECK_SCHEMA,
};
use sanbench_engine::result::TargetResult;
use sanbench_stats::design::plan::Stop;
use sanbench_store::{Cell, Comparison, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};
use sanbench_units::fmt::si_digits;

mod interval;
use interval::{all_decided, interval, interval_heading, Interval, Looks, FIGURES};
pub use sanbench_fio::json::{fio_figures, fio_result, Figures, PERCENTILES};

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

fn fmt_pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |d| format!("{:.1} %", d * 100.0))
}

/// Everything one crosscheck needs, typed and checked before anything runs.
pub struct CrosscheckConfig {
    /// The run both tools do (one target, no faults, no monitor).
    pub run: RunConfig,
    pub repeat: RepeatArg,
    /// `--max-repeat` (at least 2 with `--repeat auto`).
    pub max_repeat: u32,
    /// `--budget`: at least one pair of repetitions.
    pub budget: Option<std::time::Duration>,
    /// `--tolerance`, a percentage.
    pub tolerance: f64,
    /// The fio to run.
    pub fio_bin: std::path::PathBuf,
    pub db: Option<std::path::PathBuf>,
    pub no_store: bool,
}

impl CrosscheckConfig {
    /// Checks what [`execute`] needs of a configuration: bad values are bad input.
    pub fn check(&self) -> Result<(), CliError> {
        let c = &self.run;
        if c.faults.is_some() {
            // fio would run without them: the two tools would not measure the same thing.
            return Err(usage(
                "crosscheck takes no --fault (fio's runs could not have them)",
            ));
        }
        if c.targets.len() != 1 {
            return Err(usage("crosscheck drives one target"));
        }
        if matches!(self.repeat, RepeatArg::Auto) && self.max_repeat < 2 {
            return Err(usage(
                "--max-repeat must be at least 2 (one repetition has no noise estimate)",
            ));
        }
        if !(self.tolerance >= 0.0 && self.tolerance.is_finite()) {
            return Err(usage("--tolerance is a percentage of at least 0"));
        }
        if let Some(path) = &c.json {
            crate::outfile::check_writable("--json", path)?;
        }
        let w = &c.workload;
        if let Some(b) = self.budget {
            let pair = 2 * (w.ramp + w.time);
            if b < pair {
                return Err(usage(format!(
                    "--budget {b:?} is shorter than one pair of repetitions (2 x (ramp + time) = {pair:?})"
                )));
            }
        }
        Ok(())
    }
}

/// A finished crosscheck: its document (what `--json` writes) and what fell outside the
/// tolerance (empty when the tools agree).
pub struct Crosschecked {
    pub doc: CrosscheckDoc,
    pub misses: Vec<String>,
}

impl Crosschecked {
    /// `Ok` when the tools agree within the tolerance; otherwise the failure (exit 1) that
    /// names what did not.
    pub fn outcome(&self) -> Result<(), CliError> {
        if self.misses.is_empty() {
            return Ok(());
        }
        Err(CliError::Failed(anyhow::anyhow!(
            "crosscheck: outside the {} % tolerance: {}",
            self.doc.tolerance_pct,
            self.misses.join(", ")
        )))
    }
}

/// Runs the crosscheck `a` describes, saying each repetition and the verdict as it goes.
pub fn execute(cx: &Context, a: &CrosscheckConfig) -> Result<Crosschecked, CliError> {
    a.check()?;
    let c = &a.run;
    // Both tools on the same CPUs: sanbench pinned here, fio by the job's cpus_allowed (and
    // cpus_allowed_policy=split with --cpus-policy split).
    cx.apply_placement(c.cpus.as_ref(), c.cpus_policy)?;
    let job = c.fio_job()?;
    let (job_path, keep) = match &c.emit_fio {
        Some(p) => (p.clone(), true),
        None => (
            std::env::temp_dir().join(format!("sanbench-crosscheck-{}.fio", std::process::id())),
            false,
        ),
    };
    std::fs::write(&job_path, &job)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("writing {}: {e}", job_path.display())))?;
    let r = check(cx, a, c, &job_path);
    if !keep {
        let _ = std::fs::remove_file(&job_path);
    }
    r
}

fn fio_args(job: &Path) -> Vec<String> {
    vec![
        // json+: the latency histogram's buckets too, for the joint p99 of a mixed job.
        "--output-format=json+".into(),
        format!("--percentile_list={PERCENTILES}"),
        "--lat_percentiles=1".into(),
        job.display().to_string(),
    ]
}

fn run_fio(
    a: &CrosscheckConfig,
    job: &Path,
    depth: Option<f64>,
    engine: &str,
) -> Result<(Figures, TargetResult), CliError> {
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
            let f = fio_figures(&j, depth)
                .map_err(|e| CliError::Failed(anyhow::anyhow!("fio: {e}")))?;
            Ok((f, fio_result(&j, &f, engine)))
        }
        _ => Err(CliError::Failed(anyhow::anyhow!(
            "fio failed ({}): {}",
            out.status,
            err.lines().last().unwrap_or("no message")
        ))),
    }
}

fn run_sanbench(
    cx: &Context,
    c: &RunConfig,
    first: bool,
) -> Result<(Figures, TargetResult), CliError> {
    let (doc, _) = measure(
        cx,
        c,
        Measure {
            targets: &c.targets,
            quiet: true,
            sync: None,
            precondition: first,
            raw_latencies: false,
            rank: None,
        },
    )?;
    let r = doc
        .results
        .first()
        .ok_or_else(|| CliError::Failed(anyhow::anyhow!("sanbench returned no result")))?;
    let f = Figures {
        iops: r.iops,
        mean_us: r.latency_us.mean,
        p99_us: r.latency_us.p99,
        in_flight: Some(
            r.littles_law
                .mean_outstanding
                .unwrap_or(r.littles_law.outstanding as f64),
        ),
        p99_from: None,
        p99_method: None,
    };
    Ok((f, r.clone()))
}

/// The crosscheck as a comparison of two "targets", sanbench and fio, on one workload: the
/// store keeps it and `sanbench report` renders it like any comparison.
fn comparison(
    w: &sanbench_engine::Workload,
    target: &str,
    started: std::time::SystemTime,
    cells: Vec<Cell>,
    reps: u32,
) -> Comparison {
    let entry = |name: &str| TargetEntry {
        name: name.into(),
        uri: target.into(),
        ..TargetEntry::default()
    };
    Comparison {
        schema: COMPARE_SCHEMA.into(),
        sanbench_version: env!("CARGO_PKG_VERSION").into(),
        started_at: sanbench_engine::result::rfc3339(started),
        command: std::env::args()
            .map(|x| sanbench_engine::uri::redact(&x))
            .collect(),
        suite: "crosscheck".into(),
        suite_description: format!("sanbench against fio on {target}"),
        repeat: reps,
        targets: vec![entry("sanbench"), entry("fio")],
        workloads: vec![WorkloadEntry {
            id: "crosscheck".into(),
            title: w.describe(),
            group: "crosscheck".into(),
            spec: w.clone(),
            targets_at_once: None,
            paths: None,
        }],
        cells,
        manifest: None,
        incomplete: false,
        curve: Vec::new(),
        // The order alternates (sanbench first in even rounds): a Williams design for two,
        // judged as a fixed number of rounds.
        design: None,
        require_headroom: false,
        complete: None,
        in_progress: None,
    }
}

fn check(
    cx: &Context,
    a: &CrosscheckConfig,
    c: &RunConfig,
    job: &Path,
) -> Result<Crosschecked, CliError> {
    let tol = a.tolerance / 100.0;
    let w = &c.workload;
    // With --json -, the document alone goes to stdout and the table to stderr.
    let to_stdout = c.json_to_stdout();
    // Sentences wrap to the terminal; the table's rows stay whole (fit::prose).
    let width = crate::fit::width();
    macro_rules! say {
        ($($t:tt)*) => {{
            let line = crate::fit::prose(&format!($($t)*), width);
            if to_stdout {
                eprintln!("{line}")
            } else {
                outln!("{line}")
            }
        }};
    }
    // fio's in-flight mean: its configured depth in a closed loop (a sync engine keeps one).
    let depth = w.rate.is_none().then_some(w.qd as f64 * w.workers as f64);
    let target = sanbench_engine::uri::redact(&c.targets[0]);
    let (max, reps_text) = match a.repeat {
        RepeatArg::Fixed(n) => (n, format!("{n} repetitions")),
        RepeatArg::Auto => (
            a.max_repeat,
            format!(
                "repetitions until the ratios are decided (at most {})",
                a.max_repeat
            ),
        ),
    };
    let looks = Looks::new(a.repeat, a.max_repeat);
    say!(
        "crosscheck: {} on {target}, {reps_text} interleaved, tolerance {} %",
        w.describe(),
        a.tolerance
    );
    say!("fio: {} {}", a.fio_bin.display(), fio_args(job).join(" "));
    // A repetition is one run of each tool: twice the workload's ramp and window.
    let pair = (w.ramp + w.time) * 2;
    let fixed = matches!(a.repeat, RepeatArg::Fixed(_));
    say!(
        "{}",
        crate::eta::longest_line("repetition", pair, max, fixed, a.budget)
    );
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
    let mut cells = Vec::new();
    let engine = std::fs::read_to_string(job)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("ioengine=").map(str::to_string))
        })
        .unwrap_or_default();
    let started = std::time::SystemTime::now();
    let mut stop = match a.repeat {
        RepeatArg::Fixed(_) => Stop::Fixed,
        RepeatArg::Auto => Stop::MaxRounds,
    };
    let clock = std::time::Instant::now();
    for rep in 0..max {
        let sb_first = rep % 2 == 0;
        // Before a new pair: would it fit the budget, at the pace of the pairs so far?
        if let Some(b) = a.budget.filter(|_| rep >= 2 && sb_first) {
            let spent = clock.elapsed();
            if spent + spent / (rep / 2) > b {
                stop = Stop::Budget;
                break;
            }
        }
        for tool in if sb_first { [0, 1] } else { [1, 0] } {
            let cell_start = std::time::SystemTime::now();
            let (f, result) = if tool == 0 {
                run_sanbench(cx, c, rep == 0)?
            } else {
                run_fio(a, job, depth, &engine)?
            };
            cells.push(Cell {
                workload: "crosscheck".into(),
                target: if tool == 0 { "sanbench" } else { "fio" }.into(),
                repeat: rep,
                round: Some(rep),
                slot: Some(u32::from((tool == 0) != sb_first)),
                started_at: Some(sanbench_engine::result::rfc3339(cell_start)),
                result,
                steady: None,
                load_pct: None,
                hosts: Vec::new(),
            });
            say!(
                "{:>4}  {:<9} {:>10} {:>10.1} {:>10.1} {:>10} {:>11.2} {:>8}",
                rep + 1,
                if tool == 0 { "sanbench" } else { "fio" },
                si_digits(f.iops, 3),
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
        let n = sb.len();
        if looks.looks_after(n) && all_decided(&sb, &fio, tol, looks.alpha(n)) {
            stop = Stop::Decided;
            break;
        }
    }
    let n = sb.len();
    let alpha = looks.alpha(n);
    match stop {
        Stop::Decided => say!("stopped after {n} repetitions: every ratio decided"),
        Stop::MaxRounds => say!("stopped at --max-repeat {n}"),
        Stop::Budget => say!("stopped by --budget after {n} repetitions"),
        Stop::Fixed => {}
    }
    if fio
        .iter()
        .any(|f| f.p99_method == Some("percentile tables"))
    {
        say!(
            "note: this fio reported no latency histogram (json+ bins): its p99 joins reads' and \
             writes' percentile tables, an upper bound for a mixed job"
        );
    }
    let m = |v: &[Figures], g: fn(&Figures) -> f64| median(v.iter().map(g).collect());
    let mut misses = Vec::new();
    let mut unshown = Vec::new();
    let mut ratios = Vec::new();
    let mut littles = Vec::new();
    say!(
        "median   {:>12} {:>12} {:>8}      {}",
        "sanbench",
        "fio",
        "ratio",
        interval_heading(n, alpha)
    );
    for (what, g) in FIGURES {
        let (s, f) = (m(&sb, g), m(&fio, g));
        let ratio = s / f;
        let ok = (ratio - 1.0).abs() <= tol;
        let iv = interval(&sb, &fio, g, tol, alpha);
        if let Some(j) = iv.as_ref().filter(|j| j.verdict != "within") {
            unshown.push(format!("{what} {}", j.text()));
        }
        ratios.push(Ratio {
            sanbench: s,
            fio: f,
            ratio,
            ok,
            interval: iv.as_ref().map(Interval::typed),
        });
        if !ok {
            misses.push(format!("{what} {ratio:.2}x"));
        }
        let shown = |v: f64| {
            if what == "IOPS" {
                si_digits(v, 3)
            } else {
                format!("{v:.1}")
            }
        };
        say!(
            "{what:<8} {:>12} {:>12} {:>7.3}x  {:<7}  {}",
            shown(s),
            shown(f),
            ratio,
            if ok { "ok" } else { "OUTSIDE" },
            iv.as_ref().map_or("-".into(), Interval::text)
        );
    }
    for (who, v) in [("sanbench", &sb), ("fio", &fio)] {
        let devs: Vec<f64> = v.iter().filter_map(Figures::little).collect();
        let d = (!devs.is_empty()).then(|| median(devs));
        let ok = d.is_none_or(|d| d <= tol);
        littles.push(Little { deviation: d, ok });
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
    let reps = |v: &[Figures]| -> Vec<Repetition> {
        v.iter()
            .map(|f| Repetition {
                iops: f.iops,
                mean_us: f.mean_us,
                p99_us: f.p99_us,
                in_flight: f.in_flight,
                littles_law: f.little(),
                p99_from: f.p99_from.map(str::to_string),
                p99_method: f.p99_method.map(str::to_string),
            })
            .collect()
    };
    let [iops, mean_us, p99_us]: [Ratio; 3] = ratios.try_into().expect("three figures");
    let [littles_law_sanbench, littles_law_fio]: [Little; 2] =
        littles.try_into().expect("two tools");
    let doc = CrosscheckDoc {
        schema: CROSSCHECK_SCHEMA.into(),
        target: target.clone(),
        spec: w.clone(),
        spec_description: w.describe(),
        fio_job: std::fs::read_to_string(job).unwrap_or_default(),
        tolerance_pct: a.tolerance,
        repetitions: n,
        stop: stop.key().into(),
        sanbench: reps(&sb),
        fio: reps(&fio),
        medians: Medians {
            iops,
            mean_us,
            p99_us,
            littles_law_sanbench,
            littles_law_fio,
        },
        agree: misses.is_empty(),
    };
    if let Some(path) = &c.json {
        let text = serde_json::to_string_pretty(&doc).context("serializing the crosscheck")? + "\n";
        if path.as_os_str() == "-" {
            crate::stdout::write_bytes(text.as_bytes());
        } else {
            std::fs::write(path, text).map_err(|e| {
                CliError::Failed(anyhow::anyhow!("writing {}: {e}", path.display()))
            })?;
        }
    }
    if !a.no_store {
        let cmp = comparison(w, &target, started, cells, n as u32);
        let (mut store, path) = crate::store_io::open(a.db.as_deref())?;
        let run = store
            .save(&cmp)
            .map_err(|e| CliError::Failed(anyhow::anyhow!("recording the crosscheck: {e}")))?;
        say!("recorded as run {run} in {}", path.display());
    }
    if misses.is_empty() {
        say!("verdict: sanbench and fio agree within {} %", a.tolerance);
        if !unshown.is_empty() {
            say!(
                "  (by the medians; the intervals of the ratios do not show it: {})",
                unshown.join("; ")
            );
        }
    }
    Ok(Crosschecked { doc, misses })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
    }
}
