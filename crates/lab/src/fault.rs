//! Faults on a link: `down` / `up` (a pulled cable and its return), `loss=PCT`, `delay=D`,
//! `clear`, applied at once (`sanbench lab fault`) or on a schedule during a run
//! (`--fault AT:LINK:ACTION`).
//!
//! A link's impairment is one leaf qdisc under its htb class `1:10`, on both shaped ends (the
//! host's `sbl-L-h`, the target's `sbl-L-t`), so the rate shaping stays whatever the fault:
//!
//! * `down`: `blackhole`, which drops every packet and tells the sender it was sent. TCP sees
//!   silence, as behind a pulled cable: no reset, no ICMP, no local error; it retransmits
//!   into nothing until its own timeouts (or the initiator's path timeout) give up. Not
//!   `ip link set DEV down`: that removes the host's route to 10.213.i.0/30, so new
//!   connections fail at once with "network unreachable" (not silence) and, worse, packets
//!   for the target could follow another route off the machine. Not netem `loss 100%`
//!   either: it is silent too, but not every kernel has netem, while blackhole is built in
//!   wherever tc is.
//! * `loss=PCT`, `delay=D`: netem (`loss PCT%`, `delay D`) with a queue long enough for one
//!   delay's worth of packets at the link rate. Each direction gets them: the round trip grows
//!   by 2 D and a request/reply pair crosses two lossy hops. Needs the kernel's netem
//!   (sch_netem); without it the action fails with one line saying so.
//! * `up` undoes `down` (the loss and delay set before return); `clear` undoes everything.
//!
//! The impairment is recorded per link in the state file, so `up` knows what to restore and
//! `lab status` shows it. A change is `tc qdisc del dev DEV parent 1:10` (the leaf reverts to
//! htb's default; when there is nothing to delete the kernel refuses, and `tc qdisc show`
//! confirms the leaf is the default) then `tc qdisc add ... parent 1:10 handle 10: KIND` when
//! the link is impaired: the same two commands whatever the kernel held before, so a fault is
//! idempotent. For the instant between the two the link carries packets unimpaired.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::cmd::{Argv, Runner};
use crate::error::LabError;
// Also at their old path: the CLI and the fuzz targets name them `fault::...`.
pub use crate::impairment::{format_duration, parse_duration, FaultAction, Impairment, MAX_DELAY};
use crate::plan::tc;
use crate::state::{LabState, LinkState};

/// The qdisc (kind and parameters) under class 1:10 for `imp`; `None`: htb's default leaf.
/// `rate_bits` and `mtu` size netem's queue: one delay's worth of full frames at the link
/// rate, twice over, on top of the default 1000 (a shorter queue would turn delay into loss).
pub fn leaf(imp: &Impairment, rate_bits: u64, mtu: u32) -> Option<Vec<String>> {
    if imp.down {
        return Some(vec!["blackhole".into()]);
    }
    if imp.loss_pct.is_none() && imp.delay_us.is_none() {
        return None;
    }
    let in_flight = imp.delay_us.map_or(0, |us| {
        let bytes = rate_bits as u128 * us as u128 / 8 / 1_000_000;
        (bytes / mtu.max(1) as u128) as u64
    });
    let limit = (1000 + 2 * in_flight).min(u32::MAX as u64);
    let mut v = vec!["netem".to_string(), "limit".into(), limit.to_string()];
    if let Some(us) = imp.delay_us {
        v.extend(["delay".to_string(), format!("{us}us")]);
    }
    if let Some(p) = imp.loss_pct {
        v.extend(["loss".to_string(), format!("{p}%")]);
    }
    Some(v)
}

/// The two shaped ends of a link: (namespace or None for the host, interface).
pub fn ends(link: &LinkState) -> [(Option<String>, String); 2] {
    [
        (None, link.host_if.clone()),
        (Some(link.namespace.clone()), link.target_if.clone()),
    ]
}

/// `tc [-n NS] qdisc del dev DEV parent 1:10`
pub fn del_argv(ns: &Option<String>, dev: &str) -> Argv {
    tc(ns, ["qdisc", "del", "dev", dev, "parent", "1:10"])
}

/// `tc [-n NS] qdisc show dev DEV`
pub fn show_argv(ns: &Option<String>, dev: &str) -> Argv {
    tc(ns, ["qdisc", "show", "dev", dev])
}

/// `tc [-n NS] qdisc add dev DEV parent 1:10 handle 10: KIND ARGS...`
pub fn add_argv(ns: &Option<String>, dev: &str, leaf: &[String]) -> Argv {
    let mut v = tc(
        ns,
        [
            "qdisc", "add", "dev", dev, "parent", "1:10", "handle", "10:",
        ],
    );
    v.extend(leaf.iter().cloned());
    v
}

/// The kind of the fault leaf (`handle 10:` under class 1:10) in `tc qdisc show` output.
pub fn leaf_kind(shown: &str) -> Option<String> {
    shown.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() >= 5 && w[0] == "qdisc" && w[3] == "parent" && w[4] == "1:10")
            .then(|| w[1].to_string())
    })
}

