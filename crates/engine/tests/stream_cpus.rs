//! `RunPlan::stream_cpus` (fio's `cpus_allowed_policy=split`): each stream runs on one CPU of
//! the list, in turn, already when it opens its queue (what the queue starts inherits it);
//! without a list the streams keep the process's CPUs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sanbench_engine::null::NullTarget;
use sanbench_engine::spec::Workload;
use sanbench_engine::{
    run, EngineError, NoObserver, Queue, QueueConfig, RunPlan, Target, TargetInfo,
};

/// The CPUs the calling thread may run on.
fn allowed() -> Vec<usize> {
    let set = rustix::thread::sched_getaffinity(None).expect("sched_getaffinity");
    (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect()
}

/// A null target that notes, per worker, the CPUs its queue was opened on.
struct Noting {
    inner: NullTarget,
    seen: Mutex<Vec<(usize, Vec<usize>)>>,
}

impl Target for Noting {
    fn info(&self) -> &TargetInfo {
        self.inner.info()
    }
    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        self.seen.lock().unwrap().push((cfg.worker, allowed()));
        self.inner.open_queue(cfg)
    }
}

fn plan(t: Arc<dyn Target>, workers: u32, stream_cpus: Vec<usize>) -> RunPlan {
    let w = Workload::from_toml(&format!(
        "qd = 2\nworkers = {workers}\nramp = \"0s\"\ntime = \"30ms\"\n\
         [[segment]]\nbs = \"4k\"\nread = 100\nrandom = 100\n"
    ))
    .unwrap();
    RunPlan {
        log_interval: Duration::from_millis(10),
        stream_cpus,
        ..RunPlan::new(w, vec![t])
    }
}

fn seen_with(workers: u32, stream_cpus: Vec<usize>) -> Vec<Vec<usize>> {
    let t = Arc::new(Noting {
        inner: NullTarget::new("null:", 1 << 30),
        seen: Mutex::new(Vec::new()),
    });
    let out = run(&plan(t.clone(), workers, stream_cpus), &NoObserver).expect("null run");
    assert!(out.targets[0].read.ios > 0);
    let mut seen = t.seen.lock().unwrap().clone();
    seen.sort();
    seen.into_iter().map(|(_, cpus)| cpus).collect()
}

#[test]
fn split_streams_open_their_queues_on_one_cpu_each_in_turn() {
    let all = allowed();
    let (a, b) = (all[0], *all.last().unwrap());
    // One CPU for all: every stream on it alone.
    assert_eq!(seen_with(3, vec![b]), vec![vec![b]; 3]);
    // Two: streams 0, 1, 2 on a, b, a (the same when the host has one CPU).
    assert_eq!(seen_with(3, vec![a, b]), vec![vec![a], vec![b], vec![a]]);
    // None: the process's CPUs, untouched.
    assert_eq!(seen_with(2, Vec::new()), vec![all.clone(); 2]);
}

#[test]
fn a_cpu_the_process_may_not_use_fails_the_run() {
    let Some(c) = (0..rustix::thread::CpuSet::MAX_CPU)
        .rev()
        .find(|c| !allowed().contains(c))
    else {
        return; // every CPU number is allowed here: nothing to refuse
    };
    let t: Arc<dyn Target> = Arc::new(NullTarget::new("null:", 1 << 30));
    let Err(err) = run(&plan(t, 1, vec![c]), &NoObserver) else {
        panic!("a stream on CPU {c} ran");
    };
    assert!(
        err.to_string().contains("cannot run a stream on CPU"),
        "{err}"
    );
}
