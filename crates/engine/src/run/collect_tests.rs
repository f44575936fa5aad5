//! A save part-way is the final result restricted to the intervals it covers: the same
//! collector fed only those intervals and finished where the save was taken gives, figure for
//! figure, what the save held (totals, summaries per target, per path and for all targets),
//! so the two can never drift apart.

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::{Collector, Cut, Io};
use crate::engine::TargetInfo;
use crate::run::interval::{Interval, Msg, PathStats, Pool};
use crate::run::shared::Live;
use crate::run::snapshot::{Base, SaveSink, Saves};
use crate::run::RunOutput;

const LEN_NS: u64 = 100_000_000;
const TARGETS: usize = 2;
/// Intervals the window runs; target 1's streams lag target 0's by `LAG` of them.
const N: u64 = 24;
const LAG: u64 = 3;

#[derive(Default)]
struct Keep(Mutex<Vec<RunOutput>>);

impl SaveSink for Keep {
    fn save(&self, out: RunOutput) {
        self.0.lock().unwrap().push(out);
    }
}

fn base() -> Base {
    Base {
        infos: (0..TARGETS)
            .map(|i| TargetInfo {
                uri: format!("mem:{i}"),
                ..TargetInfo::default()
            })
            .collect(),
        outstanding: 4,
        open_loop: None,
        started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000),
        run_id: 7,
        ramp: Duration::from_secs(1),
    }
}

/// Stream `s`'s interval `k`: varied counts and latencies, split over two paths.
fn interval(s: usize, k: u64) -> Interval {
    let mut iv = Interval::default();
    let n = 5 + (k * 7 + s as u64 * 3) % 11;
    let mut paths = [PathStats::default(), PathStats::default()];
    for j in 0..n {
        let ns = 1_000 + (k * 977 + j * 131 + s as u64 * 17) % 50_000;
        let write = j % 3 == 0;
        let (d, p) = if write {
            (&mut iv.write, &mut paths[1])
        } else {
            (&mut iv.read, &mut paths[(j % 2) as usize])
        };
        d.ios += 1;
        d.bytes += 4096;
        d.hist.record(ns);
        if write {
            p.write_ios += 1;
            p.write_bytes += 4096;
        } else {
            p.read_ios += 1;
            p.read_bytes += 4096;
        }
        p.latency.record(ns);
    }
    iv.paths = paths.to_vec();
    iv
}

fn send(tx: &mpsc::Sender<Msg>, s: usize, k: u64) {
    tx.send(Msg {
        stream: s,
        index: k,
        next: k + 1,
        stats: interval(s, k),
    })
    .unwrap();
}

/// Runs the collector over the first `upto` intervals of every stream (target 1 lagging
/// while it runs), saving every `every`; its final output and its saves.
fn collect(upto: u64, every: Option<Duration>) -> (RunOutput, Vec<RunOutput>) {
    let keep = Arc::new(Keep::default());
    let saves = every.map(|every| Saves {
        every,
        to: keep.clone(),
    });
    let pool = Pool::new(&[(2, 0); TARGETS]);
    let (tx, rx) = mpsc::channel();
    let mut c = Collector::new(
        // Planned shorter than run, with a small cap: steps of 3 intervals that double.
        Cut {
            len_ns: LEN_NS,
            planned_ns: 10 * LEN_NS,
            cap: 4,
        },
        base(),
        false,
        Io {
            sink: None,
            saves: saves.as_ref(),
            rx,
            pool: &pool,
            lives: (0..TARGETS).map(|_| Live::new()).collect(),
        },
    );
    c.window_start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_001);
    for k in 0..upto {
        send(&tx, 0, k);
        if k >= LAG {
            send(&tx, 1, k - LAG);
        }
        c.poll(None);
    }
    for k in upto.saturating_sub(LAG)..upto {
        send(&tx, 1, k);
    }
    let window_ns = upto * LEN_NS;
    c.poll(Some(window_ns));
    let out = c.finish(window_ns);
    let saved = std::mem::take(&mut *keep.0.lock().unwrap());
    (out, saved)
}

#[test]
fn a_save_is_the_final_result_of_the_intervals_it_covers() {
    let (full, saves) = collect(N, Some(Duration::from_millis(500)));
    assert!(saves.len() >= 3, "{} saves", saves.len());
    for (i, save) in saves.iter().enumerate() {
        let at_ns = save.window.as_nanos() as u64;
        assert_eq!(at_ns % LEN_NS, 0);
        assert!(at_ns >= (i as u64 + 1) * 500_000_000, "save {i} at {at_ns}");
        let (restricted, _) = collect(at_ns / LEN_NS, None);
        let mut save = save.clone();
        // The per-second series is formed by the collector for saves and the final result
        // alike: each whole second is the sum of its intervals, and the save's equals the
        // restricted final result's (compared with the rest below).
        let whole = at_ns / 1_000_000_000;
        for (ti, t) in save.targets.iter_mut().enumerate() {
            assert_eq!(t.series.len(), whole.max(1) as usize);
            // Stream `ti` drives target `ti` (one worker): each whole second is its ten
            // intervals.
            for (sec, got) in t.series.iter().enumerate().take(whole as usize) {
                let want: u64 = (sec as u64 * 10..(sec as u64 + 1) * 10)
                    .map(|k| interval(ti, k))
                    .map(|iv| iv.read.ios + iv.write.ios)
                    .sum();
                assert_eq!(got.read_ios + got.write_ios, want, "second {sec}");
            }
        }
        assert!(save.targets.iter().all(|t| t.path_intervals.len() == 2));
        assert!(!save.all_intervals.is_empty());
        let (a, b) = (
            serde_json::to_value(&save).unwrap(),
            serde_json::to_value(&restricted).unwrap(),
        );
        assert_eq!(first_difference(&a, &b, ""), None, "save {i} at {at_ns} ns");
    }
    // The last save covers less than the whole window.
    let last = saves.last().unwrap();
    assert!(last.targets[0].read.ios < full.targets[0].read.ios);
}

/// Where two JSON values first differ (a path of keys and indices), with both sides.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<_> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (u, v) = (&x.get(k), &y.get(k));
                match (u, v) {
                    (Some(u), Some(v)) => first_difference(u, v, &format!("{at}.{k}")),
                    _ => Some(format!("{at}.{k}: {u:?} vs {v:?}")),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, &format!("{at}[{i}]"))),
        _ => (a != b).then(|| format!("{at}: {a} vs {b}")),
    }
}
