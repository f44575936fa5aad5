//! Transfer-size distributions from fio's `bs`, `bsrange` and `bssplit`, and the weighted
//! sanbench segments that issue the same sizes in the same shares.
//!
//! fio draws a direction first and then a size from that direction's distribution; a sanbench
//! segment draws a segment first and then a direction with the segment's read %. When every
//! segment has the same read % the two agree whenever the segments are the product of the read
//! and the write distributions (or one list of sizes when both directions use the same).

use super::value;

/// Sizes and their relative weights, sizes ascending and distinct.
pub type Dist = Vec<(u64, u64)>;

/// Most sizes one direction may have (a `bsrange` of many multiples of its minimum).
pub const MAX_SIZES: usize = 256;
/// Most segments a job becomes (read sizes x write sizes).
pub const MAX_SEGMENTS: usize = 1024;

/// `bsrange=MIN-MAX`: fio draws `MIN + U[0, MAX)` and rounds it down to a multiple of MIN
/// (io.c `get_next_buflen`), capped at MAX: each multiple of MIN up to MAX equally often when
/// MAX is a multiple of MIN.
pub fn range(s: &str, kb: u64) -> Result<Dist, String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or_else(|| format!("'{s}' is not MIN-MAX"))?;
    let (lo, hi) = (value::size(lo, kb)?, value::size(hi, kb)?);
    if lo == 0 || hi < lo {
        return Err(format!("'{s}': the range is empty"));
    }
    if hi % lo != 0 {
        return Err(format!(
            "'{s}': the maximum is not a multiple of the minimum (fio then draws uneven shares)"
        ));
    }
    let n = hi / lo;
    if n as usize > MAX_SIZES {
        return Err(format!(
            "'{s}' spans {n} sizes; sanbench takes at most {MAX_SIZES} (bssplit names fewer)"
        ));
    }
    Ok((1..=n).map(|k| (k * lo, 1)).collect())
}

/// `bssplit=BS/PCT:BS/PCT:...` for one direction, as fio's `bssplit_ddir` reads it: a missing
/// or zero percentage shares what the others leave; what they still leave goes to the entry
/// with the largest share (fio sorts by share and the draw falls through to the last); sizes
/// are rounded down to a multiple of the smallest.
pub fn split(s: &str, kb: u64) -> Result<Dist, String> {
    let mut entries: Vec<(u64, Option<u64>)> = Vec::new();
    for e in s.split(':') {
        if e.is_empty() {
            break;
        }
        let (bs, pct) = match e.split_once('/') {
            Some((b, p)) => {
                let p: u64 = p
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{e}': '{p}' is not a whole percentage"))?;
                (b, (p > 0).then_some(p.min(100)))
            }
            None => (e, None),
        };
        entries.push((value::size(bs, kb)?, pct));
        if entries.len() > 64 {
            return Err("more than 64 entries (fio's limit)".into());
        }
    }
    if entries.is_empty() {
        return Err(format!("'{s}' names no size"));
    }
    let given: u64 = entries.iter().filter_map(|e| e.1).sum();
    let missing = entries.iter().filter(|e| e.1.is_none()).count() as u64;
    if given > 100 {
        return Err(format!(
            "'{s}': the percentages add up to {given}, more than 100"
        ));
    }
    let share = (100 - given).checked_div(missing).unwrap_or(0);
    let mut d: Vec<(u64, u64)> = entries
        .iter()
        .map(|&(b, p)| (b, p.unwrap_or(share)))
        .collect();
    let left = 100 - d.iter().map(|e| e.1).sum::<u64>();
    if let Some(top) = d.iter_mut().max_by_key(|e| e.1) {
        top.1 += left;
    }
    let min = d.iter().map(|e| e.0).min().unwrap_or(1);
    if min == 0 {
        return Err(format!("'{s}': a size of 0"));
    }
    for e in d.iter_mut() {
        e.0 -= e.0 % min;
    }
    Ok(normalize(d))
}

/// One size.
pub fn single(bs: u64) -> Dist {
    vec![(bs, 1)]
}

/// Ascending distinct sizes, zero weights gone, weights divided by their common divisor.
pub fn normalize(mut d: Vec<(u64, u64)>) -> Dist {
    d.retain(|e| e.1 > 0);
    d.sort_by_key(|e| e.0);
    let mut out: Dist = Vec::with_capacity(d.len());
    for (b, w) in d {
        match out.last_mut() {
            Some(l) if l.0 == b => l.1 += w,
            _ => out.push((b, w)),
        }
    }
    let g = out.iter().fold(0, |g, e| gcd(g, e.1)).max(1);
    for e in out.iter_mut() {
        e.1 /= g;
    }
    out
}

