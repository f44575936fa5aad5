//! Pure judgements over finished measurements, apart from measuring them (as criterion keeps
//! its analysis apart from its timing loop): figures in, a verdict out, no I/O and no clock.
//!
//! * [`bottleneck`]: what limited a window (the initiator's or the target's CPU, the host, the
//!   link, the device, the queue, the round trip) and the headroom of every other resource,
//!   from the figures the CLI gathers out of the monitor's report. The result carries it as
//!   `sanbench_doc::bottleneck::Bottleneck`.
//!
//! The disruption analysis (a fault's stall, failover and recovery) still lives in the engine
//! beside the fine timeline it reads (`sanbench_engine::disruption`); the report's headroom
//! reading is in the report, beside the findings it annotates.

pub mod bottleneck;
