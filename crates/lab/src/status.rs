//! `status`: what of the recorded lab actually exists on the host right now (asked of the
//! kernel, not taken from the state file), and any leftovers under the lab's prefixes.

use std::fmt::{self, Write};
use std::path::{Path, PathBuf};

use crate::cmd::{argv, Runner};
use crate::error::LabError;
use crate::lab::{lab_links, lab_namespaces};
use crate::procs;
use crate::state::LabState;

/// One end of a link as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndStatus {
    pub interface: String,
    /// None: the interface does not exist.
    pub mtu: Option<u32>,
    /// The htb class rate as tc prints it ("1Gbit"), if shaped.
    pub rate: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkStatus {
    pub name: String,
    pub spec: String,
    pub namespace_exists: bool,
    pub host: EndStatus,
    pub target: EndStatus,
    /// The path group it belongs to (`a+b`).
    pub group: Option<String>,
    /// The fault the state file records (`down`, `up, loss 5%`), when there is one.
    pub fault: Option<String>,
    /// The fault leaf the kernel holds on the host end (`blackhole`, `netem`), if any.
    pub leaf: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcStatus {
    pub name: String,
    pub pid: u32,
    pub alive: bool,
    pub uri: Option<String>,
}

/// The lab as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub state_path: PathBuf,
    /// False: no state file (no lab recorded).
    pub recorded: bool,
    pub links: Vec<LinkStatus>,
    pub processes: Vec<ProcStatus>,
    /// `sblab-*` namespaces and `sbl-*` links the state file does not list.
    pub leftovers: Vec<String>,
}

impl Status {
    /// True when everything recorded exists and runs.
    pub fn healthy(&self) -> bool {
        self.recorded
            && self
                .links
                .iter()
                .all(|l| l.namespace_exists && l.host.rate.is_some() && l.target.rate.is_some())
            && self.processes.iter().all(|p| p.alive)
    }
}

/// Reads the state file and asks `ip`, `tc` and /proc what exists.
pub fn status(r: &dyn Runner, state_path: &Path) -> Result<Status, LabError> {
    let st = LabState::load(state_path)?;
    let namespaces = lab_namespaces(r)?;
    let host_links = lab_links(r)?;
    let mut out = Status {
        state_path: state_path.to_path_buf(),
        recorded: st.is_some(),
        links: Vec::new(),
        processes: Vec::new(),
        leftovers: Vec::new(),
    };
    let Some(st) = st else {
        out.leftovers = namespaces.into_iter().chain(host_links).collect();
        return Ok(out);
    };
    for l in &st.links {
        let ns_exists = namespaces.contains(&l.namespace);
        let mut spec = format!("{} mtu {}", l.rate, l.info.mtu);
        if !l.info.offload {
            spec.push_str(", offload off");
        }
        spec.push_str(if l.info.switched {
            ", switched"
        } else {
            ", direct"
        });
        out.links.push(LinkStatus {
            name: l.info.name.clone(),
            spec,
            namespace_exists: ns_exists,
            host: end(r, None, &l.host_if),
            group: l.group.clone(),
            fault: (!l.impairment.is_clear()).then(|| l.impairment.describe()),
            leaf: r
                .run(&crate::fault::show_argv(&None, &l.host_if))
                .ok()
                .and_then(|o| crate::fault::leaf_kind(&o)),
            target: if ns_exists {
                end(r, Some(&l.namespace), &l.target_if)
            } else {
                EndStatus {
                    interface: l.target_if.clone(),
                    mtu: None,
                    rate: None,
                }
            },
        });
    }
    for p in &st.processes {
        out.processes.push(ProcStatus {
            name: p.name.clone(),
            pid: p.pid,
            alive: procs::alive(p.pid, p.start_time),
            uri: st
                .targets
                .iter()
                .find(|t| t.name == p.name)
                .map(|t| t.uri.clone()),
        });
    }
    out.leftovers = namespaces
        .into_iter()
        .filter(|n| !st.namespaces.contains(n))
        .chain(
            host_links
                .into_iter()
                .filter(|l| !st.host_links.contains(l)),
        )
        .collect();
    Ok(out)
}

fn end(r: &dyn Runner, ns: Option<&str>, dev: &str) -> EndStatus {
    let with_ns = |tool: &str, rest: &[&str]| {
        let mut v = argv([tool]);
        if let Some(n) = ns {
            v.extend(argv(["-n", n]));
        }
        v.extend(argv(rest.iter().copied()));
        v
    };
    let mtu = r
        .run(&with_ns("ip", &["-o", "link", "show", "dev", dev]))
        .ok()
        .and_then(|o| word_after(&o, "mtu"))
        .and_then(|m| m.parse().ok());
    let rate = r
        .run(&with_ns("tc", &["class", "show", "dev", dev]))
        .ok()
        .and_then(|o| word_after(&o, "rate"));
    EndStatus {
        interface: dev.into(),
        mtu,
        rate,
    }
}

fn word_after(text: &str, key: &str) -> Option<String> {
    let mut it = text.split_whitespace();
    while let Some(w) = it.next() {
        if w == key {
            return it.next().map(String::from);
        }
    }
    None
}

fn end_text(e: &EndStatus) -> String {
    match e.mtu {
        None => format!("{} missing", e.interface),
        Some(m) => format!(
            "{} mtu {m}, {}",
            e.interface,
            e.rate
                .as_deref()
                .map(|r| format!("htb rate {r}"))
                .unwrap_or_else(|| "NOT SHAPED".into())
        ),
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        if !self.recorded {
            let _ = writeln!(s, "no lab recorded at {}", self.state_path.display());
        } else {
            let _ = writeln!(s, "lab: {}", self.state_path.display());
            for l in &self.links {
                let mut extra = String::new();
                if let Some(g) = &l.group {
                    let _ = write!(extra, "; path of {g}");
                }
                match (&l.fault, &l.leaf) {
                    (None, None) => {}
                    (f, leaf) => {
                        let _ = write!(
                            extra,
                            "; FAULT {} (kernel: {})",
                            f.as_deref().unwrap_or("none recorded"),
                            leaf.as_deref().unwrap_or("no fault qdisc")
                        );
                    }
                }
                let _ = writeln!(
                    s,
                    "  link {:<8} {:<28} namespace {}; host {}; target {}{extra}",
                    l.name,
                    l.spec,
                    if l.namespace_exists { "up" } else { "MISSING" },
                    end_text(&l.host),
                    end_text(&l.target)
                );
            }
            for p in &self.processes {
                let _ = writeln!(
                    s,
                    "  {:<14} pid {:<8} {:<8} {}",
                    p.name,
                    p.pid,
                    if p.alive { "running" } else { "DEAD" },
                    p.uri.as_deref().unwrap_or("")
                );
            }
        }
        if !self.leftovers.is_empty() {
            let _ = writeln!(
                s,
                "leftovers not in the state file (removed by 'sanbench lab down'): {}",
                self.leftovers.join(", ")
            );
        }
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_and_tc_output() {
        let ip = "7: sbl-one-h@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc htb state UP";
        assert_eq!(word_after(ip, "mtu").as_deref(), Some("9000"));
        let tc = "class htb 1:10 root prio 0 rate 1Gbit ceil 1Gbit burst 1375b cburst 1375b";
        assert_eq!(word_after(tc, "rate").as_deref(), Some("1Gbit"));
        assert_eq!(word_after("", "rate"), None);
    }
}
