//! What limited a run: the limiting resource of a target's window and the headroom of every
//! other one (docs/MEASURE.md, "Bottleneck").
//!
//! Pure: the inputs are figures the host monitor measured over the window ([`Figures`]: the
//! initiator's stream threads, the target's threads where they run on this host, all cores,
//! the link toward the target, the block device under it, the queue asked for and achieved),
//! the output is the result's `bottleneck`: a [`Verdict`], the resource, its utilization and
//! every candidate with its figures, so that a reader can check the verdict against them. The
//! result document and the report read it typed, so it lives beside the other result types;
//! the CLI turns the monitor's report into [`Figures`].
//!
//! Rules (thresholds below):
//! * A **thread** is saturated when it was runnable (on a CPU, or waiting in a run queue for
//!   one) for [`SATURATED`] of the window or more: it never waited on I/O, so a faster
//!   interconnect could not have made it go faster. The initiator's are sanbench's stream
//!   and sync threads (`initiator-cpu`), the target's are the built-in servers' connection
//!   threads and every thread of a `--watch`ed process (`target-cpu`).
//! * The **host** is saturated when its cores were busy (or stolen by the hypervisor) for
//!   [`SATURATED`] of the window *and* a thread of the run waited for a CPU for at least
//!   [`WAITED`] of it: other load on cores that the run never waited for did not limit it.
//! * The **link** is saturated at [`SATURATED`] of its line rate in either direction (the lab
//!   link's rate, or the NIC's speed); loopback has no rate and is never the verdict.
//! * The **device** is saturated at [`SATURATED`] utilization (time with I/O in flight).
//! * Several saturated: a saturated thread before all cores (a thread runnable all the window
//!   is the specific limit; busy cores are why it waited); otherwise the one with the least
//!   headroom, and within [`TIE`] of each other the more specific one (a thread before the
//!   link, then the device). The others are named in `also`.
//! * Nothing saturated: **queue** when the mean in flight stayed below [`QUEUE_FULL`] of the
//!   depth asked (the generator could not keep it full); with the queue full, the link or the
//!   device if at [`NEAR`] or more (the round trip was mostly its time), else **latency** (the
//!   queue stayed full and nothing here was busy: the round trip itself). An open loop at its
//!   asked rate is limited by that **rate**.

use std::collections::BTreeMap;

pub use sanbench_doc::bottleneck::*;

/// A resource at this share of its capacity (or more) is saturated.
pub const SATURATED: f64 = 0.90;
/// Saturated resources within this much utilization of each other count as a tie.
pub const TIE: f64 = 0.03;
/// Busy cores limit a run only if one of its threads waited for a CPU this share of the window.
pub const WAITED: f64 = 0.20;
/// Below this share of the asked depth in flight, the queue was not kept full.
pub const QUEUE_FULL: f64 = 0.80;
/// With the queue full and nothing saturated, a link or device at this share or more is the
/// verdict rather than `latency`: the round trip was mostly its time (a shaped link on a
/// loaded host falls short of its nominal rate: htb loses tokens when its softirq runs late).
pub const NEAR: f64 = 0.75;

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

/// The busiest of some threads (by runnable share, then time on a CPU) as a candidate.
fn thread_candidate(kind: Verdict, threads: &[ThreadLoad], window_s: f64) -> Option<Candidate> {
    let t = threads.iter().max_by(|a, b| {
        a.demand(window_s)
            .total_cmp(&b.demand(window_s))
            .then(a.run_s.total_cmp(&b.run_s))
    })?;
    // Waits are booked when they end, so one straddling the window's start can push the
    // runnable share a little past the window: at most all of it.
    let demand = t.demand(window_s).min(1.0);
    let on = t.run_s / window_s;
    let mut figures = BTreeMap::from([("on_cpu_pct".to_string(), on * 100.0)]);
    let waited = t.wait_s.map(|w| w / window_s);
    if let Some(w) = waited {
        figures.insert("wait_pct".into(), w * 100.0);
    }
    figures.insert("threads".into(), threads.len() as f64);
    let of = if t.process.is_empty() {
        String::new()
    } else {
        format!(" of {}", t.process)
    };
    let detail = match waited {
        Some(w) if w >= 0.05 => format!(
            "runnable {} of the window (on a CPU {}, waiting for one {})",
            pct(demand),
            pct(on),
            pct(w)
        ),
        _ => format!("{} of a core", pct(on)),
    };
    Some(Candidate {
        kind: Some(kind),
        resource: format!("thread {}{of}", t.name),
        utilization: Some(demand),
        saturated: demand >= SATURATED,
        detail,
        figures,
    })
}

