//! Where the targets run. A site is one target namespace and the links that reach it: one
//! link (the lab's ordinary mode, namespace `sblab-LINK`) or several, a path group
//! (`--paths a,b`, namespace `sblab-a+b`), whose targets listen on every link's address so
//! that an initiator reaches one store over several shaped paths (multipath).
//!
//! Several groups may be given (`--paths a,b --paths c,d`); a link belongs to at most one, and
//! links in no group keep a namespace of their own. A group holds 2 to [`MAX_PATHS`] links,
//! in the order `--paths` names them (the order of the portals in the multipath URI).
//!
//! Every command is a pure function of the site, as in [`crate::plan`]: the unit tests check
//! the exact argv.

use std::net::SocketAddr;

use crate::cmd::{argv, Argv};
use crate::error::LabError;
use crate::plan::{in_ns, LinkPlan, IQN_PREFIX, NQN_PREFIX, NS_PREFIX, TGTD_CONTROL_BASE};
use crate::spec::{LinkSpec, TargetKind};
use crate::state::LinkInfo;

/// Most links one path group holds (dm-multipath setups have 2 to 8 paths).
pub const MAX_PATHS: usize = 8;

/// Parses the `--paths` lists (`a,b`) against the links: each name a `--link`, at least two
/// per group, none named twice, no link in two groups. Returns each group as indices into
/// `specs`, in the order written.
pub fn parse_paths(groups: &[String], specs: &[LinkSpec]) -> Result<Vec<Vec<usize>>, LabError> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for g in groups {
        let bad = |why: String| LabError::Input(format!("--paths {g}: {why}"));
        let mut idx = Vec::new();
        for name in g.split(',').map(str::trim) {
            let i = specs.iter().position(|s| s.name == name).ok_or_else(|| {
                let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
                bad(format!(
                    "no --link is named '{name}' (links: {})",
                    names.join(", ")
                ))
            })?;
            if idx.contains(&i) {
                return Err(bad(format!("link '{name}' is named twice")));
            }
            if let Some(other) = out.iter().find(|o| o.contains(&i)) {
                let other: Vec<&str> = other.iter().map(|&j| specs[j].name.as_str()).collect();
                return Err(bad(format!(
                    "link '{name}' is already a path of {}",
                    other.join("+")
                )));
            }
            idx.push(i);
        }
        if idx.len() < 2 {
            return Err(bad(
                "a path group needs at least two links (e.g. --paths a,b)".into(),
            ));
        }
        if idx.len() > MAX_PATHS {
            return Err(bad(format!(
                "{} paths; a group holds at most {MAX_PATHS}",
                idx.len()
            )));
        }
        out.push(idx);
    }
    Ok(out)
}

/// The sites of a lab: one per group (at its first link's place in `--link` order) and one
/// per link in no group.
pub fn sites(specs: &[LinkSpec], groups: &[Vec<usize>]) -> Vec<Site> {
    let mut out = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        match groups.iter().find(|g| g.contains(&i)) {
            None => out.push(Site::single(LinkPlan::new(s.clone(), i))),
            Some(g) if g.iter().min() == Some(&i) => {
                let name = g
                    .iter()
                    .map(|&j| specs[j].name.as_str())
                    .collect::<Vec<_>>()
                    .join("+");
                let links = g
                    .iter()
                    .map(|&j| LinkPlan::new(specs[j].clone(), j).in_group(&name))
                    .collect();
                out.push(Site { name, links });
            }
            Some(_) => {}
        }
    }
    out
}

/// One target namespace and the links that reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The link's name, or the group's (`a+b`).
    pub name: String,
    /// One link, or the group's paths in `--paths` order.
    pub links: Vec<LinkPlan>,
}

impl Site {
    pub fn single(link: LinkPlan) -> Site {
        Site {
            name: link.spec.name.clone(),
            links: vec![link],
        }
    }

    /// More than one path leads here.
    pub fn is_group(&self) -> bool {
        self.links.len() > 1
    }

    /// The namespace the targets run in.
    pub fn namespace(&self) -> String {
        format!("{NS_PREFIX}{}", self.name)
    }

