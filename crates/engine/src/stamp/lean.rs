//! The fused path's kernels for the shape nearly every verified I/O has: whole units of a
//! multiple of 64 bytes, no zero tail, no duplicates, AVX2 and SSE4.2 (`mem:` at 4 KiB with
//! 512-byte units). One call per read or write, every unit inside it, the stamp handled as
//! five 64-bit words in registers: the general kernels in `fused.rs` (which stay for every
//! other shape and CPU) spent more instructions per unit on slicing, bounds, dispatch and
//! byte-wise field access than on the unit's 512 bytes themselves, and on a CPU whose memory
//! wait does not hide them, those instructions were what verified I/O lost against plain
//! (docs/BENCHMARKS.md, issue 43 item 3).
//!
//! Same bytes, same answers: a write's units are byte for byte what
//! [`Stamper::unique`](super::Stamper) makes, and a read is "exactly the expected units"
//! only when [`KeyCache::copy_expected`](super::KeyCache::copy_expected) would say so. Any
//! unit that is not the common case (a zero tail, a bad field or payload) makes the read
//! kernel answer [`Lean::No`], and the caller runs the general kernel over the whole read,
//! so what decides a read that is not clean stays the general code (tests compare both).

use super::{window, KeyCache, Stamper, MAGIC, SEQ_MASK, STAMP_LEN};

/// What the lean read kernel concluded.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Lean {
    /// Every unit is exactly the expected one; `dst` holds the whole read.
    Clean,
    /// Not the lean kernel's case, or something unexpected: ask the general kernel (which
    /// copies and judges the whole read again).
    No,
}

/// Whether a read or write of `len` bytes in units of `unit` over `pool` has the lean shape.
#[inline(always)]
pub(super) fn lean_shape(len: usize, unit: usize, pool: &[u8]) -> bool {
    unit >= 64 && unit.is_multiple_of(64) && len.is_multiple_of(unit) && pool.len() >= unit + 8
}

const MAGIC_WORD: u32 = u32::from_le_bytes(MAGIC);

/// CRC32C of a stamp's covered bytes 8..40 given as its four words (what `header_crc` gives).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
fn crc4(w1: u64, w2: u64, w3: u64, w4: u64) -> u32 {
    use std::arch::x86_64::_mm_crc32_u64;
    let c = _mm_crc32_u64(u32::MAX as u64, w1);
    let c = _mm_crc32_u64(c, w2);
    let c = _mm_crc32_u64(c, w3);
    !(_mm_crc32_u64(c, w4) as u32)
}

/// `dst = src` while computing the OR of `src ^ pool ^ key` over the bytes copied (0: every
/// byte matches) (each 32 bytes loaded
/// once, stored and compared: what is judged is what was copied, whoever writes `src`). `dst`
/// and `pool` at least as long as `src` (else nothing is copied and `u64::MAX` returned).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn xor_diff_copy_avx2(src: &[u8], dst: &mut [u8], pool: &[u8], key: u64) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_loadu_si256, _mm256_or_si256, _mm256_set1_epi64x, _mm256_setzero_si256,
        _mm256_storeu_si256, _mm256_testz_si256, _mm256_xor_si256,
    };
    let n = src.len();
    if dst.len() < n || pool.len() < n {
        return u64::MAX;
    }
    let k = _mm256_set1_epi64x(key as i64);
    let (s, d, p) = (src.as_ptr(), dst.as_mut_ptr(), pool.as_ptr());
    let (mut a0, mut a1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut i = 0;
    // SAFETY: every access is 32 bytes ending at most at n, inside all three slices (checked
    // above); the loads and stores are unaligned ones; the last overlaps at a multiple of 8.
    unsafe {
        while i + 64 <= n {
            let v0 = _mm256_loadu_si256(s.add(i).cast::<__m256i>());
            let v1 = _mm256_loadu_si256(s.add(i + 32).cast::<__m256i>());
            _mm256_storeu_si256(d.add(i).cast::<__m256i>(), v0);
            _mm256_storeu_si256(d.add(i + 32).cast::<__m256i>(), v1);
            let x0 = _mm256_xor_si256(v0, _mm256_loadu_si256(p.add(i).cast::<__m256i>()));
            let x1 = _mm256_xor_si256(v1, _mm256_loadu_si256(p.add(i + 32).cast::<__m256i>()));
            a0 = _mm256_or_si256(a0, _mm256_xor_si256(x0, k));
            a1 = _mm256_or_si256(a1, _mm256_xor_si256(x1, k));
            i += 64;
        }
        // What is left: whole vectors, the last one overlapping when the length is a multiple
        // of 8 (the key's lanes then line up), otherwise bytes from the last whole vector.
        let whole = n.is_multiple_of(8) && n >= 32;
        while i < n && (i + 32 <= n || whole) {
            let at = i.min(n - 32);
            let v = _mm256_loadu_si256(s.add(at).cast::<__m256i>());
            _mm256_storeu_si256(d.add(at).cast::<__m256i>(), v);
            let x = _mm256_xor_si256(v, _mm256_loadu_si256(p.add(at).cast::<__m256i>()));
            a0 = _mm256_or_si256(a0, _mm256_xor_si256(x, k));
            i += 32;
        }
    }
    let a = _mm256_or_si256(a0, a1);
    let mut diff = u64::from(_mm256_testz_si256(a, a) == 0);
    if i < n {
        // i is a multiple of 32, so the key's byte phase continues from byte 0.
        let kb = key.to_le_bytes();
        dst[i..n].copy_from_slice(&src[i..n]);
        diff |= dst[i..n]
            .iter()
            .zip(&pool[i..n])
            .enumerate()
            .fold(0u64, |d, (j, (a, b))| d | u64::from(a ^ b ^ kb[j % 8]));
    }
    diff
}

