//! A crosscheck ratio's interval: `compare`'s model for two targets on one workload, each of
//! the three figures at a third of the family's error, and what it shows against the
//! tolerance (docs/FIO.md, docs/MEASURE.md "Crosscheck intervals").

use sanbench_doc::crosscheck::RatioInterval;
use sanbench_stats::design::plan::{look_of, look_share, looks};

use super::Figures;

/// The error the three ratios (IOPS, mean and p99 latency) share: compare's family-wise 5 %,
/// a third each (Bonferroni).
pub(super) const ALPHA_EACH: f64 = sanbench_stats::design::plan::ALPHA / 3.0;

/// When the ratios are judged, and at what error: once, after a fixed number of repetitions,
/// at [`ALPHA_EACH`]; or, with `--repeat auto`, after every pair of repetitions (both orders
/// of the two tools, so the slot stays balanced in what is judged) until all three are
/// decided, look `k` of `K = ⌈max / 2⌉` spending `k / (K(K+1)/2)` of each ratio's error:
/// `compare`'s group-sequential plan (linear alpha spending, Lan and DeMets 1983; the union
/// bound over the looks holds the error whatever the stopping time).
#[derive(Clone, Copy, Debug)]
pub(super) struct Looks {
    looks: u32,
}

impl Looks {
    pub(super) fn new(repeat: crate::compare::config::RepeatArg, max: u32) -> Looks {
        Looks {
            looks: looks(repeat.plan(max), 2),
        }
    }

    /// Whether the data are looked at after `reps` repetitions.
    pub(super) fn looks_after(&self, reps: usize) -> bool {
        self.looks > 1 && reps >= 2 && reps.is_multiple_of(2)
    }

    /// Each ratio's error at the look after `reps` repetitions.
    pub(super) fn alpha(&self, reps: usize) -> f64 {
        let k = look_of(reps as u32, 2, self.looks);
        ALPHA_EACH * look_share(k, self.looks)
    }
}

/// A ratio's simultaneous interval and what it shows against the tolerance.
pub(super) struct Interval {
    pub(super) ratio: f64,
    pub(super) low: f64,
    pub(super) high: f64,
    /// "within" (the whole interval inside ± the tolerance, on the log scale: TOST),
    /// "outside" (wholly beyond it), "inconclusive".
    pub(super) verdict: &'static str,
    pub(super) more: Option<u32>,
    /// The error it was judged at.
    pub(super) alpha: f64,
}

impl Interval {
    /// "[0.62-0.89] outside", "[0.80-1.13] inconclusive (about 6 more repetitions)".
    pub(super) fn text(&self) -> String {
        let more = self
            .more
            .map_or(String::new(), |k| format!(" (about {k} more repetitions)"));
        format!("[{:.2}-{:.2}] {}{more}", self.low, self.high, self.verdict)
    }

    pub(super) fn typed(&self) -> RatioInterval {
        RatioInterval {
            ratio: self.ratio,
            ci_low: self.low,
            ci_high: self.high,
            verdict: self.verdict.into(),
            more_repetitions: self.more,
            alpha: self.alpha,
        }
    }
}

/// The ratio sanbench / fio of one figure with the interval `compare` gives a pair of targets
/// on one workload (docs/MEASURE.md: the cross-over model, here two targets and the rounds
/// as blocks, so it is the paired t interval on the log ratios; the alternating order
/// balances the slot), at `alpha` ([`ALPHA_EACH`], or its share at a look: [`Looks`]).
/// `None` below two repetitions (no noise estimate).
pub(super) fn interval(
    sb: &[Figures],
    fio: &[Figures],
    g: fn(&Figures) -> f64,
    tol: f64,
    alpha: f64,
) -> Option<Interval> {
    judged(sb, fio, g, tol, alpha, true)
}

/// Whether all three ratios are decided (within or outside) at `alpha`.
pub(super) fn all_decided(sb: &[Figures], fio: &[Figures], tol: f64, alpha: f64) -> bool {
    FIGURES.iter().all(|(_, g)| {
        judged(sb, fio, *g, tol, alpha, false).is_some_and(|i| i.verdict != "inconclusive")
    })
}

/// One figure of a repetition.
pub(super) type Getter = fn(&Figures) -> f64;

/// The three figures the crosscheck compares, as (name, getter).
pub(super) const FIGURES: [(&str, Getter); 3] = [
    ("IOPS", |f| f.iops),
    ("mean µs", |f| f.mean_us),
    ("p99 µs", |f| f.p99_us),
];

