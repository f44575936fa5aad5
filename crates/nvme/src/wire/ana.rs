//! Asymmetric Namespace Access (NVMe Base 2.0 §8.1, "Asymmetric Namespace Access Reporting"):
//! the states, the ANA log page (Get Log Page, Log Identifier 0Ch) and the asynchronous event
//! that announces a change (Notice type, information 03h, the log page 0Ch to read).
//!
//! The page is a 16-byte header (change count, number of group descriptors) followed by one
//! 32-byte descriptor per ANA group (group id, number of NSIDs, change count, state), each
//! followed by its NSIDs unless the host asked for groups only (LSP bit 0, RGO). Header and
//! descriptor are declared once as zerocopy structs with asserted offsets. [`AnaLog::decode`]
//! takes untrusted bytes and never panics: a descriptor or NSID list running past the end, a
//! group id 0 or a state the specification does not define is an error, as Linux's host
//! (`nvme_parse_ana_log`) refuses them; nothing is allocated beyond what the bytes hold.

use core::mem::{offset_of, size_of};

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::WireError;

/// Log page identifier of the ANA log page.
pub const LID: u8 = 0x0c;
/// Log Specific Parameter bit 0, Return Groups Only: descriptors without their NSID lists.
pub const LSP_RGO: u8 = 1;

/// Identify Controller CMIC bits.
pub mod cmic {
    /// The NVM subsystem may have two or more ports.
    pub const MULTI_PORT: u8 = 1 << 0;
    /// ...two or more controllers (Linux's host needs it to put a second controller of the
    /// subsystem beside the first).
    pub const MULTI_CTRL: u8 = 1 << 1;
    /// The controller reports ANA states (Linux's host then reads the ANA log page).
    pub const ANA: u8 = 1 << 3;
}

/// Identify Namespace NMIC bit 0: the namespace may be attached to two or more controllers
/// (Linux's host refuses a second path to an unshared namespace).
pub const NMIC_SHARED: u8 = 1;

/// Identify Controller ANACAP bits: the states the controller reports, and bit 6 (a
/// namespace's ANAGRPID does not change while it is attached).
pub mod anacap {
    pub const OPTIMIZED: u8 = 1 << 0;
    pub const NON_OPTIMIZED: u8 = 1 << 1;
    pub const INACCESSIBLE: u8 = 1 << 2;
    pub const PERSISTENT_LOSS: u8 = 1 << 3;
    pub const CHANGE: u8 = 1 << 4;
    pub const GRPID_FIXED: u8 = 1 << 6;
}

/// Asynchronous events (Asynchronous Event Request completion, dword 0: type in bits 2:0,
/// information in 15:8, the log page to read in 23:16) and their configuration (Set Features
/// 0Bh) as far as ANA needs them.
pub mod aen {
    /// Asynchronous Event Type: Notice.
    pub const TYPE_NOTICE: u8 = 2;
    /// Notice information: Asymmetric Namespace Access Change.
    pub const NOTICE_ANA_CHANGE: u8 = 3;
    /// OAES (Identify Controller) and Asynchronous Event Configuration bit 11: ANA Change
    /// Notices.
    pub const CFG_ANA_CHANGE: u32 = 1 << 11;

    /// Dword 0 of the completion that reports an event.
    pub fn result(kind: u8, info: u8, lid: u8) -> u32 {
        (kind & 7) as u32 | (info as u32) << 8 | (lid as u32) << 16
    }

    /// (type, information, log page) of an event's dword 0.
    pub fn decode(dw0: u32) -> (u8, u8, u8) {
        ((dw0 & 7) as u8, (dw0 >> 8) as u8, (dw0 >> 16) as u8)
    }

    /// The event that announces an ANA change.
    pub fn ana_change() -> u32 {
        result(TYPE_NOTICE, NOTICE_ANA_CHANGE, super::LID)
    }
}

/// An ANA state (bits 3:0 of a group descriptor's state byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnaState {
    Optimized = 0x01,
    NonOptimized = 0x02,
    Inaccessible = 0x03,
    PersistentLoss = 0x04,
    Change = 0x0f,
}

impl AnaState {
    pub const ALL: [AnaState; 5] = [
        AnaState::Optimized,
        AnaState::NonOptimized,
        AnaState::Inaccessible,
        AnaState::PersistentLoss,
        AnaState::Change,
    ];

    pub fn from_code(code: u8) -> Option<AnaState> {
        AnaState::ALL.into_iter().find(|s| *s as u8 == code)
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The name Linux's host shows in `/sys/block/nvmeXcYnZ/ana_state` (and nvmet takes in
    /// `ana_state`): optimized, non-optimized, inaccessible, persistent-loss, change.
    pub fn name(self) -> &'static str {
        match self {
            AnaState::Optimized => "optimized",
            AnaState::NonOptimized => "non-optimized",
            AnaState::Inaccessible => "inaccessible",
            AnaState::PersistentLoss => "persistent-loss",
            AnaState::Change => "change",
        }
    }

    /// Whether I/O to a namespace in this state is carried out (optimized and non-optimized);
    /// the other states fail it with a path-related status.
    pub fn serves_io(self) -> bool {
        matches!(self, AnaState::Optimized | AnaState::NonOptimized)
    }
}

