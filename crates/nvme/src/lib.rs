//! sanbench's NVMe over TCP crate.
//!
//! * [`wire`]: sans-I/O NVMe/TCP (NVM Express TCP Transport Specification 1.0): the PDU headers
//!   as typed little-endian structs with compile-time asserted offsets, the framer with header
//!   and data digests (CRC32C) and PDU data alignment, NVMe submission and completion queue
//!   entries, Fabrics Connect and Property Get/Set, Identify data, features and status codes.
//!   It never touches a socket, so every decoder can be fuzzed and unit-tested on plain bytes.
//!
//! Invariant: `wire` never imports `std::net`; decoders return a value, `Incomplete { needed }`
//! or a typed error, and never panic on any input.

pub mod host;
pub mod initiator;
pub mod ng;
mod recv;
pub mod target;
pub mod wire;
