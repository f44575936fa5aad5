//! What an MPI run needs to know about its ranks, kept pure (no MPI): which ranks only
//! measure their host (`--monitor-only-ranks 0,4-7`) and the per-rank expansion of target
//! URIs (`{rank}`, `{host}`). Built in every configuration, so it is tested without MPI.

use std::collections::BTreeSet;

/// Parses a rank list: numbers and inclusive ranges, comma-separated ("0", "1,3", "0,4-7").
/// Every rank must be below `size`.
// Used by the MPI build only (a build without it refuses the flag before parsing it).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn parse_rank_list(text: &str, size: u32) -> Result<BTreeSet<u32>, String> {
    let bad = |why: &str| format!("--monitor-only-ranks '{text}': {why}");
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad("an empty item"));
        }
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| bad(&format!("'{s}' is not a rank number")))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(bad(&format!("range {lo}-{hi} runs backwards")));
        }
        if hi >= size {
            return Err(bad(&format!("rank {hi} is not in a job of {size} ranks")));
        }
        out.extend(lo..=hi);
    }
    if out.len() as u32 == size {
        return Err(bad("every rank would only monitor: nothing would run I/O"));
    }
    Ok(out)
}

/// A target URI for one rank: `{rank}` and `{host}` replaced.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn expand(uri: &str, rank: u32, host: &str) -> String {
    uri.replace("{rank}", &rank.to_string())
        .replace("{host}", host)
}

/// Whether the targets differ per rank: templated (`{rank}`, `{host}`) or living inside each
/// process (`mem:`, `null:`). Then each rank preconditions its own; otherwise rank 0 alone
/// preconditions the targets every rank shares.
pub fn per_rank(uris: &[String]) -> bool {
    uris.iter().any(|u| {
        u.contains("{rank}") || u.contains("{host}") || u.starts_with("mem:") || u == "null:"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists() {
        assert_eq!(
            parse_rank_list("0,2-3", 5).unwrap(),
            [0, 2, 3].into_iter().collect()
        );
        assert!(parse_rank_list("5", 5)
            .unwrap_err()
            .contains("not in a job of 5"));
        assert!(parse_rank_list("3-1", 5).unwrap_err().contains("backwards"));
        assert!(parse_rank_list("x", 5)
            .unwrap_err()
            .contains("not a rank number"));
        assert!(parse_rank_list("0,", 5).unwrap_err().contains("empty"));
        assert!(parse_rank_list("0-1", 2)
            .unwrap_err()
            .contains("nothing would run"));
    }

    #[test]
    fn expansion() {
        assert_eq!(expand("file:/tmp/t{rank}.img", 2, "n1"), "file:/tmp/t2.img");
        assert_eq!(
            expand("nbd://{host}:10809/r{rank}", 0, "n1"),
            "nbd://n1:10809/r0"
        );
        assert!(per_rank(&["mem:1m".into(), "/x/{host}".into()]));
        assert!(per_rank(&["mem:1m".into()]));
        assert!(!per_rank(&["nbd://127.0.0.1:10809".into()]));
    }
}
