use super::*;
use crate::cmd::Recorder;

fn lines(r: &Recorder) -> Vec<String> {
    r.calls.borrow().iter().map(|c| c.join(" ")).collect()
}

#[test]
fn down_without_a_lab_only_looks() {
    let dir = tempfile::tempdir().unwrap();
    let r = Recorder::default();
    let done = down(&r, &dir.path().join("lab.json")).unwrap();
    assert!(done.is_empty());
    assert_eq!(lines(&r), ["ip netns list", "ip -o link show"]);
}

#[test]
fn down_removes_what_the_state_records_and_prefixed_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.json");
    let mut st = LabState::new("/bin/sanbench");
    st.namespaces = vec!["sblab-one".into(), "sblab-sw-sw".into(), "sblab-sw".into()];
    st.host_links = vec!["sbl-one-h".into()];
    let img = dir.path().join("img");
    std::fs::write(&img, b"x").unwrap();
    st.files.push(img.clone());
    st.save(&path).unwrap();
    let r = Recorder {
        answers: vec![
            (
                argv(["ip", "netns", "list"]),
                "sblab-old (id: 3)\nother-ns\n".into(),
            ),
            (
                argv(["ip", "-o", "link", "show"]),
                "1: lo: <LOOPBACK> mtu 65536\n9: sbl-old-h@if2: <BROADCAST> mtu 1500\n10: eth0: <UP> mtu 1500\n"
                    .into(),
            ),
        ],
        ..Recorder::default()
    };
    down(&r, &path).unwrap();
    let c = lines(&r);
    // Namespaces in reverse creation order, each emptied of processes first.
    let dels: Vec<&String> = c.iter().filter(|l| l.starts_with("ip netns del")).collect();
    assert_eq!(
        dels,
        [
            "ip netns del sblab-sw",
            "ip netns del sblab-sw-sw",
            "ip netns del sblab-one",
            "ip netns del sblab-old"
        ]
    );
    assert!(c.contains(&"ip netns pids sblab-one".to_string()));
    // Never anything without the prefixes.
    assert!(!c
        .iter()
        .any(|l| l.contains("other-ns") || l.contains("eth0")));
    assert!(!path.exists() && !img.exists());
    // sbl-old-h does not exist in /sys here, so there is nothing to delete.
    assert!(!c.iter().any(|l| l.starts_with("ip link del")));
}

#[test]
fn prefixes_filter_names() {
    let r = Recorder {
        answers: vec![
            (
                argv(["ip", "netns", "list"]),
                "sblab-a (id: 1)\nsblab-a-sw\nsbl-x\nfoo\n".into(),
            ),
            (
                argv(["ip", "-o", "link", "show"]),
                "2: sbl-a-h@if3: <UP> mtu 1500\n3: sbl0: <UP>\n4: eth0: <UP>\n".into(),
            ),
        ],
        ..Recorder::default()
    };
    assert_eq!(lab_namespaces(&r).unwrap(), ["sblab-a", "sblab-a-sw"]);
    assert_eq!(lab_links(&r).unwrap(), ["sbl-a-h"]);
}

#[test]
fn missing_peers_are_named() {
    // Every kind this host has passes; the built-in ones need nothing.
    check_peers(&[TargetKind::Nbd, TargetKind::Iscsi]).unwrap();
}

#[test]
fn a_failed_up_removes_what_it_made_and_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.json");
    let specs = crate::spec::parse_links(&["a=1gbit".into(), "b=10gbit,switched".into()]).unwrap();
    let r = Recorder::failing(argv([
        "tc", "-n", "sblab-b", "qdisc", "add", "dev", "sbl-b-t", "root", "handle", "1:", "htb",
        "default", "10",
    ]));
    let cfg = LabConfig {
        state_path: path.clone(),
        size: "1G".into(),
        runner: &r,
    };
    let e = up(&cfg, &specs, &[], &[TargetKind::Nbd], "/bin/false").unwrap_err();
    assert!(e.to_string().contains("tc -n sblab-b qdisc add"), "{e}");
    assert!(!e.is_usage());
    let c = lines(&r);
    let after: Vec<&String> = c
        .iter()
        .skip_while(|l| !l.starts_with("tc -n sblab-b qdisc"))
        .filter(|l| l.starts_with("ip netns del"))
        .collect();
    assert_eq!(
        after,
        [
            "ip netns del sblab-b",
            "ip netns del sblab-b-sw",
            "ip netns del sblab-a"
        ]
    );
    // No target was started, and no state is left to confuse the next run.
    assert!(!c.iter().any(|l| l.contains("serve nbd")));
    assert!(!path.exists());
}

#[test]
fn bad_sizes_and_missing_state_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let r = Recorder::default();
    let cfg = LabConfig {
        state_path: dir.path().join("lab.json"),
        size: "huge".into(),
        runner: &r,
    };
    let specs = crate::spec::parse_links(&["a=1gbit".into()]).unwrap();
    let e = up(&cfg, &specs, &[], &[TargetKind::Nbd], "/bin/false").unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("--size"), "{e}");
    assert!(r.calls.borrow().is_empty(), "nothing ran");
    let s = crate::status::status(&r, &dir.path().join("none.json")).unwrap();
    assert!(!s.recorded && !s.healthy());
    assert!(s.to_string().starts_with("no lab recorded"));
}

#[test]
fn a_failed_group_up_removes_the_group_namespace_and_records_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.json");
    let specs = crate::spec::parse_links(&["a=1gbit".into(), "b=1gbit,switched".into()]).unwrap();
    let groups = crate::site::parse_paths(&["a,b".into()], &specs).unwrap();
    let r = Recorder::failing(argv([
        "tc",
        "-n",
        "sblab-a+b",
        "qdisc",
        "add",
        "dev",
        "sbl-b-t",
        "root",
        "handle",
        "1:",
        "htb",
        "default",
        "10",
    ]));
    let cfg = LabConfig {
        state_path: path.clone(),
        size: "1G".into(),
        runner: &r,
    };
    up(&cfg, &specs, &groups, &[TargetKind::Iscsi], "/bin/false").unwrap_err();
    let c = lines(&r);
    assert_eq!(
        c.iter().filter(|l| *l == "ip netns add sblab-a+b").count(),
        1,
        "one namespace for the group"
    );
    let dels: Vec<&String> = c.iter().filter(|l| l.starts_with("ip netns del")).collect();
    assert_eq!(dels, ["ip netns del sblab-b-sw", "ip netns del sblab-a+b"]);
    assert!(!path.exists());
}
