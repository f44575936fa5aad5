//! The selector driven by simulation: paths are FIFO servers with a fixed cost per byte, a
//! closed loop keeps a number of I/Os in flight, time is a number the simulation advances.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use super::selector::{Config, Failback, Group, Policy, Selector, State};

/// One I/O in the simulation: when it completes, where, and what the selector needs back.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Done {
    at_ns: u64,
    path: usize,
    started_ns: u64,
    ahead: u64,
}

/// Runs `ios` I/Os of `len` bytes at queue depth `qd` over paths costing `ns_per_byte` each
/// (a FIFO server per path); returns the I/Os each path carried.
fn simulate(policy: Policy, ns_per_byte: &[u64], qd: usize, len: u32, ios: usize) -> Vec<usize> {
    simulate_cost(policy, ns_per_byte.len(), qd, len, ios, |p, _| {
        ns_per_byte[p] * len as u64
    })
}

fn share(c: &[usize], p: usize) -> f64 {
    c[p] as f64 / c.iter().sum::<usize>() as f64
}

#[test]
fn round_robin_shares_equally_whatever_the_paths_cost() {
    // Strict turns: the paths are sent the same number of I/Os, so their completions differ
    // by at most what is still in flight (the slow path holds most of the depth).
    let c = simulate(Policy::RoundRobin, &[1, 10], 16, 4096, 10_000);
    assert!((c[0] as i64 - c[1] as i64).abs() <= 16, "{c:?}");
    let c = simulate(Policy::RoundRobin, &[1, 1, 1], 8, 4096, 9_000);
    assert!(c.iter().all(|&n| n == 3000), "{c:?}");
}

#[test]
fn queue_length_avoids_a_slow_path() {
    // Path 1 is ten times slower: it keeps its I/Os longer, so it is picked less, about in
    // proportion to its speed (10:1 → 91 %); round-robin would give it half.
    let c = simulate(Policy::QueueLength, &[1, 10], 16, 4096, 20_000);
    let fast = share(&c, 0);
    assert!(
        (0.85..0.95).contains(&fast),
        "fast path's share {fast:.3}: {c:?}"
    );
    // Equal paths share equally.
    let c = simulate(Policy::QueueLength, &[2, 2], 16, 4096, 20_000);
    assert!((share(&c, 0) - 0.5).abs() < 0.02, "{c:?}");
}

#[test]
fn service_time_prefers_the_faster_path_by_its_share_of_throughput() {
    // Twice the throughput: two thirds of the I/O, as the two paths' service times are then
    // equal.
    let c = simulate(Policy::ServiceTime, &[1, 2], 16, 65536, 20_000);
    let fast = share(&c, 0);
    assert!(
        (0.62..0.72).contains(&fast),
        "fast path's share {fast:.3}: {c:?}"
    );
    // Four times: four fifths.
    let c = simulate(Policy::ServiceTime, &[1, 4], 32, 4096, 20_000);
    let fast = share(&c, 0);
    assert!(
        (0.75..0.85).contains(&fast),
        "fast path's share {fast:.3}: {c:?}"
    );
    let c = simulate(Policy::ServiceTime, &[3, 3], 16, 4096, 20_000);
    assert!((share(&c, 0) - 0.5).abs() < 0.03, "{c:?}");
}

#[test]
fn service_time_learns_the_throughput_it_reports() {
    let cfg = Config::default();
    let mut s = Selector::new(1, cfg);
    // 1 MB queued ahead plus 1 MB drained in 10 ms: 200 MB/s.
    s.started(0, 1_000_000);
    s.completed(0, 1_000_000, 1_000_000, Duration::from_millis(10));
    let r = s.rate(0).unwrap();
    assert!((r - 2e8).abs() < 1.0, "{r}");
}

fn t(base: Instant, ms: u64) -> Instant {
    base + Duration::from_millis(ms)
}

#[test]
fn a_failed_path_gets_nothing_until_reinstated_with_backoff() {
    let base = Instant::now();
    let cfg = Config {
        policy: Policy::RoundRobin,
        backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(300),
        ..Config::default()
    };
    let mut s = Selector::new(2, cfg);
    s.started(1, 4096);
    s.failed(1, t(base, 0));
    assert_eq!(s.outstanding(1), 0, "its I/Os are the caller's to reissue");
    assert!((0..10).all(|_| s.pick(4096) == Some(0)));
    assert_eq!(s.due(t(base, 99)), None);
    assert_eq!(s.next_retry(), Some(t(base, 100)));
    assert_eq!(s.due(t(base, 100)), Some(1));
    assert_eq!(s.state(1), State::Reinstating);
    assert_eq!(s.pick(4096), Some(0), "still out while reconnecting");
    // A failed retry doubles the wait, up to the maximum.
    s.retry_failed(1, t(base, 150));
    assert_eq!(s.next_retry(), Some(t(base, 350)));
    assert_eq!(s.due(t(base, 350)), Some(1));
    s.retry_failed(1, t(base, 400));
    assert_eq!(s.next_retry(), Some(t(base, 700)), "capped at 300 ms");
    assert_eq!(s.due(t(base, 700)), Some(1));
    s.reinstated(1, t(base, 710));
    let picks: Vec<_> = (0..4).map(|_| s.pick(4096).unwrap()).collect();
    assert!(picks.contains(&0) && picks.contains(&1), "{picks:?}");
    // The backoff starts over after a success.
    s.failed(1, t(base, 800));
    assert_eq!(s.next_retry(), Some(t(base, 900)));
}

