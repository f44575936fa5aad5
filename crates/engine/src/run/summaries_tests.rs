//! The summaries' bound: any number of intervals fits in the cap, counts stay exact, the step
//! is said, and percentiles are exact at a step chosen before the run.

use super::*;

const MS: u64 = 1_000_000;

fn counts(n: u64) -> Counts {
    Counts {
        read_ios: n,
        read_bytes: n * 4096,
        ..Counts::default()
    }
}

fn hist(vals: &[u64]) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    vals.iter().for_each(|&v| h.record(v));
    h
}

#[test]
fn the_step_keeps_a_planned_window_within_seven_eighths_of_the_cap() {
    // 24 h at 10 ms, 4096 summaries: 8.64 million intervals, 2411 per summary (24.11 s).
    let day = 86_400_000 * MS;
    let step = step_for(10 * MS, day, MAX_SUMMARIES);
    assert_eq!(step, 2411);
    assert!(day.div_ceil(step * 10 * MS) <= (MAX_SUMMARIES - MAX_SUMMARIES / 8) as u64);
    // Short windows keep every interval.
    assert_eq!(step_for(10 * MS, 3_000 * MS, MAX_SUMMARIES), 1);
    assert_eq!(step_for(10 * MS, 0, MAX_SUMMARIES), 1);
}

#[test]
fn a_planned_long_window_is_summarized_exactly_at_its_step() {
    // 1000 intervals planned, a cap of 16: 72 intervals per summary (ceil(1000 / 14)).
    let mut s = Series::new(10 * MS, 1000 * 10 * MS, 16);
    assert_eq!(s.step_ns(), 72 * 10 * MS);
    let mut all = LatencyHistogram::new();
    let mut firsts = LatencyHistogram::new();
    for k in 0..1000u64 {
        // A latency that grows with k: every summary's p99 differs.
        let h = hist(&[1_000 + k * 10, 2_000 + k * 10, 50_000 + k]);
        if k < 72 {
            firsts.merge(&h);
        }
        all.merge(&h);
        s.push(k, k * 10 * MS, 10 * MS, &counts(3), &h);
        assert!(s.len() <= 16);
    }
    let (out, step) = s.finish(1000 * 10 * MS - 3 * MS);
    assert_eq!(step, 72 * 10 * MS);
    assert_eq!(out.len(), 14);
    assert!(out.iter().all(|x| !x.merged));
    assert_eq!(out.iter().map(|x| x.read_ios).sum::<u64>(), 3000);
    // The first summary's figures are those of its 72 intervals merged, exactly.
    assert_eq!(out[0].t, 0.0);
    assert!((out[0].len - 0.72).abs() < 1e-12);
    assert_eq!(out[0].p99_us, firsts.quantile(0.99) as f64 / 1000.0);
    assert_eq!(out[0].max_us, firsts.max_ns() as f64 / 1000.0);
    // The last one ends with the window.
    let last = out.last().unwrap();
    assert!((last.t + last.len - 9.997).abs() < 1e-9, "{last:?}");
    let max = out.iter().map(|x| x.max_us).fold(0.0, f64::max);
    assert_eq!(max, all.max_ns() as f64 / 1000.0);
}

#[test]
fn an_unplanned_long_window_stays_within_the_cap_at_a_doubling_step() {
    // Nothing planned (step 1): the cap is reached again and again.
    let cap = 64;
    let mut s = Series::new(10 * MS, 0, cap);
    let h = hist(&[5_000]);
    let n = 100_000u64;
    let mut most = 0;
    for k in 0..n {
        // Every seventh interval saw no completion and is not emitted.
        if k % 7 == 3 {
            continue;
        }
        s.push(k, k * 10 * MS, 10 * MS, &counts(2), &h);
        most = most.max(s.len());
    }
    assert!(most <= cap, "{most}");
    let (out, step) = s.finish(n * 10 * MS);
    assert!(out.len() <= cap && out.len() >= cap / 4, "{}", out.len());
    // 100 000 intervals in at most 64 summaries: a step of 2^11 intervals (20.48 s).
    assert_eq!(step, 2048 * 10 * MS);
    let emitted = n - n.div_ceil(7);
    assert_eq!(out.iter().map(|x| x.read_ios).sum::<u64>(), 2 * emitted);
    // Contiguous, in order, each the step long but the last, which ends with the window.
    for w in out.windows(2) {
        assert!((w[0].t + w[0].len - w[1].t).abs() < 1e-9, "{w:?}");
    }
    let last = out.last().unwrap();
    assert!((last.t + last.len - (n * 10) as f64 / 1000.0).abs() < 1e-6);
    // One latency throughout: merged upper bounds are still that latency.
    assert!(out.iter().all(|x| x.p99_us == 5.0 && x.max_us == 5.0));
    assert!(out.iter().any(|x| x.merged));
}

