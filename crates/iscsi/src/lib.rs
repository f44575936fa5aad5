//! sanbench's iSCSI crate.
//!
//! * [`wire`]: sans-I/O iSCSI (RFC 7143): typed Basic Header Segments for every opcode, the PDU
//!   framer with CRC32C digests, the key=value text codec with each key's negotiation rule, the
//!   login state machine for both sides, CHAP and SendTargets. It never touches a socket, so every
//!   parser can be fuzzed and unit-tested on plain bytes.
//! * [`scsi`]: SCSI CDB decode/encode (SBC-3/SPC-4 subset) and sense data.
//! * [`initiator`]: the `iscsi://` engine: one iSCSI session per queue, pipelined READ/WRITE
//!   inside the CmdSN window, immediate and unsolicited data, R2T, digests and CHAP.
//! * [`target`]: a thread-per-connection iSCSI target over sparse RAM (or a file), used as the
//!   reference peer in benchmarks and as the system under test of libiscsi's `iscsi-test-cu`.
//!
//! Invariant: `wire` and `scsi` never import `std::net`; only `initiator` and `target` do I/O.

pub mod initiator;
pub mod scsi;

/// Fills `b` from the kernel's random source (CHAP challenges and identifiers); falls back to
/// the clock if /dev/urandom cannot be read.
pub(crate) fn os_random(b: &mut [u8]) {
    use std::io::Read;
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(b))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (t >> (i % 16 * 8)) as u8 ^ i as u8);
    }
}

pub mod target;
pub mod wire;
