//! The TOML form of a workload (the access specification documented in [`crate::spec`]):
//! the file's shape with human units, the defaults it falls back to, and one-line errors
//! that name the line. Suites reuse [`WorkloadFile`] for each of their workloads. Depends on
//! [`crate::spec`]; the spec never on it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use sanbench_units::{Bytes, Dur};

use crate::spec::{Arrival, Segment, Workload};

impl Workload {
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
