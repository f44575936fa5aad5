use super::*;
use crate::cmd::{argv, Recorder};
use crate::state::LinkInfo;
use proptest::prelude::*;

/// Link b of a path group a+b, 1 Gbit/s, MTU 1500.
fn link_b() -> LinkState {
    LinkState {
        info: LinkInfo {
            name: "b".into(),
            rate_bits: 1_000_000_000,
            mtu: 1500,
            offload: true,
            switched: false,
        },
        rate: "1gbit".into(),
        namespace: "sblab-a+b".into(),
        switch_namespace: None,
        host_if: "sbl-b-h".into(),
        target_if: "sbl-b-t".into(),
        host_addr: "10.213.1.1".into(),
        target_addr: "10.213.1.2".into(),
        group: Some("a+b".into()),
        impairment: Impairment::default(),
    }
}

fn lines(r: &Recorder) -> Vec<String> {
    r.calls.borrow().iter().map(|c| c.join(" ")).collect()
}

fn cmd(s: &str) -> Argv {
    argv(s.split(' '))
}

const HTB_ONLY: &str =
    "qdisc htb 1: root refcnt 3 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n";

/// A kernel where neither end has a fault leaf: deleting one is refused, as Linux refuses to
/// delete htb's default leaf ("Cannot delete qdisc with handle of zero").
fn clean_kernel() -> Recorder {
    let refused = "Error: Cannot delete qdisc with handle of zero.".to_string();
    Recorder {
        answers: vec![
            (cmd("tc qdisc show dev sbl-b-h"), HTB_ONLY.into()),
            (
                cmd("tc -n sblab-a+b qdisc show dev sbl-b-t"),
                HTB_ONLY.into(),
            ),
        ],
        fail: vec![
            (cmd("tc qdisc del dev sbl-b-h parent 1:10"), refused.clone()),
            (
                cmd("tc -n sblab-a+b qdisc del dev sbl-b-t parent 1:10"),
                refused,
            ),
        ],
        ..Recorder::default()
    }
}

fn act(s: &str) -> FaultAction {
    FaultAction::parse(s).unwrap()
}

#[test]
fn down_blackholes_both_ends_under_the_htb_class() {
    let r = clean_kernel();
    let mut l = link_b();
    apply(&r, &mut l, act("down")).unwrap();
    assert_eq!(
        lines(&r),
        [
            "tc qdisc del dev sbl-b-h parent 1:10",
            "tc qdisc show dev sbl-b-h",
            "tc qdisc add dev sbl-b-h parent 1:10 handle 10: blackhole",
            "tc -n sblab-a+b qdisc del dev sbl-b-t parent 1:10",
            "tc -n sblab-a+b qdisc show dev sbl-b-t",
            "tc -n sblab-a+b qdisc add dev sbl-b-t parent 1:10 handle 10: blackhole",
        ]
    );
    assert!(l.impairment.down);
    assert_eq!(l.impairment.describe(), "down");
    // Nothing touches the root qdisc, the class (the rate), the interfaces or the routes.
    assert!(!lines(&r)
        .iter()
        .any(|c| c.starts_with("ip ") || c.contains("root") || c.contains("class")));
}

#[test]
fn up_removes_the_leaf_and_restores_loss_and_delay() {
    // The leaf exists: del succeeds; nothing is added back for a clear link.
    let r = Recorder::default();
    let mut l = link_b();
    l.impairment.down = true;
    apply(&r, &mut l, act("up")).unwrap();
    assert_eq!(
        lines(&r),
        [
            "tc qdisc del dev sbl-b-h parent 1:10",
            "tc -n sblab-a+b qdisc del dev sbl-b-t parent 1:10",
        ]
    );
    assert!(l.impairment.is_clear());
    // Loss set before the link went down comes back with it.
    let r = Recorder::default();
    l.impairment = Impairment {
        down: true,
        loss_pct: Some(2.5),
        delay_us: None,
    };
    apply(&r, &mut l, act("up")).unwrap();
    assert_eq!(
        lines(&r)[1],
        "tc qdisc add dev sbl-b-h parent 1:10 handle 10: netem limit 1000 loss 2.5%"
    );
    assert_eq!(l.impairment.describe(), "up, loss 2.5%");
}

