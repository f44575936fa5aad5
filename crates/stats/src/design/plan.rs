//! The comparison's plan: which cell runs next, and when to stop. Sans-I/O: `compare` asks
//! [`Plan::next`] for a cell (passing the time since the comparison started), runs it, and hands
//! its primary figure back through [`Plan::record`]; the plan never reads a clock.
//!
//! Rounds follow the Williams [`Order`]. With a fixed number of rounds the plan runs them all.
//! With `auto` it looks at the primary questions after every complete Latin square (every `t`
//! rounds, so slot effects stay balanced in what it judges) and stops as soon as every one is
//! decided (better or equivalent), or at the round cap, or when the next round would not fit
//! the time budget.
//!
//! Looking repeatedly and stopping on what one sees inflates a fixed-sample test's error
//! (Armitage, McPherson and Rowe 1969); the plan is a group-sequential design instead: with
//! at most `K = ⌈max / t⌉` looks, look `k` spends the share `k / (K(K+1)/2)` of each question's
//! error (increments rising linearly, so the cumulative spending by look `k` is
//! `α·k(k+1)/(K(K+1))` ≈ `α·(k/K)²`: a quadratic spending function in the sense of Lan and
//! DeMets, "Discrete sequential boundaries for clinical trials", Biometrika 70 (1983) 659-663,
//! not their linear one; early looks, which can rarely decide anything, cost little), and the
//! union bound over the
//! looks keeps each question's error, and with Bonferroni over the questions the family's,
//! whatever the plan or a budget or Ctrl-C makes of the stopping time. A comparison stopped
//! between looks is judged as the next look (one more look, never more than `K`), its partial
//! round's cells with it. The intervals hold at the planned looks only (not anytime-valid).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::analysis::{judge_summary, judge_workloads, Answer, Judged, Margins, Table, Verdict};
use super::williams::{Order, Slot};

/// Family-wise error of everything a comparison prints.
pub const ALPHA: f64 = 0.05;
/// The primary family's share: throughput per (workload, pair) and the findings' averages.
pub const ALPHA_PRIMARY: f64 = 0.04;
/// The secondary family's share: tail latency, CPU and power efficiency.
pub const ALPHA_SECONDARY: f64 = ALPHA - ALPHA_PRIMARY;

/// How many rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    Fixed(u32),
    /// Until every primary question is decided, at most `max` rounds.
    Auto {
        max: u32,
    },
}

/// What the plan is given once.
#[derive(Clone, Debug)]
pub struct Config {
    pub workloads: usize,
    pub targets: usize,
    /// The targets the questions compare (references left out), in comparison order.
    pub compared: Vec<usize>,
    /// Per workload: the group whose finding averages it (bandwidth, IOPS, ...).
    pub groups: Vec<usize>,
    pub seed: u64,
    pub repeat: Repeat,
    /// Time the whole comparison may take (checked before each round).
    pub budget: Option<Duration>,
    /// What one round is expected to take before any has run (ramp + time of every cell):
    /// a budget shorter than this is refused.
    pub nominal_round: Duration,
    pub min_effect: f64,
}

/// Why the plan stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `--repeat N` rounds ran.
    Fixed,
    /// Every primary question was decided.
    Decided,
    /// The round cap (`--max-repeat`).
    MaxRounds,
    /// The next round would not have fit the budget.
    Budget,
}

impl Stop {
    pub fn key(self) -> &'static str {
        match self {
            Stop::Fixed => "fixed",
            Stop::Decided => "decided",
            Stop::MaxRounds => "max_rounds",
            Stop::Budget => "budget",
        }
    }
}

/// Why a configuration cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("--repeat must be at least 1")]
    NoRounds,
    #[error("--max-repeat must be at least 2 (one round has no noise estimate)")]
    MaxTooSmall,
    #[error("--min-effect must be above 0 % and below 100 %")]
    MinEffect,
    #[error("--budget {budget:?} is shorter than one round ({round:?}: every workload on every target once)")]
    BudgetTooShort { budget: Duration, round: Duration },
}

/// The number of primary questions and averages sharing [`ALPHA_PRIMARY`]: one per workload
/// and pair, one per group and pair.
pub fn primary_family(workloads: usize, groups: usize, compared: usize) -> usize {
    let pairs = compared * compared.saturating_sub(1) / 2;
    (workloads + groups) * pairs
}

/// Each primary question's share of the error (Bonferroni over the family).
pub fn primary_alpha(workloads: usize, groups: usize, compared: usize) -> f64 {
    ALPHA_PRIMARY / primary_family(workloads, groups, compared).max(1) as f64
}

