//! Names, addresses and the exact commands that build a link, pure functions of the spec.
//!
//! Addressing: link number `i` (0-based, in `--link` order) uses `10.213.i.0/30`; the host
//! end is `10.213.i.1`, the target end `10.213.i.2`. Nothing in the lab ever sends anywhere
//! else. Naming: every namespace starts `sblab-`, every interface `sbl-`, so a crashed lab's
//! leftovers can be found by prefix.
//!
//! ```text
//! direct:    host [sbl-N-h] ==veth== [sbl-N-t] sblab-N
//! switched:  host [sbl-N-h] ==veth== [sbl-N-a]─bridge sbl-N-br─[sbl-N-b] ==veth== [sbl-N-t] sblab-N
//!                                     └──────────── sblab-N-sw ───────────┘
//! ```
//! htb shapes the egress of `sbl-N-h` (writes) and of `sbl-N-t` (reads), so both directions
//! run at the link rate; the bridge hop is not shaped (it is the extra forwarding element).
//!
//! A path group (`--paths a,b`) ends several links in one namespace, `sblab-a+b`: each link
//! keeps its own veth pair, /30 and shaping, and its target end (`sbl-a-t`, `sbl-b-t`) lives
//! in the group's namespace, where the targets listen on every link's address
//! ([`crate::site`]).

use std::net::Ipv4Addr;

use crate::cmd::{argv, Argv};
use crate::spec::LinkSpec;

pub const NS_PREFIX: &str = "sblab-";
pub const IF_PREFIX: &str = "sbl-";
/// The private range the lab uses, one /24 per link (of which a /30 is used).
pub const ADDR_RANGE: &str = "10.213.0.0/16";
/// tgtd control ports (`tgtd -C N`) are this plus the link number, away from the usual 0-9.
pub const TGTD_CONTROL_BASE: u32 = 2130;
/// IQN prefix of the lab's targets; the target kind and the link (or path group) follow.
pub const IQN_PREFIX: &str = "iqn.2026-11.io.sanbench:lab";
/// NQN prefix of the lab's NVMe/TCP subsystems, likewise.
pub const NQN_PREFIX: &str = "nqn.2026-11.io.sanbench:lab";

/// Where one link sits: its names and addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkPlan {
    pub spec: LinkSpec,
    pub index: usize,
    /// The path group (`a+b`, from `--paths a,b`) whose one target namespace this link
    /// leads to; `None`: the link has a namespace of its own.
    pub group: Option<String>,
}

