//! Iometer-style access specifications.
//!
//! A [`Workload`] is what one run does to every target: weighted [`Segment`]s (transfer sizes,
//! read %, random %), the queue depth per target per worker, the number of workers, ramp-up and
//! measured time. It comes from command-line flags (one segment) or from a TOML file:
//!
//! ```toml
//! # The Network Computing 2003 "custom" mix: three weighted segments.
//! name = "nwc-custom"
//! qd = 8          # outstanding I/Os per target per worker
//! workers = 1
//! ramp = "5s"
//! time = "2m"
//! # size = "1G"   # span of each target to use (default: all of it)
//! # align = "4k"  # offset alignment (default: each I/O's own size)
//!
//! [[segment]]
//! weight = 33     # share of I/Os, relative to the other segments
//! bs = "512"
//! read = 100      # percent of I/Os that read
//! random = 0      # percent of I/Os at random offsets; the rest continue sequentially
//! # trim = 1       # percent of I/Os that discard their range (write size)
//! # write_zeroes = 0  # percent of I/Os that zero their range without data (write size)
//! #                # writes are the rest: 100 - read - trim - write_zeroes
//!
//! [[segment]]
//! weight = 34
//! bs = "2k"
//! read = 67
//! random = 100
//!
//! [[segment]]
//! weight = 33
//! read_bs = "64k" # separate read and write sizes, as the IBM XIV study uses
//! write_bs = "64k"
//! read = 100
//! random = 0
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use sanbench_units::format_size;

/// How I/Os arrive in an open-loop run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    Fixed,
    Poisson,
}

impl std::str::FromStr for Arrival {
    type Err = String;
    fn from_str(s: &str) -> Result<Arrival, String> {
        match s {
            "fixed" => Ok(Arrival::Fixed),
            "poisson" => Ok(Arrival::Poisson),
            _ => Err(format!("arrival '{s}': use fixed or poisson")),
        }
    }
}

impl std::fmt::Display for Arrival {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arrival::Fixed => "fixed",
            Arrival::Poisson => "poisson",
        })
    }
}

/// Largest transfer one I/O may ask for.
pub const MAX_BS: u64 = 64 << 20;

/// One weighted access pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Segment {
    pub weight: u32,
    pub read_bs: u64,
    pub write_bs: u64,
    /// Percent of I/Os that read (0..=100).
    pub read_pct: f64,
    /// Percent of I/Os at random offsets (0..=100).
    pub random_pct: f64,
    /// Offset alignment for random I/O; `None` = the I/O's own size.
    pub align: Option<u64>,
    /// Percent of I/Os that discard their range (NBD TRIM, SCSI UNMAP, NVMe deallocate,
    /// punch-hole), of all the segment's I/Os like `read_pct`; writes are what is left
    /// (`100 - read - trim - write_zeroes`). Trims use the write size.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub trim_pct: f64,
    /// Percent of I/Os that zero their range without sending data (NBD WRITE_ZEROES, SCSI
    /// WRITE SAME, NVMe Write Zeroes, zero-range), of all the segment's I/Os; write size.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub write_zeroes_pct: f64,
}

impl Segment {
    /// Percent of I/Os that write data: what reads, trims and write-zeroes leave.
    pub fn write_pct(&self) -> f64 {
        (100.0 - self.read_pct - self.trim_pct - self.write_zeroes_pct).max(0.0)
    }

    /// Trims or write-zeroes among the segment's I/Os.
    pub fn discards(&self) -> bool {
        self.trim_pct > 0.0 || self.write_zeroes_pct > 0.0
    }

    pub fn max_bs(&self) -> u64 {
        match (self.read_pct > 0.0, self.read_pct < 100.0) {
            (true, true) => self.read_bs.max(self.write_bs),
            (true, false) => self.read_bs,
            _ => self.write_bs,
        }
    }

    pub fn describe(&self) -> String {
        let bs = if self.read_bs == self.write_bs || self.read_pct == 100.0 {
            format_size(self.read_bs)
        } else if self.read_pct == 0.0 {
            format_size(self.write_bs)
        } else {
            format!(
                "{}r/{}w",
                format_size(self.read_bs),
                format_size(self.write_bs)
            )
        };
        let mut d = format!("{bs} {}% read", fmt_pct(self.read_pct));
        // Only a mix that discards names its writes apart: the read share alone said it before.
        if self.discards() {
            d += &format!(" {}% write", fmt_pct(self.write_pct()));
            for (what, p) in [
                ("trim", self.trim_pct),
                ("write-zeroes", self.write_zeroes_pct),
            ] {
                if p > 0.0 {
                    d += &format!(" {}% {what}", fmt_pct(p));
                }
            }
        }
        format!("{d} {}% random", fmt_pct(self.random_pct))
    }
}

fn fmt_pct(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

/// An access specification plus its load and timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Workload {
    pub name: Option<String>,
    pub segments: Vec<Segment>,
    /// Outstanding I/Os per target per worker.
    pub qd: u32,
    pub workers: u32,
    #[serde(with = "secs")]
    #[schemars(with = "f64")]
    pub ramp: Duration,
    #[serde(with = "secs")]
    #[schemars(with = "f64")]
    pub time: Duration,
    /// Bytes of each target to use, from offset 0; `None` = the whole target.
    pub span: Option<u64>,
    /// Each stream issues a flush (NBD FLUSH, SCSI SYNCHRONIZE CACHE, fdatasync) after every
    /// this many writes; 0: never. Flushes have their own latency histogram.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flush_every: u32,
    /// Percent of writes sent with forced unit access (durable on completion); their latency
    /// is also reported apart.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub fua_pct: f64,
    /// Open loop: I/Os per second per target (split over the workers), issued at their
    /// intended times; `None`: closed loop (`qd` always outstanding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// How open-loop I/Os arrive.
    #[serde(default = "fixed", skip_serializing_if = "is_fixed")]
    pub arrival: Arrival,
}