#[test]
fn priority_groups_and_failback() {
    let base = Instant::now();
    for failback in [Failback::Immediate, Failback::Manual] {
        let cfg = Config {
            policy: Policy::RoundRobin,
            failback,
            ..Config::default()
        };
        let mut s = Selector::new(3, cfg);
        s.set_group(1, Group::NonOptimized, base);
        s.set_group(2, Group::Inaccessible, base);
        assert!((0..5).all(|_| s.pick(512) == Some(0)), "optimized first");
        s.failed(0, t(base, 1));
        assert!(
            (0..5).all(|_| s.pick(512) == Some(1)),
            "non-optimized only when no optimized is left, inaccessible never"
        );
        assert_eq!(s.due(t(base, 10_000)), Some(0));
        s.reinstated(0, t(base, 10_001));
        let back = s.pick(512);
        match failback {
            Failback::Immediate => assert_eq!(back, Some(0), "back to the optimized path"),
            Failback::Manual => assert_eq!(back, Some(1), "stays on the group in use"),
        }
        // Manual failback moves when the group in use has no path left.
        s.failed(1, t(base, 10_002));
        assert_eq!(s.pick(512), Some(0));
    }
}

#[test]
fn no_path_retry_queues_then_fails() {
    let base = Instant::now();
    let mut s = Selector::new(2, Config::default());
    s.failed(0, t(base, 0));
    assert!(!s.no_path_expired(t(base, 100_000)), "one path left");
    s.failed(1, t(base, 5));
    assert_eq!(s.pick(4096), None, "nothing usable: the I/O waits");
    assert_eq!(s.no_path_deadline(), Some(t(base, 30_005)));
    assert!(!s.no_path_expired(t(base, 30_004)));
    assert!(s.no_path_expired(t(base, 30_005)));
    // A path back before the deadline clears it.
    let p = s.due(t(base, 20_000)).unwrap();
    s.reinstated(p, t(base, 20_001));
    assert!(!s.no_path_expired(t(base, 40_000)));
    assert_eq!(s.pick(4096), Some(p));
    // An inaccessible path alone counts as no path.
    s.set_group(p, Group::Inaccessible, t(base, 41_000));
    assert_eq!(s.pick(4096), None);
    assert!(s.no_path_expired(t(base, 71_000)));
}

#[test]
fn service_time_uses_its_estimate_where_queue_length_cannot_tell() {
    // One I/O at a time: both paths always hold nothing, so queue-length takes turns, while
    // service-time has learnt that path 0 is three times faster and keeps to it, but for a
    // few I/Os each time path 1's estimate goes stale and is measured anew.
    let ql = simulate(Policy::QueueLength, &[1, 3], 1, 4096, 2_000);
    assert!((share(&ql, 0) - 0.5).abs() < 0.01, "{ql:?}");
    let st = simulate(Policy::ServiceTime, &[1, 3], 1, 4096, 2_000);
    assert!(share(&st, 0) > 0.97, "{st:?}");
}

#[test]
fn every_policy_keeps_to_the_best_group_and_never_an_inaccessible_path() {
    use crate::engine::AccessState as A;
    let base = Instant::now();
    for policy in [Policy::RoundRobin, Policy::QueueLength, Policy::ServiceTime] {
        let cfg = Config {
            policy,
            ..Config::default()
        };
        let mut s = Selector::new(4, cfg);
        for (p, a) in [A::NonOptimized, A::Optimized, A::Inaccessible, A::Optimized]
            .into_iter()
            .enumerate()
        {
            s.set_group(p, Group::from(a), base);
        }
        // Optimized first: paths 1 and 3 only, both of them.
        let picks: Vec<usize> = (0..20)
            .map(|_| {
                let p = s.pick(4096).unwrap();
                s.started(p, 4096);
                p
            })
            .collect();
        assert!(
            picks.iter().all(|&p| p == 1 || p == 3),
            "{policy:?}: {picks:?}"
        );
        assert!(
            picks.contains(&1) && picks.contains(&3),
            "{policy:?}: {picks:?}"
        );
        // Non-optimized only when no optimized path is left.
        s.failed(1, t(base, 1));
        s.set_group(3, Group::from(A::PersistentLoss), t(base, 2));
        assert!(
            (0..10).all(|_| s.pick(4096) == Some(0)),
            "{policy:?}: the non-optimized path"
        );
        // Inaccessible, persistent loss and change: never, even with nothing else left.
        s.set_group(0, Group::from(A::Change), t(base, 3));
        assert_eq!(s.pick(4096), None, "{policy:?}");
        assert!(!s.any_usable());
    }
}