/// The number of looks: one for a fixed number of rounds; for `auto` one per Latin square up
/// to the cap, the last at the cap.
pub fn looks(repeat: Repeat, square_len: u32) -> u32 {
    match repeat {
        Repeat::Fixed(_) => 1,
        Repeat::Auto { max } => max.div_ceil(square_len.max(1)).max(1),
    }
}

/// Which look an analysis after `rounds` complete rounds is (1-based).
pub fn look_of(rounds: u32, square_len: u32, looks: u32) -> u32 {
    rounds.div_ceil(square_len.max(1)).clamp(1, looks.max(1))
}

/// The share of a question's error spent at look `k` of `looks`: increments rising linearly
/// (cumulative spending quadratic in the information fraction).
pub fn look_share(k: u32, looks: u32) -> f64 {
    let looks = looks.max(1);
    let k = k.clamp(1, looks);
    2.0 * f64::from(k) / (f64::from(looks) * f64::from(looks + 1))
}

/// The share of a question's error left at look `k` of `looks` when the earlier looks spent
/// theirs: what a look may spend when the comparison stops there whatever its figures say.
pub fn rest_share(k: u32, looks: u32) -> f64 {
    let looks = looks.max(1);
    let k = k.clamp(1, looks);
    (1.0 - (1..k).map(|i| look_share(i, looks)).sum::<f64>()).max(0.0)
}

/// The error one question of a family may spend at the analysis after `d.rounds` rounds.
///
/// A comparison the budget stopped (`d.stop == "budget"`, recorded with `looks`, issue 40
/// point 7) spends at that look all its error the earlier looks left: the budget stops it
/// there whatever the figures, so the later looks can never be reached, and the union bound
/// over the looks still holds with the last one's share raised to the rest (Bonferroni over
/// the looks that can happen). This needs the stop not to depend on the figures: cells run for
/// a set time, so when the budget runs out depends on the clock, not on what the cells
/// measured. A Ctrl-C is not treated so: whoever presses it has seen the progress lines.
pub fn question_alpha(family_alpha: f64, family: usize, d: &Design) -> f64 {
    let looks = d.planned_looks();
    let k = look_of(d.rounds, d.square_len, looks);
    let share = if d.looks.is_some() && d.stop == Stop::Budget.key() {
        rest_share(k, looks)
    } else {
        look_share(k, looks)
    };
    family_alpha / family.max(1) as f64 * share
}

/// The round cap a budget sets: the rounds of `nominal_round` that fit it (never fewer than
/// one), or `None` without a budget or a nominal round.
pub fn budget_rounds(budget: Option<Duration>, nominal_round: Duration) -> Option<u32> {
    let b = budget?;
    if nominal_round.is_zero() {
        return None;
    }
    let n = (b.as_secs_f64() / nominal_round.as_secs_f64()).floor();
    Some(n.clamp(1.0, f64::from(u32::MAX)) as u32)
}

/// The design as the comparison document records it (`design` in results.json), and all the
/// report needs to judge the finished comparison exactly as the plan did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Design {
    /// "williams".
    pub order: String,
    pub seed: u64,
    /// Rounds per Latin square (slot balance): the number of targets.
    pub square_len: u32,
    /// Rounds after which carry-over is balanced too (t, or 2t for odd t).
    pub balance_len: u32,
    /// `--repeat N`; `None` for auto.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<u32>,
    /// `--max-repeat` under auto.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_repeat: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    pub min_effect: f64,
    /// Complete rounds run.
    pub rounds: u32,
    /// Why it stopped: fixed, decided, max_rounds, budget, interrupted.
    pub stop: String,
    pub alpha: f64,
    pub alpha_primary: f64,
    /// Per target (the comparison's order): the estimated first-order carry-over on the
    /// primary figure, as a fraction: how much higher the cell right after that target ran
    /// than after the average target (geometric mean over the workloads where it was
    /// estimable; `None` where it was not). The model removes it from every contrast; a large
    /// one says the targets disturb each other (the report warns). Empty in documents written
    /// before issue 40.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carry_over: Vec<Option<f64>>,
    /// Under auto: the looks each question's error is spread over, `⌈cap / square_len⌉` with
    /// the cap the smaller of `--max-repeat` and the rounds the budget fits at the nominal
    /// round's length (issue 40, point 7: a budget that fits 12 rounds of the demo's 5-round
    /// squares gives 3 looks, not `--max-repeat 30`'s 6). Its presence also says a budget
    /// stop spent the rest of the error at its look ([`question_alpha`]). Absent in documents
    /// written before, whose looks came from `--max-repeat` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub looks: Option<u32>,
}

