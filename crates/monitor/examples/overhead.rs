//! Measures the monitor's own cost: runs the sampler on the real host and reads the CPU time of
//! its background thread (`sanbench-mon`) from that thread's CPU clock (ns; falls back to
//! utime+stime ticks from `/proc/self/task/TID/stat`), plus the caller-side cost of the window bounds.
//!
//! ```text
//! cargo run --release -p sanbench-monitor --example overhead -- [SECONDS=20] [INTERVAL_MS=1000]
//! ```

use sanbench_monitor::procs::parse_task_stat;
use sanbench_monitor::{Monitor, MonitorConfig, PowerChoice};
use std::time::{Duration, Instant};

/// CPU seconds of the thread named `name` in this process: its per-thread CPU clock (ns) when
/// the kernel grants it, else utime+stime ticks from `stat`.
fn thread_cpu_s(name: &str) -> Option<(u32, f64, &'static str)> {
    let tck = sanbench_monitor::fsutil::clk_tck() as f64;
    for e in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let tid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let st = parse_task_stat(&stat)?;
        if st.comm != name {
            continue;
        }
        // The kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): ((~tid) << 3) | 4 | 2, valid
        // for threads of the calling process.
        let clock = ((!(tid as libc::clockid_t)) << 3) | 6;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; an invalid clock id only returns an error.
        if unsafe { libc::clock_gettime(clock, &mut ts) } == 0 {
            return Some((
                tid,
                ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9,
                "thread CPU clock",
            ));
        }
        return Some((tid, (st.utime + st.stime) as f64 / tck, "stat ticks"));
    }
    None
}

fn caller_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let interval_ms: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let cfg = MonitorConfig {
        interval: Duration::from_millis(interval_ms),
        power: PowerChoice::Auto,
        ..Default::default()
    };
    let m = Monitor::new(cfg).expect("monitor");
    let source = m
        .power_source()
        .map(|(n, modeled)| format!("{n}{}", if modeled { " (modeled)" } else { "" }))
        .unwrap_or_else(|| "none".into());
    let h = m.start().expect("start");
    let c0 = caller_cpu();
    h.window_start();
    let bound_cost = caller_cpu() - c0;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let c1 = caller_cpu();
    h.window_end();
    let bound_cost = bound_cost + (caller_cpu() - c1);
    let (tid, cpu_s, how) =
        thread_cpu_s(sanbench_monitor::sampler::SAMPLER_THREAD_NAME).expect("sampler thread");
    let wall = t0.elapsed().as_secs_f64();
    let rep = h.finish().expect("report");
    let ticks = rep.series.len();
    let procs = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|s| s.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0);
    println!(
        "sampler thread {tid}: {:.3} ms CPU over {wall:.1} s ({how}) = {:.4} % of one core; \
         {ticks} ticks at {interval_ms} ms, {:.0} µs per tick; {procs} processes on the host; \
         power source {source}",
        cpu_s * 1e3,
        cpu_s / wall * 100.0,
        cpu_s / ticks.max(1) as f64 * 1e6
    );
    println!(
        "window bounds on the caller's thread: {:.0} µs for start + end",
        bound_cost.as_secs_f64() * 1e6
    );
    println!(
        "window: {:.2} s, system busy {:.2} %, self group {:.3} s",
        rep.window_s, rep.cpu.busy_pct, rep.cpu.groups[0].cpu_s
    );
}
