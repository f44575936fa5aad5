//! Pure judgements over finished measurements, apart from measuring them (as criterion keeps
//! its analysis apart from its timing loop): figures in, a verdict out, no I/O and no clock.
//!
//! * [`bottleneck`]: what limited a window (the initiator's or the target's CPU, the host, the
//!   link, the device, the queue, the round trip) and the headroom of every other resource,
//!   from the figures the CLI gathers out of the monitor's report. The result carries it as
//!   `sanbench_doc::bottleneck::Bottleneck`.
//!
//! * [`disruption`]: what a fault or a stall did to a target's I/O (stall, detection,
//!   failover, recovery, the open loop's catch-up), from the window's fine [`timeline`], the
//!   multipath paths' bins and events, and the faults fired. The engine records the timeline
//!   and hands a target's run to it (`sanbench_engine::disruption::of_target`).
//!
//! The report's headroom reading is in the report, beside the findings it annotates.

pub mod bottleneck;
pub mod disruption;
pub mod timeline;
