//! Latency figures in microseconds, and the CPU of the sanbench process: what a target's
//! result and a rank's row both carry.

use serde::{Deserialize, Serialize};

use sanbench_stats::LatencyHistogram;

/// Latency figures in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyUs {
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    pub stdev: f64,
}

impl LatencyUs {
    pub fn from_hist(h: &LatencyHistogram) -> LatencyUs {
        let s = h.summary();
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencyUs {
            mean: s.mean / 1000.0,
            min: us(s.min),
            p50: us(s.p50),
            p90: us(s.p90),
            p99: us(s.p99),
            p999: us(s.p999),
            p9999: us(s.p9999),
            max: us(s.max),
            stdev: s.stdev / 1000.0,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessCpu {
    pub user_s: f64,
    pub system_s: f64,
    /// I/Os completed in the window per CPU-second of the sanbench process.
    pub ios_per_cpu_s: f64,
    /// CPU-µs of the sanbench process per I/O.
    pub cpu_us_per_io: f64,
}

impl ProcessCpu {
    /// The process's CPU over a window in which `ios` I/Os completed.
    pub fn new(user_s: f64, system_s: f64, ios: u64) -> ProcessCpu {
        let cpu_s = user_s + system_s;
        ProcessCpu {
            user_s,
            system_s,
            ios_per_cpu_s: if cpu_s > 0.0 { ios as f64 / cpu_s } else { 0.0 },
            cpu_us_per_io: if ios > 0 {
                cpu_s * 1e6 / ios as f64
            } else {
                0.0
            },
        }
    }
}

/// A latency histogram in a document (`histogram`, `service_histogram`,
/// `issue_lag_histogram`): nanoseconds, 1 ns .. 1 h at 3 significant digits, written as
/// HdrHistogram's V2 compressed encoding in base64, the histogram column of HdrHistogram's
/// interval logs, which every HdrHistogram library decodes (sanbench_stats' histogram_text
/// module). Version 1 documents carried the same buckets as `[highest ns, count]` pairs
/// (`histogram_ns`), ~40x the text.
#[derive(Clone, Debug, Default)]
pub struct Histogram(pub LatencyHistogram);

impl Histogram {
    /// Non-empty buckets as (highest ns of the bucket, count).
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.0.buckets()
    }
}

impl PartialEq for Histogram {
    /// The same buckets and counts (what the document holds).
    fn eq(&self, other: &Self) -> bool {
        self.0.buckets() == other.0.buckets()
    }
}

impl Serialize for Histogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_hdr_base64())
    }
}

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        LatencyHistogram::from_hdr_base64(&text)
            .map(Histogram)
            .map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Histogram {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Histogram".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "contentEncoding": "base64",
            "description": "A latency histogram in nanoseconds (1 ns .. 1 h, 3 significant \
                digits): HdrHistogram's V2 compressed encoding (cookie 0x1c849314, zlib) in \
                base64, as in HdrHistogram's interval logs."
        })
    }
}