fn host_candidate(h: &HostLoad, waited: Option<f64>) -> Candidate {
    let u = ((h.busy_pct + h.steal_pct) / 100.0).max(0.0);
    let mut figures = BTreeMap::from([
        ("busy_pct".to_string(), h.busy_pct),
        ("softirq_pct".to_string(), h.softirq_pct),
        ("steal_pct".to_string(), h.steal_pct),
        ("cores".to_string(), h.cores as f64),
    ]);
    // Without wait figures, busy cores are taken to have limited the run.
    let limited = waited.is_none_or(|w| w >= WAITED);
    if let Some(w) = waited {
        figures.insert("max_thread_wait_pct".into(), w * 100.0);
    }
    let mut detail = format!(
        "{} busy (softirq {}, steal {}",
        pct(h.busy_pct / 100.0),
        pct(h.softirq_pct / 100.0),
        pct(h.steal_pct / 100.0)
    );
    if h.pacing_pct > 0.0 {
        figures.insert("pacing_pct".into(), h.pacing_pct);
        detail.push_str(&format!(
            ", the open loop's pacing {}",
            pct(h.pacing_pct / 100.0)
        ));
    }
    detail.push(')');
    if let Some(w) = waited {
        detail.push_str(&format!(
            "; the run's threads waited for a CPU at most {} of the window",
            pct(w)
        ));
    }
    Candidate {
        kind: Some(Verdict::HostCpu),
        resource: format!("{} cores", h.cores),
        utilization: Some(u),
        saturated: u >= SATURATED && limited,
        detail,
        figures,
    }
}

fn link_candidate(l: &LinkLoad) -> Candidate {
    let mut figures = BTreeMap::from([("bytes_per_s".to_string(), l.bytes_per_s)]);
    let (u, detail) = match l.rate_bits.filter(|&r| r > 0) {
        Some(r) => {
            figures.insert("rate_bits_per_s".into(), r as f64);
            let u = l.bytes_per_s * 8.0 / r as f64;
            (
                Some(u),
                format!(
                    "{} of {} ({}; {:.1} MB/s in the busier direction)",
                    pct(u),
                    sanbench_units::fmt::bit_rate_rounded(r as f64),
                    l.rate_source,
                    l.bytes_per_s / 1e6
                ),
            )
        }
        None => (
            None,
            format!(
                "{:.1} MB/s in the busier direction; no line rate ({})",
                l.bytes_per_s / 1e6,
                if l.rate_source.is_empty() {
                    "unknown"
                } else {
                    &l.rate_source
                }
            ),
        ),
    };
    Candidate {
        kind: Some(Verdict::Link),
        resource: format!("link {}", l.iface),
        utilization: u,
        saturated: u.is_some_and(|u| u >= SATURATED),
        detail,
        figures,
    }
}

fn device_candidate(d: &DeviceLoad) -> Candidate {
    let u = d.util_pct / 100.0;
    Candidate {
        kind: Some(Verdict::Device),
        resource: format!("device {}", d.name),
        utilization: Some(u),
        saturated: u >= SATURATED,
        detail: format!("util {}, queue {:.1}", pct(u), d.avg_queue),
        figures: BTreeMap::from([
            ("util_pct".to_string(), d.util_pct),
            ("avg_queue".to_string(), d.avg_queue),
        ]),
    }
}

