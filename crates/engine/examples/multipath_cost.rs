//! What the multipath layer costs per I/O by itself, with no network under it (issue 23's
//! "a path selector costs <= 2 % CPU per I/O").
//!
//! On loopback the layer's cost is a few per cent of a transport's, under noise of 10-20 %
//! between identical runs, and a second path brings a second connection whose own cost
//! dwarfs it. Here the paths are `null:` targets (every I/O completes at once, no data moved),
//! so the difference in process CPU per I/O between the plain null target and the same
//! target through the layer is the layer's own work: the slot kept for reissue, the
//! selector's pick and estimate, per-path counts, latency and 10 ms bins, and the stream's
//! per-path statistics. Divided by a transport's CPU per I/O on loopback (the `plain` column
//! of `scripts/bench_paths.py`), it is the layer's share of that transport's I/O.
//!
//! `cargo run --release -p sanbench-engine --example multipath_cost -- [REPS] [SECONDS]`
//! (default 7 repetitions of 2 s, 4 KiB random reads at QD 32, one worker, every variant
//! once per repetition, the order rotating). Prints the CPU-ns per I/O of each run and the
//! medians, and each variant's difference from plain.

use std::collections::BTreeMap;
use std::sync::Arc;

use sanbench_engine::multipath::{MultipathTarget, Opener, Options, Policy, LU_ID, MULTI_CONN};
use sanbench_engine::null::NullTarget;
use sanbench_engine::spec::Workload;
use sanbench_engine::{
    run, EngineError, NoObserver, Queue, QueueConfig, RunPlan, Target, TargetInfo,
};

/// A null target that names its logical unit, as a transport's does (the layer checks it).
struct Lu {
    inner: NullTarget,
    info: TargetInfo,
}

impl Lu {
    fn new(uri: &str) -> Lu {
        let inner = NullTarget::new(uri, 1 << 30);
        let mut info = inner.info().clone();
        info.params.insert(LU_ID.into(), "null-lu".into());
        info.params.insert(MULTI_CONN.into(), true.into());
        Lu { inner, info }
    }
}

impl Target for Lu {
    fn info(&self) -> &TargetInfo {
        &self.info
    }
    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        self.inner.open_queue(cfg)
    }
}

fn target(paths: usize, policy: Option<Policy>) -> Arc<dyn Target> {
    let Some(policy) = policy else {
        return Arc::new(Lu::new("null:"));
    };
    let openers: Vec<Opener> = (0..paths)
        .map(|i| {
            let o: Opener = Arc::new(move || Ok(Arc::new(Lu::new(&format!("null:{i}"))) as _));
            o
        })
        .collect();
    let options = Options {
        policy,
        ..Options::default()
    };
    Arc::new(MultipathTarget::new("null:multipath", openers, options).expect("null paths"))
}

fn plan(t: Arc<dyn Target>, secs: f64) -> RunPlan {
    let w = Workload::from_toml(&format!(
        "qd = 32\nramp = \"200ms\"\ntime = \"{}ms\"\n\
         [[segment]]\nbs = \"4k\"\nread = 100\nrandom = 100\n",
        (secs * 1000.0).round()
    ))
    .expect("workload");
    RunPlan::new(w, vec![t])
}

fn cpu_ns() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// Process CPU per I/O over the whole run (ramp and set-up included, the same for all).
fn measure(paths: usize, policy: Option<Policy>, secs: f64) -> f64 {
    let p = plan(target(paths, policy), secs);
    let before = cpu_ns();
    let out = run(&p, &NoObserver).expect("null run");
    let cpu = cpu_ns() - before;
    let t = &out.targets[0];
    let ios = (t.read.ios + t.write.ios).max(1);
    // The ramp's I/Os are not counted: scale by the window's share of the run.
    let whole = secs + 0.2;
    cpu * (secs / whole) / ios as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let reps: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(7);
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let variants: [(&str, usize, Option<Policy>); 5] = [
        ("plain", 1, None),
        ("layer, 1 path", 1, Some(Policy::ServiceTime)),
        ("2 paths service-time", 2, Some(Policy::ServiceTime)),
        ("2 paths queue-length", 2, Some(Policy::QueueLength)),
        ("2 paths round-robin", 2, Some(Policy::RoundRobin)),
    ];
    let mut res: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for rep in 0..reps {
        let mut line = format!("rep {}:", rep + 1);
        for k in 0..variants.len() {
            let i = (k + rep) % variants.len();
            let (name, paths, policy) = variants[i];
            let ns = measure(paths, policy, secs);
            res.entry(i).or_default().push(ns);
            line += &format!(" {name} {ns:.1} |");
        }
        println!("{}", line.trim_end_matches(" |"));
    }
    let med: Vec<f64> = (0..variants.len())
        .map(|i| median(res.get_mut(&i).expect("measured")))
        .collect();
    println!("CPU-ns per I/O, medians of {reps} (4 KiB random read, QD 32, one worker, {secs} s):");
    for (i, (name, _, _)) in variants.iter().enumerate() {
        let d = med[i] - med[0];
        println!("  {name:<22} {:>7.1} ns  (+{d:.1} ns over plain)", med[i]);
    }
}
