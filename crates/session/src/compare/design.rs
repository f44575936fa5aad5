//! The comparison's design as compare drives it: the plan built from the arguments (the
//! order, stopping and verdicts themselves live in `sanbench_stats::design`), and the lines
//! that say what it will do and where it is.

use std::time::Duration;

use sanbench_stats::design::plan::Plan;
use sanbench_stats::design::williams::Slot;

use super::config::{CompareConfig, RepeatArg};
use super::prepared::Prepared;
use crate::error::{usage, CliError};

/// The plan of a comparison. Rank 0 of an MPI job (and every non-MPI run) judges as it goes;
/// the other ranks run the same order for as many rounds as rank 0 may ask for and follow its
/// decisions.
pub(super) fn plan(a: &CompareConfig, p: &Prepared, rank0: bool) -> Result<Plan, CliError> {
    use sanbench_stats::design::plan::{Config, Repeat};
    let flavours: Vec<sanbench_report::analysis::Flavour> = p
        .suite
        .workloads
        .iter()
        .map(|w| sanbench_report::analysis::flavour(&super::prepared::workload_entry(w)))
        .collect();
    let groups = flavours
        .iter()
        .map(|f| usize::from(*f == sanbench_report::analysis::Flavour::Io))
        .collect();
    let nominal_round = p
        .suite
        .workloads
        .iter()
        .map(|w| w.workload.ramp + w.workload.time)
        .sum::<Duration>()
        * p.targets.len() as u32;
    let mut repeat = a.repeat.plan(a.max_repeat);
    let mut budget = a.budget.map(|d| d.0);
    if !rank0 {
        if let Repeat::Auto { max } = repeat {
            repeat = Repeat::Fixed(max);
        }
        budget = None;
    }
    Plan::new(Config {
        workloads: p.suite.workloads.len(),
        targets: p.targets.len(),
        compared: (0..p.targets.len()).filter(|&i| !p.references[i]).collect(),
        groups,
        seed: a.seed,
        repeat,
        budget,
        nominal_round,
        min_effect: a.min_effect.0 / 100.0,
    })
    .map_err(|e| usage(e.to_string()))
}

/// What the comparison will do, before it starts.
pub(super) fn line(plan: &Plan, a: &CompareConfig) -> String {
    let d = plan.design();
    format!(
        "design: Williams order (seed {}; every target in every slot each {} rounds{}); {}",
        d.seed,
        d.square_len,
        if d.balance_len != d.square_len {
            format!(", after every other target each {}", d.balance_len)
        } else {
            String::new()
        },
        match a.repeat {
            RepeatArg::Fixed(n) => format!("{n} rounds"),
            RepeatArg::Auto => format!(
                "rounds until every throughput question is decided (at most {}{})",
                a.max_repeat,
                a.budget
                    .map(|b| format!(", budget {}", fmt_dur(b.0)))
                    .unwrap_or_default()
            ),
        }
    )
}

use crate::eta::dur as fmt_dur;

/// The progress line of one cell: where it is in its round and, for a fixed number of rounds,
/// the time the cells still to run will take.
pub(super) fn cell_line(
    a: &CompareConfig,
    p: &Prepared,
    s: &Slot,
    per_cell: &[Duration],
    elapsed: Duration,
) -> String {
    let t = p.targets.len();
    let per_round = per_cell.len() * t;
    // Rounds run workload by workload: the cell's place follows from the slot.
    let in_round = s.workload * t + s.slot + 1;
    let round: Duration = per_cell.iter().sum::<Duration>() * t as u32;
    let rest_of_this: Duration = per_cell[s.workload] * (t - s.slot - 1) as u32
        + per_cell[s.workload + 1..].iter().sum::<Duration>() * t as u32;
    let (of, left) = match a.repeat {
        RepeatArg::Fixed(n) => {
            let left = round * n.saturating_sub(s.round + 1) + rest_of_this;
            (format!("/{n}"), format!(" ({} left)", fmt_dur(left)))
        }
        RepeatArg::Auto => {
            let nominal = round * a.max_repeat.saturating_sub(s.round + 1) + rest_of_this;
            let left = crate::eta::left_at_most(nominal, a.budget.map(|b| b.0), elapsed);
            (
                format!(" of at most {}", a.max_repeat),
                format!(" (at most {} left)", fmt_dur(left)),
            )
        }
    };
    format!(
        "[round {}{of}, {in_round}/{per_round}] {} on {}{left}",
        s.round + 1,
        p.suite.workloads[s.workload].id,
        p.targets[s.target].0
    )
}

/// The longest the comparison may take and how to bound it, said before the first cell.
/// `elapsed`: the time since the comparison started (preconditioning counts against the
/// budget).
pub(super) fn time_line(
    a: &CompareConfig,
    per_cell: &[Duration],
    targets: usize,
    elapsed: Duration,
) -> String {
    let round: Duration = per_cell.iter().sum::<Duration>() * targets as u32;
    let (rounds, fixed) = match a.repeat {
        RepeatArg::Fixed(n) => (n, true),
        RepeatArg::Auto => (a.max_repeat, false),
    };
    let left = a.budget.map(|b| b.0.saturating_sub(elapsed));
    crate::eta::longest_line("round", round, rounds, fixed, left)
}