impl KeyCache {
    /// `dst = src` and whether every unit of the read is the expected one, for the lean shape
    /// ([`lean_shape`], AVX2 and SSE4.2: the caller checks). This unit's share of `ahead` is
    /// prefetched as each unit starts, as the general kernel does.
    #[allow(clippy::too_many_arguments)]
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,sse4.2")]
    pub(super) fn copy_expected_lean(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        io_off: u64,
        unit: usize,
        run_id: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
        ahead: &[u8],
    ) -> Lean {
        use std::arch::x86_64::{
            __m256i, _mm256_loadu_si256, _mm256_storeu_si256, _mm_prefetch, _MM_HINT_T0,
        };
        let len = src.len();
        if dst.len() < len || !lean_shape(len, unit, pool) {
            return Lean::No;
        }
        let slots = ((pool.len() - unit) / 8).max(1) as u64;
        let mut at = 0usize;
        while at < len {
            let ahead_unit = ahead.get(at..at + unit);
            if let Some(a) = ahead_unit {
                let mut l = 0;
                while l < unit {
                    // SAFETY: a prefetch hint of an address inside `ahead`.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().add(l).cast::<i8>()) };
                    l += 64;
                }
            } else if let Some(a) = ahead.get(at..) {
                let mut l = 0;
                while l < a.len() {
                    // SAFETY: a prefetch hint of an address inside `ahead`.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().add(l).cast::<i8>()) };
                    l += 64;
                }
            }
            let off = io_off + at as u64;
            let g = gen(off);
            // SAFETY: at + unit <= len (len is a multiple of unit), inside src and dst; the
            // stamp's 40 bytes are read unaligned from src and copied to dst.
            let (w0, w1, w2, w3, w4) = unsafe {
                let s = src.as_ptr().add(at);
                let d = dst.as_mut_ptr().add(at);
                let v = _mm256_loadu_si256(s.cast::<__m256i>());
                _mm256_storeu_si256(d.cast::<__m256i>(), v);
                let w4 = s.add(32).cast::<u64>().read_unaligned();
                d.add(32).cast::<u64>().write_unaligned(w4);
                (
                    u64::from_le(s.cast::<u64>().read_unaligned()),
                    u64::from_le(s.add(8).cast::<u64>().read_unaligned()),
                    u64::from_le(s.add(16).cast::<u64>().read_unaligned()),
                    u64::from_le(s.add(24).cast::<u64>().read_unaligned()),
                    u64::from_le(w4),
                )
            };
            // magic | crc, offset, run, worker | unit length | generation, sequence | zeros.
            let fields = w0 as u32 == MAGIC_WORD
                && w1 == off
                && w2 == run_id
                && (w3 >> 16) as u16 as usize == unit
                && (w3 >> 32) as u32 == g
                && g != 0
                && w4 >> 48 == 0;
            if !fields || (w0 >> 32) as u32 != crc4(w1, w2, w3, w4) {
                return Lean::No;
            }
            let key = self.key(run_id, off, w4 & SEQ_MASK, w3 as u16, g);
            let w = (((key >> 32) * slots) >> 32) as usize * 8;
            debug_assert_eq!(w, window(key, pool.len(), unit));
            let pay = at + STAMP_LEN..at + unit;
            let Some(win) = pool.get(w + STAMP_LEN..w + unit) else {
                return Lean::No;
            };
            if xor_diff_copy_avx2(&src[pay.clone()], &mut dst[pay], win, key) != 0 {
                return Lean::No;
            }
            at += unit;
        }
        Lean::Clean
    }
}

