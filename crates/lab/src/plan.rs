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

use std::net::Ipv4Addr;

use crate::cmd::{argv, Argv};
use crate::spec::{LinkSpec, TargetKind};

pub const NS_PREFIX: &str = "sblab-";
pub const IF_PREFIX: &str = "sbl-";
/// The private range the lab uses, one /24 per link (of which a /30 is used).
pub const ADDR_RANGE: &str = "10.213.0.0/16";
/// tgtd control ports (`tgtd -C N`) are this plus the link number, away from the usual 0-9.
pub const TGTD_CONTROL_BASE: u32 = 2130;
/// IQN prefix of the lab's targets; the link name and target kind follow.
pub const IQN_PREFIX: &str = "iqn.2026-11.io.sanbench:lab";

/// Where one link sits: its names and addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkPlan {
    pub spec: LinkSpec,
    pub index: usize,
}

impl LinkPlan {
    pub fn new(spec: LinkSpec, index: usize) -> LinkPlan {
        LinkPlan { spec, index }
    }
    /// The namespace the targets run in.
    pub fn namespace(&self) -> String {
        format!("{NS_PREFIX}{}", self.spec.name)
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
    pub fn tgtd_control(&self) -> u32 {
        TGTD_CONTROL_BASE + self.index as u32
    }
    pub fn iqn(&self, kind: TargetKind) -> String {
        format!("{IQN_PREFIX}-{}-{}", kind.as_str(), self.spec.name)
    }
    /// All namespaces of this link, the target's last (deleted first on the way down).
    pub fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.switch_namespace().into_iter().collect();
        v.push(self.namespace());
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

    /// The command that serves `kind` inside the namespace (tgtd still needs
    /// [`LinkPlan::tgtd_setup`] once it runs). All run in the foreground except nbdkit: it
    /// asks the kernel to kill it when its parent exits (PR_SET_PDEATHSIG, even without
    /// --exit-with-parent), which would end it with `lab up`, so it daemonizes and writes its
    /// pid to `pidfile`.
    pub fn target_command(&self, kind: TargetKind, exe: &str, size: &str, pidfile: &str) -> Argv {
        let addr = self.target_addr().to_string();
        let listen = format!("{addr}:{}", kind.port());
        let cmd = match kind {
            TargetKind::Nbd => argv([exe, "serve", "nbd", "--size", size, "--listen", &listen]),
            TargetKind::Iscsi => argv([
                exe,
                "serve",
                "iscsi",
                "--size",
                size,
                "--listen",
                &listen,
                "--iqn",
                &self.iqn(kind),
            ]),
            TargetKind::Nbdkit => argv([
                "nbdkit",
                "-P",
                pidfile,
                "-i",
                &addr,
                "-p",
                &kind.port().to_string(),
                "memory",
                size,
            ]),
            TargetKind::Tgtd => argv([
                "tgtd",
                "-f",
                "-C",
                &self.tgtd_control().to_string(),
                "--iscsi",
                &format!("portal={listen}"),
            ]),
        };
        in_ns(&Some(self.namespace()), cmd)
    }

    /// tgtadm commands that give a running tgtd one target with a RAM-backed LUN 1.
    pub fn tgtd_setup(&self, image: &str) -> Vec<Argv> {
        let ctl = self.tgtd_control().to_string();
        let base = |rest: &[&str]| {
            let mut v = argv(["tgtadm", "-C", &ctl, "--lld", "iscsi"]);
            v.extend(rest.iter().map(|s| s.to_string()));
            v
        };
        let iqn = self.iqn(TargetKind::Tgtd);
        vec![
            base(&["--op", "new", "--mode", "target", "--tid", "1", "-T", &iqn]),
            base(&[
                "--op",
                "new",
                "--mode",
                "logicalunit",
                "--tid",
                "1",
                "--lun",
                "1",
                "-b",
                image,
            ]),
            base(&[
                "--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL",
            ]),
        ]
    }

    /// The URI an initiator on the host uses for `kind`.
    pub fn uri(&self, kind: TargetKind) -> String {
        let a = self.target_addr();
        let p = kind.port();
        match kind {
            TargetKind::Nbd | TargetKind::Nbdkit => format!("nbd://{a}:{p}"),
            // sanbench numbers LUNs from 0; tgtd's LUN 0 is the controller, the disk is 1.
            TargetKind::Iscsi => format!("iscsi://{a}:{p}/{}/0", self.iqn(kind)),
            TargetKind::Tgtd => format!("iscsi://{a}:{p}/{}/1", self.iqn(kind)),
        }
    }

    /// The RAM-backed image tgtd serves.
    pub fn tgtd_image(&self) -> String {
        format!("/dev/shm/{NS_PREFIX}{}-tgtd.img", self.spec.name)
    }
}

/// `ip [-n NS] ARGS...`
fn ip<const N: usize>(ns: &Option<String>, rest: [&str; N]) -> Argv {
    let mut v = argv(["ip"]);
    if let Some(n) = ns {
        v.extend(argv(["-n", n]));
    }
    v.extend(argv(rest));
    v
}

/// `tc [-n NS] ARGS...`
fn tc<const N: usize>(ns: &Option<String>, rest: [&str; N]) -> Argv {
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
