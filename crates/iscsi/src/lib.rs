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
pub mod target;
pub mod wire;