/// [`interval`], with or without the projection of the repetitions that would decide.
fn judged(
    sb: &[Figures],
    fio: &[Figures],
    g: fn(&Figures) -> f64,
    tol: f64,
    alpha: f64,
    project: bool,
) -> Option<Interval> {
    use sanbench_stats::design::analysis::{judge_workload, Margins, Table, Verdict};
    let n = sb.len().min(fio.len());
    if n < 2 {
        return None;
    }
    let mut t = Table::new(1, 2, n);
    for r in 0..n {
        t.set(0, 0, r, g(&sb[r]));
        t.set(0, 1, r, g(&fio[r]));
    }
    let mg = Margins {
        min_effect: tol,
        alpha,
        project,
    };
    let j = judge_workload(&t, 0, &[0, 1], mg).first()?.judged;
    if !j.half_width.is_finite() {
        return None;
    }
    Some(Interval {
        ratio: j.ratio(),
        low: j.low(),
        high: j.high(),
        verdict: match j.verdict {
            Verdict::Equivalent => "within",
            Verdict::Higher | Verdict::Lower => "outside",
            Verdict::Inconclusive => "inconclusive",
        },
        more: j.more_rounds,
        alpha,
    })
}

/// The interval column's heading.
pub(super) fn interval_heading(repeat: usize, alpha: f64) -> String {
    if repeat < 2 {
        "(one repetition: no interval)".into()
    } else {
        // The verdicts' interval (partitioning principle, stats' `interval::critical`): each
        // verdict is wrong at most at `alpha`, the interval covers at `1 − 2·alpha` or more.
        format!(
            "interval (at least {:.1} % each)",
            100.0 * (1.0 - 2.0 * alpha)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figs(iops: &[f64]) -> Vec<Figures> {
        iops.iter()
            .map(|&iops| Figures {
                iops,
                mean_us: 1e6 / iops,
                p99_us: 2e6 / iops,
                in_flight: None,
                p99_from: None,
                p99_method: None,
            })
            .collect()
    }

    #[test]
    fn intervals_say_within_outside_or_how_many_more() {
        let iops = |f: &Figures| f.iops;
        // One repetition: no noise estimate, no interval.
        assert!(interval(&figs(&[100.0]), &figs(&[100.0]), iops, 0.15, ALPHA_EACH).is_none());
        // Drift shared by both tools cancels: a steady 2 % apart is within 15 %.
        let sb = figs(&[100.0, 80.0, 120.0, 90.0, 110.0]);
        let fio = figs(&[98.0, 78.5, 117.0, 88.0, 108.0]);
        let i = interval(&sb, &fio, iops, 0.15, ALPHA_EACH).unwrap();
        assert_eq!(i.verdict, "within", "{}", i.text());
        assert!(i.low < 1.02 && i.high > 1.02, "{}", i.text());
        // A steady 0.7x is outside.
        let slow = figs(&[70.0, 56.5, 83.0, 63.0, 77.0]);
        let o = interval(&slow, &fio, iops, 0.15, ALPHA_EACH).unwrap();
        assert_eq!(o.verdict, "outside", "{}", o.text());
        // Medians 5 % apart in noise of 20 %: neither, and how many more would decide.
        let noisy = figs(&[130.0, 70.0, 125.0, 95.0, 80.0]);
        let n = interval(&noisy, &fio, iops, 0.15, ALPHA_EACH).unwrap();
        assert_eq!(n.verdict, "inconclusive", "{}", n.text());
        assert!(n.text().contains("more repetitions"), "{}", n.text());
        // As the document has it: the same interval, field for field.
        let j = serde_json::to_value(n.typed()).unwrap();
        assert_eq!(j["verdict"], "inconclusive");
        assert!(j["ci_low"].as_f64().unwrap() < 1.0 && j["ci_high"].as_f64().unwrap() > 1.0);
        assert_eq!(j["more_repetitions"].as_u64(), n.more.map(u64::from));
    }

    /// Seeded simulation of `trials` crosschecks of at most `max` repetitions with a true
    /// ratio `true_ratio`: a round effect shared by both tools (the machine's drift, sd 0.2 on
    /// the log scale) and noise of their own (sd 0.1 each), tolerance 15 %. After repetition
    /// `n` the ratio is judged at `alpha_at(n)` when that is `Some`, and the crosscheck stops
    /// once decided. Returns the (within, outside, inconclusive) rates and the mean
    /// repetitions run.
    fn simulate(
        rng: &mut sanbench_stats::design::Rng,
        trials: usize,
        true_ratio: f64,
        max: usize,
        alpha_at: impl Fn(usize) -> Option<f64>,
    ) -> ([f64; 3], f64) {
        let (mut counts, mut reps) = ([0usize; 3], 0usize);
        for _ in 0..trials {
            let (mut s, mut f) = (Vec::new(), Vec::new());
            let mut verdict = "inconclusive";
            for n in 1..=max {
                let drift = 0.2 * rng.normal();
                s.push(1000.0 * true_ratio * (drift + 0.1 * rng.normal()).exp());
                f.push(1000.0 * (drift + 0.1 * rng.normal()).exp());
                if let Some(alpha) = alpha_at(n) {
                    verdict = judged(&figs(&s), &figs(&f), |x| x.iops, 0.15, alpha, false)
                        .unwrap()
                        .verdict;
                }
                if verdict != "inconclusive" || n == max {
                    reps += n;
                    break;
                }
            }
            counts[["within", "outside", "inconclusive"]
                .iter()
                .position(|w| *w == verdict)
                .unwrap()] += 1;
        }
        (
            counts.map(|c| c as f64 / trials as f64),
            reps as f64 / trials as f64,
        )
    }

    /// The interval's error rates with 10 fixed repetitions (docs/MEASURE.md, "Crosscheck
    /// intervals"): a true ratio on the tolerance's edge must be called "within" at most at the
    /// error it is given; a true ratio of 1 must never be called "outside".
    #[test]
    fn simulated_error_rates() {
        let mut rng = sanbench_stats::design::Rng::new(0x2545_f491_4f6c_dd1d);
        let trials = 2000;
        let mut rate =
            |r: f64| simulate(&mut rng, trials, r, 10, |n| (n == 10).then_some(ALPHA_EACH)).0;
        let equal = rate(1.0);
        let edge = rate(1.15);
        let far = rate(1.6);
        eprintln!(
            "ratio 1.00: {equal:?}; 1.15: {edge:?}; 1.60: {far:?} (within, outside, inconclusive)"
        );
        // Binomial slack: 3 standard errors over the error given.
        let slack = 3.0 * (ALPHA_EACH * (1.0 - ALPHA_EACH) / trials as f64).sqrt();
        assert!(
            edge[0] <= ALPHA_EACH + slack,
            "on the edge called within: {edge:?}"
        );
        assert_eq!(equal[1], 0.0, "equal called outside: {equal:?}");
        // And the test has power where it should.
        assert!(equal[0] > 0.2, "equal shown within too rarely: {equal:?}");
        assert!(far[1] > 0.5, "1.6x shown outside too rarely: {far:?}");
    }

    /// `--repeat auto`, by seeded simulation: the same runs, looked at after every pair of
    /// repetitions up to 30 and stopped once decided. With the looks' spending, a true ratio
    /// on the tolerance's edge is called "within" at most at the error given; looking as often
    /// at the full error each time (no spending) calls it "within" more often than that, which
    /// is why the spending is there. Equal tools are never called outside.
    #[test]
    fn simulated_error_rates_when_stopping_on_what_is_seen() {
        let mut rng = sanbench_stats::design::Rng::new(0x5eed_c0de_2611_2700);
        let trials = 2000;
        let looks = Looks::new(crate::compare::config::RepeatArg::Auto, 30);
        let mut rate = |r: f64, spend: bool| {
            simulate(&mut rng, trials, r, 30, |n| {
                looks
                    .looks_after(n)
                    .then(|| if spend { looks.alpha(n) } else { ALPHA_EACH })
            })
        };
        let equal = rate(1.0, true);
        let edge = rate(1.15, true);
        let far = rate(1.6, true);
        let edge_unspent = rate(1.15, false);
        eprintln!(
            "auto, at most 30: ratio 1.00: {equal:?}; 1.15: {edge:?}; 1.60: {far:?}; \
             1.15 without spending: {edge_unspent:?} ((within, outside, inconclusive), mean reps)"
        );
        let slack = 3.0 * (ALPHA_EACH * (1.0 - ALPHA_EACH) / trials as f64).sqrt();
        assert!(
            edge.0[0] <= ALPHA_EACH + slack,
            "on the edge called within: {edge:?}"
        );
        assert!(
            edge_unspent.0[0] > ALPHA_EACH + slack,
            "without spending the edge stays under the error given: {edge_unspent:?}"
        );
        assert_eq!(equal.0[1], 0.0, "equal called outside: {equal:?}");
        // More repetitions buy power: equal tools are shown within far more often than ten
        // fixed repetitions do (0.30), and a 1.6x is decided outside within ten.
        assert!(equal.0[0] > 0.8, "equal shown within too rarely: {equal:?}");
        assert!(far.0[1] > 0.95 && far.1 < 10.0, "1.6x: {far:?}");
    }
}
