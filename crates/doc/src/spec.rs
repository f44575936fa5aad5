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

use sanbench_units::{format_size, Bytes, Dur};

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

    /// Parses the TOML form documented at the top of this module.
    pub fn from_toml(text: &str) -> Result<Workload, String> {
        let f = WorkloadFile::parse(text)?;
        let w = f.into_workload(&Defaults::default())?;
        w.validate()?;
        Ok(w)
    }
}

/// Values a workload file falls back to when it does not set them.
#[derive(Clone, Debug)]
pub struct Defaults {
    pub qd: u32,
    pub workers: u32,
    pub ramp: Duration,
    pub time: Duration,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            qd: 1,
            workers: 1,
            ramp: Duration::ZERO,
            time: Duration::from_secs(10),
        }
    }
}

/// A TOML error on one line that names the line: from the error's span, or, for an unknown
/// key inside an array of tables (where the parser gives no span), the first line that sets
/// that key.
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().to_string();
    let line = match e.span() {
        Some(sp) => Some(text[..sp.start.min(text.len())].matches('\n').count() + 1),
        None => msg
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
            .and_then(|key| {
                text.lines().position(|l| {
                    l.trim_start()
                        .strip_prefix(key)
                        .is_some_and(|r| r.trim_start().starts_with('='))
                })
            })
            .map(|i| i + 1),
    };
    match line {
        Some(n) => format!("line {n}: {msg}"),
        None => msg,
    }
}

/// The TOML shape of a workload, with human units. Suites reuse it for each of their workloads.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    pub name: Option<String>,
    pub qd: Option<u32>,
    pub workers: Option<u32>,
    pub ramp: Option<Dur>,
    pub time: Option<Dur>,
    pub size: Option<Bytes>,
    pub align: Option<Bytes>,
    /// A flush after every N writes of each stream.
    pub flush_every: Option<u32>,
    /// Percent of writes with forced unit access.
    pub fua: Option<f64>,
    /// Open loop: I/Os per second per target.
    pub rate: Option<f64>,
    /// Open-loop arrivals: "fixed" or "poisson".
    pub arrival: Option<Arrival>,
    #[serde(default, rename = "segment")]
    pub segments: Vec<SegmentFile>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentFile {
    pub weight: Option<u32>,
    pub bs: Option<Bytes>,
    pub read_bs: Option<Bytes>,
    pub write_bs: Option<Bytes>,
    pub read: Option<f64>,
    pub random: Option<f64>,
    pub align: Option<Bytes>,
    /// Percent of the segment's I/Os that trim (write size).
    pub trim: Option<f64>,
    /// Percent of the segment's I/Os that write zeroes (write size).
    pub write_zeroes: Option<f64>,
}

impl SegmentFile {
    pub fn into_segment(self, n: usize, default_align: Option<u64>) -> Result<Segment, String> {
        let bs = self.bs.map(|b| b.0);
        let read_bs = self.read_bs.map(|b| b.0).or(bs);
        let write_bs = self.write_bs.map(|b| b.0).or(bs);
        let (read_bs, write_bs) = match (read_bs, write_bs) {
            (Some(r), Some(w)) => (r, w),
            (Some(r), None) => (r, r),
            (None, Some(w)) => (w, w),
            (None, None) => {
                return Err(format!(
                    "segment {n}: give a transfer size (bs, or read_bs and write_bs)"
                ))
            }
        };
        Ok(Segment {
            weight: self.weight.unwrap_or(1),
            read_bs,
            write_bs,
            // Unset, reads take what trims and write-zeroes leave (100 with neither).
            read_pct: self.read.unwrap_or_else(|| {
                (100.0 - self.trim.unwrap_or(0.0) - self.write_zeroes.unwrap_or(0.0))
                    .clamp(0.0, 100.0)
            }),
            random_pct: self.random.unwrap_or(0.0),
            align: self.align.map(|b| b.0).or(default_align),
            trim_pct: self.trim.unwrap_or(0.0),
            write_zeroes_pct: self.write_zeroes.unwrap_or(0.0),
        })
    }
}

impl WorkloadFile {
    /// Reads the TOML form; an error is one line that names the line of the file.
    pub fn parse(text: &str) -> Result<WorkloadFile, String> {
        toml::from_str(text).map_err(|e| toml_error(text, &e))
    }

