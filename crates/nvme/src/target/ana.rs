//! The target's ANA states (NVMe Base 2.0 §8.1): one ANA group, id 1, holds every namespace,
//! and its state is kept per port, as Linux's nvmet keeps `ports/N/ana_groups/1/ana_state`.
//! A controller reports the state of the port its admin queue connected through; I/O through
//! a port whose state does not serve I/O fails with the matching path-related status.
//!
//! Why not one group per port: a namespace belongs to exactly one ANA group in the whole
//! subsystem (its ANAGRPID in Identify Namespace), while the group's *state* may differ per
//! controller. One group with a state per port is the same thing said the way the
//! specification and the kernel's host read it (the host looks the group up by the
//! namespace's ANAGRPID in each controller's log page).
//!
//! Ports are named by their 1-based index in `--listen` order (the discovery log's PORTID,
//! nvmet's port numbers) or by their address. [`AnaSetting`] parses `PORT=STATE`: the command
//! line's `--ana`, the control socket's requests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::wire::ana::{AnaGroup, AnaLog, AnaState};

/// The one ANA group's id.
pub const GROUP: u32 = 1;
/// ANATT, seconds: a group is never left in the change state by sanbench itself, so the
/// transition time only bounds what `--ana PORT=change` asks of a host (nvmet reports 10).
pub const ANATT_SECS: u8 = 10;

/// A port, as a user names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRef {
    /// 1-based, in `--listen` order.
    Index(usize),
    Addr(SocketAddr),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Index(i) => write!(f, "{i}"),
            PortRef::Addr(a) => write!(f, "{a}"),
        }
    }
}

impl PortRef {
    /// The 0-based port this names among `ports` (the bound addresses) or `given` (the
    /// addresses as configured, so `127.0.0.1:0` names the port it was written as).
    pub fn resolve(self, ports: &[SocketAddr], given: &[SocketAddr]) -> Result<usize, String> {
        let found = match self {
            PortRef::Index(i) => (1..=ports.len()).contains(&i).then(|| i - 1),
            PortRef::Addr(a) => ports
                .iter()
                .position(|p| *p == a)
                .or_else(|| given.iter().position(|p| *p == a && p.port() != 0)),
        };
        found.ok_or_else(|| {
            format!(
                "unknown port {self} (ports: {})",
                ports
                    .iter()
                    .enumerate()
                    .map(|(i, a)| format!("{} {a}", i + 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

/// `PORT=STATE`: a port (index or address) and the ANA state to give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnaSetting {
    pub port: PortRef,
    pub state: AnaState,
}

impl std::str::FromStr for AnaSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<AnaSetting, String> {
        let (p, st) = s
            .rsplit_once('=')
            .ok_or_else(|| format!("'{s}': give PORT=STATE (e.g. 1=non-optimized)"))?;
        let port = if p.contains(':') {
            PortRef::Addr(p.parse().map_err(|_| {
                format!("'{p}': a port is its index (1, 2, ...) or its address (127.0.0.1:4420)")
            })?)
        } else {
            match p.parse::<usize>() {
                Ok(i) if i >= 1 => PortRef::Index(i),
                _ => {
                    return Err(format!(
                        "'{p}': a port is its index (1, 2, ...) or its address (127.0.0.1:4420)"
                    ))
                }
            }
        };
        Ok(AnaSetting {
            port,
            state: st.parse()?,
        })
    }
}

struct Port {
    state: AtomicU8,
    /// The port's log page change count: incremented at each change of the page's contents.
    chgcnt: AtomicU64,
}

/// Every port's state of the one ANA group.
pub(crate) struct AnaStates {
    ports: Vec<Port>,
}

impl AnaStates {
    pub fn new(states: &[AnaState]) -> AnaStates {
        AnaStates {
            ports: states
                .iter()
                .map(|s| Port {
                    state: AtomicU8::new(s.code()),
                    chgcnt: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    pub fn get(&self, port: usize) -> AnaState {
        self.ports
            .get(port)
            .and_then(|p| AnaState::from_code(p.state.load(Ordering::Acquire)))
            .unwrap_or(AnaState::Optimized)
    }

    /// Sets a port's state; true when it changed (the change count moved).
    pub fn set(&self, port: usize, s: AnaState) -> bool {
        let Some(p) = self.ports.get(port) else {
            return false;
        };
        if p.state.swap(s.code(), Ordering::AcqRel) == s.code() {
            return false;
        }
        // The count rolls over from u64::MAX to 0 (the specification's rule).
        p.chgcnt.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// The log page a controller of `port` returns: the group with namespaces 1..=N.
    pub fn log(&self, port: usize, namespaces: u32) -> AnaLog {
        let chgcnt = self
            .ports
            .get(port)
            .map_or(0, |p| p.chgcnt.load(Ordering::Acquire));
        AnaLog {
            chgcnt,
            groups: vec![AnaGroup {
                grpid: GROUP,
                chgcnt,
                state: self.get(port),
                nsids: (1..=namespaces).collect(),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn settings_parse_and_ports_resolve() {
        let s: AnaSetting = "2=non-optimized".parse().unwrap();
        assert_eq!(
            (s.port, s.state),
            (PortRef::Index(2), AnaState::NonOptimized)
        );
        let s: AnaSetting = "[::1]:4421=inaccessible".parse().unwrap();
        assert_eq!(s.port, PortRef::Addr(a("[::1]:4421")));
        for (bad, want) in [
            ("1", "PORT=STATE"),
            ("0=optimized", "index"),
            ("x=optimized", "index"),
            ("1.2.3.4=optimized", "index"),
            ("1=fast", "ANA state 'fast'"),
            ("=optimized", "index"),
        ] {
            let e = bad.parse::<AnaSetting>().unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
        let bound = [a("127.0.0.1:4420"), a("127.0.0.1:40001")];
        let given = [a("127.0.0.1:4420"), a("127.0.0.1:0")];
        assert_eq!(PortRef::Index(2).resolve(&bound, &given), Ok(1));
        assert_eq!(
            PortRef::Addr(a("127.0.0.1:40001")).resolve(&bound, &given),
            Ok(1)
        );
        let e = PortRef::Index(3).resolve(&bound, &given).unwrap_err();
        assert!(
            e.contains("unknown port 3") && e.contains("2 127.0.0.1:40001"),
            "{e}"
        );
        // Port 0 as written names no port: it is not an address anyone can reach.
        assert!(PortRef::Addr(a("127.0.0.1:0"))
            .resolve(&bound, &given)
            .is_err());
    }

    #[test]
    fn a_change_moves_the_count_and_the_page() {
        let st = AnaStates::new(&[AnaState::Optimized, AnaState::NonOptimized]);
        let l = st.log(1, 3);
        assert_eq!(l.groups[0].state, AnaState::NonOptimized);
        assert_eq!(l.groups[0].nsids, [1, 2, 3]);
        assert_eq!(l.groups[0].grpid, GROUP);
        assert!(!st.set(1, AnaState::NonOptimized), "no change, no count");
        assert!(st.set(1, AnaState::Inaccessible));
        let l2 = st.log(1, 3);
        assert_eq!(l2.chgcnt, l.chgcnt + 1);
        assert_eq!(l2.groups[0].state, AnaState::Inaccessible);
        // The other port's page did not change.
        assert_eq!(st.log(0, 3).chgcnt, 0);
        assert_eq!(st.get(0), AnaState::Optimized);
    }
}
