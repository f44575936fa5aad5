//! Host monitors for sanbench: what the host spent (CPU, network, energy) while the engine ran.
//!
//! Everything reads from a **root path** (default `/`): `ROOT/proc/stat`, `ROOT/sys/class/...`.
//! Tests point the root at fixture trees (`tests/fixtures/`) so that each transport, power source
//! and odd file can be exercised on a 2-core VM without RAPL or a BMC.
//!
//! * [`cpu`]: `/proc/stat` deltas, per core and in all (docs/MEASURE.md, "CPU").
//! * [`procs`]: per process, thread and kernel-thread group CPU seconds.
//! * [`net`]: `/proc/net/dev` deltas and payload-to-wire efficiency; a NIC's speed.
//! * [`disk`]: `/proc/diskstats` deltas: a block device's utilization and mean queue.
//! * [`power`]: RAPL, IPMI DCMI, Watts Up? Pro, a command, a model; energy integration.
//! * [`sampler`]: [`Monitor`], the background sampler the run loop drives, and [`MonitorReport`].
//! * [`efficiency`](mod@efficiency): work per CPU and per joule.
//! * [`manifest`] and [`transport`]: the environment manifest and a block device's transport.
//!
//! Failures never abort a run and never become numbers: a figure that cannot be measured is
//! `None` with a `note` saying why.

pub mod cmd;
pub mod cpu;
pub mod disk;
pub mod efficiency;
pub mod error;
pub mod fsutil;
pub mod manifest;
pub mod net;
pub mod power;
pub mod procs;
pub mod sampler;
pub mod transport;

pub use efficiency::{efficiency, Efficiency};
pub use error::MonitorError;
pub use manifest::{Manifest, ManifestOptions};
pub use power::{detect, PowerChoice, PowerOptions, PowerReport, SourceStatus};
pub use procs::{GroupReport, WatchSpec};
pub use sampler::{CpuReport, Monitor, MonitorConfig, MonitorHandle, MonitorReport};
pub use transport::{DeviceInfo, Transport};
