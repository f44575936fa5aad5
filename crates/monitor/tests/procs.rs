//! Process, thread and kernel-thread groups on a procfs fixture built at runtime (it is mutated
//! between samples): exact CPU seconds, names with spaces and parentheses, threads and processes
//! that appear or vanish mid-window, a kworker that takes a storage workqueue's name.

use sanbench_monitor::procs::{default_kernel_patterns, ProcessTracker, WatchSpec};
use std::fs;
use std::path::Path;

const TCK: u64 = 100;

fn stat(pid: u32, comm: &str, ut: u64, st: u64, threads: u64, start: u64) -> String {
    format!(
        "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 {ut} {st} 0 0 20 0 {threads} 0 {start} 0 0\n"
    )
}

fn proc_(root: &Path, pid: u32, comm: &str, ut: u64, st: u64, start: u64) {
    let d = root.join(format!("proc/{pid}"));
    fs::create_dir_all(d.join("task")).unwrap();
    fs::write(d.join("stat"), stat(pid, comm, ut, st, 1, start)).unwrap();
}

fn thread(root: &Path, pid: u32, tid: u32, comm: &str, ut: u64, st: u64, start: u64) {
    let d = root.join(format!("proc/{pid}/task/{tid}"));
    fs::create_dir_all(&d).unwrap();
    fs::write(d.join("stat"), stat(tid, comm, ut, st, 1, start)).unwrap();
}

/// A single-threaded process: its own stat and its one task.
fn single(root: &Path, pid: u32, comm: &str, ut: u64, st: u64, start: u64) {
    proc_(root, pid, comm, ut, st, start);
    thread(root, pid, pid, comm, ut, st, start);
}

#[test]
fn groups_exact_over_a_changing_fixture() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fs::create_dir_all(r.join("proc")).unwrap();
    // Boot + 1000 s = 100000 ticks: the window starts there.
    fs::write(r.join("proc/uptime"), "1000.00 1900.00\n").unwrap();
    fs::write(r.join("proc/stat"), "cpu 1 1 1 1\n").unwrap(); // not a pid: skipped

    // sanbench itself (pid 50): main thread and a `burn` thread.
    proc_(r, 50, "sanbench", 100, 50, 1000);
    thread(r, 50, 50, "sanbench", 80, 40, 1000);
    thread(r, 50, 51, "burn", 20, 10, 1000);
    single(r, 100, "my (weird) proc", 1000, 500, 1000);
    single(r, 20, "kworker/0:1H-nvme_tcp_wq", 0, 300, 10);
    single(r, 21, "kworker/1:0-events", 0, 700, 10);
    single(r, 12, "ksoftirqd/0", 0, 50, 5);
    single(r, 1, "systemd", 5000, 5000, 1);

    let watch = vec![WatchSpec::parse("my (weird) proc")];
    let mut tr = ProcessTracker::new(r, 50, watch, default_kernel_patterns(), TCK);
    tr.sample();
    tr.window_start();

    // Mid-window: an io_uring worker appears in sanbench (started after the window: counted
    // from zero), the idle kworker now serves iSCSI (counted from first seen), and a second
    // watched process starts.
    thread(r, 50, 52, "iou-wrk-50", 0, 40, 100_050);
    proc_(r, 50, "sanbench", 100, 90, 1000);
    single(r, 21, "kworker/1:0-iscsi_q_3", 0, 800, 10);
    single(r, 200, "my (weird) proc", 30, 20, 100_100);
    tr.sample();

    // Before the end: the worker thread and the second process are gone; the process's own
    // stat still holds the exited thread's time.
    fs::remove_dir_all(r.join("proc/50/task/52")).unwrap();
    fs::remove_dir_all(r.join("proc/200")).unwrap();
    thread(r, 50, 50, "sanbench", 100, 50, 1000);
    thread(r, 50, 51, "burn", 200, 50, 1000);
    proc_(r, 50, "sanbench", 300, 140, 1000);
    single(r, 100, "my (weird) proc", 1100, 550, 1000);
    single(r, 20, "kworker/0:1H-nvme_tcp_wq", 0, 500, 10);
    single(r, 21, "kworker/1:0-iscsi_q_3", 0, 900, 10);
    single(r, 12, "ksoftirqd/0", 0, 60, 5);
    single(r, 1, "systemd", 9000, 9000, 1);
    tr.window_end();

    // After the window nothing changes the report.
    single(r, 20, "kworker/0:1H-nvme_tcp_wq", 0, 90_000, 10);
    tr.sample();

    let g = tr.report(10.0);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert_eq!(g.len(), 3);

    let me = &g[0];
    assert_eq!(me.name, "self");
    assert!(close(me.user_s, 2.0) && close(me.system_s, 0.9), "{me:?}");
    assert!(close(me.cpu_s, 2.9));
    assert!(close(me.pct_of_core, 29.0));
    assert_eq!((me.processes, me.threads), (1, 3));
    assert_eq!(me.top_threads[0].name, "burn");
    assert_eq!(me.top_threads[0].tid, 51);
    assert!(close(me.top_threads[0].cpu_s, 2.2));

    let w = &g[1];
    assert_eq!(w.name, "watch:my (weird) proc");
    // pid 100: 1.0 + 0.5 s; pid 200 (started in the window, then exited): 0.3 + 0.2 s.
    assert!(close(w.cpu_s, 2.0), "{w:?}");
    assert!(close(w.user_s, 1.3));
    assert_eq!((w.processes, w.threads), (2, 2));

    let k = &g[2];
    assert_eq!(k.name, "kernel");
    // nvme_tcp kworker 2.0 + iscsi kworker 1.0 (from first seen) + ksoftirqd 0.1 + iou-wrk 0.4.
    assert!(close(k.cpu_s, 3.5), "{k:?}");
    assert!(close(k.overlap_cpu_s.unwrap(), 0.4));
    assert_eq!(k.processes, 3);
    assert_eq!(k.threads, 4);
    assert_eq!(k.top_threads[0].name, "kworker/0:1H-nvme_tcp_wq");
    assert!(k.top_threads.iter().any(|t| t.name == "iou-wrk-50"));

    let j = serde_json::to_value(&g).unwrap();
    assert_eq!(j[0]["name"], "self");
    assert!(j[0]["pct_of_core"].is_number());
}

