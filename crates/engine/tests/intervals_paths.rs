//! `--log-interval` over a multipath target: every interval's paths add up to its directions,
//! bucket for bucket, and the merged intervals to the window.

use std::sync::Arc;
use std::time::Duration;

mod support;
use support::{plan, Keep};

use sanbench_engine::mem::MemTarget;
use sanbench_engine::run::Interval;
use sanbench_engine::{run, EngineError, NoObserver, Queue, QueueConfig, Target, TargetInfo};
use sanbench_stats::LatencyHistogram;

/// A `mem:` store named as one logical unit, as a transport's path is (the multipath layer
/// checks that its paths lead to the same one).
struct Lu {
    inner: MemTarget,
    info: TargetInfo,
}

impl Target for Lu {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        self.inner.open_queue(cfg)
    }
}

#[test]
fn over_several_paths_each_interval_adds_up_per_path_and_per_direction() {
    use sanbench_engine::multipath::{MultipathTarget, Opener, Options, Policy, LU_ID, MULTI_CONN};
    let openers: Vec<Opener> = (0..2)
        .map(|i| {
            let o: Opener = Arc::new(move || {
                let inner = MemTarget::new(&format!("mem:p{i}"), 16 << 20)?;
                let mut info = inner.info().clone();
                info.params.insert(LU_ID.into(), "one-lu".into());
                info.params.insert(MULTI_CONN.into(), true.into());
                Ok(Arc::new(Lu { inner, info }) as Arc<dyn Target>)
            });
            o
        })
        .collect();
    let options = Options {
        policy: Policy::RoundRobin,
        ..Options::default()
    };
    let t: Arc<dyn Target> =
        Arc::new(MultipathTarget::new("mem:multipath", openers, options).unwrap());
    let keep = Arc::new(Keep::default());
    // No raw latencies: those send every completion through the general counting, and this
    // is about the multipath one (each I/O recorded once, in its path's histogram of its
    // direction, added to both at the interval's end).
    let mut p = plan(vec![t], 50, 300, Duration::from_millis(20));
    p.intervals = Some(keep.clone());
    let out = run(&p, &NoObserver).unwrap();
    let got = keep.0.lock().unwrap();
    assert!(got.len() >= 3, "{} intervals", got.len());
    let mut merged = Interval::default();
    for (_, k, _, _, iv) in got.iter() {
        let ios = iv.read.ios + iv.write.ios;
        assert_eq!(iv.read.hist.count(), iv.read.ios, "interval {k}: reads");
        assert_eq!(iv.write.hist.count(), iv.write.ios, "interval {k}: writes");
        // A slot for each path in every interval, made before the clock started (a path
        // that completed nothing in it has zeros).
        assert_eq!(iv.paths.len(), 2, "interval {k}: {} paths", iv.paths.len());
        let mut paths = LatencyHistogram::new();
        for (i, ps) in iv.paths.iter().enumerate() {
            assert_eq!(
                ps.latency.count(),
                ps.read_ios + ps.write_ios,
                "interval {k}, path {i}"
            );
            paths.merge(&ps.latency);
        }
        let mut both = iv.read.hist.clone();
        both.merge(&iv.write.hist);
        assert_eq!(paths.buckets(), both.buckets(), "interval {k}");
        assert_eq!(paths.count(), ios);
        merged.merge(iv);
    }
    assert!(
        merged.paths.iter().all(|p| p.read_ios + p.write_ios > 10),
        "both paths carried I/O"
    );
    let t = &out.targets[0];
    assert!(
        t.read.ios > 100 && t.write.ios > 20,
        "{} {}",
        t.read.ios,
        t.write.ios
    );
    assert_eq!(merged.read.hist.buckets(), t.read.hist.buckets());
    assert_eq!(merged.write.hist.buckets(), t.write.hist.buckets());
    assert_eq!(t.read.hist.count(), t.read.ios);
    assert_eq!(t.write.hist.count(), t.write.ios);
}