/// The queue achieved: the sampled mean in flight, or, for a target whose every I/O goes to
/// a device, what the device held when that was less (I/Os handed to the sync engine's
/// threads are in flight for the generator but not yet at the device).
fn queue_candidate(f: &Figures) -> Candidate {
    let mut figures = BTreeMap::from([("asked".to_string(), f.asked as f64)]);
    let at_device = f.device.as_ref().filter(|d| d.direct).map(|d| d.avg_queue);
    if let Some(q) = at_device {
        figures.insert("device_queue".into(), q);
    }
    let achieved = f.mean_in_flight.map(|m| {
        figures.insert("mean_in_flight".into(), m);
        at_device.map_or(m, |q| q.min(m))
    });
    let fullness = achieved.map(|a| if f.asked > 0 { a / f.asked as f64 } else { 1.0 });
    let mut detail = match f.mean_in_flight {
        Some(m) => format!("{m:.1} of {} in flight on average", f.asked),
        None => format!("{} asked; in flight not sampled", f.asked),
    };
    if let Some(q) = at_device {
        detail.push_str(&format!(", {q:.1} at the device"));
    }
    Candidate {
        kind: Some(Verdict::Queue),
        resource: "queue".into(),
        utilization: fullness,
        saturated: false,
        detail,
        figures,
    }
}

/// Every candidate of a window, before the verdict.
pub fn candidates(f: &Figures) -> Vec<Candidate> {
    let w = f.window_s.max(1e-9);
    let mut out = Vec::new();
    if let Some(mut c) = thread_candidate(Verdict::InitiatorCpu, &f.initiator, w) {
        if f.open_loop.is_some() {
            // The open loop polls its queue while I/O is in flight: runnable by design.
            c.saturated = false;
            c.detail
                .push_str("; an open loop polls while I/O is in flight, so this is by design");
        }
        out.push(c);
    }
    out.extend(thread_candidate(Verdict::TargetCpu, &f.target, w));
    if let Some(h) = &f.host {
        let waited = f
            .initiator
            .iter()
            .chain(&f.target)
            .filter_map(|t| t.wait_s)
            .map(|s| s / w)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        out.push(host_candidate(h, waited));
    }
    out.extend(f.link.as_ref().map(link_candidate));
    out.extend(f.device.as_ref().map(device_candidate));
    out.push(queue_candidate(f));
    out
}

