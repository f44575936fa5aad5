//! The monitor end to end: on a fixture root (exact CPU and network deltas, a command meter
//! integrated against an idle baseline, a meter failing mid-run) and on the real procfs (a
//! `burn` thread's CPU attributed to this process).

use sanbench_monitor::{efficiency, Monitor, MonitorConfig, PowerChoice};
use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

const NET_HDR: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n";

fn net_dev(rx: u64, tx: u64) -> String {
    format!(
        "{NET_HDR}    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n  eth0: {rx} {} 0 0 0 0 0 0 {tx} {} 0 0 0 0 0 0\n",
        rx / 1000,
        tx / 1000
    )
}

fn fixture(root: &Path) {
    fs::create_dir_all(root.join("proc/net")).unwrap();
    fs::write(
        root.join("proc/stat"),
        "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\n",
    )
    .unwrap();
    fs::write(root.join("proc/net/dev"), net_dev(1_000_000, 50_000)).unwrap();
    fs::write(root.join("proc/uptime"), "100.0 100.0\n").unwrap();
    fs::write(root.join("watts"), "100\n").unwrap();
}

fn config(root: &Path) -> MonitorConfig {
    MonitorConfig {
        root: root.to_path_buf(),
        interval: Duration::from_millis(50),
        baseline: Duration::from_millis(300),
        power: PowerChoice::Command(format!("cat {}", root.join("watts").display())),
        clk_tck: Some(100),
        self_pid: Some(999_999),
        ..Default::default()
    }
}

#[test]
fn fixture_window_exact_cpu_net_and_integrated_power() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fixture(r);
    let mut m = Monitor::new(config(r)).unwrap();
    assert_eq!(m.power_source(), Some(("command".to_string(), false)));
    let b = m.baseline().unwrap();
    assert!((b.idle_w.unwrap() - 100.0).abs() < 1e-9);
    assert_eq!(b.busy_pct, 0.0); // the fixture's counters did not move

    fs::write(r.join("watts"), "150\n").unwrap();
    let h = m.start().unwrap();
    std::thread::sleep(Duration::from_millis(120)); // let samples at 150 W precede the window
    h.window_start();
    // Δ: user +300, system +100, softirq +50, idle +500, iowait +50 → total 1000, busy 450.
    fs::write(
        r.join("proc/stat"),
        "cpu  400 0 200 1300 50 0 50 0 0 0\ncpu0 350 0 100 450 0 0 50 0 0 0\ncpu1 50 0 100 850 50 0 0 0 0 0\n",
    )
    .unwrap();
    fs::write(r.join("proc/net/dev"), net_dev(5_200_000, 150_000)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    h.window_end();
    let rep = h.finish().unwrap();

    assert!(
        rep.window_s > 0.45 && rep.window_s < 2.0,
        "{}",
        rep.window_s
    );
    assert!((rep.cpu.busy_pct - 45.0).abs() < 1e-9);
    assert!((rep.cpu.busy_cpu_s - 4.5).abs() < 1e-9);
    assert!((rep.cpu.breakdown.user_pct - 30.0).abs() < 1e-9);
    assert!((rep.cpu.breakdown.softirq_pct - 5.0).abs() < 1e-9);
    assert_eq!(rep.cpu.cores, 2);
    // cpu0: Δ user 300 system 50 softirq 50 idle 50 → 400 of 450 busy.
    assert!((rep.cpu.per_core[0].pct.busy_pct - 400.0 / 450.0 * 100.0).abs() < 1e-9);
    assert_eq!(rep.cpu.baseline_busy_pct, Some(0.0));
    assert_eq!(rep.cpu.busy_above_idle_pct, Some(45.0));
    assert_eq!(rep.net.total.rx_bytes, 4_200_000);
    assert_eq!(rep.net.total.tx_bytes, 100_000);

    let p = &rep.power;
    assert_eq!(p.source, "command");
    assert!(!p.modeled);
    assert!((p.idle_w.unwrap() - 100.0).abs() < 1e-9);
    let avg = p.avg_w.unwrap();
    assert!((avg - 150.0).abs() < 1e-6, "{avg}");
    let j = p.joules.unwrap();
    assert!((j - 150.0 * rep.window_s).abs() < 1e-6);
    assert!((p.joules_above_idle.unwrap() - 50.0 * rep.window_s).abs() < 1e-6);
    assert!(p.samples >= 5, "{}", p.samples);
    assert!(p.note.is_none(), "{:?}", p.note);
    assert!(rep.series.len() >= 8);
    assert!(rep.series.iter().all(|s| s.watts.is_some()));

    let e = efficiency(100_000, 409_600_000, rep.window_s, &rep, None);
    assert!((e.iops_per_cpu_pct.unwrap() - 100_000.0 / rep.window_s / 45.0).abs() < 1e-6);
    assert!((e.cpu_us_per_io.unwrap() - 45.0).abs() < 1e-9);
    let ipw = e.iops_per_watt.unwrap();
    assert!(
        (ipw - 100_000.0 / (50.0 * rep.window_s)).abs() < 1e-3,
        "{ipw}"
    );

    // The JSON blocks the run loop stores.
    let v = serde_json::to_value(&rep).unwrap();
    for k in [
        "busy_pct",
        "per_core",
        "breakdown",
        "baseline_busy_pct",
        "groups",
    ] {
        assert!(v["cpu"].get(k).is_some(), "cpu.{k}");
    }
    for k in ["name", "cpu_s", "pct_of_core", "threads"] {
        assert!(v["cpu"]["groups"][0].get(k).is_some(), "groups[0].{k}");
    }
    assert_eq!(v["net"]["total"]["rx_bytes"], 4_200_000);
    for k in ["source", "modeled", "idle_w", "avg_w", "joules", "samples"] {
        assert!(v["power"].get(k).is_some(), "power.{k}");
    }
}