impl Design {
    pub fn repeat(&self) -> Repeat {
        match self.fixed {
            Some(n) => Repeat::Fixed(n),
            None => Repeat::Auto {
                max: self.max_repeat.unwrap_or(super::DEFAULT_MAX_REPEAT),
            },
        }
    }

    /// The looks each question's error is spread over (recorded, or from `--max-repeat`).
    pub fn planned_looks(&self) -> u32 {
        match (self.fixed, self.looks) {
            (Some(_), _) => 1,
            (None, Some(k)) => k.max(1),
            (None, None) => looks(self.repeat(), self.square_len),
        }
    }
}

pub struct Plan {
    cfg: Config,
    order: Order,
    table: Table,
    round: u32,
    /// Cells of the current round still to run.
    pending: Vec<Slot>,
    round_started: Option<Duration>,
    round_times: Vec<Duration>,
    stop: Option<Stop>,
    /// The target of the last cell handed out (the next cell's predecessor).
    last_target: Option<usize>,
    /// The primary family's error: [`ALPHA_PRIMARY`], or what a simulation sets to make a rate
    /// measurable.
    alpha_primary: f64,
}

impl Plan {
    pub fn new(cfg: Config) -> Result<Plan, PlanError> {
        match cfg.repeat {
            Repeat::Fixed(0) => return Err(PlanError::NoRounds),
            Repeat::Auto { max } if max < 2 => return Err(PlanError::MaxTooSmall),
            _ => {}
        }
        if !(cfg.min_effect > 0.0 && cfg.min_effect < 1.0) {
            return Err(PlanError::MinEffect);
        }
        if let Some(b) = cfg.budget {
            if b < cfg.nominal_round {
                return Err(PlanError::BudgetTooShort {
                    budget: b,
                    round: cfg.nominal_round,
                });
            }
        }
        Ok(Plan {
            order: Order::new(cfg.workloads, cfg.targets, cfg.seed),
            table: Table::new(cfg.workloads, cfg.targets, 1),
            round: 0,
            pending: Vec::new(),
            round_started: None,
            round_times: Vec::new(),
            stop: None,
            last_target: None,
            alpha_primary: ALPHA_PRIMARY,
            cfg,
        })
    }

    /// Sets the primary family's error (simulations measure error rates at a large one, where
    /// a rate is measurable with a few hundred comparisons). Recorded in the design.
    pub fn set_alpha_primary(&mut self, alpha: f64) {
        self.alpha_primary = alpha;
    }

    pub fn order(&self) -> &Order {
        &self.order
    }

    /// Rounds started so far.
    pub fn rounds_started(&self) -> u32 {
        self.round
    }

    /// The next cell, or `None` when the plan has stopped ([`Plan::stopped`] says why).
    /// `now` is the time since the comparison started.
    pub fn next(&mut self, now: Duration) -> Option<Slot> {
        if self.stop.is_some() {
            return None;
        }
        if self.pending.is_empty() {
            if let Some(s) = self.round_started.take() {
                self.round_times.push(now.saturating_sub(s));
            }
            if let Some(stop) = self.should_stop(now) {
                self.stop = Some(stop);
                return None;
            }
            self.pending = self.order.round(self.round);
            self.pending.reverse();
            self.round += 1;
            self.round_started = Some(now);
        }
        let s = self.pending.pop()?;
        self.table
            .set_slot(s.workload, s.target, s.round as usize, s.slot);
        if let Some(p) = self.last_target {
            self.table
                .set_prev(s.workload, s.target, s.round as usize, p);
        }
        self.last_target = Some(s.target);
        Some(s)
    }

    /// The primary figure of a cell that ran (IOPS or MB/s; `None` when it failed).
    pub fn record(&mut self, s: &Slot, figure: Option<f64>) {
        if let Some(f) = figure {
            self.table.set(s.workload, s.target, s.round as usize, f);
        }
    }

    /// [`Plan::record`] for a figure counted from `ios` I/Os (its resolution bounds the noise
    /// estimate, as the report's analysis does).
    pub fn record_counted(&mut self, s: &Slot, figure: Option<f64>, ios: u64) {
        if let Some(f) = figure {
            self.table
                .set_counted(s.workload, s.target, s.round as usize, f, ios);
        }
    }

    pub fn stopped(&self) -> Option<Stop> {
        self.stop
    }