#[test]
fn loss_and_delay_are_netem_under_the_class() {
    let r = clean_kernel();
    let mut l = link_b();
    apply(&r, &mut l, act("loss=5")).unwrap();
    let c = lines(&r);
    assert_eq!(
        c[2],
        "tc qdisc add dev sbl-b-h parent 1:10 handle 10: netem limit 1000 loss 5%"
    );
    assert_eq!(
        c[5],
        "tc -n sblab-a+b qdisc add dev sbl-b-t parent 1:10 handle 10: netem limit 1000 loss 5%"
    );
    // Delay joins the loss; the queue holds twice a delay's worth of frames at 1 Gbit/s
    // (10 ms x 125 MB/s / 1500 B = 833) on top of 1000.
    let r = Recorder::default();
    apply(&r, &mut l, act("delay=10ms")).unwrap();
    assert_eq!(
        lines(&r),
        [
            "tc qdisc del dev sbl-b-h parent 1:10",
            "tc qdisc add dev sbl-b-h parent 1:10 handle 10: netem limit 2666 delay 10000us loss 5%",
            "tc -n sblab-a+b qdisc del dev sbl-b-t parent 1:10",
            "tc -n sblab-a+b qdisc add dev sbl-b-t parent 1:10 handle 10: netem limit 2666 \
             delay 10000us loss 5%",
        ]
    );
    assert_eq!(l.impairment.describe(), "up, loss 5%, delay 10ms");
    // Down while lossy: the blackhole replaces netem, and the loss is remembered.
    let r = Recorder::default();
    apply(&r, &mut l, act("down")).unwrap();
    assert!(lines(&r)[1].ends_with("handle 10: blackhole"));
    assert_eq!(l.impairment.loss_pct, Some(5.0));
    // loss=0 and delay=0 remove each; clear removes everything.
    assert_eq!(l.impairment.after(act("loss=0")).loss_pct, None);
    assert_eq!(l.impairment.after(act("delay=0")).delay_us, None);
    let r = Recorder::default();
    apply(&r, &mut l, act("clear")).unwrap();
    assert_eq!(
        lines(&r),
        [
            "tc qdisc del dev sbl-b-h parent 1:10",
            "tc -n sblab-a+b qdisc del dev sbl-b-t parent 1:10",
        ]
    );
    assert!(l.impairment.is_clear());
}

#[test]
fn a_fault_on_a_clean_link_that_clears_does_nothing_more() {
    let r = clean_kernel();
    let mut l = link_b();
    apply(&r, &mut l, act("clear")).unwrap();
    assert_eq!(
        lines(&r),
        [
            "tc qdisc del dev sbl-b-h parent 1:10",
            "tc qdisc show dev sbl-b-h",
            "tc -n sblab-a+b qdisc del dev sbl-b-t parent 1:10",
            "tc -n sblab-a+b qdisc show dev sbl-b-t",
        ]
    );
}

#[test]
fn a_real_failure_stands_and_the_link_keeps_its_state() {
    // The interface is gone: del fails and so does show.
    let r = Recorder {
        fail: vec![
            (
                cmd("tc qdisc del dev sbl-b-h parent 1:10"),
                "Cannot find device \"sbl-b-h\"".into(),
            ),
            (
                cmd("tc qdisc show dev sbl-b-h"),
                "Cannot find device \"sbl-b-h\"".into(),
            ),
        ],
        ..Recorder::default()
    };
    let mut l = link_b();
    let e = apply(&r, &mut l, act("down")).unwrap_err();
    assert!(e.to_string().contains("Cannot find device"), "{e}");
    assert!(l.impairment.is_clear());
    assert!(!lines(&r).iter().any(|c| c.contains("add")));
    // del refused while show lists a fault leaf: not "nothing to delete".
    let r = Recorder {
        answers: vec![(
            cmd("tc qdisc show dev sbl-b-h"),
            format!("{HTB_ONLY}qdisc blackhole 10: parent 1:10 \n"),
        )],
        fail: vec![(
            cmd("tc qdisc del dev sbl-b-h parent 1:10"),
            "RTNETLINK answers: Operation not permitted".into(),
        )],
        ..Recorder::default()
    };
    assert!(apply(&r, &mut l, act("up")).is_err());
}

