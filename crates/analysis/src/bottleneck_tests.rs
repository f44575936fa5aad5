//! The attribution's rules on synthetic figures: every verdict, and the boundary cases.

use super::*;

const W: f64 = 10.0;

fn thread(name: &str, run_s: f64, wait_s: f64) -> ThreadLoad {
    ThreadLoad {
        name: name.into(),
        process: String::new(),
        run_s,
        wait_s: Some(wait_s),
    }
}

fn idle_host() -> HostLoad {
    HostLoad {
        cores: 2,
        busy_pct: 30.0,
        softirq_pct: 2.0,
        steal_pct: 0.0,
        pacing_pct: 0.0,
    }
}

/// A closed loop at QD 32 whose queue stayed full, nothing busy.
fn base() -> Figures {
    Figures {
        window_s: W,
        initiator: vec![thread("sb-w0-t0", 2.0, 0.1)],
        target: Vec::new(),
        host: Some(idle_host()),
        link: Some(LinkLoad {
            iface: "lo".into(),
            bytes_per_s: 5e8,
            rate_bits: None,
            rate_source: "loopback".into(),
        }),
        device: None,
        mean_in_flight: Some(31.5),
        asked: 32,
        open_loop: None,
        notes: Vec::new(),
    }
}

fn util(b: &Bottleneck, k: Verdict) -> f64 {
    b.candidate(k).and_then(|c| c.utilization).unwrap()
}

#[test]
fn nothing_busy_and_a_full_queue_is_latency() {
    let b = attribute(&base());
    assert_eq!(b.verdict, Verdict::Latency);
    assert!(b.text.contains("31.5 of 32 in flight"), "{}", b.text);
    assert!(b.also.is_empty());
    // Every candidate is there with its figure; loopback has no utilization.
    assert!(util(&b, Verdict::InitiatorCpu) < SATURATED);
    assert!(b.candidate(Verdict::Link).unwrap().utilization.is_none());
    assert!(!b.candidate(Verdict::Link).unwrap().saturated);
    assert_eq!(b.candidate(Verdict::TargetCpu), None);
}

#[test]
fn a_queue_kept_below_its_depth_is_queue() {
    let mut f = base();
    f.mean_in_flight = Some(12.0);
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Queue);
    assert!((util(&b, Verdict::Queue) - 12.0 / 32.0).abs() < 1e-9);
    // At the boundary the queue counts as full.
    f.mean_in_flight = Some(32.0 * QUEUE_FULL);
    assert_eq!(attribute(&f).verdict, Verdict::Latency);
}

#[test]
fn a_stream_thread_runnable_all_the_window_is_initiator_cpu() {
    let mut f = base();
    f.initiator = vec![thread("sb-w0-t0", 9.9, 0.05), thread("sb-w1-t0", 3.0, 0.0)];
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::InitiatorCpu);
    assert_eq!(b.resource, "thread sb-w0-t0");
    assert_eq!(b.text, "initiator-cpu: thread sb-w0-t0 at 99 % of a core");
    let c = b.candidate(Verdict::InitiatorCpu).unwrap();
    assert!((c.figures["on_cpu_pct"] - 99.0).abs() < 1e-9);
    assert_eq!(c.figures["threads"], 2.0);
    // Just below the threshold it is not saturated.
    f.initiator = vec![thread("sb-w0-t0", 8.9, 0.0)];
    assert_eq!(attribute(&f).verdict, Verdict::Latency);
}

#[test]
fn runnable_time_counts_waiting_for_a_cpu() {
    // Pinned with another thread to one core: on a CPU half the time, waiting the rest.
    let mut f = base();
    f.initiator = vec![thread("sb-w0-t0", 5.0, 4.8), thread("sb-w1-t0", 4.9, 4.9)];
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::InitiatorCpu);
    assert!(b.text.contains("runnable 98 %"), "{}", b.text);
    assert!(b.text.contains("waiting for one 48 %"), "{}", b.text);
}

#[test]
fn a_server_thread_is_target_cpu_and_named_with_its_process() {
    let mut f = base();
    f.target = vec![
        ThreadLoad {
            name: "sb-nbd-c0".into(),
            process: "sanbench (pid 812)".into(),
            run_s: 9.7,
            wait_s: Some(0.2),
        },
        ThreadLoad {
            name: "sb-nbd-c1".into(),
            process: "sanbench (pid 812)".into(),
            run_s: 1.0,
            wait_s: Some(0.0),
        },
    ];
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::TargetCpu);
    assert_eq!(b.resource, "thread sb-nbd-c0 of sanbench (pid 812)");
    assert!(b.verdict.about_the_target());
}