impl Stamper {
    /// Every unit of a write at `offset` straight into far memory (`dst`, 32-byte aligned), by
    /// non-temporal stores, for the lean shape without compression or duplicates; `false`
    /// (nothing written) when the write is not of that shape, which the caller then makes unit
    /// by unit. Byte for byte what [`Stamper::unique`] writes, the stamp composed in
    /// registers with the first 24 bytes of payload.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,sse4.2")]
    pub(super) fn fill_far_lean(
        &mut self,
        dst: &mut [u8],
        offset: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
    ) -> bool {
        use std::arch::x86_64::{
            __m256i, _mm256_loadu_si256, _mm256_set1_epi64x, _mm256_set_epi64x,
            _mm256_stream_si256, _mm256_xor_si256,
        };
        let (len, unit) = (dst.len(), self.unit);
        if self.dedupe_thresh != 0
            || self.compress_permille != 0
            || !lean_shape(len, unit, pool)
            || !(dst.as_ptr() as usize).is_multiple_of(32)
        {
            return false;
        }
        let seq = self.seq & SEQ_MASK;
        let slots = ((pool.len() - unit) / 8).max(1) as u64;
        // worker | unit length, the generation added per unit; sequence, no zero tail.
        let w3_base = u64::from(self.worker) | (unit as u64) << 16;
        let w4 = seq;
        let d = dst.as_mut_ptr();
        let mut at = 0usize;
        while at < len {
            let off = offset + at as u64;
            let g = gen(off);
            let key = self.keys.key(self.run_id, off, seq, self.worker, g);
            let w = (((key >> 32) * slots) >> 32) as usize * 8;
            debug_assert_eq!(w, window(key, pool.len(), unit));
            let Some(src) = pool.get(w..w + unit) else {
                // Unreachable for the lean shape (w + unit <= pool.len()), but a unit already
                // written stays written: finish this one and the rest the ordinary way.
                return self.rest_unique(dst, offset, at, pool, gen);
            };
            let w3 = w3_base | u64::from(g) << 32;
            let crc = crc4(off, self.run_id, w3, w4);
            let w0 = u64::from(MAGIC_WORD) | u64::from(crc) << 32;
            let k = _mm256_set1_epi64x(key as i64);
            let s = src.as_ptr();
            // SAFETY: every access is 32 bytes inside `src` (unit bytes) or the unit of `dst`
            // at `at` (32-byte aligned: dst is, and unit is a multiple of 64); loads are
            // unaligned loads.
            unsafe {
                let u = d.add(at);
                let head = _mm256_set_epi64x(w3 as i64, self.run_id as i64, off as i64, w0 as i64);
                _mm256_stream_si256(u.cast::<__m256i>(), head);
                // Bytes 32..64: the sequence word, then payload bytes 40..64 (the key's lanes
                // line up: 40 is a multiple of 8).
                let p = _mm256_xor_si256(_mm256_loadu_si256(s.add(32).cast::<__m256i>()), k);
                let second = std::arch::x86_64::_mm256_blend_epi32::<0b0000_0011>(
                    p,
                    _mm256_set_epi64x(0, 0, 0, w4 as i64),
                );
                _mm256_stream_si256(u.add(32).cast::<__m256i>(), second);
                let mut i = 64;
                while i < unit {
                    let v0 = _mm256_loadu_si256(s.add(i).cast::<__m256i>());
                    let v1 = _mm256_loadu_si256(s.add(i + 32).cast::<__m256i>());
                    _mm256_stream_si256(u.add(i).cast::<__m256i>(), _mm256_xor_si256(v0, k));
                    _mm256_stream_si256(u.add(i + 32).cast::<__m256i>(), _mm256_xor_si256(v1, k));
                    i += 64;
                }
            }
            at += unit;
        }
        true
    }

