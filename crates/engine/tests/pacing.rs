//! The open loop's pacing (run/open.rs): the time a stream spins for its next arrival inside the
//! window is counted (`TargetRun::pacing_ns`), so that CPU efficiency can leave it out. It must
//! be CPU time the process spent (never the stream's sleeps), it must be there in an open loop
//! whose gaps are spun, and a closed loop has none.

use std::sync::Arc;
use std::time::Duration;

use sanbench_engine::mem::MemTarget;
use sanbench_engine::spec::Workload;
use sanbench_engine::{run, NoObserver, RunPlan, Target};

fn plan(rate: Option<f64>) -> RunPlan {
    let rate = rate.map_or(String::new(), |r| format!("rate = {r:?}\n"));
    let w = Workload::from_toml(&format!(
        "qd = 4\nramp = \"50ms\"\ntime = \"600ms\"\n{rate}\
         [[segment]]\nbs = \"4k\"\nread = 70\nrandom = 100\n"
    ))
    .unwrap();
    let t: Arc<dyn Target> = Arc::new(MemTarget::new("mem:p", 16 << 20).unwrap());
    RunPlan {
        log_interval: Duration::from_millis(100),
        ..RunPlan::new(w, vec![t])
    }
}

/// This process's CPU time (user and system, every thread) so far.
fn process_cpu() -> Duration {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
    let u = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()), 0);
        u.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// One test in this file: the process's CPU time is the bound, and another test running
/// beside it would add to it.
#[test]
fn an_open_loops_spin_is_counted_as_cpu_time_and_a_closed_loop_has_none() {
    // 2,000 arrivals a second on a RAM disk: each I/O takes a few µs, so the stream sleeps
    // most of each 500 µs gap and spins the last 10-150 µs of it (its spin window).
    let before = process_cpu();
    let out = run(&plan(Some(2_000.0)), &NoObserver).unwrap();
    let cpu = process_cpu() - before;
    let t = &out.targets[0];
    let pacing = Duration::from_nanos(t.pacing_ns);
    let arrivals = t.read.ios + t.write.ios;
    assert!(arrivals >= 1_000, "{arrivals} I/Os");
    // Each gap spins at least the narrowest window (10 µs) unless its wake-up came after the
    // arrival: over ~1,200 gaps that is 12 ms; 1 ms holds on a host that woke late often.
    assert!(
        pacing >= Duration::from_millis(1),
        "{pacing:?} of pacing over {arrivals} arrivals"
    );
    // Never the sleeps: no more than the CPU time the whole process spent (the stream, the
    // coordinator and the set-up), with 5 ms for rusage's tick-based accounting.
    assert!(
        pacing <= cpu + Duration::from_millis(5),
        "{pacing:?} of pacing, {cpu:?} of process CPU"
    );
    // And less than the window the stream ran.
    assert!(pacing < out.window, "{pacing:?} in {:?}", out.window);

    // The result document says it in seconds.
    let r = sanbench_engine::result::target_result(t, out.window.as_secs_f64(), false);
    let p = r.pacing_cpu_s.expect("an open loop's pacing");
    assert!((p - t.pacing_ns as f64 / 1e9).abs() < 1e-12, "{p}");

    let out = run(&plan(None), &NoObserver).unwrap();
    assert_eq!(out.targets[0].pacing_ns, 0);
    let r = sanbench_engine::result::target_result(&out.targets[0], 1.0, false);
    assert_eq!(r.pacing_cpu_s, None);
}