#[test]
fn garbage_stat_files_are_skipped_not_fatal() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fs::create_dir_all(r.join("proc/77/task")).unwrap();
    fs::write(r.join("proc/77/stat"), "77 (half a line").unwrap();
    fs::create_dir_all(r.join("proc/78")).unwrap();
    fs::write(r.join("proc/78/stat"), [0xff, 0xfe, 0x00]).unwrap();
    single(r, 79, "tgtd", 10, 10, 1);
    let mut tr = ProcessTracker::new(r, 1, vec![WatchSpec::parse("tgtd")], vec![], TCK);
    tr.window_start();
    single(r, 79, "tgtd", 20, 10, 1);
    tr.window_end();
    let g = tr.report(1.0);
    assert!((g[1].cpu_s - 0.1).abs() < 1e-9);
    // No /proc at all: empty groups, no panic.
    let mut tr = ProcessTracker::new(Path::new("/nonexistent"), 1, vec![], vec![], TCK);
    tr.window_start();
    tr.window_end();
    assert_eq!(tr.report(1.0)[0].cpu_s, 0.0);
}

/// One high-priority kworker serves several stacks' workqueues in turn: the report names it as
/// it was last seen and lists what else it was seen as during the window (not before it).
#[test]
fn shared_kworker_lists_the_workqueues_it_was_seen_serving() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fs::create_dir_all(r.join("proc")).unwrap();
    fs::write(r.join("proc/uptime"), "1000.00 1900.00\n").unwrap();
    single(r, 20, "kworker/0:1H-ib-comp-wq", 0, 100, 10);
    let mut tr = ProcessTracker::new(r, 1, vec![], default_kernel_patterns(), TCK);
    tr.sample();
    single(r, 20, "kworker/0:1H-kblockd", 0, 110, 10);
    tr.window_start();
    single(r, 20, "kworker/0:1H-nvme_tcp_wq", 0, 150, 10);
    tr.sample();
    single(r, 20, "kworker/0:1H-kblockd", 0, 170, 10);
    tr.sample();
    single(r, 20, "kworker/0:1H-nvme_tcp_wq", 0, 190, 10);
    tr.window_end();
    let g = tr.report(1.0);
    let k = g.last().unwrap();
    let w = &k.top_threads[0];
    assert_eq!(w.name, "kworker/0:1H-nvme_tcp_wq");
    assert_eq!(w.seen_as, vec!["kworker/0:1H-kblockd".to_string()]);
    assert!((w.cpu_s - 0.8).abs() < 1e-9, "{w:?}");
    let j = serde_json::to_value(w).unwrap();
    assert_eq!(j["seen_as"][0], "kworker/0:1H-kblockd");
}