    /// The units of `dst` from byte `at` on, one by one (the general path).
    #[cold]
    fn rest_unique(
        &mut self,
        dst: &mut [u8],
        offset: u64,
        at: usize,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
    ) -> bool {
        let mut at = at;
        while at < dst.len() {
            let n = (dst.len() - at).min(self.unit);
            let uoff = offset + at as u64;
            let g = gen(uoff);
            self.unique(&mut dst[at..at + n], uoff, pool, g);
            at += n;
        }
        true
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::{avx2, fill_pool, sse42, DataSpec, POOL, UNIT};
    use super::*;

    /// The lean kernels against the general ones: a write is byte for byte the same, a clean
    /// read is clean for both, and any changed byte (stamp or payload) is "look closer".
    #[test]
    fn lean_kernels_agree_with_the_general_ones() {
        if !(avx2() && sse42()) {
            return;
        }
        let run = 0x5eed_f00d;
        let mut pool = vec![0u8; POOL + UNIT];
        fill_pool(&mut pool, run);
        for unit in [64usize, 512, 4096] {
            let off = 3 * 4096 * 7;
            let len = 4 * unit.max(4096) / unit * unit;
            let gen = |o: u64| ((o / 4096) % 60 + 1) as u32;
            let mut general = Stamper::new(&DataSpec::default(), run, 3).with_unit(unit);
            let mut want = vec![0u8; len];
            general.fill_gen(&mut want, off, &pool, gen);
            // A 32-byte aligned destination, as the lean writer asks.
            let mut backing = vec![0u8; len + 32];
            let skew = backing.as_ptr().align_offset(32);
            let got = &mut backing[skew..skew + len];
            let mut lean = Stamper::new(&DataSpec::default(), run, 3).with_unit(unit);
            lean.seq = 1;
            // SAFETY: the CPU has AVX2 and SSE4.2 (checked above).
            assert!(unsafe { lean.fill_far_lean(got, off, &pool, gen) });
            super::super::store_fence();
            assert!(
                got == want.as_slice(),
                "unit {unit}: the lean write differs"
            );
            let mut keys = KeyCache::default();
            let mut dst = vec![0u8; len];
            // SAFETY: as above.
            let clean = unsafe {
                keys.copy_expected_lean(&want, &mut dst, off, unit, run, &pool, gen, &[])
            };
            assert_eq!(clean, Lean::Clean, "unit {unit}");
            assert_eq!(dst, want);
            for i in (0..len).step_by(7).chain([0, 39, 40, unit - 1, len - 1]) {
                let mut bad = want.clone();
                bad[i] ^= 0x10;
                let mut dst = vec![0u8; len];
                // SAFETY: as above.
                let r = unsafe {
                    keys.copy_expected_lean(&bad, &mut dst, off, unit, run, &pool, gen, &[])
                };
                assert_eq!(r, Lean::No, "unit {unit}: byte {i} changed unnoticed");
                assert!(!keys.copy_expected(&bad, &mut dst, off, unit, run, &pool, gen, &[]));
                assert_eq!(dst, bad, "the general kernel leaves the whole read copied");
            }
            // Another generation, offset or run: not the expected unit.
            for (o, r, g) in [
                (off, run, 99u32),
                (off + len as u64, run, 0),
                (off, run + 1, 0),
            ] {
                let gen2 = |x: u64| if g == 0 { gen(x) } else { g };
                // SAFETY: as above.
                let r = unsafe {
                    keys.copy_expected_lean(&want, &mut dst, o, unit, r, &pool, gen2, &[])
                };
                assert_eq!(r, Lean::No);
            }
        }
    }
}