/// As [`simulate`], each I/O's cost on path `p` being `cost(p, k)` ns for the `k`-th I/O
/// overall (noise, a slow moment, a fixed cost per I/O).
fn simulate_cost(
    policy: Policy,
    paths: usize,
    qd: usize,
    len: u32,
    ios: usize,
    mut cost: impl FnMut(usize, usize) -> u64,
) -> Vec<usize> {
    let cfg = Config {
        policy,
        ..Config::default()
    };
    let mut sel = Selector::new(paths, cfg);
    let mut free_at = vec![0u64; paths];
    let mut carried = vec![0usize; paths];
    let mut events = BinaryHeap::new();
    let mut now = 0u64;
    let mut k = 0usize;
    let mut issue = |sel: &mut Selector, now: u64, events: &mut BinaryHeap<Reverse<Done>>| {
        sel.tick(now);
        let p = sel.pick(len).expect("a usable path");
        let ahead = sel.in_flight_bytes(p);
        sel.started(p, len);
        free_at[p] = free_at[p].max(now) + cost(p, k);
        k += 1;
        events.push(Reverse(Done {
            at_ns: free_at[p],
            path: p,
            started_ns: now,
            ahead,
        }));
    };
    for _ in 0..qd {
        issue(&mut sel, now, &mut events);
    }
    for _ in 0..ios {
        let Reverse(d) = events.pop().expect("I/O in flight");
        now = d.at_ns;
        carried[d.path] += 1;
        sel.completed(
            d.path,
            len,
            d.ahead,
            Duration::from_nanos(now - d.started_ns),
        );
        issue(&mut sel, now, &mut events);
    }
    carried
}

#[test]
fn service_time_shares_equal_noisy_paths_at_low_load() {
    // Two equal paths whose latencies vary by +-20 % (an LCG, seeded), one I/O at a time:
    // the estimates differ by that noise only, and the paths take turns, as dm's service-time
    // does for equal throughputs. Compared exactly, one path took nearly everything.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noisy = move |_p: usize, _k: usize| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = (x >> 33) as f64 / (1u64 << 31) as f64;
        (10_000.0 * (0.8 + 0.4 * u)) as u64
    };
    let c = simulate_cost(Policy::ServiceTime, 2, 1, 4096, 20_000, noisy);
    assert!((share(&c, 0) - 0.5).abs() < 0.1, "{c:?}");
}

#[test]
fn service_time_measures_again_a_path_one_slow_moment_left_idle() {
    // Path 1's first I/O is 10x slow, then both paths are equal. One I/O at a time: its
    // estimate, a tenth of path 0's, was never measured again and it carried nothing more;
    // now the estimate goes stale, the path is measured anew, found equal, and the paths
    // take turns.
    // 1 ms per I/O, 20 s simulated: stale after the first second.
    let c = simulate_cost(Policy::ServiceTime, 2, 1, 4096, 20_000, |p, k| {
        if p == 1 && k < 2 {
            10_000_000
        } else {
            1_000_000
        }
    });
    assert!((share(&c, 0) - 0.5).abs() < 0.1, "{c:?}");
}

#[test]
fn service_time_measures_a_slow_path_again_rarely() {
    // Path 1 is ten times slower, one I/O at a time, 5 s simulated. Its estimate goes stale
    // once a second and it is measured anew for a few I/Os each time: it carries some, and
    // so few that no percentile a run reports (p99.99 at most) is theirs. (Stale after 256
    // picks, it carried 1-2 %: a p99 of the slow path's.)
    let c = simulate_cost(Policy::ServiceTime, 2, 1, 4096, 500_000, |p, _| {
        [10_000, 100_000][p]
    });
    assert!(c[1] >= 4, "never measured again: {c:?}");
    assert!(share(&c, 1) < 0.0001, "{c:?}");
}

#[test]
fn a_flush_leaves_the_throughput_estimate_alone() {
    let mut s = Selector::new(1, Config::default());
    s.started(0, 1_000_000);
    s.completed(0, 1_000_000, 0, Duration::from_millis(10));
    let r = s.rate(0).unwrap();
    // A flush: nothing moved, 5 ms of the device's time.
    s.started(0, 0);
    s.completed(0, 0, 0, Duration::from_millis(5));
    assert_eq!(s.rate(0), Some(r));
}

#[test]
fn service_time_counts_estimates_within_noise_as_equal() {
    // Path 1 is 5 % slower, one I/O at a time: a difference of the size of the estimates'
    // noise. The paths take turns (dm's service-time with equal throughputs); compared
    // exactly, path 0 took all but the I/Os that measured path 1's stale estimate anew.
    let c = simulate_cost(Policy::ServiceTime, 2, 1, 4096, 20_000, |p, _| {
        [10_000, 10_500][p]
    });
    assert!((share(&c, 0) - 0.5).abs() < 0.05, "{c:?}");
    // Twice as slow is a real difference: path 0 keeps it (but for those I/Os).
    let c = simulate_cost(Policy::ServiceTime, 2, 1, 4096, 20_000, |p, _| {
        [10_000, 20_000][p]
    });
    assert!(share(&c, 0) > 0.97, "{c:?}");
}