fn fixed() -> Arrival {
    Arrival::Fixed
}

fn is_fixed(a: &Arrival) -> bool {
    *a == Arrival::Fixed
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

impl Workload {
    pub fn max_bs(&self) -> u64 {
        self.segments.iter().map(Segment::max_bs).max().unwrap_or(0)
    }

    pub fn has_writes(&self) -> bool {
        self.segments.iter().any(|s| s.read_pct < 100.0)
    }

    pub fn has_reads(&self) -> bool {
        self.segments.iter().any(|s| s.read_pct > 0.0)
    }

    /// Some segment trims.
    pub fn has_trims(&self) -> bool {
        self.segments.iter().any(|s| s.trim_pct > 0.0)
    }

    /// Some segment zeroes ranges without data.
    pub fn has_write_zeroes(&self) -> bool {
        self.segments.iter().any(|s| s.write_zeroes_pct > 0.0)
    }

    pub fn describe(&self) -> String {
        let total: u64 = self.segments.iter().map(|s| s.weight as u64).sum();
        let segs: Vec<String> = if self.segments.len() == 1 {
            vec![self.segments[0].describe()]
        } else {
            self.segments
                .iter()
                .map(|s| {
                    format!(
                        "{:.0}% {}",
                        100.0 * s.weight as f64 / total.max(1) as f64,
                        s.describe()
                    )
                })
                .collect()
        };
        format!(
            "{}, QD {} x {} worker{}",
            segs.join(" + "),
            self.qd,
            self.workers,
            if self.workers == 1 { "" } else { "s" }
        )
    }

    /// Checks internal consistency; the message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.segments.is_empty() {
            return Err("the access specification has no segments".into());
        }
        if self.qd == 0 || self.qd > 65_536 {
            return Err(format!(
                "queue depth {} is out of range (1..=65536)",
                self.qd
            ));
        }
        if self.workers == 0 || self.workers > 4096 {
            return Err(format!(
                "worker count {} is out of range (1..=4096)",
                self.workers
            ));
        }
        if self.time.is_zero() {
            return Err("the measured time must be longer than zero".into());
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && (1.0..=1e9).contains(&r)) {
                return Err(format!(
                    "rate {r} is out of range (1..=1e9 I/Os per second)"
                ));
            }
        }
        if !(0.0..=100.0).contains(&self.fua_pct) || self.fua_pct.is_nan() {
            return Err(format!("fua {}% is not between 0 and 100", self.fua_pct));
        }
        if self.flush_every > 0 && !self.has_writes() {
            return Err("flush_every needs writes to flush".into());
        }
        if self.segments.iter().all(|s| s.weight == 0) {
            return Err("every segment has weight 0".into());
        }
        // The generator scales cumulative weights by 2^32 in 64 bits: a sum past u32::MAX
        // would lose its top bits and pick segments in the wrong shares.
        let total: u64 = self.segments.iter().map(|s| s.weight as u64).sum();
        if total > u32::MAX as u64 {
            return Err(format!(
                "segment weights sum to {total}, more than {} (weights are relative: divide \
                 them)",
                u32::MAX
            ));
        }
        for (i, s) in self.segments.iter().enumerate() {
            let n = i + 1;
            for (what, p) in [
                ("read", s.read_pct),
                ("random", s.random_pct),
                ("trim", s.trim_pct),
                ("write_zeroes", s.write_zeroes_pct),
            ] {
                if !(0.0..=100.0).contains(&p) || p.is_nan() {
                    return Err(format!("segment {n}: {what} {p}% is not between 0 and 100"));
                }
            }
            // Shares of one segment's I/Os: writes take what the others leave.
            let taken = s.read_pct + s.trim_pct + s.write_zeroes_pct;
            if taken > 100.0 {
                return Err(format!(
                    "segment {n}: read {}% + trim {}% + write_zeroes {}% is {}%, more than 100 \
                     (each is a share of all the segment's I/Os; writes take the rest)",
                    fmt_pct(s.read_pct),
                    fmt_pct(s.trim_pct),
                    fmt_pct(s.write_zeroes_pct),
                    fmt_pct(taken)
                ));
            }
            for (what, bs, used) in [
                ("read size", s.read_bs, s.read_pct > 0.0),
                ("write size", s.write_bs, s.read_pct < 100.0),
            ] {
                if used && (bs == 0 || bs > MAX_BS) {
                    return Err(format!(
                        "segment {n}: {what} {bs} is out of range (1 B..=64 MiB)"
                    ));
                }
            }
            if let Some(a) = s.align {
                if a == 0 {
                    return Err(format!("segment {n}: alignment must be at least 1 byte"));
                }
            }
        }
        if let Some(span) = self.span {
            if span < self.max_bs() {
                return Err(format!(
                    "size {} is smaller than the largest transfer {}",
                    format_size(span),
                    format_size(self.max_bs())
                ));
            }
        }
        Ok(())
    }
}