#[test]
fn merged_percentiles_are_upper_bounds_and_empty_parts_do_not_count() {
    let mut a = summary(0, 10, &counts(1), &hist(&[1_000]));
    let b = summary(10, 10, &counts(1), &hist(&[9_000]));
    merge_into(&mut a, &b);
    assert_eq!(
        (a.p50_us, a.p99_us, a.max_us, a.merged),
        (9.0, 9.0, 9.0, true)
    );
    let mut e = summary(0, 10, &Counts::default(), &LatencyHistogram::new());
    merge_into(&mut e, &b);
    assert_eq!((e.p99_us, e.read_ios, e.merged), (9.0, 1, false));
    assert_eq!(e.len, 20e-9);
}

#[test]
fn a_snapshot_part_way_is_what_finishing_there_would_give() {
    for planned in [0, 100 * 10 * MS] {
        let mut s = Series::new(10 * MS, planned, 8);
        for k in 0..37u64 {
            let h = hist(&[1_000 * (k + 1)]);
            s.push(k, k * 10 * MS, 10 * MS, &counts(1), &h);
        }
        let window = 365 * MS;
        let (snap, step) = s.snapshot(window);
        let (done, step2) = s.finish(window);
        assert_eq!((snap, step), (done, step2), "planned {planned}");
    }
}

/// Whatever the window's length and wherever the cap is reached (part-way, or by the last
/// summary as the window ends), the summaries are contiguous and the last ends exactly with
/// the window: none reaches past it. (The last pair merged at the end once took the full
/// step of its first half: a summary up to 0.17 s past a window of 6.87 s.)
#[test]
fn the_last_summary_ends_with_the_window_whenever_the_cap_is_reached() {
    let h = hist(&[5_000]);
    for cap in [2, 3, 4, 5, 16] {
        for planned in [0, 12 * 10 * MS] {
            for end in 1..=200u64 {
                // The window ends 3 ms into its last interval, as the collector sees it.
                let window = end * 10 * MS - 7 * MS;
                let mut s = Series::new(10 * MS, planned, cap);
                for k in 0..end {
                    let len = (10 * MS).min(window - k * 10 * MS);
                    s.push(k, k * 10 * MS, len, &counts(1), &h);
                }
                let (out, _) = s.finish(window);
                let what = format!("cap {cap}, planned {planned}, window {window}: {out:?}");
                assert!(out.len() <= cap, "{what}");
                assert_eq!(out.iter().map(|x| x.read_ios).sum::<u64>(), end, "{what}");
                for w in out.windows(2) {
                    assert!((w[0].t + w[0].len - w[1].t).abs() < 1e-9, "{what}");
                }
                let last = out.last().unwrap();
                assert!(
                    (last.t + last.len - window as f64 / 1e9).abs() < 1e-9,
                    "{what}"
                );
            }
        }
    }
}

/// An interval handed over at the end that starts where the window ended holds nothing and has
/// no length: a window of 0 (a run stopped during its ramp) has no summaries, and a window
/// ending on an interval's edge none past it; an interval that did count I/O there stays.
#[test]
fn an_empty_interval_at_the_windows_end_is_no_summary() {
    for step_ms in [1000, 10] {
        let mut s = Series::new(step_ms * MS, 10_000 * MS, 64);
        s.push(0, 0, 1, &Counts::default(), &hist(&[]));
        assert_eq!(s.finish(0).0.len(), 0, "step {step_ms} ms");
    }
    let mut s = Series::new(1000 * MS, 10_000 * MS, 64);
    s.push(0, 0, 1000 * MS, &counts(5), &hist(&[10]));
    s.push(1, 1000 * MS, 1, &Counts::default(), &hist(&[]));
    let (out, _) = s.finish(1000 * MS);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].t, out[0].len, out[0].read_ios), (0.0, 1.0, 5));
    // Not dropped when it holds I/O (that would hide a count outside the window).
    let mut s = Series::new(1000 * MS, 10_000 * MS, 64);
    s.push(0, 0, 1, &counts(2), &hist(&[10]));
    assert_eq!(s.finish(0).0.len(), 1);
}
