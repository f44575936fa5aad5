//! Each built-in suite expands to the workloads its study describes (shared/SUITES.md).

use super::*;

fn ids(s: &Suite) -> Vec<&str> {
    s.workloads.iter().map(|w| w.id.as_str()).collect()
}

fn get<'a>(s: &'a Suite, id: &str) -> &'a SuiteWorkload {
    s.workloads
        .iter()
        .find(|w| w.id == id)
        .unwrap_or_else(|| panic!("{id} missing from {:?}", ids(s)))
}

#[test]
fn every_builtin_parses() {
    for n in builtin_names() {
        let s = load(n).unwrap();
        assert_eq!(s.name, n);
        assert!(!s.description.is_empty());
    }
}

#[test]
fn thirdio_matches_the_study() {
    let s = load("thirdio-2008").unwrap();
    assert_eq!(s.workloads.len(), 12);
    for w in &s.workloads {
        assert_eq!(w.workload.qd, 12, "{}", w.id);
        assert!(matches!(w.targets_at_once, Some(4) | Some(8)));
    }
    let d = get(&s, "duplex-1m-x4");
    assert_eq!(d.workload.segments[0].read_bs, 1 << 20);
    assert_eq!(d.workload.segments[0].read_pct, 50.0);
    assert_eq!(d.workload.segments[0].random_pct, 0.0);
    assert_eq!(d.group, "bandwidth");
    let db = get(&s, "database-8k-x8");
    assert_eq!(db.workload.segments[0].read_bs, 8192);
    assert_eq!(db.workload.segments[0].read_pct, 67.0);
    assert_eq!(db.workload.segments[0].random_pct, 100.0);
    assert_eq!(db.group, "database");
    assert!(ids(&s).contains(&"rand-read-1m-x4"));
}

#[test]
fn ibm_xiv_has_eleven_mixed_size_patterns() {
    let s = load("ibm-xiv-2014").unwrap();
    let pairs: Vec<(u64, u64)> = s
        .workloads
        .iter()
        .filter(|w| w.group == "mixed")
        .map(|w| {
            (
                w.workload.segments[0].read_bs >> 10,
                w.workload.segments[0].write_bs >> 10,
            )
        })
        .collect();
    assert_eq!(
        pairs,
        vec![
            (4, 4),
            (4, 8),
            (4, 16),
            (8, 16),
            (16, 32),
            (32, 64),
            (32, 128),
            (64, 128),
            (256, 512),
            (512, 1024),
            (1024, 1024)
        ]
    );
    for w in &s.workloads {
        assert_eq!(w.workload.segments[0].read_pct, 50.0);
        assert_eq!(w.workload.segments[0].random_pct, 0.0);
    }
}

#[test]
fn demartek_is_24_tests_at_qd1() {
    let s = load("demartek-lsi-2011").unwrap();
    assert_eq!(s.workloads.len(), 24);
    assert!(s.workloads.iter().all(|w| w.workload.qd == 1));
    let sizes: std::collections::BTreeSet<u64> = s
        .workloads
        .iter()
        .map(|w| w.workload.segments[0].read_bs >> 10)
        .collect();
    assert_eq!(
        sizes.into_iter().collect::<Vec<_>>(),
        vec![4, 8, 16, 32, 64, 128]
    );
    let w = get(&s, "seq-write-64kib");
    assert_eq!(w.workload.segments[0].read_pct, 0.0);
    assert_eq!(w.workload.segments[0].random_pct, 0.0);
}

#[test]
fn nwc_has_the_custom_mix_and_one_vs_two_targets() {
    let s = load("nwc-2003").unwrap();
    let c = get(&s, "nwc-custom");
    let segs = &c.workload.segments;
    assert_eq!(segs.len(), 3);
    assert_eq!(
        (segs[0].weight, segs[0].read_bs, segs[0].random_pct),
        (33, 512, 0.0)
    );
    assert_eq!(
        (
            segs[1].weight,
            segs[1].read_bs,
            segs[1].read_pct,
            segs[1].random_pct
        ),
        (34, 2048, 67.0, 100.0)
    );
    assert_eq!((segs[2].weight, segs[2].read_bs), (33, 65536));
    assert_eq!(c.workload.ramp, Duration::from_secs(5));
    assert_eq!(c.workload.time, Duration::from_secs(120));
    assert_eq!(get(&s, "read-64k-targets-x1").targets_at_once, Some(1));
    assert_eq!(get(&s, "read-64k-targets-x2").targets_at_once, Some(2));
    assert_eq!(get(&s, "max-io-rate-512").workload.segments[0].read_bs, 512);
    assert_eq!(get(&s, "database-2k").workload.segments[0].read_pct, 67.0);
}

#[test]
fn qlogic_sweeps_sizes_and_queue_depth() {
    let s = load("qlogic-fcoe-2010").unwrap();
    let qds: Vec<u32> = s
        .workloads
        .iter()
        .filter(|w| w.group == "scaling")
        .map(|w| w.workload.qd)
        .collect();
    assert_eq!(qds, vec![1, 2, 4, 8, 16, 32]);
    assert_eq!(get(&s, "seq-read-512b").workload.segments[0].read_bs, 512);
    assert_eq!(
        get(&s, "seq-read-1mib").workload.segments[0].read_bs,
        1 << 20
    );
}

#[test]
fn snia_matrix_is_56_random_tests() {
    let s = load("snia-pts-iops").unwrap();
    assert_eq!(s.workloads.len(), 56);
    assert!(s
        .workloads
        .iter()
        .all(|w| w.workload.segments[0].random_pct == 100.0));
    assert_eq!(get(&s, "rw65-4kib").workload.segments[0].read_pct, 65.0);
}

