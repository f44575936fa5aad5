//! A small, fully deterministic comparison: three targets, four workloads, two repetitions.
//!
//! It exists for tests (the store's round trips, the report's snapshot and browser tests) and
//! for a look at the report without hardware (the report crate's `fixture_report` example);
//! test-only, behind the `fixture` feature (see the crate docs). Its figures are made up but shaped like the
//! studies': latency follows Little's law from the queue depth, CPU and power figures give the
//! efficiency ratios, and the third target's power is modeled (as on a VM without a meter).
//! One target's name holds HTML metacharacters on purpose.

use sanbench_doc::host::{Baseline, CpuBreakdown, CpuReport, PowerReport};
use sanbench_doc::interval::IntervalSummary;
use sanbench_doc::manifest::Manifest;
use sanbench_doc::run::{Efficiency, LatencyUs, Sample, TargetResult};
use sanbench_doc::spec::{Segment, Workload};
use sanbench_io::TargetInfo;
use sanbench_stats::LatencyHistogram;

use crate::model::{Cell, Comparison, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};

/// Per target: name, URI, and per workload (MB/s or IOPS base figure, CPU busy %), watts above
/// idle, whether power is modeled.
struct Profile {
    name: &'static str,
    uri: &'static str,
    /// One entry per workload, in [`WORKLOADS`] order: (IOPS, CPU busy %).
    load: [(f64, f64); 4],
    watts: f64,
    modeled: bool,
}

/// (id, title, group, block size, read %, random %, qd)
const WORKLOADS: [(&str, &str, &str, u64, f64, f64, u32); 4] = [
    (
        "seq-read-1m",
        "Sequential read, 1 MiB, QD 12",
        "bandwidth",
        1 << 20,
        100.0,
        0.0,
        12,
    ),
    (
        "seq-write-1m",
        "Sequential write, 1 MiB, QD 12",
        "bandwidth",
        1 << 20,
        0.0,
        0.0,
        12,
    ),
    (
        "db-8k-qd4",
        "Database 8 KiB 67/33, QD 4",
        "database",
        8 << 10,
        67.0,
        100.0,
        4,
    ),
    (
        "db-8k-qd16",
        "Database 8 KiB 67/33, QD 16",
        "database",
        8 << 10,
        67.0,
        100.0,
        16,
    ),
];

const PROFILES: [Profile; 3] = [
    Profile {
        name: "FC 8G",
        uri: "file:///dev/sdb",
        load: [
            (744.0, 4.0),
            (725.0, 4.5),
            (40_000.0, 18.0),
            (95_000.0, 38.0),
        ],
        watts: 30.0,
        modeled: false,
    },
    Profile {
        name: "iSCSI 10G",
        uri: "iscsi://127.0.0.1:3261/iqn.2026-11.test:ram1/1",
        load: [
            (668.0, 30.0),
            (496.0, 36.0),
            (30_000.0, 35.0),
            (60_000.0, 62.0),
        ],
        watts: 62.0,
        modeled: false,
    },
    Profile {
        name: "NBD <ram> & co",
        uri: "nbd://127.0.0.1:10809",
        load: [
            (1_140.0, 22.0),
            (720.0, 20.0),
            (52_000.0, 30.0),
            (70_000.0, 41.0),
        ],
        watts: 45.0,
        modeled: true,
    },
];

/// Deterministic pseudo-random numbers in [0, 1) (a 64-bit LCG; quality is irrelevant here).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn spec(bs: u64, read: f64, random: f64, qd: u32) -> Workload {
    Workload {
        name: None,
        segments: vec![Segment {
            weight: 1,
            read_bs: bs,
            write_bs: bs,
            read_pct: read,
            random_pct: random,
            align: None,
            trim_pct: 0.0,
            write_zeroes_pct: 0.0,
        }],
        qd,
        workers: 1,
        ramp: std::time::Duration::from_secs(5),
        time: std::time::Duration::from_secs(10),
        span: None,
        flush_every: 0,
        fua_pct: 0.0,
        rate: None,
        arrival: sanbench_doc::spec::Arrival::Fixed,
    }
}