pub fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Segments as (read size, write size, weight): one per size when only one direction is used
/// or both use the same sizes, else the product of the two distributions.
pub fn segments(read: &Dist, write: &Dist, reads: bool, writes: bool) -> Vec<(u64, u64, u64)> {
    let one = |d: &Dist| d.iter().map(|&(b, w)| (b, b, w)).collect::<Vec<_>>();
    let mut v = if !writes {
        one(read)
    } else if !reads || read == write {
        if reads {
            one(read)
        } else {
            one(write)
        }
    } else {
        let mut v = Vec::with_capacity(read.len() * write.len());
        for &(r, wr) in read {
            for &(w, ww) in write {
                v.push((r, w, wr * ww));
            }
        }
        v
    };
    let g = v.iter().fold(0, |g, e| gcd(g, e.2)).max(1);
    for e in v.iter_mut() {
        e.2 /= g;
    }
    v
}

/// The read and the write distributions of segments (the inverse of [`segments`] when they
/// are such a product): each direction's sizes in the shares of that direction's I/Os, from
/// (read size, write size, weight, read %) with the read % in hundredths.
pub fn marginals(segs: &[(u64, u64, u64, u64)]) -> (Dist, Dist) {
    let r = normalize(segs.iter().map(|s| (s.0, s.2 * s.3)).collect());
    let w = normalize(segs.iter().map(|s| (s.1, s.2 * (10_000 - s.3))).collect());
    (r, w)
}

/// A distribution as fio's bssplit writes it, in whole percentages; `None` when the weights do
/// not come to whole percentages.
pub fn fmt_split(d: &Dist) -> Option<String> {
    let total: u64 = d.iter().map(|e| e.1).sum();
    if total == 0 || 100 % total != 0 {
        // Not exact: the caller rounds (and says so).
        return None;
    }
    Some(
        d.iter()
            .map(|&(b, w)| format!("{}/{}", value::fmt_size(b), w * 100 / total))
            .collect::<Vec<_>>()
            .join(":"),
    )
}

/// Whole percentages that add up to 100, closest to the weights (largest remainders).
pub fn rounded_split(d: &Dist) -> String {
    let total: u64 = d.iter().map(|e| e.1).sum::<u64>().max(1);
    let mut p: Vec<(usize, u64, u64)> = d
        .iter()
        .enumerate()
        .map(|(i, e)| (i, e.1 * 100 / total, e.1 * 100 % total))
        .collect();
    let left = 100 - p.iter().map(|e| e.1).sum::<u64>();
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(p[i].2));
    for &i in order.iter().take(left as usize) {
        p[i].1 += 1;
    }
    p.iter()
        .filter(|e| e.1 > 0)
        .map(|e| format!("{}/{}", value::fmt_size(d[e.0].0), e.1))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bsrange_is_uniform_over_multiples_of_its_minimum() {
        assert_eq!(
            range("4k-16k", 1024).unwrap(),
            vec![(4096, 1), (8192, 1), (12288, 1), (16384, 1)]
        );
        assert!(range("4k-10k", 1024).unwrap_err().contains("multiple"));
        assert!(range("512-1m", 1024).unwrap_err().contains("2048 sizes"));
    }

    #[test]
    fn bssplit_shares_as_fio_reads_them() {
        // fio's iometer-file-access-server example.
        let d = split("512/10:1k/5:2k/5:4k/60:8k/2:16k/4:32k/4:64k/10", 1024).unwrap();
        assert_eq!(d.iter().map(|e| e.1).sum::<u64>(), 100);
        assert_eq!(d[3], (4096, 60));
        // Missing shares split what is left; the rest goes to the largest.
        assert_eq!(
            split("4k/50:8k:16k", 1024).unwrap(),
            vec![(4096, 2), (8192, 1), (16384, 1)]
        );
        assert_eq!(
            split("4k/30:8k/60", 1024).unwrap(),
            normalize(vec![(4096, 30), (8192, 70)])
        );
        assert_eq!(split("4k", 1024).unwrap(), vec![(4096, 1)]);
        assert!(split("4k/60:8k/50", 1024).unwrap_err().contains("110"));
        assert!(split("4k/x", 1024).is_err());
    }

    #[test]
    fn segments_and_back() {
        let r = split("4k/50:64k/50", 1024).unwrap();
        let w = single(8192);
        let s = segments(&r, &w, true, true);
        assert_eq!(s, vec![(4096, 8192, 1), (65536, 8192, 1)]);
        let with_pct: Vec<_> = s.iter().map(|e| (e.0, e.1, e.2, 5000)).collect();
        assert_eq!(marginals(&with_pct), (r.clone(), w));
        assert_eq!(segments(&r, &r, true, true).len(), 2);
        assert_eq!(fmt_split(&r).unwrap(), "4k/50:64k/50");
        assert_eq!(fmt_split(&normalize(vec![(512, 1), (4096, 2)])), None);
        assert_eq!(
            rounded_split(&normalize(vec![(512, 1), (4096, 2)])),
            "512/33:4k/67"
        );
    }
}
