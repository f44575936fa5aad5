//! Each result's `bottleneck` from the host monitor's report: which threads were the
//! initiator's and which the target's, the link toward the target and the device under it.
//! The judging is `sanbench_analysis::bottleneck` (pure); this module only gathers its figures.

use std::path::Path;

use sanbench_analysis::bottleneck::{
    attribute, DeviceLoad, Figures, HostLoad, LinkLoad, ThreadLoad,
};
use sanbench_engine::result::{RunDoc, TargetResult};
use sanbench_engine::run::{is_stream_thread, STREAM_THREAD_PREFIX};
use sanbench_engine::sync::SYNC_THREAD_PREFIX;
use sanbench_monitor::procs::GroupThread;
use sanbench_monitor::MonitorReport;

/// Thread-name prefixes of the built-in servers' connection threads, by URI scheme.
const SERVER_THREADS: [(&str, &str); 3] = [
    ("nbd", sanbench_nbd::CONNECTION_THREAD_PREFIX),
    ("iscsi", sanbench_iscsi::target::CONNECTION_THREAD_PREFIX),
    ("nvme", sanbench_nvme::target::CONNECTION_THREAD_PREFIX),
];

/// sanbench's own threads that drive target `ti` (`None`: every target, the aggregate): its
/// stream threads `sb-wW-tT`, the sync engine's `sb-syncW-I` (when the target runs on it) and
/// io_uring's workers (`iou-wrk-*`, `iou-sqp-*`: the kernel doing the ring's work) when it runs
/// on io_uring.
fn is_initiator(t: &GroupThread, ti: Option<usize>, engine: &str) -> bool {
    if t.group != "self" {
        return false;
    }
    if t.name.starts_with(STREAM_THREAD_PREFIX) {
        return is_stream_thread(&t.name, ti);
    }
    let any = engine == "all" || engine.contains(" x");
    (t.name.starts_with(SYNC_THREAD_PREFIX) && (any || engine == "sync"))
        || (t.name.starts_with(sanbench_iscsi::sg::SG_THREAD_PREFIX) && (any || engine == "sg"))
        || ((t.name.starts_with("iou-wrk-") || t.name.starts_with("iou-sqp-"))
            && (any || engine == "io_uring" || engine == "nvme-ng"))
}

/// The target's threads on this host: the built-in server's connection threads (in this
/// process, or a `--watch`ed `sanbench serve`), and every thread of a `--watch`ed process.
fn is_target(t: &GroupThread, uri: &str) -> bool {
    let scheme = uri.split("://").next().unwrap_or("");
    let server = SERVER_THREADS
        .iter()
        .any(|(s, prefix)| scheme.starts_with(s) && t.name.starts_with(prefix));
    server || t.group.starts_with("watch:")
}

fn load(t: &GroupThread, with_process: bool) -> ThreadLoad {
    ThreadLoad {
        name: t.name.clone(),
        process: if with_process {
            format!("{} (pid {})", t.process, t.pid)
        } else {
            String::new()
        },
        run_s: t.cpu_s,
        wait_s: t.wait_s,
    }
}

fn iface_of(r: &TargetResult) -> Option<String> {
    let p = &r.info.as_ref()?.params;
    p.get("interface")?
        .get("name")?
        .as_str()
        .filter(|n| !n.is_empty())
        .map(String::from)
}

fn link_of(iface: &str, report: &MonitorReport, root: &Path) -> Option<LinkLoad> {
    let c = report.net.interfaces.iter().find(|i| i.name == iface)?;
    let w = report.window_s.max(1e-9);
    let bytes_per_s = c.counters.rx_bytes.max(c.counters.tx_bytes) as f64 / w;
    let rate_bits = sanbench_monitor::net::link_speed_bits(root, iface);
    Some(LinkLoad {
        iface: iface.to_string(),
        bytes_per_s,
        rate_bits,
        rate_source: match (rate_bits, iface) {
            (Some(_), _) => "sysfs speed".into(),
            (None, "lo") => "loopback".into(),
            (None, _) => "no speed in sysfs".into(),
        },
    })
}

fn device_of(r: &TargetResult, report: &MonitorReport) -> Option<DeviceLoad> {
    let p = &r.info.as_ref()?.params;
    let kind = p.get("kind")?.as_str()?;
    if kind != "file" && kind != "block device" {
        return None;
    }
    let path = p.get("path")?.as_str()?;
    let (major, minor) = sanbench_monitor::disk::device_of(Path::new(path))?;
    let direct = p.get("direct").and_then(|d| d.as_bool()).unwrap_or(false);
    Some(match report.disks.device(major, minor) {
        Some(d) => DeviceLoad {
            name: d.name.clone(),
            util_pct: d.util_pct,
            avg_queue: d.avg_queue,
            direct,
        },
        // The device did no I/O in the window (a file served from the page cache).
        None => DeviceLoad {
            name: format!("{major}:{minor}"),
            util_pct: 0.0,
            avg_queue: 0.0,
            direct,
        },
    })
}