/// The verdict over a set of candidates (see the module's rules).
pub fn decide(
    cands: Vec<Candidate>,
    open_loop: Option<(bool, f64)>,
    notes: Vec<String>,
) -> Bottleneck {
    let mut sat: Vec<&Candidate> = cands.iter().filter(|c| c.saturated).collect();
    let is_thread =
        |c: &Candidate| matches!(c.kind, Some(Verdict::InitiatorCpu | Verdict::TargetCpu));
    // A thread runnable all the window is the specific limit; busy cores are why it waited.
    let thread_sat = sat.iter().any(|c| is_thread(c));
    let yields = |c: &Candidate| thread_sat && c.kind == Some(Verdict::HostCpu);
    let top = sat
        .iter()
        .filter(|c| !yields(c))
        .filter_map(|c| c.utilization)
        .fold(f64::NEG_INFINITY, f64::max);
    sat.sort_by_key(|c| {
        let near = c.utilization.is_some_and(|u| u >= top - TIE);
        (yields(c), !near, c.kind.map_or(u8::MAX, Verdict::rank))
    });
    let (verdict, resource, utilization, text) = match sat.first() {
        Some(c) => {
            let v = c.kind.unwrap_or(Verdict::Latency);
            // "thread sb-w0-t0 at 99 % of a core", "link eth0 at 96 % of 1 Gbit/s (...)".
            let at =
                if c.detail.starts_with(|ch: char| ch.is_ascii_digit()) && v != Verdict::HostCpu {
                    "at "
                } else {
                    ""
                };
            let name = ["link ", "device "]
                .iter()
                .find_map(|k| c.resource.strip_prefix(k))
                .unwrap_or(&c.resource);
            let what = format!("{name} {at}{}", c.detail);
            (v, c.resource.clone(), c.utilization, format!("{v}: {what}"))
        }
        None => {
            let q = cands.iter().find(|c| c.kind == Some(Verdict::Queue));
            let fullness = q.and_then(|q| q.utilization);
            let in_flight = q.map(|q| q.detail.clone()).unwrap_or_default();
            match open_loop {
                Some((true, rate)) => (
                    Verdict::Rate,
                    "open loop".to_string(),
                    None,
                    format!(
                        "rate: the open loop held its asked {rate:.0} IOPS and nothing was \
                         saturated"
                    ),
                ),
                Some((false, rate)) => (
                    Verdict::Queue,
                    "generator".to_string(),
                    fullness,
                    format!(
                        "queue: the open loop fell short of its asked {rate:.0} IOPS with \
                         nothing saturated: the generator could not keep its schedule"
                    ),
                ),
                None if fullness.is_some_and(|x| x < QUEUE_FULL) => (
                    Verdict::Queue,
                    "queue".to_string(),
                    fullness,
                    format!("queue: {in_flight}: the generator could not keep the queue full"),
                ),
                None if busiest_wire(&cands).is_some() => {
                    let c = busiest_wire(&cands).expect("checked");
                    let v = c.kind.unwrap_or(Verdict::Link);
                    let name = ["link ", "device "]
                        .iter()
                        .find_map(|k| c.resource.strip_prefix(k))
                        .unwrap_or(&c.resource);
                    let at = if v == Verdict::Link { "at " } else { "" };
                    (
                        v,
                        c.resource.clone(),
                        c.utilization,
                        format!(
                            "{v}: {name} {at}{} with the queue full ({in_flight}); nothing \
                             saturated, this was the busiest resource",
                            c.detail
                        ),
                    )
                }
                None => (
                    Verdict::Latency,
                    "round trip".to_string(),
                    fullness,
                    format!(
                        "latency: the queue stayed full ({in_flight}) and nothing local was \
                         busy: the round trip itself"
                    ),
                ),
            }
        }
    };
    let also = sat
        .iter()
        .skip(1)
        .filter_map(|c| c.kind)
        .filter(|k| *k != verdict)
        .collect();
    Bottleneck {
        verdict,
        resource,
        utilization,
        text,
        also,
        candidates: cands,
        notes,
    }
}

/// The busiest link or device at [`NEAR`] or more, if any.
fn busiest_wire(cands: &[Candidate]) -> Option<&Candidate> {
    cands
        .iter()
        .filter(|c| matches!(c.kind, Some(Verdict::Link | Verdict::Device)))
        .filter(|c| c.utilization.is_some_and(|u| u >= NEAR))
        .max_by(|a, b| {
            a.utilization
                .unwrap_or(0.0)
                .total_cmp(&b.utilization.unwrap_or(0.0))
        })
}

/// The bottleneck of one target's window.
pub fn attribute(f: &Figures) -> Bottleneck {
    decide(candidates(f), f.open_loop, f.notes.clone())
}

/// The same window judged again with the link's line rate known (compare's lab links,
/// whose shaping the interface does not report): the link candidate gets the rate and the
/// verdict is decided again over the same candidates.
/// `open_loop` as in [`Figures::open_loop`].
pub fn with_link_rate(
    b: &Bottleneck,
    rate_bits: u64,
    source: &str,
    open_loop: Option<(bool, f64)>,
) -> Bottleneck {
    let mut cands = b.candidates.clone();
    if let Some(c) = cands.iter_mut().find(|c| c.kind == Some(Verdict::Link)) {
        let l = LinkLoad {
            iface: c.resource.trim_start_matches("link ").to_string(),
            bytes_per_s: c.figures.get("bytes_per_s").copied().unwrap_or(0.0),
            rate_bits: Some(rate_bits),
            rate_source: source.to_string(),
        };
        *c = link_candidate(&l);
    }
    decide(cands, open_loop, b.notes.clone())
}

#[cfg(test)]
#[path = "bottleneck_tests.rs"]
mod tests;
