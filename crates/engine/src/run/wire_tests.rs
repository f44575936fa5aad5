//! Tests of the run output's bytes and the merge.

use std::time::{Duration, SystemTime};

use super::timeline::Timeline;
use super::wire::{decode, encode, merge};
use super::{DirStats, RunOutput, Second, TargetRun};
use crate::engine::TargetInfo;

fn target(lats: &[u64]) -> TargetRun {
    let mut read = DirStats::default();
    for &l in lats {
        read.hist.record(l);
        read.ios += 1;
        read.bytes += 4096;
    }
    TargetRun {
        info: TargetInfo {
            uri: "mem:1m".into(),
            ..TargetInfo::default()
        },
        read,
        write: DirStats::default(),
        flush: DirStats::default(),
        fua: DirStats::default(),
        trim: DirStats::default(),
        write_zeroes: DirStats::default(),
        allocation_after: None,
        series: vec![Second {
            read_ios: lats.len() as u64,
            ..Second::default()
        }],
        outstanding: 4,
        mean_outstanding: Some(3.5),
        queue_stats: Vec::new(),
        verify: None,
        open_loop: None,
        intervals: Vec::new(),
        intervals_step_ns: 0,
        path_intervals: Vec::new(),
        raw_ns: Vec::new(),
        timeline: Default::default(),
        pacing_ns: 1_500,
        replay: None,
    }
}

fn output(targets: Vec<TargetRun>) -> RunOutput {
    RunOutput {
        started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(100),
        window: Duration::from_secs(1),
        stopped_early: false,
        clock_started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(101),
        run_id: 7,
        targets,
        all_intervals: Vec::new(),
        all_intervals_step_ns: 0,
    }
}

#[test]
fn merged_percentiles_are_those_of_all_latencies_together() {
    let a: Vec<u64> = (0..5_000).map(|i| 10_000 + i * 3).collect();
    let b: Vec<u64> = (0..2_000).map(|i| 400_000 + i * 101).collect();
    let outs = [
        output(vec![target(&a)]),
        output(vec![]),
        output(vec![target(&b)]),
    ];
    let bytes: Vec<Vec<u8>> = outs.iter().map(encode).collect();
    let back: Vec<RunOutput> = bytes.iter().map(|b| decode(b).unwrap()).collect();
    let m = merge(&back).unwrap();
    let mut all = sanbench_stats::LatencyHistogram::new();
    for &l in a.iter().chain(&b) {
        all.record(l);
    }
    let t = &m.targets[0];
    assert_eq!(t.read.ios, 7_000);
    assert_eq!(t.read.hist.summary(), all.summary());
    assert_eq!(t.series[0].read_ios, 7_000);
    assert_eq!(t.outstanding, 8);
    assert_eq!(t.mean_outstanding, Some(7.0));
    // Each rank's open-loop spin adds.
    assert_eq!(t.pacing_ns, 3_000);
    // The mean window of the two that ran I/O.
    assert_eq!(m.window, Duration::from_secs(1));
}

#[test]
fn the_window_is_the_mean_of_the_processes_that_ran_io() {
    let mut a = output(vec![target(&[1_000])]);
    let mut b = output(vec![target(&[2_000])]);
    let mut idle = output(vec![]);
    a.window = Duration::from_millis(1_000);
    b.window = Duration::from_millis(1_040);
    idle.window = Duration::from_millis(5_000);
    let m = merge(&[idle, a, b]).unwrap();
    assert_eq!(m.window, Duration::from_millis(1_020));
    assert_eq!(m.targets[0].read.ios, 2);
}

#[test]
fn timelines_merge_across_processes_bins_adding_and_stalls_intersecting() {
    let mut a = target(&[1_000]);
    let mut b = target(&[2_000]);
    a.timeline = Timeline {
        done: vec![2, 0, 0, 5],
        gaps: vec![(8, 40)],
        ..Timeline::default()
    };
    b.timeline = Timeline {
        done: vec![1, 0, 3],
        gaps: vec![(12, 50)],
        ..Timeline::default()
    };
    let bytes = [encode(&output(vec![a])), encode(&output(vec![b]))];
    let back: Vec<RunOutput> = bytes.iter().map(|b| decode(b).unwrap()).collect();
    let m = merge(&back).unwrap();
    assert_eq!(m.targets[0].timeline.done, vec![3, 0, 3, 5]);
    assert_eq!(m.targets[0].timeline.gaps, vec![(12, 40)]);
}

#[test]
fn garbage_is_an_error() {
    assert!(decode(b"{not json").is_err());
    assert!(merge(&[]).is_none());
}

/// The fuzzer's seeds (fuzz/seeds/mpi_run_output, fuzz/seeds/mpi_histogram) are a current run
/// output and a current histogram, so the fuzzer starts from bytes a rank really sends instead
/// of hunting for valid JSON. When the format changes this fails; regenerate them with
/// `SANBENCH_WRITE_FUZZ_SEEDS=1 cargo test -p sanbench-engine fuzzer_seeds`.
#[test]
fn fuzzer_seeds_are_current() {
    let a: Vec<u64> = (0..300).map(|i| 10_000 + i * i * 7).collect();
    let b: Vec<u64> = (0..50).map(|i| 2_000_000 + i * 10_007).collect();
    let mut t = target(&a);
    t.write.hist.record(123_456);
    t.write.ios = 1;
    t.series.push(Second::default());
    t.timeline = Timeline {
        done: vec![3, 0, 4],
        gaps: vec![(10_000_000, 25_000_000)],
        window_start_unix_ns: 101_000_000_000,
        ..Timeline::default()
    };
    let iv = super::IntervalSummary {
        t: 0.0,
        len: 0.5,
        read_ios: 300,
        read_bytes: 300 * 4096,
        p50_us: 12.0,
        p99_us: 90.0,
        max_us: 640.0,
        ..Default::default()
    };
    t.intervals = vec![iv.clone()];
    t.intervals_step_ns = 500_000_000;
    t.path_intervals = vec![vec![iv.clone()], Vec::new()];
    let mut out = output(vec![t, target(&b)]);
    out.all_intervals = vec![iv];
    out.all_intervals_step_ns = 500_000_000;
    let run = encode(&out);
    let hist = out.targets[0].read.hist.to_bytes();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let files = [
        (dir.join("mpi_run_output/two_targets.json"), run),
        (dir.join("mpi_histogram/read.bin"), hist),
    ];
    for (path, bytes) in &files {
        if std::env::var_os("SANBENCH_WRITE_FUZZ_SEEDS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        let seed = std::fs::read(path).unwrap_or_default();
        assert!(
            &seed == bytes,
            "{} is not what this version sends: regenerate (see this test's docs)",
            path.display()
        );
    }
    // And they decode.
    decode(&files[0].1).unwrap();
    sanbench_stats::LatencyHistogram::from_bytes(&files[1].1).unwrap();
}
