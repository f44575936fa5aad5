//! How long a comparison or a crosscheck may take, said before it starts (issue 41: a
//! `compare --suite lab` without --budget ran 16 minutes with nothing said), and the time
//! left on its progress lines.

use std::time::Duration;

/// "45s", "16m40s", "2h05m" (units::fmt::span).
pub use sanbench_units::fmt::span as dur;

/// The line printed before the first cell. `round` is one round's measured time (ramps and
/// windows, no setup), `rounds` the most rounds that can run, `fixed` whether exactly that
/// many will, `budget` the --budget if any; `unit` names a round ("round", "pair").
pub fn longest_line(
    unit: &str,
    round: Duration,
    rounds: u32,
    fixed: bool,
    budget: Option<Duration>,
) -> String {
    let all = round * rounds;
    let each = format!(
        "{} {unit}{} of {} each",
        rounds,
        if rounds == 1 { "" } else { "s" },
        dur(round)
    );
    match (fixed, budget) {
        (true, _) => format!(
            "time: about {} ({each}, plus setup); shorter: a smaller --repeat N",
            dur(all)
        ),
        (false, Some(b)) if b < all => format!(
            "time: at most {} (--budget; up to {each} would take {}); --repeat N runs exactly N",
            dur(b),
            dur(all)
        ),
        (false, _) => format!(
            "time: at most {} (up to {each}, plus setup; most comparisons stop sooner); \
             bound it with --budget DURATION or --repeat N",
            dur(all)
        ),
    }
}

/// The most time left: the rounds not yet run at the nominal pace, within the budget.
pub fn left_at_most(
    nominal_left: Duration,
    budget: Option<Duration>,
    elapsed: Duration,
) -> Duration {
    match budget {
        Some(b) => nominal_left.min(b.saturating_sub(elapsed)),
        None => nominal_left,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_the_longest_time_and_how_to_bound_it() {
        let r = Duration::from_secs(33);
        let auto = longest_line("round", r, 30, false, None);
        assert!(auto.contains("at most 16m30s"), "{auto}");
        assert!(
            auto.contains("--budget") && auto.contains("--repeat N"),
            "{auto}"
        );
        let budget = longest_line("round", r, 30, false, Some(Duration::from_secs(240)));
        assert!(budget.contains("at most 4m00s (--budget"), "{budget}");
        let fixed = longest_line("round", r, 3, true, None);
        assert!(fixed.contains("about 1m39s"), "{fixed}");
        // A budget longer than every round: the rounds bound it.
        let long = longest_line("round", r, 2, false, Some(Duration::from_secs(3600)));
        assert!(long.contains("at most 1m06s"), "{long}");
    }

    #[test]
    fn time_left_stays_within_the_budget() {
        let s = Duration::from_secs;
        assert_eq!(left_at_most(s(600), Some(s(240)), s(100)), s(140));
        assert_eq!(left_at_most(s(60), Some(s(240)), s(100)), s(60));
        assert_eq!(left_at_most(s(60), Some(s(240)), s(300)), s(0));
        assert_eq!(left_at_most(s(60), None, s(300)), s(60));
    }
}
