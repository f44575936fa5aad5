use super::*;
use sanbench_doc::multipath::{PathEvent, PathReport};

const MSU: u64 = 1_000_000;
/// The window's start, ns since the Unix epoch (a whole second, so ms offsets are exact).
const START: u64 = 1_700_000_000_000 * MSU;

fn input<'a>(tl: &'a Timeline, faults: &'a [Fault], mp: Option<&'a MultipathReport>) -> Input<'a> {
    Input {
        timeline: tl,
        multipath: mp,
        faults,
        window_ns: tl.done.len() as u64 * BIN_NS,
        median_ns: MSU,
        worst_ns: 2_000 * MSU,
        offered_iops: None,
        verify: None,
    }
}

/// `n` bins of `per` completions.
fn steady(n: usize, per: u32) -> Vec<u32> {
    vec![per; n]
}

/// Path 1's `what`, `ms` into the window.
fn path1_event(ms: u64, what: &str) -> PathEvent {
    PathEvent {
        at: String::new(),
        at_unix_ms: START / MSU + ms,
        path: 1,
        worker: 0,
        event: what.into(),
        reason: None,
        access_state: None,
    }
}

fn fault(offset_ms: f64, action: &str) -> Fault {
    Fault {
        offset_ms,
        at: "2023-11-14T22:13:21.000Z".into(),
        link: "b".into(),
        action: action.into(),
    }
}

#[test]
fn a_quiet_run_has_no_disruption_and_a_short_stall_is_not_one() {
    let tl = Timeline {
        done: steady(300, 20),
        gaps: vec![(500 * MSU, 560 * MSU)],
        window_start_unix_ns: START,
        ..Timeline::default()
    };
    assert_eq!(analyse(&input(&tl, &[], None)), None);
    // 60 ms without a completion is under the 100 ms threshold; 150 ms is over it.
    let tl = Timeline {
        gaps: vec![(500 * MSU, 650 * MSU)],
        ..tl
    };
    let d = analyse(&input(&tl, &[], None)).unwrap();
    assert_eq!(d.cause, "stall");
    assert_eq!(d.stall_ms, 150.0);
    assert_eq!(d.stall_start_ms, 500.0);
    assert_eq!(d.stall_threshold_ms, 100.0);
    assert_eq!(
        d.stalls,
        vec![Stall {
            start_ms: 500.0,
            ms: 150.0
        }]
    );
    // Ten median latencies of 20 ms: the threshold is 200 ms, and 150 ms is not a stall.
    let mut i = input(&tl, &[], None);
    i.median_ns = 20 * MSU;
    assert_eq!(analyse(&i), None);
}

#[test]
fn a_stall_and_its_recovery_are_measured_from_the_bins() {
    // 2,000 IOPS (20 per 10 ms), nothing from 1.0 s to 1.5 s, then the level again.
    let mut done = steady(300, 20);
    done[100..150].fill(0);
    let tl = Timeline {
        done,
        gaps: vec![(1_000 * MSU, 1_500 * MSU)],
        window_start_unix_ns: START,
        ..Timeline::default()
    };
    let d = analyse(&input(&tl, &[fault(1_000.0, "down")], None)).unwrap();
    assert_eq!(d.cause, "fault");
    assert_eq!(d.pre_fault_iops, Some(2_000.0));
    assert_eq!(d.recovered_ms, Some(500.0));
    assert_eq!(d.stall_ms, 500.0);
    assert_eq!(d.worst_latency_ms, 2_000.0);
    // No multipath: no detection or failover events to measure from.
    assert_eq!(d.detected_ms, None);
    assert_eq!(d.failover_ms, None);
    assert_eq!(d.events.len(), 1);
    assert_eq!(d.events[0].event, "fault");
    assert_eq!(d.events[0].link.as_deref(), Some("b"));
    // A 3 s window is shown whole.
    assert_eq!(d.from_ms, 0.0);
    assert_eq!(d.completions.len(), 300);
}

#[test]
fn half_the_paths_gone_is_degraded_not_recovered() {
    let mut done = steady(400, 20);
    done[100..110].fill(0);
    done[110..].fill(10);
    let tl = Timeline {
        done,
        gaps: vec![(1_000 * MSU, 1_100 * MSU)],
        window_start_unix_ns: START,
        ..Timeline::default()
    };
    let d = analyse(&input(&tl, &[fault(1_000.0, "down")], None)).unwrap();
    assert_eq!(d.recovered_ms, None);
    assert_eq!(d.pre_fault_iops, Some(2_000.0));
    assert!((d.degraded_ratio.unwrap() - 0.5).abs() < 1e-9, "{d:?}");
}

#[test]
fn multipath_events_time_detection_and_failover_and_bins_align_by_epoch() {
    let done = steady(300, 20);
    let tl = Timeline {
        done,
        gaps: vec![(1_000 * MSU, 1_230 * MSU)],
        window_start_unix_ns: START,
        ..Timeline::default()
    };
    // The multipath target's epoch is 250 ms before the window: its bins are 25 ahead.
    let epoch = START - 250 * MSU;
    let mut a = vec![0u32; 325];
    a[25 + 7] = 9;
    let mp = MultipathReport {
        policy: "round-robin".into(),
        failback: "immediate".into(),
        paths: vec![
            PathReport {
                bins_10ms: a,
                ..PathReport::default()
            },
            PathReport::default(),
        ],
        reissued: 8,
        failed_no_path: 0,
        events: vec![
            path1_event(1_200, "failed"),
            path1_event(1_230, "failed_over"),
            path1_event(2_600, "reinstated"),
        ],
        epoch_unix_ns: epoch,
    };
    let d = analyse(&input(&tl, &[fault(1_000.0, "down")], Some(&mp))).unwrap();
    assert_eq!(d.detected_ms, Some(200.0));
    assert_eq!(d.failover_ms, Some(230.0));
    assert_eq!(d.reissued, 8);
    assert_eq!(d.paths.len(), 2);
    assert_eq!(d.paths[0][7], 9);
    assert_eq!(d.paths[0].iter().sum::<u32>(), 9);
    assert_eq!(d.paths[1].len(), 300);
    let kinds: Vec<&str> = d.events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["fault", "failed", "failed_over", "reinstated"]);
    assert_eq!(d.events[1].offset_ms, 1_200.0);
}

