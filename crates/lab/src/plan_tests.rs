use super::*;

fn plan(spec: &str, index: usize) -> LinkPlan {
    LinkPlan::new(LinkSpec::parse(spec).unwrap(), index)
}

fn lines(cmds: &[Argv]) -> Vec<String> {
    cmds.iter().map(|c| c.join(" ")).collect()
}

#[test]
fn direct_link_commands() {
    let p = plan("one=1gbit", 0);
    let c = lines(&p.build());
    let expect = [
        "ip netns add sblab-one",
        "ip -n sblab-one link set lo up",
        "ip link add sbl-one-h type veth peer name sbl-one-t netns sblab-one",
        "ip link set sbl-one-h mtu 1500",
        "ip -n sblab-one link set sbl-one-t mtu 1500",
        "ip addr add 10.213.0.1/30 dev sbl-one-h",
        "ip -n sblab-one addr add 10.213.0.2/30 dev sbl-one-t",
        "tc qdisc add dev sbl-one-h root handle 1: htb default 10",
        "tc class add dev sbl-one-h parent 1: classid 1:10 htb rate 1gbit ceil 1gbit",
        "tc -n sblab-one qdisc add dev sbl-one-t root handle 1: htb default 10",
        "tc -n sblab-one class add dev sbl-one-t parent 1: classid 1:10 htb rate 1gbit ceil 1gbit",
        "ip link set sbl-one-h up",
        "ip -n sblab-one link set sbl-one-t up",
    ];
    assert_eq!(c, expect);
}

#[test]
fn both_directions_are_shaped() {
    let c = lines(&plan("ten=10gbit,mtu=9000", 3).build());
    let classes: Vec<&String> = c.iter().filter(|l| l.contains("class add")).collect();
    assert_eq!(classes.len(), 2);
    assert!(classes[0].contains("dev sbl-ten-h") && classes[0].contains("rate 10gbit"));
    assert!(classes[1].contains("-n sblab-ten") && classes[1].contains("dev sbl-ten-t"));
    assert!(c.contains(&"ip link set sbl-ten-h mtu 9000".to_string()));
    assert!(c.contains(&"ip -n sblab-ten link set sbl-ten-t mtu 9000".to_string()));
    assert!(c.contains(&"ip addr add 10.213.3.1/30 dev sbl-ten-h".to_string()));
}

#[test]
fn offload_off_on_every_end() {
    let c = lines(&plan("x=1gbit,offload=off", 0).build());
    let eth: Vec<&String> = c.iter().filter(|l| l.contains("ethtool")).collect();
    assert_eq!(
        eth,
        [
            "ethtool -K sbl-x-h tso off gso off gro off tx off rx off",
            "ip netns exec sblab-x ethtool -K sbl-x-t tso off gso off gro off tx off rx off"
        ]
    );
    assert!(!lines(&plan("x=1gbit", 0).build())
        .iter()
        .any(|l| l.contains("ethtool")));
}

#[test]
fn switched_link_adds_a_bridge_hop() {
    let p = plan("sw=1gbit,switched,offload=off", 1);
    assert_eq!(p.namespaces(), ["sblab-sw-sw", "sblab-sw"]);
    let c = lines(&p.build());
    for want in [
        "ip netns add sblab-sw-sw",
        "ip link add sbl-sw-h type veth peer name sbl-sw-a netns sblab-sw-sw",
        "ip -n sblab-sw-sw link add sbl-sw-b type veth peer name sbl-sw-t netns sblab-sw",
        "ip -n sblab-sw-sw link add sbl-sw-br type bridge",
        "ip -n sblab-sw-sw link set sbl-sw-a master sbl-sw-br",
        "ip -n sblab-sw-sw link set sbl-sw-b master sbl-sw-br",
        "ip -n sblab-sw-sw link set sbl-sw-br up",
        "ip netns exec sblab-sw-sw ethtool -K sbl-sw-b tso off gso off gro off tx off rx off",
    ] {
        assert!(c.contains(&want.to_string()), "missing: {want}\n{c:#?}");
    }
    // The shaped ends stay the host's and the target's.
    assert_eq!(c.iter().filter(|l| l.contains("htb rate")).count(), 2);
    // Every interface name fits IFNAMSIZ.
    for (_, dev) in p.ends() {
        assert!(dev.len() <= 15, "{dev}");
    }
}

#[test]
fn longest_names_fit_interface_names() {
    let p = plan("abcdefgh=1gbit,switched", 63);
    for (_, dev) in p.ends() {
        assert!(dev.len() <= 15, "{dev}");
    }
    assert!("sbl-abcdefgh-br".len() <= 15);
    assert_eq!(p.target_addr().to_string(), "10.213.63.2");
}
