//! A [`LatencyHistogram`] as text in a result document: HdrHistogram's V2 compressed encoding
//! (the V2 encoding deflated by zlib behind its own cookie and length) in base64, the form of
//! the histogram column of HdrHistogram's interval logs, which every HdrHistogram library
//! decodes (Java's `decodeFromCompressedByteBuffer`, the `hdrhistogram` Python package's
//! `HdrHistogram.decode`, hdrhistogram-js, the Rust crate's `Deserializer`).
//!
//! A 0.5 s cell's histogram of ~700 non-empty buckets is ~0.7 kB this way, against ~12 kB as
//! `[bucket, count]` pairs in compact JSON and ~30 kB pretty-printed (`histogram_ns` of
//! version 1 documents).
//!
//! Decoding takes untrusted text (a document from anywhere): the base64, the zlib stream and
//! the V2 header's sizes are all bounded before anything is allocated by them, and bounds that
//! are not sanbench's (1 ns .. 1 h, 3 significant digits) are refused. The exact sum and
//! extremes that [`LatencyHistogram`] keeps are not in the encoding: a decoded histogram's are
//! its buckets' (the document's `latency_us` carries the exact figures).

use std::io::Read;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

use crate::histogram_wire::check_v2_header;
use crate::{HistogramWireError, LatencyHistogram};

/// HdrHistogram's cookie of the V2 compressed encoding (big-endian, first four bytes).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// The largest V2 encoding accepted once inflated: every count of sanbench's histogram
/// (~45k of them) as a 9-byte varint is ~0.4 MB.
const MAX_INFLATED: u64 = 1 << 20;

/// The longest text accepted (its compressed form cannot usefully be longer than the
/// inflated limit).
const MAX_TEXT: usize = 2 << 20;