    /// Namespaces this site creates, in creation order.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.is_group() {
            v.push(self.namespace());
        }
        for l in &self.links {
            v.extend(l.namespaces());
        }
        v
    }

    /// The commands that build the site: for a group its namespace, then every link.
    pub fn build(&self) -> Vec<Argv> {
        let mut c = Vec::new();
        if self.is_group() {
            let ns = self.namespace();
            c.push(argv(["ip", "netns", "add", &ns]));
            c.push(argv(["ip", "-n", &ns, "link", "set", "lo", "up"]));
        }
        for l in &self.links {
            c.extend(l.build());
        }
        c
    }

    /// The name inside IQNs and NQNs: '+' is not an IQN character (RFC 3720 §3.2.6.2), '.'
    /// is, and link names hold none.
    fn key(&self) -> String {
        self.name.replace('+', ".")
    }

    pub fn iqn(&self, kind: TargetKind) -> String {
        format!("{IQN_PREFIX}-{}-{}", kind.as_str(), self.key())
    }

    pub fn nqn(&self, kind: TargetKind) -> String {
        format!("{NQN_PREFIX}-{}-{}", kind.as_str(), self.key())
    }

    /// tgtd's control port: unique per site, since a link is in one site only.
    pub fn tgtd_control(&self) -> u32 {
        TGTD_CONTROL_BASE + self.links[0].index as u32
    }

    /// The RAM-backed image tgtd serves.
    pub fn tgtd_image(&self) -> String {
        format!("/dev/shm/{NS_PREFIX}{}-tgtd.img", self.name)
    }

    /// Every address `kind` listens on, one per link.
    pub fn addrs(&self, kind: TargetKind) -> Vec<SocketAddr> {
        self.links
            .iter()
            .map(|l| SocketAddr::new(l.target_addr().into(), kind.port()))
            .collect()
    }

    /// The command that serves `kind` inside the namespace, listening on every link's
    /// address (tgtd still needs [`Site::tgtd_setup`] once it runs). All run in the
    /// foreground except nbdkit: it asks the kernel to kill it when its parent exits
    /// (PR_SET_PDEATHSIG, even without --exit-with-parent), which would end it with `lab up`,
    /// so it daemonizes and writes its pid to `pidfile`. nbdkit 1.32 takes one `-i` address:
    /// in a group it listens on every address of the namespace, all of them the lab's.
    pub fn target_command(&self, kind: TargetKind, exe: &str, size: &str, pidfile: &str) -> Argv {
        let listens: Vec<String> = self.addrs(kind).iter().map(|a| a.to_string()).collect();
        let with_listens = |mut v: Argv| {
            for l in &listens {
                v.extend(argv(["--listen", l]));
            }
            v
        };
        let cmd = match kind {
            TargetKind::Nbd => with_listens(argv([exe, "serve", "nbd", "--size", size])),
            TargetKind::Iscsi => {
                let mut v = with_listens(argv([exe, "serve", "iscsi", "--size", size]));
                v.extend(argv(["--iqn", &self.iqn(kind)]));
                v
            }
            TargetKind::Nvme => {
                let mut v = with_listens(argv([exe, "serve", "nvme", "--size", size]));
                v.extend(argv(["--nqn", &self.nqn(kind)]));
                v
            }
            TargetKind::Nbdkit => {
                let mut v = argv(["nbdkit", "-P", pidfile]);
                if !self.is_group() {
                    v.extend(argv(["-i", &self.links[0].target_addr().to_string()]));
                }
                v.extend(argv(["-p", &kind.port().to_string(), "memory", size]));
                v
            }
            TargetKind::Tgtd => {
                let portals: Vec<String> = listens.iter().map(|l| format!("portal={l}")).collect();
                argv([
                    "tgtd",
                    "-f",
                    "-C",
                    &self.tgtd_control().to_string(),
                    "--iscsi",
                    &portals.join(","),
                ])
            }
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

    /// The URI an initiator on the host uses for `kind`: over every path (a multipath URI,
    /// `iscsi://H1:P,H2:P/IQN/LUN`) when the site is a group.
    pub fn uri(&self, kind: TargetKind) -> String {
        let hosts: Vec<String> = self.addrs(kind).iter().map(|a| a.to_string()).collect();
        self.uri_over(kind, &hosts.join(","))
    }

    /// The URI over the `i`th path alone.
    pub fn path_uri(&self, kind: TargetKind, i: usize) -> String {
        self.uri_over(kind, &self.addrs(kind)[i].to_string())
    }

    fn uri_over(&self, kind: TargetKind, hosts: &str) -> String {
        match kind {
            TargetKind::Nbd | TargetKind::Nbdkit => format!("nbd://{hosts}"),
            // sanbench numbers LUNs from 0; tgtd's LUN 0 is the controller, the disk is 1.
            TargetKind::Iscsi => format!("iscsi://{hosts}/{}/0", self.iqn(kind)),
            TargetKind::Tgtd => format!("iscsi://{hosts}/{}/1", self.iqn(kind)),
            TargetKind::Nvme => format!("nvme+tcp://{hosts}/{}/1", self.nqn(kind)),
        }
    }

    /// The link as the comparison records it; for a group, the paths together: the group's
    /// name, the sum of the rates, the smallest MTU, offloads on only if on for every path,
    /// switched if any path is.
    pub fn link_info(&self) -> LinkInfo {
        if !self.is_group() {
            return crate::state::link_info(&self.links[0].spec);
        }
        let specs = self.links.iter().map(|l| &l.spec);
        LinkInfo {
            name: self.name.clone(),
            rate_bits: specs.clone().map(|s| s.rate_bits).sum(),
            mtu: specs.clone().map(|s| s.mtu).min().unwrap_or(1500),
            offload: specs.clone().all(|s| s.offload),
            switched: specs.clone().any(|s| s.switched),
        }
    }
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