fn result(p: &Profile, w: usize, repeat: u32) -> TargetResult {
    let (_, _, _, bs, read, _, qd) = WORKLOADS[w];
    let (base, cpu) = p.load[w];
    // Bandwidth workloads are given in MB/s, database ones in IOPS.
    let base_iops = if bs >= 1 << 20 {
        base * 1e6 / bs as f64
    } else {
        base
    };
    let jitter = if repeat.is_multiple_of(2) {
        0.995
    } else {
        1.005
    };
    let iops = base_iops * jitter;
    let secs = 10.0;
    let mean_s = qd as f64 / iops;
    let mut hist = LatencyHistogram::new();
    let mut rng = Lcg(0x5eed ^ (w as u64) << 8 ^ u64::from(repeat) ^ p.name.len() as u64);
    for i in 0..4000 {
        let tail = if i % 97 == 0 { 6.0 } else { 1.0 };
        let ns = mean_s * 1e9 * (0.4 + 1.2 * rng.next()) * tail;
        hist.record(ns as u64);
    }
    let ios = (iops * secs) as u64;
    let bytes = ios * bs;
    let mb = bytes as f64 / secs / 1e6;
    let lat = LatencyUs::from_hist(&hist);
    let read_share = read / 100.0;
    let timeseries = (0..10)
        .map(|t| {
            let f = 1.0 + 0.03 * (rng.next() - 0.5) - if t == 0 { 0.04 } else { 0.0 };
            Sample {
                t,
                iops: iops * f,
                mb_per_s: mb * f,
                read_iops: iops * f * read_share,
                write_iops: iops * f * (1.0 - read_share),
                lat_mean_us: mean_s * 1e6 / f,
            }
        })
        .collect::<Vec<Sample>>();
    // One interval per second, as `--log-interval 1s` keeps them: the second's counts, the
    // window's percentiles scaled as the second's mean latency was.
    let intervals = timeseries
        .iter()
        .map(|x| {
            let f = x.lat_mean_us / (mean_s * 1e6);
            IntervalSummary {
                t: f64::from(x.t),
                len: 1.0,
                read_ios: x.read_iops.round() as u64,
                write_ios: x.write_iops.round() as u64,
                read_bytes: x.read_iops.round() as u64 * bs,
                write_bytes: x.write_iops.round() as u64 * bs,
                p50_us: (lat.p50 * f).round(),
                p99_us: (lat.p99 * f).round(),
                max_us: (lat.max * f).round(),
                ..IntervalSummary::default()
            }
        })
        .collect();
    let cores = 2.0;
    TargetResult {
        target: p.uri.into(),
        engine: "uring".into(),
        seconds: secs,
        ios,
        bytes,
        iops,
        mb_per_s: mb,
        mib_per_s: bytes as f64 / secs / (1u64 << 20) as f64,
        latency_us: lat,
        latency_ms_buckets: hist.ms_buckets(24),
        histogram: Some(sanbench_doc::run::Histogram(hist.clone())),
        timeseries,
        intervals,
        cpu: Some(CpuReport {
            busy_pct: cpu,
            cores: cores as usize,
            // As the monitor writes it now: busy as the window less idle, the ticks beside.
            breakdown: CpuBreakdown {
                busy_pct: cpu,
                tick_busy_pct: Some(cpu),
                ..CpuBreakdown::default()
            },
            ..CpuReport::default()
        }),
        power: Some(PowerReport {
            idle_w: Some(211.0),
            avg_w: Some(211.0 + p.watts),
            w_above_idle: Some(p.watts),
            modeled: p.modeled,
            ..PowerReport::default()
        }),
        efficiency: Efficiency {
            iops_per_cpu_pct: Some(iops / cpu),
            mb_per_s_per_cpu_pct: Some(mb / cpu),
            cpu_us_per_io: Some(cpu / 100.0 * cores * 1e6 / iops),
            core_pct_per_1000_iops: Some(cpu * cores / (iops / 1000.0)),
            iops_per_watt: Some(iops / p.watts),
            mb_per_s_per_watt: Some(mb / p.watts),
            cpu_pct: Some(cpu),
            cpu_baseline_subtracted: true,
            host_not_idle: false,
            cpu_us_per_io_gross: None,
            power_modeled: p.modeled,
            pacing_cpu_pct: None,
        },
        ..TargetResult::default()
    }
}