    pub fn into_workload(self, d: &Defaults) -> Result<Workload, String> {
        let align = self.align.map(|b| b.0);
        let segments = self
            .segments
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.into_segment(i + 1, align))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Workload {
            name: self.name,
            segments,
            qd: self.qd.unwrap_or(d.qd),
            workers: self.workers.unwrap_or(d.workers),
            ramp: self.ramp.map_or(d.ramp, |v| v.0),
            time: self.time.map_or(d.time, |v| v.0),
            span: self.size.map(|b| b.0),
            flush_every: self.flush_every.unwrap_or(0),
            fua_pct: self.fua.unwrap_or(0.0),
            rate: self.rate,
            arrival: self.arrival.unwrap_or(Arrival::Fixed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NWC: &str = r#"
name = "nwc-custom"
qd = 8
ramp = "5s"
time = "2m"
[[segment]]
weight = 33
bs = "512"
read = 100
random = 0
[[segment]]
weight = 34
bs = "2k"
read = 67
random = 100
[[segment]]
weight = 33
read_bs = "64k"
write_bs = "64k"
read = 100
"#;

    #[test]
    fn parses_nwc_custom() {
        let w = Workload::from_toml(NWC).unwrap();
        assert_eq!(w.segments.len(), 3);
        assert_eq!(w.qd, 8);
        assert_eq!(w.workers, 1);
        assert_eq!(w.ramp, Duration::from_secs(5));
        assert_eq!(w.time, Duration::from_secs(120));
        assert_eq!(w.segments[0].read_bs, 512);
        assert_eq!(w.segments[1].read_pct, 67.0);
        assert_eq!(w.segments[1].random_pct, 100.0);
        assert_eq!(w.segments[2].read_bs, 65536);
        assert_eq!(w.max_bs(), 65536);
        assert!(w.has_writes());
    }

    #[test]
    fn rejects_bad_input_with_a_clear_message() {
        let cases = [
            ("qd = 0\n[[segment]]\nbs = \"4k\"", "queue depth"),
            ("[[segment]]\nbs = \"4q\"", "unknown unit"),
            ("[[segment]]\nread = 50", "transfer size"),
            ("[[segment]]\nbs = \"4k\"\nread = 150", "between 0 and 100"),
            ("[[segment]]\nbs = \"4k\"\nbogus = 1", "unknown field"),
            (
                "qd = 8\n[[segment]]\nbs = \"4k\"\nreed = 5",
                "line 4: unknown field `reed`",
            ),
            ("qd = 4", "no segments"),
            (
                "time = \"0s\"\n[[segment]]\nbs = \"4k\"",
                "longer than zero",
            ),
            ("size = \"1k\"\n[[segment]]\nbs = \"4k\"", "smaller than"),
            ("[[segment]]\nweight = 0\nbs = \"4k\"", "weight 0"),
            (
                "[[segment]]\nweight = 4294967295\nbs = \"4k\"\n\
                 [[segment]]\nweight = 1\nbs = \"4k\"",
                "segment weights sum to 4294967296",
            ),
            ("qd = \"x\"", "line 1"),
            (
                "[[segment]]\nbs = \"4k\"\nread = 80\ntrim = 15\nwrite_zeroes = 10",
                "is 105%, more than 100",
            ),
            (
                "[[segment]]\nbs = \"4k\"\ntrim = -1",
                "trim -1% is not between",
            ),
        ];
        for (text, want) in cases {
            let err = Workload::from_toml(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: got {err:?}, want {want:?}");
            assert!(!err.contains('\n'), "one line: {err:?}");
        }
    }

    #[test]
    fn trim_and_write_zeroes_are_shares_of_all_ios_and_writes_the_rest() {
        let w = Workload::from_toml(
            "[[segment]]\nbs = \"4k\"\nread = 70\ntrim = 10\n\
             [[segment]]\nbs = \"8k\"\nwrite_zeroes = 25\n\
             [[segment]]\nbs = \"8k\"\ntrim = 100",
        )
        .unwrap();
        let s = &w.segments;
        assert_eq!(
            (s[0].read_pct, s[0].trim_pct, s[0].write_pct()),
            (70.0, 10.0, 20.0)
        );
        // Unset, read takes what the others leave.
        assert_eq!(
            (s[1].read_pct, s[1].write_zeroes_pct, s[1].write_pct()),
            (75.0, 25.0, 0.0)
        );
        assert_eq!((s[2].read_pct, s[2].write_pct()), (0.0, 0.0));
        assert!(w.has_trims() && w.has_write_zeroes() && w.has_writes());
        assert!(s[0].describe().contains("70% read 20% write 10% trim"));
        // A document without the new keys loads, and one with none writes none.
        let j = serde_json::to_value(Workload::from_toml(NWC).unwrap()).unwrap();
        assert!(j["segments"][0].get("trim_pct").is_none());
        let back: Workload = serde_json::from_value(j).unwrap();
        assert_eq!(back.segments[0].trim_pct, 0.0);
    }

    #[test]
    fn describe_reads_like_iometer() {
        let w = Workload::from_toml(NWC).unwrap();
        let d = w.describe();
        assert!(d.starts_with("33% 512B 100% read 0% random + 34% 2KiB 67% read 100% random"));
        assert!(d.ends_with("QD 8 x 1 worker"));
    }
}