impl std::fmt::Display for AnaState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AnaState {
    type Err = String;
    fn from_str(s: &str) -> Result<AnaState, String> {
        AnaState::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!(
                    "ANA state '{s}' (use optimized, non-optimized, inaccessible, \
                     persistent-loss or change)"
                )
            })
    }
}

/// The log page header.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Header {
    pub chgcnt: U64,
    pub ngrps: U16,
    pub rsvd: [u8; 6],
}

/// One ANA group descriptor, without its NSIDs (which follow it, 4 bytes each).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Desc {
    pub grpid: U32,
    pub nnsids: U32,
    pub chgcnt: U64,
    pub state: u8,
    pub rsvd: [u8; 15],
}

pub const HEADER_LEN: usize = 16;
pub const DESC_LEN: usize = 32;

const _: () = {
    assert!(size_of::<Header>() == HEADER_LEN);
    assert!(offset_of!(Header, ngrps) == 8);
    assert!(size_of::<Desc>() == DESC_LEN);
    assert!(offset_of!(Desc, nnsids) == 4);
    assert!(offset_of!(Desc, chgcnt) == 8);
    assert!(offset_of!(Desc, state) == 16);
};

/// One ANA group as the page reports it to the controller that is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnaGroup {
    /// ANA Group Identifier, never 0.
    pub grpid: u32,
    pub chgcnt: u64,
    pub state: AnaState,
    /// The group's namespaces, ascending (empty when the host asked for groups only).
    pub nsids: Vec<u32>,
}

/// The ANA log page.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AnaLog {
    pub chgcnt: u64,
    pub groups: Vec<AnaGroup>,
}

impl AnaLog {
    /// The page's length: what a host that knows the groups and namespaces asks for.
    pub fn len(&self) -> usize {
        HEADER_LEN
            + self
                .groups
                .iter()
                .map(|g| DESC_LEN + 4 * g.nsids.len())
                .sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The largest page a controller reporting `nanagrpid` groups and `mnan` namespaces can
    /// return: the size Linux's host asks for (`nvme_mpath_init_identify`).
    pub fn max_len(nanagrpid: u32, mnan: u32) -> usize {
        HEADER_LEN + nanagrpid as usize * DESC_LEN + mnan as usize * 4
    }

    /// The page; with `groups_only` (RGO) every descriptor reports no NSIDs.
    pub fn encode(&self, groups_only: bool) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.len());
        let mut h = Header::new_zeroed();
        h.chgcnt = U64::new(self.chgcnt);
        h.ngrps = U16::new(self.groups.len().min(u16::MAX as usize) as u16);
        b.extend_from_slice(h.as_bytes());
        for g in self.groups.iter().take(u16::MAX as usize) {
            let nsids: &[u32] = if groups_only { &[] } else { &g.nsids };
            let mut d = Desc::new_zeroed();
            d.grpid = U32::new(g.grpid);
            d.nnsids = U32::new(nsids.len() as u32);
            d.chgcnt = U64::new(g.chgcnt);
            d.state = g.state.code();
            b.extend_from_slice(d.as_bytes());
            for n in nsids {
                b.extend_from_slice(&n.to_le_bytes());
            }
        }
        b
    }

    /// Reads a page: every descriptor NGRPS names must be whole within `b`.
    pub fn decode(b: &[u8]) -> Result<AnaLog, WireError> {
        let short = |len: usize, want: usize| WireError::Length {
            what: "ANA log page",
            len,
            want,
        };
        let (h, _) = Header::read_from_prefix(b).map_err(|_| short(b.len(), HEADER_LEN))?;
        let mut at = HEADER_LEN;
        let mut groups = Vec::new();
        for _ in 0..h.ngrps.get() {
            let rest = &b[at..];
            let (d, _) = Desc::read_from_prefix(rest).map_err(|_| short(b.len(), at + DESC_LEN))?;
            let n = d.nnsids.get() as usize;
            let start = at + DESC_LEN;
            let list = n
                .checked_mul(4)
                .and_then(|l| b.get(start..start.checked_add(l)?))
                .ok_or_else(|| short(b.len(), start.saturating_add(n.saturating_mul(4))))?;
            if d.grpid.get() == 0 {
                return Err(WireError::Unrepresentable {
                    what: "ANA group descriptor",
                    reason: "ANA group identifier 0",
                });
            }
            let state = AnaState::from_code(d.state & 0x0f).ok_or(WireError::Unrepresentable {
                what: "ANA group descriptor",
                reason: "ANA state not defined (01h-04h, 0Fh)",
            })?;
            groups.push(AnaGroup {
                grpid: d.grpid.get(),
                chgcnt: d.chgcnt.get(),
                state,
                nsids: list
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            });
            at = start + list.len();
        }
        Ok(AnaLog {
            chgcnt: h.chgcnt.get(),
            groups,
        })
    }

    /// The state of namespace `nsid` in group `grpid`: the group's descriptor when the
    /// namespace names its group (ANAGRPID), else the descriptor that lists the NSID.
    pub fn state_of(&self, grpid: u32, nsid: u32) -> Option<AnaState> {
        self.groups
            .iter()
            .find(|g| grpid != 0 && g.grpid == grpid)
            .or_else(|| self.groups.iter().find(|g| g.nsids.contains(&nsid)))
            .map(|g| g.state)
    }
}

#[cfg(test)]
#[path = "ana_tests.rs"]
mod tests;
