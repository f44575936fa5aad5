//! sanbench's I/O core: what every transport needs and nothing else. The protocol crates (NBD,
//! iSCSI, NVMe/TCP) depend on this crate alone, so they do not rebuild when a suite, the run
//! loop or the result document changes.
//!
//! * [`engine`]: [`Target`] and [`Queue`], the plugin boundary (fio's `ioengine_ops`), with
//!   [`Io`], [`Completion`], [`TargetInfo`] and the access states of multipath.
//! * [`arena`]: the page-aligned data buffers a queue reads into and writes from.
//! * [`blocking`]: a queue's threads for system calls that block (the sync engine's, sg's).
//! * [`chardev`]: the character device of a passthrough engine (sg, bsg, NVMe generic), opened.
//! * [`error`]: [`EngineError`], whose usage-like variants the CLI maps to exit code 2.
//! * [`rng`]: the seeded generator of the I/O path.
//! * [`params`]: the engine-specific facts' map and the keys other crates read.
//! * [`redact`]: secrets out of URIs before they are recorded or printed.
//! * [`sockring`]: the initiators' sockets on io_uring (one `io_uring_enter` per round trip),
//!   and [`SocketLayer`], the choice between it and the poll loop.
//! * [`poison`]: the one lock-poison helper (from `sanbench-stats`).

pub mod arena;
pub mod blocking;
pub mod chardev;
pub mod engine;
pub mod error;
pub mod params;
pub mod redact;
pub mod rng;
pub mod sockring;

pub use sanbench_stats::poison;

pub use arena::Arena;
pub use engine::{
    AccessState, Allocation, Completion, DataPath, Io, Op, Queue, QueueConfig, Readiness, Target,
    TargetInfo, PATH_ERROR,
};
pub use error::EngineError;
pub use rng::Rng;
pub use sockring::{RingConn, RingFeatures, SharedRing, SockRing, SocketLayer};