#[test]
fn a_kernel_without_netem_says_so_and_the_first_end_is_put_back() {
    let mut r = clean_kernel();
    r.fail.push((
        cmd(
            "tc -n sblab-a+b qdisc add dev sbl-b-t parent 1:10 handle 10: netem limit 1000 loss 1%",
        ),
        "Error: Specified qdisc kind is unknown.".into(),
    ));
    let mut l = link_b();
    let e = apply(&r, &mut l, act("loss=1")).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("link b: this kernel has no netem qdisc") && m.contains("sch_netem"),
        "{m}"
    );
    assert!(
        e.is_usage(),
        "a missing kernel feature is the host's: exit 2"
    );
    assert!(l.impairment.is_clear());
    let c = lines(&r);
    // The host end had netem already: it is taken off again, right after the failed add, and
    // so is whatever the failing end's del left.
    let failed = c
        .iter()
        .position(|l| l.starts_with("tc -n sblab-a+b qdisc add"))
        .unwrap();
    assert_eq!(
        c[failed + 1..],
        [
            "tc qdisc del dev sbl-b-h parent 1:10",
            "tc qdisc show dev sbl-b-h",
            "tc -n sblab-a+b qdisc del dev sbl-b-t parent 1:10",
            "tc -n sblab-a+b qdisc show dev sbl-b-t",
        ]
    );
}

#[test]
fn a_failed_up_leaves_the_link_down() {
    // Down with loss recorded, on a kernel without netem: `up` would need netem. The host
    // end's blackhole is deleted before the add fails; it must come back.
    let r = Recorder {
        fail: vec![(
            cmd("tc qdisc add dev sbl-b-h parent 1:10 handle 10: netem limit 1000 loss 5%"),
            "Error: Specified qdisc kind is unknown.".into(),
        )],
        ..Recorder::default()
    };
    let mut l = link_b();
    l.impairment = Impairment {
        down: true,
        loss_pct: Some(5.0),
        delay_us: None,
    };
    assert!(apply(&r, &mut l, act("up")).is_err());
    assert!(l.impairment.down);
    assert_eq!(
        lines(&r)[2..],
        [
            "tc qdisc del dev sbl-b-h parent 1:10",
            "tc qdisc add dev sbl-b-h parent 1:10 handle 10: blackhole",
        ]
    );
}

#[test]
fn actions_parse_and_print_back() {
    assert_eq!(act("down"), FaultAction::Down);
    assert_eq!(act("up"), FaultAction::Up);
    assert_eq!(act("clear"), FaultAction::Clear);
    assert_eq!(act("loss=5"), FaultAction::Loss(5.0));
    assert_eq!(act("loss=0.5%"), FaultAction::Loss(0.5));
    assert_eq!(
        act("delay=250us"),
        FaultAction::Delay(Duration::from_micros(250))
    );
    assert_eq!(
        act("delay=1.5ms"),
        FaultAction::Delay(Duration::from_micros(1500))
    );
    assert_eq!(act("loss=5").to_string(), "loss=5%");
    assert_eq!(act("delay=1.5ms").to_string(), "delay=1500us");
    assert_eq!(act("delay=2s").to_string(), "delay=2s");
    for (s, words) in [
        ("sideways", "unknown"),
        ("loss=", "percentage"),
        ("loss=101", "percentage"),
        ("loss=-1", "percentage"),
        ("loss=nan", "percentage"),
        ("delay=10", "needs a unit"),
        ("delay=10h", "unknown unit"),
        ("delay=61s", "more than 60 s"),
        ("jitter=1ms", "unknown"),
    ] {
        let e = FaultAction::parse(s).unwrap_err();
        let m = e.to_string();
        assert!(m.contains(words), "{s}: {m}");
        assert!(m.contains(s) && !m.contains('\n') && e.is_usage(), "{m}");
    }
}