/// A cell's `cpu` block with a breakdown, as the monitor writes it now (`tick_busy_pct` beside
/// busy) or as an earlier sanbench did, which counted busy ticks (no `tick_busy_pct`).
pub fn cpu_block(from_ticks: bool) -> Option<CpuReport> {
    Some(CpuReport {
        busy_pct: 40.0,
        cores: 2,
        breakdown: CpuBreakdown {
            busy_pct: 40.0,
            user_pct: 30.0,
            tick_busy_pct: (!from_ticks).then_some(31.0),
            ..CpuBreakdown::default()
        },
        ..CpuReport::default()
    })
}

/// The fixture comparison (cells interleaved by repetition, then workload, then target).
pub fn sample_comparison() -> Comparison {
    let targets = PROFILES
        .iter()
        .map(|p| TargetEntry {
            name: p.name.into(),
            uri: p.uri.into(),
            manifest: Some(TargetInfo {
                uri: p.uri.into(),
                engine: "uring".into(),
                block_size: 512,
                ..TargetInfo::default()
            }),
            link: None,
            baseline: Some(Baseline {
                seconds: 2.0,
                busy_pct: 1.5,
                idle_w: Some(211.0),
            }),
            reference: false,
            shared: None,
        })
        .collect();
    let workloads = WORKLOADS
        .iter()
        .map(|&(id, title, group, bs, read, random, qd)| WorkloadEntry {
            id: id.into(),
            title: title.into(),
            group: group.into(),
            spec: spec(bs, read, random, qd),
            targets_at_once: None,
            paths: None,
        })
        .collect();
    let mut cells = Vec::new();
    for repeat in 0..3 {
        for (w, wl) in WORKLOADS.iter().enumerate() {
            for p in &PROFILES {
                cells.push(Cell {
                    workload: wl.0.into(),
                    target: p.name.into(),
                    repeat,
                    round: None,
                    slot: None,
                    started_at: None,
                    result: result(p, w, repeat),
                    steady: None,
                    load_pct: None,
                    hosts: Vec::new(),
                });
            }
        }
    }
    Comparison {
        schema: COMPARE_SCHEMA.into(),
        sanbench_version: "0.1.0".into(),
        started_at: "2026-11-22T09:14:23.250Z".into(),
        command: vec![
            "sanbench".into(),
            "compare".into(),
            "--suite".into(),
            "thirdio-2008".into(),
            "--repeat".into(),
            "3".into(),
            "FC 8G=file:///dev/sdb".into(),
            "iSCSI 10G=iscsi://127.0.0.1:3261/iqn.2026-11.test:ram1/1".into(),
            "NBD <ram> & co=nbd://127.0.0.1:10809".into(),
        ],
        suite: "thirdio-2008".into(),
        suite_description: "Third I/O 2008: bandwidth (1 MiB) and database (8 KiB) tests".into(),
        repeat: 3,
        targets,
        workloads,
        cells,
        manifest: Some(Manifest {
            hostname: Some("lab1".into()),
            kernel: Some("6.1.0-28-amd64".into()),
            cpu_model: Some("Example CPU @ 2.60GHz".into()),
            cpu_count: 2,
            governor: Some("performance".into()),
            ..Manifest::default()
        }),
        incomplete: false,
        curve: Vec::new(),
        design: None,
        require_headroom: false,
        complete: None,
        in_progress: None,
    }
}

/// A second run of [`sample_comparison`] that disagrees with it in two ways, for the tests of
/// replication and `diff`: NBD's sequential reads a third as fast (its lead over FC and iSCSI
/// there turns) and FC's database IOPS swinging from round to round (nothing decided about FC
/// there); everything else as in the first.
pub fn sample_rerun() -> Comparison {
    let mut b = sample_comparison();
    for c in &mut b.cells {
        let round = c.round.unwrap_or(c.repeat) as usize;
        if c.workload == "seq-read-1m" && c.target == PROFILES[2].name {
            c.result.mb_per_s /= 3.0;
            c.result.iops /= 3.0;
        }
        if c.workload.starts_with("db-") && c.target == PROFILES[0].name {
            let f = [1.0, 1.6, 0.6][round % 3];
            c.result.iops *= f;
            c.result.mb_per_s *= f;
        }
    }
    b
}