/// The load beside the measurement: processes in no group, by name, over the window; every
/// process read on every pass while the window is open (outside it, unmatched ones only every
/// 8th), and one that exits in the window kept up to its last reading.
#[test]
fn others_are_the_processes_in_no_group() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fs::create_dir_all(r.join("proc")).unwrap();
    fs::write(r.join("proc/uptime"), "1000.00 1900.00\n").unwrap();
    single(r, 50, "sanbench", 100, 50, 1000);
    single(r, 60, "tgtd", 0, 0, 1000);
    single(r, 100, "cargo", 100, 50, 1000);
    single(r, 101, "rustc", 0, 0, 1000);
    single(r, 103, "sshd", 7, 7, 1000);
    single(r, 21, "kworker/1:0-events", 0, 700, 10);
    single(r, 12, "ksoftirqd/0", 0, 50, 5);
    let watch = vec![WatchSpec::parse("tgtd")];
    let mut tr = ProcessTracker::new(r, 50, watch, default_kernel_patterns(), TCK);
    tr.sample();
    tr.window_start();

    // Mid-window: rustc 101 ran 2 s, a second rustc starts (counted from zero); the group
    // members and kernel threads work too.
    single(r, 101, "rustc", 150, 50, 1000);
    single(r, 102, "rustc", 100, 0, 100_050);
    single(r, 50, "sanbench", 500, 250, 1000);
    single(r, 60, "tgtd", 300, 300, 1000);
    single(r, 21, "kworker/1:0-events", 0, 900, 10);
    // In a window the processes in no group are read every pass, at most every 250 ms.
    std::thread::sleep(std::time::Duration::from_millis(260));
    tr.sample();

    // Before the end: rustc 101 is gone (its 2 s stay), rustc 102 ran another second.
    fs::remove_dir_all(r.join("proc/101")).unwrap();
    single(r, 102, "rustc", 200, 0, 100_050);
    single(r, 100, "cargo", 400, 150, 1000);
    single(r, 12, "ksoftirqd/0", 0, 90, 5);
    tr.window_end();
    // After the window nothing changes the figures.
    single(r, 100, "cargo", 9000, 150, 1000);
    tr.sample();
    tr.sample();

    let o = tr.others(10.0);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // cargo 3 + 1 s; rustc 2 s (101) + 2 s (102); sshd 0; not sanbench, tgtd (watched), the
    // kworker or ksoftirqd.
    assert!(close(o.cpu_s, 8.0), "{o:?}");
    assert!(close(o.pct_of_core, 80.0), "{o:?}");
    let names: Vec<(&str, usize)> = o
        .top
        .iter()
        .map(|x| (x.name.as_str(), x.processes))
        .collect();
    assert_eq!(names, [("cargo", 1), ("rustc", 2)], "{o:?}");
    assert!(close(o.top[0].cpu_s, 4.0) && close(o.top[1].cpu_s, 4.0));
    let j = serde_json::to_value(&o).unwrap();
    assert_eq!(j["top"][1]["name"], "rustc");

    // A new window forgets the exited process and starts from zero.
    tr.window_start();
    tr.window_end();
    let o = tr.others(1.0);
    assert_eq!((o.cpu_s, o.top.len()), (0.0, 0), "{o:?}");
}