impl LatencyHistogram {
    /// The histogram in HdrHistogram's V2 compressed encoding, base64 (see the module docs).
    pub fn to_hdr_base64(&self) -> String {
        let mut out = Vec::with_capacity(1024);
        // Writing to a Vec cannot fail, and every u64 histogram serializes.
        let _ = V2DeflateSerializer::new().serialize(&self.h, &mut out);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    /// The inverse of [`LatencyHistogram::to_hdr_base64`], for text from anywhere.
    pub fn from_hdr_base64(text: &str) -> Result<LatencyHistogram, HistogramWireError> {
        let bad = |why: &str| HistogramWireError::Decode(why.into());
        if text.len() > MAX_TEXT {
            return Err(bad("longer than any sanbench histogram"));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim().as_bytes())
            .map_err(|e| HistogramWireError::Decode(format!("not base64: {e}")))?;
        if bytes.len() < 8 {
            return Err(HistogramWireError::Short(bytes.len()));
        }
        let be32 =
            |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        if be32(0) != V2_COMPRESSED_COOKIE {
            return Err(bad("not HdrHistogram's V2 compressed encoding (cookie)"));
        }
        let len = be32(4) as usize;
        let zlib = bytes
            .get(8..8 + len)
            .ok_or_else(|| bad("compressed length beyond the bytes"))?;
        let mut v2 = Vec::new();
        flate2::read::ZlibDecoder::new(zlib)
            .take(MAX_INFLATED + 1)
            .read_to_end(&mut v2)
            .map_err(|e| HistogramWireError::Decode(format!("zlib: {e}")))?;
        if v2.len() as u64 > MAX_INFLATED {
            return Err(bad("inflates beyond any sanbench histogram"));
        }
        let mut out = LatencyHistogram::new();
        check_v2_header(&v2, &out)?;
        out.h = Deserializer::new()
            .deserialize(&mut &v2[..])
            .map_err(|e| HistogramWireError::Decode(format!("{e:?}")))?;
        if !out.h.is_empty() {
            out.min_ns = out.h.min();
            out.max_ns = out.h.max();
            out.sum_ns = out
                .h
                .iter_recorded()
                .map(|v| {
                    u128::from(out.h.median_equivalent(v.value_iterated_to()))
                        * u128::from(v.count_at_value())
                })
                .sum();
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 1 µs .. ~16 ms, log-spread: a realistic spread of buckets.
            h.record(1_000 + (x >> 20) % (1u64 << (10 + x % 14)));
        }
        h
    }

    /// Every bucket and count comes back; percentiles agree exactly; the text is small.
    #[test]
    fn round_trips_the_buckets() {
        let h = sample();
        let text = h.to_hdr_base64();
        let back = LatencyHistogram::from_hdr_base64(&text).unwrap();
        assert_eq!(back.buckets(), h.buckets());
        assert_eq!(back.count(), h.count());
        // Bucketed extremes (and so percentiles, which are clamped to the maximum) and mean:
        // within the histogram's 0.1 %.
        let s = h.summary();
        let b = back.summary();
        let near = |a: f64, b: f64| (a - b).abs() <= b * 1e-3;
        assert!(near(b.max as f64, s.max as f64), "{b:?} {s:?}");
        assert!(near(b.min as f64, s.min as f64), "{b:?} {s:?}");
        assert!(near(b.p50 as f64, s.p50 as f64), "{b:?} {s:?}");
        assert!(near(b.p99 as f64, s.p99 as f64), "{b:?} {s:?}");
        assert!(near(b.mean, s.mean), "{b:?} {s:?}");
        assert!(
            text.len() * 10 < h.buckets().len() * 16,
            "{} chars",
            text.len()
        );
        let empty =
            LatencyHistogram::from_hdr_base64(&LatencyHistogram::new().to_hdr_base64()).unwrap();
        assert_eq!(empty.count(), 0);
    }

    /// An independent check of the format: the cookie and length of HdrHistogram's
    /// compressed encoding, and the hdrhistogram crate's own deserializer reads it.
    #[test]
    fn is_hdrhistograms_compressed_encoding() {
        let h = sample();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(h.to_hdr_base64())
            .unwrap();
        assert_eq!(&bytes[..4], &[0x1c, 0x84, 0x93, 0x14]);
        let len = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
        assert_eq!(len + 8, bytes.len());
        let d: hdrhistogram::Histogram<u64> =
            Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(d.len(), h.count());
    }

    /// Bad text is an error, never a panic or a large allocation: not base64, short, another
    /// cookie, a length beyond the bytes, a zlib bomb, other bounds, truncations of a good one.
    #[test]
    fn bad_text_is_an_error() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        for t in [
            "",
            "%%%",
            "AAAA",
            &b64(&[0x1c, 0x84, 0x93, 0x13, 0, 0, 0, 0]),
        ] {
            assert!(LatencyHistogram::from_hdr_base64(t).is_err(), "{t}");
        }
        let mut long = vec![0x1c, 0x84, 0x93, 0x14, 0xff, 0xff, 0xff, 0xff];
        long.extend_from_slice(&[0; 16]);
        assert!(LatencyHistogram::from_hdr_base64(&b64(&long)).is_err());
        // Twice the inflated limit of zeros deflates to ~2 kB: refused at the limit.
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, &vec![0u8; 2 * MAX_INFLATED as usize]).unwrap();
        let z = z.finish().unwrap();
        let mut bomb = vec![0x1c, 0x84, 0x93, 0x14];
        bomb.extend_from_slice(&(z.len() as u32).to_be_bytes());
        bomb.extend_from_slice(&z);
        let e = LatencyHistogram::from_hdr_base64(&b64(&bomb)).unwrap_err();
        assert!(e.to_string().contains("inflates beyond"), "{e}");
        // Another histogram's bounds (5 digits).
        let mut other = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 40, 5).unwrap();
        other.record(1234).unwrap();
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&other, &mut bytes)
            .unwrap();
        assert!(matches!(
            LatencyHistogram::from_hdr_base64(&b64(&bytes)),
            Err(HistogramWireError::Bounds)
        ));
        let good = base64::engine::general_purpose::STANDARD
            .decode(sample().to_hdr_base64())
            .unwrap();
        for cut in [8, 9, good.len() / 2, good.len() - 1] {
            assert!(
                LatencyHistogram::from_hdr_base64(&b64(&good[..cut])).is_err(),
                "{cut}"
            );
        }
    }
}