impl LinkPlan {
    pub fn new(spec: LinkSpec, index: usize) -> LinkPlan {
        LinkPlan {
            spec,
            index,
            group: None,
        }
    }
    /// This link as one path of the group `group` (`a+b`).
    pub fn in_group(mut self, group: &str) -> LinkPlan {
        self.group = Some(group.to_string());
        self
    }
    /// The namespace the targets run in: the link's own, or its path group's.
    pub fn namespace(&self) -> String {
        format!(
            "{NS_PREFIX}{}",
            self.group.as_deref().unwrap_or(&self.spec.name)
        )
    }
    /// The namespace holding the bridge, for switched links.
    pub fn switch_namespace(&self) -> Option<String> {
        self.spec
            .switched
            .then(|| format!("{NS_PREFIX}{}-sw", self.spec.name))
    }
    fn ifname(&self, end: &str) -> String {
        format!("{IF_PREFIX}{}-{end}", self.spec.name)
    }
    pub fn host_if(&self) -> String {
        self.ifname("h")
    }
    pub fn target_if(&self) -> String {
        self.ifname("t")
    }
    pub fn host_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.index as u8, 1)
    }
    pub fn target_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.index as u8, 2)
    }
    /// All namespaces this link creates, the target's last (deleted first on the way down).
    /// A path of a group creates only its switch namespace: the group makes the target's.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.switch_namespace().into_iter().collect();
        if self.group.is_none() {
            v.push(self.namespace());
        }
        v
    }

    /// Every veth end on the path, as (namespace or None for the host, interface).
    pub fn ends(&self) -> Vec<(Option<String>, String)> {
        let ns = Some(self.namespace());
        match self.switch_namespace() {
            None => vec![(None, self.host_if()), (ns, self.target_if())],
            Some(sw) => vec![
                (None, self.host_if()),
                (Some(sw.clone()), self.ifname("a")),
                (Some(sw), self.ifname("b")),
                (ns, self.target_if()),
            ],
        }
    }

    /// The commands that build this link, in order.
    pub fn build(&self) -> Vec<Argv> {
        let ns = self.namespace();
        let (h, t) = (self.host_if(), self.target_if());
        let mut c: Vec<Argv> = Vec::new();
        for n in self.namespaces() {
            c.push(argv(["ip", "netns", "add", &n]));
            c.push(argv(["ip", "-n", &n, "link", "set", "lo", "up"]));
        }
        match self.switch_namespace() {
            None => c.push(argv([
                "ip", "link", "add", &h, "type", "veth", "peer", "name", &t, "netns", &ns,
            ])),
            Some(sw) => {
                let (a, b, br) = (self.ifname("a"), self.ifname("b"), self.ifname("br"));
                c.push(argv([
                    "ip", "link", "add", &h, "type", "veth", "peer", "name", &a, "netns", &sw,
                ]));
                c.push(argv([
                    "ip", "-n", &sw, "link", "add", &b, "type", "veth", "peer", "name", &t,
                    "netns", &ns,
                ]));
                c.push(argv([
                    "ip", "-n", &sw, "link", "add", &br, "type", "bridge",
                ]));
                for port in [&a, &b] {
                    c.push(argv(["ip", "-n", &sw, "link", "set", port, "master", &br]));
                }
            }
        }
        let mtu = self.spec.mtu.to_string();
        for (n, dev) in self.ends() {
            c.push(ip(&n, ["link", "set", &dev, "mtu", &mtu]));
        }
        c.push(argv([
            "ip",
            "addr",
            "add",
            &format!("{}/30", self.host_addr()),
            "dev",
            &h,
        ]));
        c.push(argv([
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/30", self.target_addr()),
            "dev",
            &t,
        ]));
        if !self.spec.offload {
            for (n, dev) in self.ends() {
                let cmd = argv([
                    "ethtool", "-K", &dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                    "rx", "off",
                ]);
                c.push(in_ns(&n, cmd));
            }
        }
        let rate = self.spec.rate();
        for (n, dev) in [(None, h.clone()), (Some(ns.clone()), t.clone())] {
            c.push(tc(
                &n,
                [
                    "qdisc", "add", "dev", &dev, "root", "handle", "1:", "htb", "default", "10",
                ],
            ));
            c.push(tc(
                &n,
                [
                    "class", "add", "dev", &dev, "parent", "1:", "classid", "1:10", "htb", "rate",
                    &rate, "ceil", &rate,
                ],
            ));
        }
        for (n, dev) in self.ends() {
            c.push(ip(&n, ["link", "set", &dev, "up"]));
        }
        if let Some(sw) = self.switch_namespace() {
            c.push(argv([
                "ip",
                "-n",
                &sw,
                "link",
                "set",
                &self.ifname("br"),
                "up",
            ]));
        }
        c
    }
}

/// `ip [-n NS] ARGS...`
pub(crate) fn ip<const N: usize>(ns: &Option<String>, rest: [&str; N]) -> Argv {
    let mut v = argv(["ip"]);
    if let Some(n) = ns {
        v.extend(argv(["-n", n]));
    }
    v.extend(argv(rest));
    v
}

/// `tc [-n NS] ARGS...`
pub(crate) fn tc<const N: usize>(ns: &Option<String>, rest: [&str; N]) -> Argv {
    let mut v = argv(["tc"]);
    if let Some(n) = ns {
        v.extend(argv(["-n", n]));
    }
    v.extend(argv(rest));
    v
}

/// `ip netns exec NS CMD...`, or CMD itself on the host.
pub fn in_ns(ns: &Option<String>, cmd: Argv) -> Argv {
    match ns {
        None => cmd,
        Some(n) => {
            let mut v = argv(["ip", "netns", "exec", n]);
            v.extend(cmd);
            v
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