#[test]
fn the_open_loop_catch_up_counts_the_ios_the_stall_delayed() {
    // 1,000 IOPS offered (10 per bin); nothing completes from 1.0 to 1.5 s; then 30 per
    // bin until the backlog of 500 (plus what keeps arriving) is done.
    let n = 400;
    let arrivals = steady(n, 10);
    let mut done = steady(n, 10);
    done[100..150].fill(0);
    done[150..175].fill(30);
    let tl = Timeline {
        done,
        arrivals,
        gaps: vec![(1_000 * MSU, 1_500 * MSU)],
        window_start_unix_ns: START,
        ..Timeline::default()
    };
    let mut i = input(&tl, &[], None);
    i.offered_iops = Some(1_000.0);
    let d = analyse(&i).unwrap();
    let c = d.catch_up.unwrap();
    // Arrived before 1.5 s: 1,500; completed before 1.0 s: 1,000.
    assert_eq!(c.ios, 500);
    assert_eq!(c.peak_iops, 3_000.0);
    // 1,000 done by 1.5 s, then 30 a bin: 1,500 reached after 17 bins (1,510).
    assert_eq!(c.drained_ms, Some(170.0));
    assert_eq!(d.arrivals.len(), n);
}

#[test]
fn a_long_window_shows_the_span_around_the_events() {
    let n = 30_000; // 300 s
    let tl = Timeline {
        done: steady(n, 5),
        gaps: vec![(100_000 * MSU, 100_400 * MSU)],
        window_start_unix_ns: START,
        ..Timeline::default()
    };
    let d = analyse(&input(&tl, &[fault(100_000.0, "down")], None)).unwrap();
    assert_eq!(d.from_ms, 99_000.0);
    // To two seconds after the stall's end (recovery is at its end too).
    assert_eq!(d.completions.len(), (102_400 - 99_000) / 10);
}

#[test]
fn threshold_is_100_ms_or_ten_medians() {
    assert_eq!(stall_threshold_ns(MSU), 100 * MSU);
    assert_eq!(stall_threshold_ns(30 * MSU), 300 * MSU);
}

/// A path that failed by itself (no fault fired, no stall: the other path carried on) is a
/// disruption of cause "path": its failure is put where the path last completed an I/O, and
/// detection, failover and recovery count from there.
#[test]
fn a_path_that_fails_by_itself_is_the_cause() {
    let tl = Timeline {
        done: steady(300, 20),
        window_start_unix_ns: START,
        ..Timeline::default()
    };
    // Bins from an epoch 250 ms before the window. Path 1 completes until the bin ending at
    // 1,100 ms into the window, then nothing; it is declared failed at 1,180 ms.
    let epoch = START - 250 * MSU;
    let mut p1 = vec![0u32; 325];
    for b in &mut p1[25..25 + 110] {
        *b = 10;
    }
    let mut mp = MultipathReport {
        policy: "round-robin".into(),
        failback: "immediate".into(),
        paths: vec![
            PathReport {
                bins_10ms: vec![10; 325],
                ..PathReport::default()
            },
            PathReport {
                bins_10ms: p1,
                ..PathReport::default()
            },
        ],
        reissued: 3,
        failed_no_path: 0,
        events: vec![
            path1_event(1_180, "failed"),
            path1_event(1_195, "failed_over"),
        ],
        epoch_unix_ns: epoch,
    };
    let d = analyse(&input(&tl, &[], Some(&mp))).unwrap();
    assert_eq!(d.cause, "path");
    assert_eq!(d.stall_ms, 0.0);
    assert_eq!(d.detected_ms, Some(80.0));
    assert_eq!(d.failover_ms, Some(95.0));
    assert_eq!(d.reissued, 3);
    assert_eq!(d.pre_fault_iops, Some(2_000.0));
    assert_eq!(d.recovered_ms.map(|r| r <= 200.0), Some(true), "{d:?}");
    // A path that never completed anything is put at its event.
    mp.paths[1].bins_10ms.clear();
    let d = analyse(&input(&tl, &[], Some(&mp))).unwrap();
    assert_eq!(d.detected_ms, Some(0.0));
    // A path brought back, or a new access state, is its own cause.
    mp.events = vec![path1_event(2_000, "reinstated")];
    let d = analyse(&input(&tl, &[], Some(&mp))).unwrap();
    assert_eq!((d.cause.as_str(), d.detected_ms), ("path", None));
    // Events outside the window, or of another kind, are not a cause.
    mp.events = vec![
        path1_event(5_000, "failed"),
        path1_event(1_000, "reconnect_failed"),
    ];
    assert!(analyse(&input(&tl, &[], Some(&mp))).is_none());
    // A fault fired is still the cause when there is one.
    mp.events = vec![path1_event(1_180, "failed")];
    let d = analyse(&input(&tl, &[fault(1_150.0, "down")], Some(&mp))).unwrap();
    assert_eq!((d.cause.as_str(), d.detected_ms), ("fault", Some(30.0)));
}
