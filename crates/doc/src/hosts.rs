//! The per-host part of a result that several processes measured together (the ranks of an
//! MPI job): `hosts[]` and `mpi` in `sanbench.run/1`. The totals of such a document are the
//! merged run (counts added, histograms merged: see `run::wire`); these are each rank's own
//! figures beside them. Field names are public interface: extend, never rename.

use serde::{Deserialize, Serialize};

use crate::efficiency::Efficiency;
use crate::latency::{LatencyUs, ProcessCpu};

/// One rank's own figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct HostResult {
    pub rank: u32,
    /// The host name the rank ran on (MPI's processor name).
    pub host: String,
    /// The rank ran no I/O and only measured its host (`--monitor-only-ranks`).
    pub monitor_only: bool,
    /// The targets it drove, `{rank}` and `{host}` expanded.
    pub targets: Vec<String>,
    /// Its exit from the start barrier (wall clock, RFC 3339 with ms; the offset below in µs), where its ramp began.
    pub barrier_exit: String,
    /// Microseconds after the earliest rank's barrier exit.
    pub barrier_exit_offset_us: f64,
    pub seconds: f64,
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub latency_us: LatencyUs,
    /// Its host's CPU, network and power over its window (the monitors' blocks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<crate::host::CpuReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<crate::host::NetReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::host::PowerReport>,
    pub efficiency: Efficiency,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_cpu: Option<ProcessCpu>,
    /// The CPU each of its streams was pinned to, in stream order (`--cpus-policy split`:
    /// the ranks of one host deal the CPUs out in turn); empty when unpinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_cpus: Vec<usize>,
    /// Bytes of the report this rank sent rank 0 (output, histograms, monitors).
    pub gathered_bytes: u64,
    /// Its own intervals (`--log-interval`; all its targets together when it drove several),
    /// as a result's `intervals`: the merged totals keep none, percentiles do not add.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<crate::interval::IntervalSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals_step_s: Option<f64>,
}

/// How the ranks ran together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct MpiInfo {
    pub ranks: u32,
    /// Who started the job (mpirun, srun, ...).
    pub launcher: String,
    /// Latest minus earliest barrier exit, wall clock (includes the hosts' clock offsets).
    pub barrier_exit_spread_us: f64,
    /// Longest minus shortest measured window over the ranks that ran I/O.
    pub window_spread_us: f64,
    /// The rank that decided the end of the window.
    pub decided_by: u32,
    /// Rank 0's time to receive and decode every rank's report, and to merge them.
    pub gather_ms: f64,
    pub merge_ms: f64,
}