#[test]
fn meter_failing_mid_run_leaves_a_note_and_no_number() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fixture(r);
    let mut m = Monitor::new(config(r)).unwrap();
    m.baseline().unwrap();
    let h = m.start().unwrap();
    h.window_start();
    std::thread::sleep(Duration::from_millis(120));
    fs::remove_file(r.join("watts")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    h.window_end();
    let rep = h.finish().unwrap();
    assert!((rep.power.idle_w.unwrap() - 100.0).abs() < 1e-9);
    assert_eq!(rep.power.joules, None);
    assert_eq!(rep.power.avg_w, None);
    assert_eq!(rep.power.joules_above_idle, None);
    let note = rep.power.note.clone().unwrap();
    assert!(note.contains("command failed"), "{note}");
    assert_eq!(efficiency(1000, 4096, 1.0, &rep, None).iops_per_watt, None);
}

#[test]
fn no_meter_at_all_and_no_baseline() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fixture(r);
    let cfg = MonitorConfig {
        power: PowerChoice::Rapl,
        ..config(r)
    };
    // An explicit choice that cannot work is not fatal: no power figures, a note.
    let m = Monitor::new(cfg).unwrap();
    let rep = m.start().unwrap().finish().unwrap();
    assert_eq!(rep.power.source, "none");
    assert_eq!(rep.power.joules, None);
    assert!(rep.power.note.unwrap().contains("no RAPL"));
    assert_eq!(rep.cpu.baseline_busy_pct, None);
    // No /proc/stat: the monitor cannot work and says so.
    let e = Monitor::new(MonitorConfig {
        root: r.join("nowhere"),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("proc/stat"), "{e}");
}

/// CPU time this thread has used, from CLOCK_THREAD_CPUTIME_ID.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn burn_for(cpu: Duration) {
    let mut x = 0u64;
    while thread_cpu() < cpu {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
}

#[test]
fn real_procfs_burn_thread_is_attributed_to_this_process() {
    let cfg = MonitorConfig {
        interval: Duration::from_millis(100),
        baseline: Duration::from_millis(200),
        power: PowerChoice::Off,
        ..Default::default()
    };
    let mut m = Monitor::new(cfg).unwrap();
    m.baseline().unwrap();
    let h = m.start().unwrap();
    h.window_start();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let burner = std::thread::Builder::new()
        .name("burn".into())
        .spawn(move || {
            burn_for(Duration::from_secs(1));
            done_tx.send(()).unwrap();
            // Stay alive until the window closed, so the thread is seen by name at the end.
            let _ = exit_rx.recv();
        })
        .unwrap();
    done_rx.recv().unwrap();
    h.window_end();
    exit_tx.send(()).unwrap();
    burner.join().unwrap();
    let rep = h.finish().unwrap();

    let me = &rep.cpu.groups[0];
    assert_eq!(me.name, "self");
    assert!(
        (0.7..=1.3).contains(&me.cpu_s),
        "self group CPU {:.3} s, expected ≈ 1 s: {me:?}",
        me.cpu_s
    );
    let burn = me
        .top_threads
        .iter()
        .find(|t| t.name == "burn")
        .unwrap_or_else(|| panic!("no burn thread in {:?}", me.top_threads));
    assert_eq!(burn.pid, std::process::id());
    assert!((0.7..=1.3).contains(&burn.cpu_s), "{burn:?}");
    // System-wide busy time includes the burn: at least ~1 CPU-second.
    assert!(rep.cpu.busy_cpu_s >= 0.7, "{}", rep.cpu.busy_cpu_s);
    assert!(me.threads >= 2);
}