#[test]
fn quick_fits_in_a_minute_on_four_targets() {
    let s = load("quick").unwrap();
    assert!(
        s.duration(3) <= Duration::from_secs(60),
        "{:?}",
        s.duration(3)
    );
}

#[test]
fn scaling_and_user_suite_errors() {
    let mut s = load("nwc-2003").unwrap();
    s.scale(Some(Duration::from_secs(2)), Some(Duration::ZERO));
    assert!(s
        .workloads
        .iter()
        .all(|w| w.workload.time == Duration::from_secs(2)));
    assert!(load("no-such-suite").unwrap_err().contains("built-in"));
    let e = parse("name = \"x\"\n[[workload]]\nid = \"a\"\nsegment = [{ bs = \"4k\" }]\n[[workload]]\nid = \"a\"\nsegment = [{ bs = \"4k\" }]\n").unwrap_err();
    assert!(e.contains("twice"), "{e}");
    let e =
        parse("name = \"x\"\n[[workload]]\nid = \"a\"\nsegment = [{ bs = \"4k\", read = 101 }]\n")
            .unwrap_err();
    assert!(e.contains("workload a"), "{e}");
    let e = parse("name = \"x\"\nbogus = 1\n").unwrap_err();
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn lab_suite_has_the_link_cap_and_one_vs_two_connections() {
    let s = load("lab").unwrap();
    let ids: Vec<&str> = s.workloads.iter().map(|w| w.id.as_str()).collect();
    assert!(ids.contains(&"seq-read-1m"), "{ids:?}");
    let conns: Vec<Option<u32>> = s
        .workloads
        .iter()
        .filter(|w| w.group == "connections")
        .map(|w| w.targets_at_once)
        .collect();
    assert_eq!(conns, [Some(1), Some(2)]);
    // A few seconds per workload: the lab is for quick reproductions.
    assert!(s.workloads.iter().all(|w| w.workload.time.as_secs() <= 5));
}

#[test]
fn nvme_vs_iscsi_is_the_thirdio_and_demartek_matrices() {
    let s = load("nvme-vs-iscsi").unwrap();
    let third = load("thirdio-2008").unwrap();
    let demartek = load("demartek-lsi-2011").unwrap();
    assert_eq!(
        s.workloads.len(),
        third.workloads.len() + demartek.workloads.len()
    );
    for w in third.workloads.iter().chain(&demartek.workloads) {
        // The Third I/O sweeps name their QD 12 (the suite's default is Demartek's QD 1).
        let id = match w.id.rsplit_once("-x") {
            Some((base, n)) => format!("{base}-qd12-x{n}"),
            None => w.id.clone(),
        };
        let mine = get(&s, &id);
        assert_eq!(mine.workload.segments, w.workload.segments, "{}", w.id);
        assert_eq!(mine.workload.qd, w.workload.qd, "{}", w.id);
        assert_eq!(mine.targets_at_once, w.targets_at_once, "{}", w.id);
    }
}

#[test]
fn ibm_xiv_sweeps_one_two_and_six_paths() {
    let s = load("ibm-xiv-2014").unwrap();
    for (id, paths) in [
        ("paths-4kib-p1", 1),
        ("paths-4kib-p2", 2),
        ("paths-4kib-p6", 6),
        ("paths-256kib-p6", 6),
    ] {
        let w = get(&s, id);
        assert_eq!(w.paths, Some(paths), "{id}");
        assert!(
            w.title.ends_with(&format!(
                ", {paths} path{}",
                if paths == 1 { "" } else { "s" }
            )),
            "{}",
            w.title
        );
    }
    // The study's own mixes keep each target as given.
    assert_eq!(get(&s, "rw-4k-4k").paths, None);
    let bad = "name = \"x\"\n[[workload]]\nid = \"a\"\npaths = 0\nsegment = [{ bs = \"4k\" }]\n";
    assert!(parse(bad).unwrap_err().contains("paths must be 1 to 64"));
}

#[test]
fn failover_fires_path_two_down_at_a_third_and_up_at_two_thirds() {
    let s = load("failover").unwrap();
    assert_eq!(s.curve, vec![50.0]);
    for w in &s.workloads {
        assert_eq!(w.faults, ["33%:path2:down", "67%:path2:up"], "{}", w.id);
        let at: Vec<Duration> = w
            .faults
            .iter()
            .map(|f| fault_at(f, w.workload.time).unwrap())
            .collect();
        assert_eq!(
            at,
            [Duration::from_secs_f64(9.9), Duration::from_secs_f64(20.1)]
        );
    }
    assert_eq!(ids(&s), ["failover-4k-random", "failover-1m-seq"]);
}

#[test]
fn suite_faults_are_checked_for_form_and_window() {
    let w = Duration::from_secs(10);
    assert_eq!(fault_at("2s:b:down", w).unwrap(), Duration::from_secs(2));
    assert_eq!(fault_at("50%:path2:up", w).unwrap(), Duration::from_secs(5));
    for bad in [
        "2s:b",
        "x:b:down",
        "120%:b:down",
        "0%:b:down",
        "10s:b:down",
        "1s::down",
    ] {
        assert!(fault_at(bad, w).is_err(), "{bad}");
    }
    let bad = "name = \"x\"\ntime = \"5s\"\n[[workload]]\nid = \"a\"\nfault = [\"6s:b:down\"]\nsegment = [{ bs = \"4k\" }]\n";
    assert!(parse(bad)
        .unwrap_err()
        .contains("not inside the 5.000 s window"));
}
