//! The bottleneck's types: the verdicts, a candidate and the result's `bottleneck` block, and
//! the figures the attribution takes (crates/analysis/src/bottleneck.rs has the rules).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// What limited a target's window.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// A thread of sanbench's initiator was runnable all the window.
    InitiatorCpu,
    /// A thread of the target (a built-in server here, a `--watch`ed process) was.
    TargetCpu,
    /// Every core of the host was busy and the run waited for them.
    HostCpu,
    /// The link toward the target ran at its line rate.
    Link,
    /// The block device under the target was busy all the window.
    Device,
    /// The queue stayed full and nothing here was busy: the round trip itself.
    Latency,
    /// The generator could not keep the queue full.
    Queue,
    /// An open loop held its asked rate: the offered load, not a resource.
    Rate,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::InitiatorCpu => "initiator-cpu",
            Verdict::TargetCpu => "target-cpu",
            Verdict::HostCpu => "host-cpu",
            Verdict::Link => "link",
            Verdict::Device => "device",
            Verdict::Latency => "latency",
            Verdict::Queue => "queue",
            Verdict::Rate => "rate",
        }
    }

    /// At most 8 characters, for table columns.
    pub fn short(self) -> &'static str {
        match self {
            Verdict::InitiatorCpu => "init-cpu",
            Verdict::TargetCpu => "tgt-cpu",
            v => v.as_str(),
        }
    }

    /// Whether a cell limited by this measured the interconnect or the target under test
    /// (the link, the target's CPU or device, the round trip, the asked rate); the others
    /// (the initiator's CPU, the host's, the generator's queue) say more about the host
    /// sanbench ran on than about what was compared.
    pub fn about_the_target(self) -> bool {
        matches!(
            self,
            Verdict::TargetCpu | Verdict::Link | Verdict::Device | Verdict::Latency | Verdict::Rate
        )
    }

    /// What limited, as a phrase for a sentence: "the initiator host's CPU".
    pub fn phrase(self) -> &'static str {
        match self {
            Verdict::InitiatorCpu | Verdict::HostCpu => "the initiator host's CPU",
            Verdict::TargetCpu => "the target's CPU",
            Verdict::Link => "the link",
            Verdict::Device => "the device",
            Verdict::Latency => "the round trip",
            Verdict::Queue => "the generator's queue",
            Verdict::Rate => "the asked rate",
        }
    }

    /// The order in which ties are broken: the most specific resource first.
    pub fn rank(self) -> u8 {
        match self {
            Verdict::InitiatorCpu => 0,
            Verdict::TargetCpu => 1,
            Verdict::Link => 2,
            Verdict::Device => 3,
            Verdict::HostCpu => 4,
            Verdict::Queue => 5,
            Verdict::Latency => 6,
            Verdict::Rate => 7,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One resource's figure over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Candidate {
    pub kind: Option<Verdict>,
    /// "thread sb-w0-t0", "thread sb-nbd-c0 of sanbench (pid 812)", "2 cores", "link
    /// sbl-one-h", "device vda", "queue".
    pub resource: String,
    /// Share of its capacity, 0..1 (a thread: runnable share of the window; the queue: mean
    /// in flight over the depth asked). `None` where the capacity is unknown (loopback).
    pub utilization: Option<f64>,
    pub saturated: bool,
    /// The figures in words: "99 % of a core (on a CPU 97 %, waiting for one 2 %)".
    pub detail: String,
    /// The figures the verdict rests on, by name (`on_cpu_pct`, `wait_pct`, `busy_pct`,
    /// `softirq_pct`, `steal_pct`, `bytes_per_s`, `rate_bits_per_s`, `util_pct`,
    /// `avg_queue`, `mean_in_flight`, `asked`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, f64>,
}

/// A target's bottleneck (`results[].bottleneck`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bottleneck {
    pub verdict: Verdict,
    /// The limiting resource, as its candidate names it.
    pub resource: String,
    pub utilization: Option<f64>,
    /// "initiator-cpu: thread sb-w0-t0 at 99 % of a core".
    pub text: String,
    /// Other saturated resources (two near saturation: both are named, the verdict is the one
    /// with less headroom).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Verdict>,
    /// Every resource looked at, with its figures: the headroom of the others.
    pub candidates: Vec<Candidate>,
    /// What could not be measured, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A thread's CPU over the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadLoad {
    pub name: String,
    /// "sanbench (pid 812)": where the thread lives, for a target's threads.
    pub process: String,
    /// Seconds on a CPU.
    pub run_s: f64,
    /// Seconds runnable but waiting for a CPU (schedstat), where the kernel says.
    pub wait_s: Option<f64>,
}