#[test]
fn busy_cores_limit_only_a_run_that_waited_for_them() {
    let mut f = base();
    f.host = Some(HostLoad {
        cores: 2,
        busy_pct: 97.0,
        softirq_pct: 20.0,
        steal_pct: 1.0,
        pacing_pct: 0.0,
    });
    // Nothing of the run waited: other load on the host, not this run's limit.
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Latency);
    assert!(!b.candidate(Verdict::HostCpu).unwrap().saturated);
    // The run's threads waited a quarter of the window: host-cpu.
    f.initiator = vec![thread("sb-w0-t0", 5.0, 2.5), thread("sb-sync0-1", 2.0, 1.0)];
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::HostCpu);
    assert!((util(&b, Verdict::HostCpu) - 0.98).abs() < 1e-9);
    assert!(b
        .text
        .starts_with("host-cpu: 2 cores 97 % busy (softirq 20 %, steal 1 %)"));
    // Without wait figures (no schedstat), busy cores are taken as the limit.
    for t in f.initiator.iter_mut() {
        t.wait_s = None;
    }
    assert_eq!(attribute(&f).verdict, Verdict::HostCpu);
}

#[test]
fn a_link_at_its_line_rate_is_link() {
    let mut f = base();
    f.initiator = vec![thread("sb-w0-t0", 0.5, 0.0)];
    f.link = Some(LinkLoad {
        iface: "sbl-one-h".into(),
        bytes_per_s: 0.96 * 125e6,
        rate_bits: Some(1_000_000_000),
        rate_source: "lab link one".into(),
    });
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Link);
    assert_eq!(
        b.text,
        "link: sbl-one-h at 96 % of 1 Gbit/s (lab link one; 120.0 MB/s in the busier direction)"
    );
    assert!(b.verdict.about_the_target());
    // A 10 Gbit/s link at the same bytes has headroom.
    f.link.as_mut().unwrap().rate_bits = Some(10_000_000_000);
    assert_eq!(attribute(&f).verdict, Verdict::Latency);
}

#[test]
fn a_shaped_link_short_of_its_rate_with_the_queue_full_is_still_link() {
    // htb on a loaded host: 84 % of 1 Gbit/s, QD 4 always in flight, nothing else busy.
    let mut f = base();
    f.mean_in_flight = Some(4.0);
    f.asked = 4;
    f.link = Some(LinkLoad {
        iface: "sbl-one-h".into(),
        bytes_per_s: 0.84 * 125e6,
        rate_bits: Some(1_000_000_000),
        rate_source: "lab link one".into(),
    });
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Link);
    assert!(
        b.text.starts_with("link: sbl-one-h at 84 % of 1 Gbit/s"),
        "{}",
        b.text
    );
    assert!(b.text.contains("nothing saturated"), "{}", b.text);
    // Below NEAR it is the round trip; with the queue not full, the generator.
    f.link.as_mut().unwrap().bytes_per_s = 0.70 * 125e6;
    assert_eq!(attribute(&f).verdict, Verdict::Latency);
    f.link.as_mut().unwrap().bytes_per_s = 0.84 * 125e6;
    f.mean_in_flight = Some(2.0);
    assert_eq!(attribute(&f).verdict, Verdict::Queue);
}

#[test]
fn the_lab_rate_decides_again_over_the_same_candidates() {
    let mut f = base();
    f.link = Some(LinkLoad {
        iface: "sbl-one-h".into(),
        bytes_per_s: 124e6,
        rate_bits: Some(10_000_000_000),
        rate_source: "sysfs speed".into(),
    });
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Latency);
    let again = with_link_rate(&b, 1_000_000_000, "lab link one", None);
    assert_eq!(again.verdict, Verdict::Link);
    assert!((util(&again, Verdict::Link) - 0.992).abs() < 1e-9);
    assert!(again.text.contains("lab link one"));
}

#[test]
fn a_busy_device_is_device_with_its_queue() {
    let mut f = base();
    f.device = Some(DeviceLoad {
        name: "vda".into(),
        util_pct: 100.0,
        avg_queue: 31.8,
        direct: true,
    });
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Device);
    assert_eq!(b.text, "device: vda util 100 %, queue 31.8");
    let c = b.candidate(Verdict::Device).unwrap();
    assert_eq!(c.figures["avg_queue"], 31.8);
}

#[test]
fn a_device_fed_below_its_depth_is_queue() {
    // The sync engine's threads hold 64 I/Os, the device saw 20 of them and was not busy.
    let mut f = base();
    f.mean_in_flight = Some(63.5);
    f.asked = 64;
    f.device = Some(DeviceLoad {
        name: "vda".into(),
        util_pct: 70.0,
        avg_queue: 20.0,
        direct: true,
    });
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Queue);
    assert!((util(&b, Verdict::Queue) - 20.0 / 64.0).abs() < 1e-9);
    assert!(
        b.text
            .contains("63.5 of 64 in flight on average, 20.0 at the device"),
        "{}",
        b.text
    );
    // Through the page cache the device's queue says nothing about the target's.
    f.device.as_mut().unwrap().direct = false;
    assert_eq!(attribute(&f).verdict, Verdict::Latency);
}

