//! sanbench's software test bed: the studies' link comparisons (10 Gb vs 1 Gb iSCSI, direct vs
//! switched, one connection vs two) reproduced on one Linux host.
//!
//! Each link is a network namespace (`sblab-NAME`) joined to the host by a veth pair whose two
//! ends are shaped by htb to the link rate, so reads (target → host) and writes (host →
//! target) both see it. A switched link puts a bridge, in a namespace of its own, on the path.
//! The targets (sanbench's own NBD and iSCSI servers, and nbdkit and tgtd as reference peers)
//! run inside the link's namespace and listen only on its private address (10.213.N.2):
//! the lab sends nothing anywhere but to namespaces it created.
//!
//! Why shell out to `ip`/`tc`/`ethtool` rather than speak netlink: the commands are what a
//! reader would type to check the bed by hand, every one is visible (and testable) as an
//! argv in [`plan`], and a failure names the exact command. All of them run through
//! [`cmd::Runner`].
//!
//! Everything made is recorded in a state file ([`state`]) as it is made, so `down` removes
//! exactly that, and a crashed lab is cleaned by the next `up`.
//!
//! A path group (`--paths a,b`, [`site`]) puts one target namespace behind several links, so
//! an initiator reaches one store over several shaped paths (multipath); [`fault`] takes a
//! link down (silently, as a pulled cable), makes it lossy or slow, and brings it back, at
//! once or on a run's schedule.

pub mod cmd;
pub mod error;
pub mod fault;
pub mod impairment;
pub mod lab;
pub mod plan;
pub mod procs;
pub mod site;
pub mod spec;
pub mod state;
pub mod status;

pub use error::LabError;
pub use fault::Scheduled;
pub use impairment::{FaultAction, Impairment};
pub use lab::{down, up, Lab, LabConfig};
pub use site::parse_paths;
pub use spec::{parse_links, parse_targets, LinkSpec, TargetKind};
pub use state::{default_path, load_lab_targets, LabPath, LabState, LabTarget, LinkInfo};
pub use status::{status, Status};
