use super::*;
use crate::spec::parse_links;

fn specs(v: &[&str]) -> Vec<LinkSpec> {
    parse_links(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

fn lines(cmds: &[Argv]) -> Vec<String> {
    cmds.iter().map(|c| c.join(" ")).collect()
}

fn groups(specs: &[LinkSpec], g: &[&str]) -> Result<Vec<Vec<usize>>, LabError> {
    parse_paths(&g.iter().map(|s| s.to_string()).collect::<Vec<_>>(), specs)
}

/// The site of the group `a+b` over two 1 Gbit/s links, after one ungrouped link.
fn pair() -> (Vec<LinkSpec>, Vec<Site>) {
    let s = specs(&["one=10gbit", "a=1gbit", "b=1gbit"]);
    let g = groups(&s, &["a,b"]).unwrap();
    let sites = sites(&s, &g);
    (s, sites)
}

#[test]
fn single_link_targets_are_as_before() {
    // The ordinary mode, one namespace per link: exactly the commands and URIs it always had.
    let p = LinkPlan::new(LinkSpec::parse("ten=10gbit").unwrap(), 1);
    let s = Site::single(p.clone());
    assert_eq!(s.build(), p.build());
    assert_eq!(s.namespaces(), ["sblab-ten"]);
    let t = |k| {
        s.target_command(k, "/bin/sanbench", "1G", "/run/x.pid")
            .join(" ")
    };
    assert_eq!(
        t(TargetKind::Nbd),
        "ip netns exec sblab-ten /bin/sanbench serve nbd --size 1G --listen 10.213.1.2:10809"
    );
    assert_eq!(
        t(TargetKind::Iscsi),
        "ip netns exec sblab-ten /bin/sanbench serve iscsi --size 1G --listen 10.213.1.2:3260 \
         --iqn iqn.2026-11.io.sanbench:lab-iscsi-ten"
    );
    assert_eq!(
        t(TargetKind::Nvme),
        "ip netns exec sblab-ten /bin/sanbench serve nvme --size 1G --listen 10.213.1.2:4420 \
         --nqn nqn.2026-11.io.sanbench:lab-nvme-ten"
    );
    assert_eq!(
        t(TargetKind::Nbdkit),
        "ip netns exec sblab-ten nbdkit -P /run/x.pid -i 10.213.1.2 -p 10810 memory 1G"
    );
    assert_eq!(
        t(TargetKind::Tgtd),
        "ip netns exec sblab-ten tgtd -f -C 2131 --iscsi portal=10.213.1.2:3261"
    );
    assert_eq!(s.uri(TargetKind::Nbd), "nbd://10.213.1.2:10809");
    assert_eq!(s.uri(TargetKind::Nbdkit), "nbd://10.213.1.2:10810");
    assert_eq!(
        s.uri(TargetKind::Iscsi),
        "iscsi://10.213.1.2:3260/iqn.2026-11.io.sanbench:lab-iscsi-ten/0"
    );
    assert_eq!(
        s.uri(TargetKind::Tgtd),
        "iscsi://10.213.1.2:3261/iqn.2026-11.io.sanbench:lab-tgtd-ten/1"
    );
    assert_eq!(
        s.uri(TargetKind::Nvme),
        "nvme+tcp://10.213.1.2:4420/nqn.2026-11.io.sanbench:lab-nvme-ten/1"
    );
    assert_eq!(s.tgtd_image(), "/dev/shm/sblab-ten-tgtd.img");
    let setup = lines(&s.tgtd_setup("/dev/shm/sblab-ten-tgtd.img"));
    assert_eq!(setup.len(), 3);
    assert!(setup[1].ends_with("--lun 1 -b /dev/shm/sblab-ten-tgtd.img"));
    assert!(setup[2].ends_with("--op bind --mode target --tid 1 -I ALL"));
    let lt = crate::lab::lab_targets(&s, TargetKind::Nbd);
    assert_eq!(lt.len(), 1);
    assert_eq!(lt[0].name, "nbd@ten");
    assert!(lt[0].paths.is_empty());
    assert_eq!(lt[0].link, crate::state::link_info(&p.spec));
}

#[test]
fn paths_lists_are_checked() {
    let s = specs(&["a=1gbit", "b=1gbit", "c=1gbit", "d=1gbit"]);
    assert_eq!(groups(&s, &["b,a"]).unwrap(), [vec![1, 0]]);
    assert_eq!(
        groups(&s, &["a,b", "c,d"]).unwrap(),
        [vec![0, 1], vec![2, 3]]
    );
    assert!(groups(&s, &[]).unwrap().is_empty());
    for (g, words) in [
        (&["a"][..], "at least two"),
        (&["a,x"], "no --link is named 'x' (links: a, b, c, d)"),
        (&["a,a"], "named twice"),
        (&["a,b", "c,a"], "already a path of a+b"),
        (&["a,"], "no --link is named ''"),
    ] {
        let e = groups(&s, g).unwrap_err();
        let m = e.to_string();
        assert!(m.contains(words), "{g:?}: {m}");
        assert!(m.starts_with("--paths "), "{m}");
        assert!(e.is_usage() && !m.contains('\n'));
    }
    let many: Vec<String> = (0..9).map(|i| format!("l{i}=1gbit")).collect();
    let s = parse_links(&many).unwrap();
    let all = (0..9)
        .map(|i| format!("l{i}"))
        .collect::<Vec<_>>()
        .join(",");
    assert!(parse_paths(&[all], &s)
        .unwrap_err()
        .to_string()
        .contains("at most 8"));
}

#[test]
fn a_group_is_one_namespace_behind_every_link() {
    let (_, sites) = pair();
    assert_eq!(
        sites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["one", "a+b"]
    );
    let g = &sites[1];
    assert!(g.is_group() && !sites[0].is_group());
    assert_eq!(g.namespace(), "sblab-a+b");
    assert_eq!(g.namespaces(), ["sblab-a+b"]);
    let c = lines(&g.build());
    let expect = [
        "ip netns add sblab-a+b",
        "ip -n sblab-a+b link set lo up",
        "ip link add sbl-a-h type veth peer name sbl-a-t netns sblab-a+b",
        "ip link set sbl-a-h mtu 1500",
        "ip -n sblab-a+b link set sbl-a-t mtu 1500",
        "ip addr add 10.213.1.1/30 dev sbl-a-h",
        "ip -n sblab-a+b addr add 10.213.1.2/30 dev sbl-a-t",
        "tc qdisc add dev sbl-a-h root handle 1: htb default 10",
        "tc class add dev sbl-a-h parent 1: classid 1:10 htb rate 1gbit ceil 1gbit",
        "tc -n sblab-a+b qdisc add dev sbl-a-t root handle 1: htb default 10",
        "tc -n sblab-a+b class add dev sbl-a-t parent 1: classid 1:10 htb rate 1gbit ceil 1gbit",
        "ip link set sbl-a-h up",
        "ip -n sblab-a+b link set sbl-a-t up",
        "ip link add sbl-b-h type veth peer name sbl-b-t netns sblab-a+b",
        "ip link set sbl-b-h mtu 1500",
        "ip -n sblab-a+b link set sbl-b-t mtu 1500",
        "ip addr add 10.213.2.1/30 dev sbl-b-h",
        "ip -n sblab-a+b addr add 10.213.2.2/30 dev sbl-b-t",
        "tc qdisc add dev sbl-b-h root handle 1: htb default 10",
        "tc class add dev sbl-b-h parent 1: classid 1:10 htb rate 1gbit ceil 1gbit",
        "tc -n sblab-a+b qdisc add dev sbl-b-t root handle 1: htb default 10",
        "tc -n sblab-a+b class add dev sbl-b-t parent 1: classid 1:10 htb rate 1gbit ceil 1gbit",
        "ip link set sbl-b-h up",
        "ip -n sblab-a+b link set sbl-b-t up",
    ];
    assert_eq!(c, expect);
    // The ungrouped link is untouched by the group beside it.
    assert_eq!(
        sites[0].build(),
        LinkPlan::new(LinkSpec::parse("one=10gbit").unwrap(), 0).build()
    );
}

#[test]
fn a_switched_path_keeps_its_bridge_namespace() {
    let s = specs(&["a=1gbit,switched", "b=1gbit"]);
    let sites = sites(&s, &groups(&s, &["a,b"]).unwrap());
    assert_eq!(sites.len(), 1);
    assert_eq!(sites[0].namespaces(), ["sblab-a+b", "sblab-a-sw"]);
    let c = lines(&sites[0].build());
    assert!(c.contains(
        &"ip -n sblab-a-sw link add sbl-a-b type veth peer name sbl-a-t netns sblab-a+b".into()
    ));
    assert_eq!(
        c.iter().filter(|l| l.starts_with("ip netns add")).count(),
        2
    );
}

#[test]
fn group_targets_listen_on_every_path() {
    let (_, sites) = pair();
    let g = &sites[1];
    let t = |k| {
        g.target_command(k, "/bin/sanbench", "1G", "/run/x.pid")
            .join(" ")
    };
    assert_eq!(
        t(TargetKind::Nbd),
        "ip netns exec sblab-a+b /bin/sanbench serve nbd --size 1G --listen 10.213.1.2:10809 \
         --listen 10.213.2.2:10809"
    );
    assert_eq!(
        t(TargetKind::Iscsi),
        "ip netns exec sblab-a+b /bin/sanbench serve iscsi --size 1G --listen 10.213.1.2:3260 \
         --listen 10.213.2.2:3260 --iqn iqn.2026-11.io.sanbench:lab-iscsi-a.b"
    );
    assert_eq!(
        t(TargetKind::Nvme),
        "ip netns exec sblab-a+b /bin/sanbench serve nvme --size 1G --listen 10.213.1.2:4420 \
         --listen 10.213.2.2:4420 --nqn nqn.2026-11.io.sanbench:lab-nvme-a.b"
    );
    // nbdkit takes one -i: without it, every address of the namespace (only the lab's).
    assert_eq!(
        t(TargetKind::Nbdkit),
        "ip netns exec sblab-a+b nbdkit -P /run/x.pid -p 10810 memory 1G"
    );
    assert_eq!(
        t(TargetKind::Tgtd),
        "ip netns exec sblab-a+b tgtd -f -C 2131 --iscsi \
         portal=10.213.1.2:3261,portal=10.213.2.2:3261"
    );
    assert_eq!(g.tgtd_image(), "/dev/shm/sblab-a+b-tgtd.img");
    assert_eq!(
        g.uri(TargetKind::Iscsi),
        "iscsi://10.213.1.2:3260,10.213.2.2:3260/iqn.2026-11.io.sanbench:lab-iscsi-a.b/0"
    );
    assert_eq!(
        g.path_uri(TargetKind::Iscsi, 1),
        "iscsi://10.213.2.2:3260/iqn.2026-11.io.sanbench:lab-iscsi-a.b/0"
    );
    assert_eq!(
        g.uri(TargetKind::Nvme),
        "nvme+tcp://10.213.1.2:4420,10.213.2.2:4420/nqn.2026-11.io.sanbench:lab-nvme-a.b/1"
    );
    assert_eq!(
        g.uri(TargetKind::Nbd),
        "nbd://10.213.1.2:10809,10.213.2.2:10809"
    );
    assert_eq!(
        g.uri(TargetKind::Tgtd),
        "iscsi://10.213.1.2:3261,10.213.2.2:3261/iqn.2026-11.io.sanbench:lab-tgtd-a.b/1"
    );
}

#[test]
fn the_lab_file_names_every_path_and_each_alone() {
    let (_, sites) = pair();
    let g = &sites[1];
    let lt = crate::lab::lab_targets(g, TargetKind::Iscsi);
    let names: Vec<&str> = lt.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["iscsi@a+b", "iscsi@a", "iscsi@b"]);
    assert_eq!(lt[0].uri, g.uri(TargetKind::Iscsi));
    assert_eq!(
        lt[0].paths.iter().map(|p| &p.uri).collect::<Vec<_>>(),
        [&lt[1].uri, &lt[2].uri]
    );
    assert_eq!(lt[1].uri, g.path_uri(TargetKind::Iscsi, 0));
    assert_eq!(lt[2].link.name, "b");
    assert_eq!(lt[2].link.rate_bits, 1_000_000_000);
    // The multipath entry's link is the paths together.
    assert_eq!(
        lt[0].link,
        LinkInfo {
            name: "a+b".into(),
            rate_bits: 2_000_000_000,
            mtu: 1500,
            offload: true,
            switched: false
        }
    );
    let s = specs(&["a=1gbit,mtu=9000,offload=off", "b=10gbit,switched"]);
    let g = &sites_of(&s, &["a,b"])[0];
    let l = g.link_info();
    assert_eq!(l.rate_bits, 11_000_000_000);
    assert_eq!(l.mtu, 1500);
    assert!(!l.offload && l.switched);
}

fn sites_of(s: &[LinkSpec], g: &[&str]) -> Vec<Site> {
    sites(s, &groups(s, g).unwrap())
}
