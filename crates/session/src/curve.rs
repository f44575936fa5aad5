//! `compare --curve 10,50,80,90,95,100`: response time under load, SPC-1's way. After the
//! closed-loop cells, each (workload, target) runs open loop at each level's share of its own
//! closed-loop maximum (the median IOPS of its closed-loop repetitions), lowest level first,
//! with the workload's ramp, window and repetitions, interleaved as the closed-loop cells are;
//! a (workload, target, repetition) stops climbing once its mean response time passes
//! `--curve-stop`. Every point is a cell with `load_pct`, carrying asked and achieved rate
//! and the response, service and issue-lag histograms.

use sanbench_engine::result::TargetResult;

use crate::compare::book::{Book, Place};
use crate::compare::cell::{run_cell, CellCtx};
use crate::compare::prepared::Prepared;
use crate::error::CliError;

pub struct CurvePlan {
    /// Ascending percentages of the closed-loop maximum.
    pub levels: Vec<f64>,
    /// Mean response time (µs) past which a curve stops.
    pub stop_us: f64,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub(crate) fn run(
    cx: &CellCtx<'_>,
    p: &Prepared,
    plan: &CurvePlan,
    book: &mut Book<'_>,
) -> Result<(), CliError> {
    let stop = crate::signals::stop_flag();
    let (nw, nt) = (p.suite.workloads.len(), p.targets.len());
    // Each target's closed-loop maximum per workload.
    let max: Vec<Vec<Option<f64>>> = p
        .suite
        .workloads
        .iter()
        .map(|w| {
            p.targets
                .iter()
                .map(|(name, _)| {
                    median(
                        book.cmp
                            .cells_of(&w.id, name)
                            .map(|c| c.result.iops)
                            .collect(),
                    )
                })
                .collect()
        })
        .collect();
    let repeats = curve_repeats(cx.a);
    let total = plan.levels.len() * nw * nt * repeats as usize;
    let mut n = 0usize;
    for rep in 0..repeats {
        for (wi, w) in p.suite.workloads.iter().enumerate() {
            for k in 0..nt {
                // The first target rotates, as in the closed-loop order.
                let ti = (k + wi + rep as usize) % nt;
                let (name, uri) = &p.targets[ti];
                // A trace replays at the trace's own times: no load levels.
                let Some(top) = max[wi][ti].filter(|_| w.trace.is_none()) else {
                    continue;
                };
                for &pct in &plan.levels {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return Ok(());
                    }
                    n += 1;
                    let rate = top * pct / 100.0;
                    if rate < 1.0 {
                        continue;
                    }
                    if !cx.a.quiet {
                        eprintln!(
                            "[curve {n}/{total}] {} on {name} at {pct} % of {} IOPS{}",
                            w.id,
                            sanbench_units::fmt::si(top),
                            if repeats > 1 {
                                format!(", repetition {}/{}", rep + 1, repeats)
                            } else {
                                String::new()
                            }
                        );
                    }
                    let mut sw = w.clone();
                    sw.workload.rate = Some(rate);
                    // Curves never run as an MPI job (compare refuses), so a cell always
                    // has its result here.
                    let place = Place::curve(rep, pct);
                    let every = (cx.a.live.save_every, sw.workload.time);
                    let save = book.cell_save((ti, &w.id), &place, false, every);
                    let Some(cell) =
                        run_cell(cx, &sw, ti, uri, name, &mut book.baselines[ti], save)?
                    else {
                        continue;
                    };
                    let r: &TargetResult = book.record(ti, &w.id, place, cell)?;
                    if r.latency_us.mean > plan.stop_us {
                        if !cx.a.quiet {
                            eprintln!(
                                "    mean response time past --curve-stop: {name} stops at {pct} %"
                            );
                        }
                        n += plan.levels.iter().filter(|&&l| l > pct).count();
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Repetitions of each curve point: `--repeat N`, or under auto the three a curve finding
/// needs (the curve's points are not part of the adaptive design).
fn curve_repeats(a: &crate::compare::config::CompareConfig) -> u32 {
    match a.repeat {
        crate::compare::config::RepeatArg::Fixed(n) => n,
        crate::compare::config::RepeatArg::Auto => sanbench_report::curve::MIN_REPEATS as u32,
    }
}