#[test]
fn two_saturated_resources_are_both_named_and_the_one_with_less_headroom_wins() {
    let mut f = base();
    f.device = Some(DeviceLoad {
        name: "vda".into(),
        util_pct: 99.0,
        avg_queue: 20.0,
        direct: false,
    });
    f.initiator = vec![thread("sb-w0-t0", 9.2, 0.0)];
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Device);
    assert_eq!(b.also, vec![Verdict::InitiatorCpu]);
    // Within the tie margin the more specific resource (the thread) is the verdict.
    f.initiator = vec![thread("sb-w0-t0", 9.75, 0.0)];
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::InitiatorCpu);
    assert_eq!(b.also, vec![Verdict::Device]);
}

#[test]
fn a_never_sleeping_thread_beats_cores_busy_with_other_load() {
    // null: on a loaded host the stream thread gets 60 % of a core and waits the rest.
    let mut f = base();
    f.initiator = vec![thread("sb-w0-t0", 6.0, 4.0)];
    f.host = Some(HostLoad {
        cores: 2,
        busy_pct: 100.0,
        softirq_pct: 1.0,
        steal_pct: 0.0,
        pacing_pct: 0.0,
    });
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::InitiatorCpu);
    assert_eq!(b.also, vec![Verdict::HostCpu]);
}

#[test]
fn a_starved_server_thread_is_the_limit_not_the_busy_cores_that_starved_it() {
    // Pinned to a core shared with other work: on a CPU 2 %, waiting 91 %.
    let mut f = base();
    f.target = vec![ThreadLoad {
        name: "sb-nbd-c3".into(),
        process: "sanbench (pid 9)".into(),
        run_s: 0.2,
        wait_s: Some(9.1),
    }];
    f.host = Some(HostLoad {
        cores: 2,
        busy_pct: 100.0,
        softirq_pct: 1.0,
        steal_pct: 0.0,
        pacing_pct: 0.0,
    });
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::TargetCpu);
    assert_eq!(b.also, vec![Verdict::HostCpu]);
    // Below saturation the thread is not the verdict: the cores are.
    f.target[0].wait_s = Some(8.0);
    f.initiator = vec![thread("sb-w0-t0", 1.0, 3.0)];
    assert_eq!(attribute(&f).verdict, Verdict::HostCpu);
}

/// Cores busy with an open loop's spin are busy (a thread that waited behind it was limited by
/// it), and the detail says whose the cycles were.
#[test]
fn the_host_candidate_names_an_open_loops_pacing() {
    let mut f = base();
    f.open_loop = Some((true, 8000.0));
    f.host = Some(HostLoad {
        cores: 2,
        busy_pct: 56.0,
        softirq_pct: 1.0,
        steal_pct: 0.0,
        pacing_pct: 40.0,
    });
    let c = candidates(&f)
        .into_iter()
        .find(|c| c.kind == Some(Verdict::HostCpu))
        .unwrap();
    assert_eq!(c.figures.get("pacing_pct"), Some(&40.0));
    assert!(
        c.detail.contains("the open loop's pacing 40 %"),
        "{}",
        c.detail
    );
    // A closed loop's: no such figure.
    f.host.as_mut().unwrap().pacing_pct = 0.0;
    let c = candidates(&f)
        .into_iter()
        .find(|c| c.kind == Some(Verdict::HostCpu))
        .unwrap();
    assert!(
        !c.figures.contains_key("pacing_pct") && c.detail.contains("steal 0 %)"),
        "{}",
        c.detail
    );
}

#[test]
fn an_open_loop_is_limited_by_its_rate_not_by_its_polling_thread() {
    let mut f = base();
    f.initiator = vec![thread("sb-w0-t0", 10.0, 0.0)];
    f.mean_in_flight = Some(0.3);
    f.open_loop = Some((true, 5000.0));
    let b = attribute(&f);
    assert_eq!(b.verdict, Verdict::Rate);
    assert!(!b.candidate(Verdict::InitiatorCpu).unwrap().saturated);
    f.open_loop = Some((false, 5000.0));
    assert_eq!(attribute(&f).verdict, Verdict::Queue);
}

#[test]
fn which_verdicts_are_about_the_target() {
    for v in [Verdict::InitiatorCpu, Verdict::HostCpu, Verdict::Queue] {
        assert!(!v.about_the_target(), "{v}");
    }
    for v in [
        Verdict::TargetCpu,
        Verdict::Link,
        Verdict::Device,
        Verdict::Latency,
        Verdict::Rate,
    ] {
        assert!(v.about_the_target(), "{v}");
    }
}

#[test]
fn round_trips_through_json_with_kebab_case_verdicts() {
    let mut f = base();
    f.initiator = vec![thread("sb-w0-t0", 9.9, 0.0)];
    let b = attribute(&f);
    let v = serde_json::to_value(&b).unwrap();
    assert_eq!(v["verdict"], "initiator-cpu");
    assert_eq!(v["candidates"][0]["kind"], "initiator-cpu");
    let back: Bottleneck = serde_json::from_value(v).unwrap();
    assert_eq!(back, b);
}