    fn should_stop(&self, now: Duration) -> Option<Stop> {
        let done = self.round;
        match self.cfg.repeat {
            Repeat::Fixed(n) => return (done >= n).then_some(Stop::Fixed),
            Repeat::Auto { max } => {
                if done > 0 && done.is_multiple_of(self.order.square_len()) && self.all_decided() {
                    return Some(Stop::Decided);
                }
                if done >= max {
                    return Some(Stop::MaxRounds);
                }
                // The looks were counted for the rounds the budget fits at the nominal round
                // (`Design::looks`): never more, even if rounds run faster than that.
                if self.budget_cap().is_some_and(|cap| done >= cap) {
                    return Some(Stop::Budget);
                }
            }
        }
        if let Some(b) = self.cfg.budget {
            let next = self
                .round_times
                .iter()
                .max()
                .copied()
                .unwrap_or(self.cfg.nominal_round);
            if done > 0 && now + next > b {
                return Some(Stop::Budget);
            }
        }
        None
    }

    fn margins(&self) -> Margins {
        let family = primary_family(
            self.cfg.workloads,
            distinct(&self.cfg.groups),
            self.cfg.compared.len(),
        );
        // Cells of a round not yet complete (an interrupted comparison) are judged as the next
        // look: with the completed rounds' share the look those rounds already had would spend
        // its error twice (issue 40).
        let mut d = self.design();
        d.rounds = self.round;
        Margins {
            min_effect: self.cfg.min_effect,
            alpha: question_alpha(self.alpha_primary, family, &d),
            project: false,
        }
    }

    /// The round cap the budget sets under auto (see [`budget_rounds`]).
    fn budget_cap(&self) -> Option<u32> {
        match self.cfg.repeat {
            Repeat::Auto { .. } => budget_rounds(self.cfg.budget, self.cfg.nominal_round),
            Repeat::Fixed(_) => None,
        }
    }

    /// The design so far, as recorded.
    pub fn design(&self) -> Design {
        let (fixed, max_repeat) = match self.cfg.repeat {
            Repeat::Fixed(n) => (Some(n), None),
            Repeat::Auto { max } => (None, Some(max)),
        };
        Design {
            order: "williams".into(),
            seed: self.cfg.seed,
            square_len: self.order.square_len(),
            balance_len: self.order.balance_len(),
            fixed,
            max_repeat,
            budget_s: self.cfg.budget.map(|b| b.as_secs_f64()),
            min_effect: self.cfg.min_effect,
            rounds: self.complete_rounds(),
            stop: self.stop.map_or("interrupted", Stop::key).into(),
            alpha: ALPHA,
            alpha_primary: self.alpha_primary,
            carry_over: super::analysis::carry_over_by_target(&self.table),
            looks: match self.cfg.repeat {
                Repeat::Auto { max } => {
                    let cap = self.budget_cap().map_or(max, |c| c.min(max));
                    Some(looks(Repeat::Auto { max: cap }, self.order.square_len()))
                }
                Repeat::Fixed(_) => None,
            },
        }
    }

    /// Rounds every cell of which has been handed out and (by the caller's loop) run.
    fn complete_rounds(&self) -> u32 {
        if self.pending.is_empty() {
            self.round
        } else {
            self.round - 1
        }
    }

    /// The primary questions' answers so far.
    pub fn answers(&self) -> Vec<Answer> {
        let mg = self.margins();
        let ws: Vec<usize> = (0..self.cfg.workloads).collect();
        judge_workloads(&self.table, &ws, &self.cfg.compared, mg)
    }

    /// The averages per group and pair so far.
    pub fn summaries(&self) -> Vec<(usize, usize, usize, Judged)> {
        let mg = self.margins();
        let mut out = Vec::new();
        let c = &self.cfg.compared;
        for g in 0..=self.cfg.groups.iter().copied().max().unwrap_or(0) {
            let ws: Vec<usize> = (0..self.cfg.workloads)
                .filter(|&w| self.cfg.groups.get(w) == Some(&g))
                .collect();
            for i in 0..c.len() {
                for j in i + 1..c.len() {
                    if let Some(s) = judge_summary(&self.table, &ws, c, c[i], c[j], mg) {
                        out.push((g, c[i], c[j], s));
                    }
                }
            }
        }
        out
    }

    /// Every question that can be asked is decided: a pair of which one target has no figure
    /// at all on a workload (it skips it, or every cell failed) asks nothing there, and must
    /// not keep the comparison going to the cap (issue 40).
    fn all_decided(&self) -> bool {
        let a = self.answers();
        let c = &self.cfg.compared;
        let has = |w: usize, t: usize| {
            (0..self.table.rounds()).any(|r| self.table.get(w, t, r).is_some())
        };
        let askable = (0..self.cfg.workloads)
            .map(|w| {
                let k = c.iter().filter(|&&t| has(w, t)).count();
                k * k.saturating_sub(1) / 2
            })
            .sum::<usize>();
        askable > 0
            && a.len() >= askable
            && a.iter().all(|x| x.judged.verdict != Verdict::Inconclusive)
    }
}

fn distinct(v: &[usize]) -> usize {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.dedup();
    s.len()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
