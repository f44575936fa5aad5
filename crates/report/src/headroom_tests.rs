//! Notes on findings and the --require-headroom warning, on the fixture comparison with
//! verdicts set per target.

use super::*;
use crate::{Options, Report};
use sanbench_doc::bottleneck::Bottleneck;
use sanbench_store::fixture::sample_comparison;

const NBD: &str = "NBD <ram> & co";
const ISCSI: &str = "iSCSI 10G";
const FC: &str = "FC 8G";

fn limited(v: Verdict) -> Bottleneck {
    Bottleneck {
        verdict: v,
        resource: "x".into(),
        utilization: Some(0.99),
        text: format!("{v}: x"),
        also: Vec::new(),
        candidates: Vec::new(),
        notes: Vec::new(),
    }
}

/// The fixture with every cell of each target limited as given.
fn with(verdicts: &[(&str, Verdict)]) -> Comparison {
    let mut c = sample_comparison();
    for cell in c.cells.iter_mut() {
        if let Some((_, v)) = verdicts.iter().find(|(t, _)| *t == cell.target) {
            cell.result.bottleneck = Some(limited(*v));
        }
    }
    c
}

fn between<'a>(r: &'a Report, a: &str, b: &str, label: &str) -> &'a Finding {
    r.findings
        .iter()
        .find(|f| {
            f.label == label && ((f.better == a && f.worse == b) || (f.better == b && f.worse == a))
        })
        .unwrap_or_else(|| {
            let all: Vec<&str> = r.findings.iter().map(|f| f.text.as_str()).collect();
            panic!("no {label} finding between {a} and {b}: {all:#?}")
        })
}

#[test]
fn both_sides_limited_by_the_initiator_cpu_carry_the_note() {
    let c = with(&[
        (NBD, Verdict::InitiatorCpu),
        (ISCSI, Verdict::HostCpu),
        (FC, Verdict::Link),
    ]);
    let r = Report::new(&c, &Options::default());
    let f = between(&r, NBD, ISCSI, "bandwidth");
    assert!(
        f.text.ends_with(
            "(both limited by the initiator host's CPU: this compares CPU cost per I/O, not \
             the links)"
        ),
        "{}",
        f.text
    );
    // One side limited by the link, the other by the initiator's CPU: that side is named.
    let g = between(&r, FC, ISCSI, "bandwidth");
    assert!(
        g.text
            .ends_with("(iSCSI 10G limited by the initiator host's CPU: the difference may be that, not the link)"),
        "{}",
        g.text
    );
}

#[test]
fn sides_limited_by_the_link_or_the_round_trip_carry_no_note() {
    let c = with(&[
        (NBD, Verdict::Link),
        (ISCSI, Verdict::Latency),
        (FC, Verdict::TargetCpu),
    ]);
    let r = Report::new(&c, &Options::default());
    for f in &r.findings {
        assert!(!f.text.contains("limited by"), "{}", f.text);
    }
    // The finding itself is there, without a note.
    assert!(between(&r, NBD, ISCSI, "bandwidth")
        .text
        .contains("greater bandwidth"));
    // Without verdicts (documents from before the bottleneck) nothing changes either.
    let (c1, c2) = (sample_comparison(), with(&[]));
    let plain = Report::new(&c1, &Options::default());
    let r2 = Report::new(&c2, &Options::default());
    assert_eq!(plain.findings, r2.findings);
}

#[test]
fn a_side_limited_in_only_some_cells_is_counted() {
    let mut c = with(&[(NBD, Verdict::Latency), (ISCSI, Verdict::Latency)]);
    // Most of iSCSI's bandwidth cells are limited by the generator's queue, one is not.
    let mut n = 0;
    for cell in c.cells.iter_mut() {
        if cell.target == ISCSI && cell.workload.starts_with("seq-") {
            n += 1;
            if n > 1 {
                cell.result.bottleneck = Some(limited(Verdict::Queue));
            }
        }
    }
    let r = Report::new(&c, &Options::default());
    let f = between(&r, NBD, ISCSI, "bandwidth");
    assert!(
        f.text.ends_with(&format!(
            "(iSCSI 10G limited by the generator's queue in {} of {n} cells: the difference \
             may be that, not the link)",
            n - 1
        )),
        "{}",
        f.text
    );
}