impl ThreadLoad {
    pub fn demand(&self, window_s: f64) -> f64 {
        (self.run_s + self.wait_s.unwrap_or(0.0)) / window_s
    }
}

/// All cores over the window, in percent of all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostLoad {
    pub cores: usize,
    pub busy_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    /// Of `busy_pct`, an open loop's streams spinning for their next arrival (0 for a closed
    /// loop): busy all the same (a thread that waited behind it was limited by it), named so
    /// the reader knows whose the cycles were.
    pub pacing_pct: f64,
}

/// The link toward a network target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkLoad {
    /// The interface ("lo", "eth0", "sbl-one-h").
    pub iface: String,
    /// The busier direction's bytes per second at the interface (frames).
    pub bytes_per_s: f64,
    /// Line rate in bits per second, where known.
    pub rate_bits: Option<u64>,
    /// Where the rate comes from: "lab link one", "sysfs speed".
    pub rate_source: String,
}

/// The block device under a target, from /proc/diskstats.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceLoad {
    pub name: String,
    /// Time with at least one I/O in flight, percent of the window.
    pub util_pct: f64,
    /// Mean I/Os in flight at the device (aqu-sz).
    pub avg_queue: f64,
    /// Every I/O of the target goes to the device (O_DIRECT, or a block device without the
    /// page cache): then the device's queue is the queue the target achieved.
    pub direct: bool,
}

/// Everything the attribution looks at for one target's window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub window_s: f64,
    /// sanbench's stream (and sync-engine) threads driving the target.
    pub initiator: Vec<ThreadLoad>,
    /// The target's threads on this host (built-in servers, `--watch`ed processes).
    pub target: Vec<ThreadLoad>,
    pub host: Option<HostLoad>,
    pub link: Option<LinkLoad>,
    pub device: Option<DeviceLoad>,
    /// I/Os in flight: the sampled mean and the depth asked (workers × queue depth).
    pub mean_in_flight: Option<f64>,
    pub asked: u64,
    /// An open loop: whether its point held the asked rate (`OpenLoop::valid`) and the rate.
    pub open_loop: Option<(bool, f64)>,
    /// What the caller could not measure.
    pub notes: Vec<String>,
}

impl Bottleneck {
    /// The candidate of one kind.
    pub fn candidate(&self, kind: Verdict) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.kind == Some(kind))
    }

    /// Everything but the verdict, for a line under a table: "headroom: host-cpu 45 %,
    /// link 3 % of 1 Gbit/s, queue 32.0 of 32 in flight on average".
    pub fn headroom_text(&self) -> String {
        let parts: Vec<String> = self
            .candidates
            .iter()
            .filter(|c| c.kind != Some(self.verdict) || c.resource != self.resource)
            .map(|c| {
                let k = c.kind.map_or("?", Verdict::as_str);
                // "queue: ...", "link lo: ...", "host-cpu 2 cores: ...".
                let r = c.resource.strip_prefix(k).unwrap_or(&c.resource).trim();
                if r.is_empty() {
                    format!("{k}: {}", c.detail)
                } else {
                    format!("{k} {r}: {}", c.detail)
                }
            })
            .collect();
        parts.join("; ")
    }
}