/// Gives one end the leaf of `imp`.
fn set_end(
    r: &dyn Runner,
    ns: &Option<String>,
    dev: &str,
    link: &LinkState,
    imp: &Impairment,
) -> Result<(), LabError> {
    if let Err(e) = r.run(&del_argv(ns, dev)) {
        // Refused: either nothing to delete (htb's default leaf, which `show` does not list)
        // or a real failure, which stands.
        match r.run(&show_argv(ns, dev)) {
            Ok(shown) if leaf_kind(&shown).is_none() => {}
            _ => return Err(e),
        }
    }
    if let Some(l) = leaf(imp, link.info.rate_bits, link.info.mtu) {
        r.run(&add_argv(ns, dev, &l)).map_err(|e| match &e {
            LabError::Command { stderr, .. } if stderr.contains("qdisc kind is unknown") => {
                LabError::Missing(format!(
                    "link {}: this kernel has no {} qdisc{}",
                    link.info.name,
                    l[0],
                    if l[0] == "netem" {
                        " (module sch_netem, CONFIG_NET_SCH_NETEM), which loss= and delay= need"
                    } else {
                        ""
                    }
                ))
            }
            _ => e,
        })?;
    }
    Ok(())
}

/// Puts `link` in the state `imp` on both ends. On failure the ends touched (the failing one
/// too: its old leaf may be gone already) are put back, best effort, and the link's recorded
/// impairment stays as it was.
pub fn set(r: &dyn Runner, link: &mut LinkState, imp: &Impairment) -> Result<(), LabError> {
    let ends = ends(link);
    for (i, (ns, dev)) in ends.iter().enumerate() {
        if let Err(e) = set_end(r, ns, dev, link, imp) {
            for (ns, dev) in &ends[..=i] {
                let _ = set_end(r, ns, dev, link, &link.impairment);
            }
            return Err(e);
        }
    }
    link.impairment = imp.clone();
    Ok(())
}

/// Applies `action` to `link`.
pub fn apply(r: &dyn Runner, link: &mut LinkState, action: FaultAction) -> Result<(), LabError> {
    let next = link.impairment.after(action);
    set(r, link, &next)
}

/// The link named `name` in the lab, or a one-line error listing the lab's links.
pub fn find_link<'a>(
    st: &'a mut LabState,
    name: &str,
    path: &Path,
) -> Result<&'a mut LinkState, LabError> {
    let names: Vec<String> = st.links.iter().map(|l| l.info.name.clone()).collect();
    st.links
        .iter_mut()
        .find(|l| l.info.name == name)
        .ok_or_else(|| {
            LabError::Input(format!(
                "no link '{name}' in the lab at {} (links: {})",
                path.display(),
                names.join(", ")
            ))
        })
}

/// Loads the lab recorded at `path`, or says there is none.
pub fn load_lab(path: &Path) -> Result<LabState, LabError> {
    LabState::load(path)?.ok_or_else(|| LabError::File {
        path: path.to_path_buf(),
        reason: "no lab recorded here (start one with 'sanbench lab up')".into(),
    })
}

/// `lab fault LINK ACTION`: applies it to the lab at `state_path` and records the link's new
/// impairment there. Returns the link as it is now.
pub fn fault(
    r: &dyn Runner,
    state_path: &Path,
    link: &str,
    action: FaultAction,
) -> Result<LinkState, LabError> {
    let mut st = load_lab(state_path)?;
    let l = find_link(&mut st, link, state_path)?;
    apply(r, l, action)?;
    let out = l.clone();
    st.save(state_path)?;
    Ok(out)
}

/// One fault of a run's schedule: `AT:LINK:ACTION`, AT after the measured window's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduled {
    pub at: Duration,
    pub link: String,
    pub action: FaultAction,
}

impl Scheduled {
    pub fn parse(s: &str) -> Result<Scheduled, LabError> {
        let bad = |why: String| LabError::Input(format!("--fault {s}: {why}"));
        let mut it = s.splitn(3, ':');
        let (Some(at), Some(link), Some(action)) = (it.next(), it.next(), it.next()) else {
            return Err(bad("expected AT:LINK:ACTION, e.g. 10s:b:down".into()));
        };
        let at = parse_duration(at).map_err(|e| bad(format!("AT {e}")))?;
        if link.is_empty() {
            return Err(bad("the link name is empty".into()));
        }
        let action = FaultAction::parse(action).map_err(|e| bad(e.to_string()))?;
        Ok(Scheduled {
            at,
            link: link.into(),
            action,
        })
    }
}

impl fmt::Display for Scheduled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            format_duration(self.at),
            self.link,
            self.action
        )
    }
}

/// Parses every `--fault` value (each may hold several, comma-separated) into one schedule
/// in time order (faults at the same time keep the order given).
pub fn parse_schedule(items: &[String]) -> Result<Vec<Scheduled>, LabError> {
    let mut v = items
        .iter()
        .flat_map(|i| i.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Scheduled::parse)
        .collect::<Result<Vec<_>, _>>()?;
    v.sort_by_key(|s| s.at);
    Ok(v)
}

/// Checks a schedule against the lab (every link in it) and the measured window (every AT
/// inside it: `0 <= AT < window`; `what` names the window in the message).
pub fn check_schedule(
    sched: &[Scheduled],
    st: &LabState,
    path: &Path,
    window: Duration,
    what: &str,
) -> Result<(), LabError> {
    for s in sched {
        if !st.links.iter().any(|l| l.info.name == s.link) {
            let names: Vec<&str> = st.links.iter().map(|l| l.info.name.as_str()).collect();
            return Err(LabError::Input(format!(
                "--fault {s}: no link '{}' in the lab at {} (links: {})",
                s.link,
                path.display(),
                names.join(", ")
            )));
        }
        if s.at >= window {
            return Err(LabError::Input(format!(
                "--fault {s}: {} is not inside {what}'s measured window of {}",
                format_duration(s.at),
                format_duration(window)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
