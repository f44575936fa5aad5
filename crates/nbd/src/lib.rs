//! NBD (Network Block Device) for sanbench.
//!
//! * [`wire`]: the protocol as a sans-I/O codec (never touches a socket), fuzzed under `fuzz/`.
//! * [`client`]: the `nbd://` engine: one TCP connection per queue, pipelined requests,
//!   out-of-order replies, one system call per submitted batch.
//! * [`server`]: a multi-threaded NBD server over a sparse RAM store (allocated as written) or
//!   a file, to measure clients against and to measure interconnects without disk in the way.

pub mod client;
pub mod error;
pub mod server;
pub mod tls;
pub mod wire;

pub use client::{open, ClientOptions};
pub use error::NbdError;
pub use sanbench_io::SocketLayer;
pub use server::{serve, Server, ServerConfig, CONNECTION_THREAD_PREFIX};
