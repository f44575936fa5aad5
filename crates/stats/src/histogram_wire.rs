//! A [`LatencyHistogram`] as bytes, for sending it to another process (the ranks of an MPI run
//! send theirs to rank 0, which merges them: merged percentiles are exact, never averaged).
//!
//! Layout: the exact sum (u128), minimum and maximum (u64), little-endian, then the histogram
//! in HdrHistogram's V2 serialization (uncompressed: the counts are sparse varints already,
//! and a run's histograms are a few kilobytes). In serde (JSON), the bytes travel as base64.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use serde::{Deserialize, Serialize};

use crate::LatencyHistogram;

const HEADER: usize = 16 + 8 + 8;

/// Bytes that are not a serialized histogram.
#[derive(Debug, thiserror::Error)]
pub enum HistogramWireError {
    #[error("histogram bytes: {0} bytes is shorter than the {HEADER}-byte header")]
    Short(usize),
    #[error("histogram bytes: {0}")]
    Decode(String),
    #[error("histogram bytes: bounds differ from sanbench's (1 ns .. 1 h, 3 digits)")]
    Bounds,
}

impl LatencyHistogram {
    /// The histogram as bytes (see the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + 64);
        out.extend_from_slice(&self.sum_ns.to_le_bytes());
        out.extend_from_slice(&self.min_ns.to_le_bytes());
        out.extend_from_slice(&self.max_ns.to_le_bytes());
        // Writing to a Vec cannot fail, and every u64 histogram serializes.
        let _ = V2Serializer::new().serialize(&self.h, &mut out);
        out
    }

    /// The inverse of [`LatencyHistogram::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<LatencyHistogram, HistogramWireError> {
        if b.len() < HEADER {
            return Err(HistogramWireError::Short(b.len()));
        }
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let mut sum = [0u8; 16];
        sum.copy_from_slice(&b[..16]);
        let h: hdrhistogram::Histogram<u64> = Deserializer::new()
            .deserialize(&mut &b[HEADER..])
            .map_err(|e| HistogramWireError::Decode(format!("{e:?}")))?;
        let mut out = LatencyHistogram::new();
        if h.low() != out.h.low() || h.high() != out.h.high() || h.sigfig() != out.h.sigfig() {
            return Err(HistogramWireError::Bounds);
        }
        out.h = h;
        out.sum_ns = u128::from_le_bytes(sum);
        out.min_ns = u64_at(16);
        out.max_ns = u64_at(24);
        Ok(out)
    }
}

impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(self.to_bytes()))
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)?;
        LatencyHistogram::from_bytes(&bytes).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_every_figure_and_merges_exactly() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for i in 0..10_000u64 {
            a.record(1_000 + i * 37);
            b.record(50_000 + i * 1_013);
        }
        let a2 = LatencyHistogram::from_bytes(&a.to_bytes()).unwrap();
        assert_eq!(a2.summary(), a.summary());
        assert_eq!(a2.buckets(), a.buckets());
        let json = serde_json::to_string(&b).unwrap();
        let b2: LatencyHistogram = serde_json::from_str(&json).unwrap();
        let (mut m1, mut m2) = (a.clone(), a2);
        m1.merge(&b);
        m2.merge(&b2);
        assert_eq!(m1.summary(), m2.summary());
        // An empty histogram survives too (a rank that ran no reads).
        let e = LatencyHistogram::from_bytes(&LatencyHistogram::new().to_bytes()).unwrap();
        assert_eq!(e.count(), 0);
    }

    #[test]
    fn bad_bytes_are_an_error_not_a_panic() {
        assert!(matches!(
            LatencyHistogram::from_bytes(&[1, 2, 3]),
            Err(HistogramWireError::Short(3))
        ));
        let mut b = LatencyHistogram::new().to_bytes();
        b.truncate(HEADER + 3);
        assert!(LatencyHistogram::from_bytes(&b).is_err());
    }
}