#[test]
fn require_headroom_puts_a_warning_first() {
    let mut c = with(&[(NBD, Verdict::InitiatorCpu), (ISCSI, Verdict::Link)]);
    assert_eq!(warning(&c), None, "only when asked");
    c.require_headroom = true;
    let r = Report::new(&c, &Options::default());
    let w = &r.caveats[0];
    assert!(w.starts_with("--require-headroom: 4 cell groups"), "{w}");
    assert!(
        w.contains("seq-read-1m on NBD <ram> & co (initiator-cpu in 3 of 3)"),
        "{w}"
    );
    assert!(!w.contains("iSCSI 10G"), "{w}");
    // Nothing limited elsewhere: no warning even when asked.
    let mut ok = with(&[(NBD, Verdict::Link), (ISCSI, Verdict::Device)]);
    ok.require_headroom = true;
    assert_eq!(warning(&ok), None);
}

#[test]
fn the_tables_show_the_modal_verdict() {
    let mut c = with(&[(NBD, Verdict::InitiatorCpu)]);
    let first = c
        .cells
        .iter_mut()
        .find(|x| x.target == NBD && x.workload == "seq-read-1m")
        .unwrap();
    first.result.bottleneck = Some(limited(Verdict::Link));
    let l = cell_limit(&c, "seq-read-1m", NBD).unwrap();
    assert_eq!(l.verdict, Verdict::InitiatorCpu);
    assert_eq!((l.agree, l.of), (2, 3));
    assert_eq!(l.cell_text(), "init-cpu 2/3");
    assert_eq!(l.short_text(), "init-cpu*");
    assert_eq!(cell_limit(&c, "seq-read-1m", FC), None);
    assert_eq!(
        cell_limit(&c, "db-8k-qd4", NBD).unwrap().cell_text(),
        "init-cpu"
    );
}

#[test]
fn loopback_uris_are_told_apart() {
    for (uri, want) in [
        ("nbd://127.0.0.1:10809", true),
        ("nbd://127.0.0.1:10809/export", true),
        ("iscsi://127.0.0.1:3261/iqn.2026-11.test:ram1/1", true),
        (
            "iscsi://127.0.0.1:3260,127.0.0.1:3261/iqn.x/0?policy=round-robin",
            true,
        ),
        ("iscsi://user%25secret@127.0.0.2:3260/iqn.x/0", true),
        ("nvme+tcp://[::1]:4420/nqn.x/1", true),
        ("nvme+tcp://localhost:4420/nqn.x/1", true),
        ("iscsi://127.0.0.1:3260,10.0.0.2:3260/iqn.x/0", false),
        ("nbd://10.77.0.2:10809", false),
        ("nbd://[fe80::1]:10809", false),
        ("file:///dev/sdb", false),
        ("mem:1G", false),
        ("nbd://", false),
    ] {
        assert_eq!(loopback_uri(uri), want, "{uri}");
    }
}

#[test]
fn two_loopback_targets_say_so_unless_a_limit_says_more() {
    // The fixture serves NBD and iSCSI on 127.0.0.1 (FC is a local device).
    let c = with(&[(NBD, Verdict::Latency), (ISCSI, Verdict::Latency)]);
    let r = Report::new(&c, &Options::default());
    let f = between(&r, NBD, ISCSI, "bandwidth");
    assert!(
        f.text.ends_with(
            "(both served over loopback on this host: this compares the implementations' CPU \
             and wake-up costs, not interconnects)"
        ),
        "{}",
        f.text
    );
    // A device on one side: no loopback note.
    for f in r
        .findings
        .iter()
        .filter(|f| f.better == FC || f.worse == FC)
    {
        assert!(!f.text.contains("loopback"), "{}", f.text);
    }
    // Behind a lab link, the same address is a shaped link: no note.
    let mut lab = c.clone();
    for t in lab.targets.iter_mut().filter(|t| t.name == ISCSI) {
        t.link = Some(sanbench_doc::compare::LinkInfo {
            name: "one".into(),
            rate_bits: 1_000_000_000,
            mtu: 1500,
            offload: true,
            switched: false,
        });
    }
    let r = Report::new(&lab, &Options::default());
    assert!(!between(&r, NBD, ISCSI, "bandwidth")
        .text
        .contains("loopback"));
    // A limit elsewhere says more than loopback does, and is the one note.
    let c = with(&[(NBD, Verdict::InitiatorCpu), (ISCSI, Verdict::HostCpu)]);
    let r = Report::new(&c, &Options::default());
    let f = between(&r, NBD, ISCSI, "bandwidth");
    assert!(
        f.text.contains("(both limited by") && !f.text.contains("loopback"),
        "{}",
        f.text
    );
}