#[test]
fn schedules_parse_sort_and_check() {
    let s = parse_schedule(&["10s:b:down,20s:b:up".into(), "2.5s:a:loss=1".into()]).unwrap();
    assert_eq!(
        s.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
        ["2500ms:a:loss=1%", "10s:b:down", "20s:b:up"]
    );
    assert_eq!(s[1].at, Duration::from_secs(10));
    for (item, words) in [
        ("10s:b", "AT:LINK:ACTION"),
        ("10:b:down", "needs a unit"),
        ("x:b:down", "not a duration"),
        ("1s::down", "link name is empty"),
        ("1s:b:off", "unknown"),
    ] {
        let e = parse_schedule(&[item.into()]).unwrap_err().to_string();
        assert!(e.starts_with(&format!("--fault {item}: ")), "{e}");
        assert!(e.contains(words), "{item}: {e}");
    }
    let mut st = LabState::new("/bin/sanbench");
    st.links.push(link_b());
    let p = Path::new("/run/lab.json");
    let w = Duration::from_secs(4);
    let ok = parse_schedule(&["1s:b:down,3999ms:b:up".into()]).unwrap();
    check_schedule(&ok, &st, p, w, "the run").unwrap();
    let e = check_schedule(
        &parse_schedule(&["1s:c:down".into()]).unwrap(),
        &st,
        p,
        w,
        "x",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no link 'c'") && e.contains("(links: b)"), "{e}");
    let e = check_schedule(
        &parse_schedule(&["4s:b:up".into()]).unwrap(),
        &st,
        p,
        w,
        "seq-read",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("not inside seq-read's measured window of 4s"),
        "{e}"
    );
}

#[test]
fn lab_fault_records_the_impairment_in_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.json");
    let r = Recorder::default();
    let e = fault(&r, &path, "b", FaultAction::Down).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("lab up"), "{e}");
    let mut st = LabState::new("/bin/sanbench");
    st.links.push(link_b());
    st.save(&path).unwrap();
    let e = fault(&r, &path, "z", FaultAction::Down).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("no link 'z'"), "{e}");
    assert!(r.calls.borrow().is_empty(), "nothing ran for bad input");
    let l = fault(&r, &path, "b", FaultAction::Down).unwrap();
    assert!(l.impairment.down);
    let back = LabState::load(&path).unwrap().unwrap();
    assert!(back.links[0].impairment.down);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"impairment\""), "{text}");
    fault(&r, &path, "b", FaultAction::Up).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("\"impairment\""),
        "a clear link records none: {text}"
    );
}

#[test]
fn leaf_kinds_from_tc_show() {
    assert_eq!(leaf_kind(HTB_ONLY), None);
    let s = format!("{HTB_ONLY}qdisc netem 10: parent 1:10 limit 1000 loss 5%\n");
    assert_eq!(leaf_kind(&s).as_deref(), Some("netem"));
}

fn action() -> impl Strategy<Value = FaultAction> {
    prop_oneof![
        Just(FaultAction::Down),
        Just(FaultAction::Up),
        Just(FaultAction::Clear),
        (0u32..=100_000).prop_map(|m| FaultAction::Loss(m as f64 / 1000.0)),
        (0u64..=60_000_000).prop_map(|us| FaultAction::Delay(Duration::from_micros(us))),
    ]
}

proptest! {
    #[test]
    fn actions_round_trip(a in action()) {
        prop_assert_eq!(FaultAction::parse(&a.to_string()).unwrap(), a);
    }

    #[test]
    fn schedules_round_trip(at in 0u64..100_000_000, a in action(), link in "[a-z0-9]{1,8}") {
        let s = Scheduled { at: Duration::from_micros(at), link, action: a };
        prop_assert_eq!(Scheduled::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn any_text_parses_or_fails_in_one_line(s in "\\PC{0,40}") {
        if let Err(e) = parse_schedule(&[s]) {
            prop_assert!(!e.to_string().contains('\n'));
            prop_assert!(e.is_usage());
        }
    }
}