/// The figures of one result (`ti`: its index among the run's targets; `None`: the
/// aggregate of all of them).
pub fn figures(r: &TargetResult, ti: Option<usize>, report: &MonitorReport) -> Figures {
    let root = Path::new("/");
    let mut notes = Vec::new();
    let initiator: Vec<ThreadLoad> = report
        .threads
        .iter()
        .filter(|t| is_initiator(t, ti, &r.engine))
        .map(|t| load(t, false))
        .collect();
    let uri = r
        .info
        .as_ref()
        .map_or(r.target.as_str(), |i| i.uri.as_str());
    let target: Vec<ThreadLoad> = report
        .threads
        .iter()
        .filter(|t| is_target(t, uri))
        .map(|t| load(t, true))
        .collect();
    if target.is_empty() && uri.contains("://") {
        notes.push(
            "target CPU not measured: the target runs elsewhere (or give --watch PID|NAME of \
             its process on this host)"
                .to_string(),
        );
    }
    if initiator.iter().any(|t| t.wait_s.is_none()) {
        notes.push("no schedstat: a thread's waiting for a CPU is not counted".to_string());
    }
    let c = &report.cpu;
    let host = (c.cores > 0).then_some(HostLoad {
        cores: c.cores,
        busy_pct: c.busy_pct,
        softirq_pct: c.breakdown.softirq_pct,
        steal_pct: c.breakdown.steal_pct,
        pacing_pct: r.efficiency.pacing_cpu_pct.unwrap_or(0.0),
    });
    let link = iface_of(r).and_then(|i| link_of(&i, report, root));
    Figures {
        window_s: report.window_s,
        initiator,
        target,
        host,
        link,
        device: device_of(r, report),
        mean_in_flight: r.littles_law.mean_outstanding,
        asked: r.littles_law.outstanding,
        open_loop: r.open_loop.as_ref().map(|o| (o.valid, o.asked_iops)),
        notes,
    }
}

/// Fills every result's `bottleneck` (and the aggregate's). Call after the manifest, which
/// names the interface toward each network target.
pub fn attach(doc: &mut RunDoc, report: &MonitorReport) {
    if report.window_s <= 0.0 {
        return;
    }
    for (ti, r) in doc.results.iter_mut().enumerate() {
        r.bottleneck = Some(attribute(&figures(r, Some(ti), report)));
    }
    if let Some(all) = doc.all.as_mut() {
        // The aggregate's link and device only when every target shares them.
        let mut f = figures(all, None, report);
        let ifaces: Vec<Option<String>> = doc.results.iter().map(iface_of).collect();
        if let Some(Some(i)) = ifaces
            .first()
            .filter(|_| ifaces.windows(2).all(|w| w[0] == w[1]))
        {
            f.link = link_of(i, report, Path::new("/"));
        }
        let devices: Vec<Option<String>> = doc
            .results
            .iter()
            .map(|r| device_of(r, report).map(|d| d.name))
            .collect();
        if devices.first().is_some_and(|d| d.is_some()) && devices.windows(2).all(|w| w[0] == w[1])
        {
            f.device = device_of(&doc.results[0], report);
        }
        all.bottleneck = Some(attribute(&f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn th(group: &str, name: &str) -> GroupThread {
        GroupThread {
            group: group.into(),
            process: "sanbench".into(),
            pid: 7,
            tid: 8,
            name: name.into(),
            cpu_s: 1.0,
            wait_s: Some(0.0),
        }
    }

    #[test]
    fn whose_thread_is_it() {
        assert!(is_initiator(&th("self", "sb-w0-t1"), Some(1), "nbd"));
        assert!(!is_initiator(&th("self", "sb-w0-t1"), Some(0), "nbd"));
        assert!(!is_initiator(&th("self", "sb-w0-t12"), Some(1), "nbd"));
        assert!(is_initiator(&th("self", "sb-w3-t12"), None, "all"));
        assert!(is_initiator(&th("self", "sb-sync0-3"), Some(0), "sync"));
        assert!(!is_initiator(
            &th("self", "sb-sync0-3"),
            Some(0),
            "io_uring"
        ));
        assert!(is_initiator(&th("self", "iou-wrk-77"), Some(0), "io_uring"));
        // The sg engine's SG_IO threads, and nvme-ng's ring workers.
        assert!(is_initiator(&th("self", "sb-sg0-5"), Some(0), "sg"));
        assert!(!is_initiator(&th("self", "sb-sg0-5"), Some(0), "sync"));
        assert!(is_initiator(&th("self", "iou-wrk-9"), Some(0), "nvme-ng"));
        assert!(!is_initiator(&th("watch:tgtd", "sb-w0-t0"), Some(0), "nbd"));
        assert!(!is_initiator(&th("self", "sb-nbd-c0"), Some(0), "nbd"));
        assert!(is_target(&th("self", "sb-nbd-c0"), "nbd://127.0.0.1:1"));
        assert!(!is_target(&th("self", "sb-iscsi-c0"), "nbd://127.0.0.1:1"));
        assert!(is_target(&th("self", "sb-nvme-c2"), "nvme+tcp://h/nqn/1"));
        assert!(is_target(
            &th("watch:nbdkit", "nbdkit"),
            "nbd://127.0.0.1:1"
        ));
        assert!(!is_target(&th("self", "sb-w0-t0"), "nbd://127.0.0.1:1"));
    }
}