#[test]
fn rapl_counters_at_exact_window_bounds_with_wrap() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fixture(r);
    let z = r.join("sys/class/powercap/intel-rapl:0");
    fs::create_dir_all(&z).unwrap();
    fs::write(z.join("name"), "package-0\n").unwrap();
    fs::write(z.join("max_energy_range_uj"), "262143328850\n").unwrap();
    // Replaced whole (a write then a rename), as sysfs reads are: `fs::write` truncates first,
    // and the sampler reading in between saw an empty counter (no figure at a bound: this test
    // failed 2 runs in 8).
    let put = |z: &std::path::Path, uj: u64| {
        let tmp = z.join(".energy_uj.new");
        fs::write(&tmp, format!("{uj}\n")).unwrap();
        fs::rename(&tmp, z.join("energy_uj")).unwrap();
    };
    let set = |uj: u64| put(&z, uj);
    set(262_000_000_000);
    let cfg = MonitorConfig {
        power: PowerChoice::Rapl,
        baseline: Duration::from_millis(200),
        ..config(r)
    };
    let mut m = Monitor::new(cfg).unwrap();
    assert_eq!(m.power_source(), Some(("rapl".to_string(), false)));
    // 10 J during a 200 ms baseline: ≈ 50 W idle.
    let b = {
        let z = z.clone();
        let bumper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            put(&z, 262_010_000_000);
        });
        let b = m.baseline().unwrap();
        bumper.join().unwrap();
        b
    };
    let idle = b.idle_w.unwrap();
    assert!(idle > 30.0 && idle < 60.0, "{idle}");
    let h = m.start().unwrap();
    set(262_100_000_000);
    h.window_start();
    std::thread::sleep(Duration::from_millis(150));
    // Wraps: 262100 J → max 262143.32885 J → 56.67115 J: Δ = 100 J exactly.
    set(56_671_150);
    std::thread::sleep(Duration::from_millis(150));
    h.window_end();
    set(99_000_000);
    let rep = h.finish().unwrap();
    let j = rep.power.joules.unwrap();
    assert!((j - 100.0).abs() < 1e-6, "{j}");
    assert!((rep.power.avg_w.unwrap() - 100.0 / rep.window_s).abs() < 1e-6);
    assert!(rep.power.samples >= 3);
}

#[test]
fn slow_meter_does_not_delay_window_bounds() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fixture(r);
    let cfg = MonitorConfig {
        power: PowerChoice::Command(format!("sleep 0.4; cat {}", r.join("watts").display())),
        ..config(r)
    };
    let m = Monitor::new(cfg).unwrap();
    let h = m.start().unwrap();
    std::thread::sleep(Duration::from_millis(100)); // a background reading is under way
    let t0 = std::time::Instant::now();
    h.window_start();
    let waited = t0.elapsed();
    assert!(
        waited < Duration::from_millis(150),
        "window_start waited {waited:?}"
    );
    std::thread::sleep(Duration::from_millis(900));
    h.window_end();
    let rep = h.finish().unwrap();
    // Readings on both sides of each bound: the window is covered and constant at 100 W.
    assert!(
        (rep.power.avg_w.unwrap() - 100.0).abs() < 1e-9,
        "{:?}",
        rep.power
    );
}

/// On a VM whose hypervisor steals time: steal is reported beside busy, never inside it, so the
/// CPU a run is charged with (and every efficiency figure) counts only work done on this host.
#[test]
fn steal_is_reported_beside_busy_not_in_it() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fixture(r);
    let mut m = Monitor::new(config(r)).unwrap();
    m.baseline().unwrap();
    let h = m.start().unwrap();
    h.window_start();
    // Δ: user +300, system +100, idle +400, steal +200 → total 1000, busy 400, steal 200.
    fs::write(
        r.join("proc/stat"),
        "cpu  400 0 200 1200 0 0 0 200 0 0\ncpu0 200 0 100 600 0 0 0 100 0 0\ncpu1 200 0 100 600 0 0 0 100 0 0\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    h.window_end();
    let rep = h.finish().unwrap();
    assert!(
        (rep.cpu.busy_pct - 40.0).abs() < 1e-9,
        "{}",
        rep.cpu.busy_pct
    );
    assert!((rep.cpu.breakdown.steal_pct - 20.0).abs() < 1e-9);
    assert!((rep.cpu.busy_cpu_s - 4.0).abs() < 1e-9);
    // cpu0: Δ user 150 system 50 idle 200 steal 100 → 200 of 500 busy.
    assert!((rep.cpu.per_core[0].pct.busy_pct - 40.0).abs() < 1e-9);
    assert_eq!(rep.cpu.busy_above_idle_pct, Some(40.0));
    let e = efficiency(100_000, 409_600_000, rep.window_s, &rep, None);
    assert_eq!(e.cpu_pct, Some(40.0));
    assert!((e.iops_per_cpu_pct.unwrap() - 100_000.0 / rep.window_s / 40.0).abs() < 1e-6);
    let v = serde_json::to_value(&rep).unwrap();
    assert_eq!(v["cpu"]["breakdown"]["steal_pct"], 20.0);
}
