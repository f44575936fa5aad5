//! `nvme+tcp://HOST[:PORT]` with no subsystem NQN: the discovery controller (port 8009 unless
//! given). Connects its admin queue, enables it, reads the discovery log page and disconnects.

use sanbench_io::EngineError;

use super::{connect_err, resolve, NvmeUri};
use crate::host::session::connect_admin;
use crate::initiator::engine_err;
use crate::wire::discovery::Record;

/// The generation counter and the records of the discovery log at `uri`.
pub fn discover(uri: &str) -> Result<(u64, Vec<Record>), EngineError> {
    let mut u = NvmeUri::parse_discovery(uri)?;
    // A discovery controller needs no keep-alive for one log page.
    u.kato_ms = 0;
    let (addr, opts) = resolve(&u)?;
    let peer = addr.to_string();
    let mut a =
        connect_admin(addr, &u.subnqn, 0, 0, &opts).map_err(|e| connect_err(&peer, e, &opts))?;
    if a.ns.is_some() {
        return Err(EngineError::Protocol {
            peer,
            reason: "the controller at the discovery NQN is not a discovery controller".into(),
        });
    }
    a.discovery_log()
        .map_err(|e| engine_err(&peer, e, opts.timeout))
}
