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
/// HdrHistogram's V2 header: cookie, payload length, normalizing offset, significant digits
/// (u32 each), lowest and highest trackable values (u64), integer-to-double ratio (f64).
const V2_HEADER: usize = 4 * 4 + 8 + 8 + 8;

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
        let mut out = LatencyHistogram::new();
        check_v2_header(&b[HEADER..], &out)?;
        // Built by the deserializer with the bounds just checked: sanbench's own.
        let h: hdrhistogram::Histogram<u64> = Deserializer::new()
            .deserialize(&mut &b[HEADER..])
            .map_err(|e| HistogramWireError::Decode(format!("{e:?}")))?;
        out.h = h;
        out.sum_ns = u128::from_le_bytes(sum);
        out.min_ns = u64_at(16);
        out.max_ns = u64_at(24);
        Ok(out)
    }
}

/// Checks the V2 header at the start of `v2` against the bytes and `h`'s bounds. The V2
/// header's bounds and payload length are checked before the deserializer sizes its counts
/// and its payload buffer by them: taken from the bytes (a highest trackable value of 2^63, a
/// payload of 4 GB behind a 100-byte message) they would have it allocate gigabytes (found by
/// the mpi_histogram and mpi_run_output fuzz targets).
pub(crate) fn check_v2_header(v2: &[u8], h: &LatencyHistogram) -> Result<(), HistogramWireError> {
    // A big-endian field of the V2 header.
    let field = |r: std::ops::Range<usize>| {
        v2.get(r)
            .map(|x| x.iter().fold(0u64, |a, &b| a << 8 | b as u64))
    };
    let payload = field(4..8);
    if payload.is_none_or(|p| p > v2.len().saturating_sub(V2_HEADER) as u64) {
        return Err(HistogramWireError::Decode(
            "payload length beyond the bytes".into(),
        ));
    }
    if field(12..16) != Some(u64::from(h.h.sigfig()))
        || field(16..24) != Some(h.h.low())
        || field(24..32) != Some(h.h.high())
    {
        return Err(HistogramWireError::Bounds);
    }
    Ok(())
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

    /// Sizes from the bytes are checked before anything is allocated by them: a payload
    /// length of 4 GB behind a short message, or bounds that are not sanbench's (here a
    /// highest trackable value of 2^62 at 5 digits, a counts array of gigabytes), are refused.
    /// (That nothing large is allocated on the way is tests/wire_alloc.rs's check.)
    #[test]
    fn sizes_in_the_header_are_checked_before_allocating() {
        let mut h = LatencyHistogram::new();
        h.record(12_345);
        let good = h.to_bytes();
        let mut long = good.clone();
        long[HEADER + 4..HEADER + 8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            LatencyHistogram::from_bytes(&long),
            Err(HistogramWireError::Decode(_))
        ));
        let mut wide = good.clone();
        wide[HEADER + 12..HEADER + 16].copy_from_slice(&5u32.to_be_bytes());
        wide[HEADER + 24..HEADER + 32].copy_from_slice(&(1u64 << 62).to_be_bytes());
        assert!(matches!(
            LatencyHistogram::from_bytes(&wide),
            Err(HistogramWireError::Bounds)
        ));
        for cut in [HEADER, HEADER + 7, HEADER + 20, good.len() - 1] {
            assert!(LatencyHistogram::from_bytes(&good[..cut]).is_err(), "{cut}");
        }
        assert!(LatencyHistogram::from_bytes(&good).is_ok());
    }

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
