//! Where sanbench's threads run: `--cpus LIST` on `run`, `compare` and `serve` (fio's
//! `cpus_allowed`), and the demo's placement of its client and its servers on different cores.
//!
//! A CPU list is spelled as the kernel and taskset spell it: `0`, `0,2`, `0-3,6`. Pinning sets
//! the affinity of every thread the process has (sched_setaffinity per task); threads made
//! later inherit their creator's, so the stream threads, the monitor and the in-process
//! servers follow. What was chosen goes into every result's manifest (`placement`).

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet, Pid};
use std::fmt;
use std::str::FromStr;

use crate::error::{usage, CliError};

/// How the streams use the CPUs of `--cpus` (fio's `cpus_allowed_policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpusPolicy {
    /// Every thread may run on any of them (the scheduler places the streams).
    #[default]
    Shared,
    /// Each stream on one CPU of its own, in turn (stream k on the k-th CPU, round-robin),
    /// pinned before it opens its queue: what the queue starts (io_uring's io-wq workers)
    /// stays with it.
    Split,
}

impl FromStr for CpusPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<CpusPolicy, String> {
        match s {
            "shared" => Ok(CpusPolicy::Shared),
            "split" => Ok(CpusPolicy::Split),
            _ => Err(format!("'{s}' is not a CPU policy (shared or split)")),
        }
    }
}

impl CpusPolicy {
    /// Every policy's name, as `--cpus-policy` takes it.
    pub const NAMES: [&'static str; 2] = ["shared", "split"];

    pub fn name(self) -> &'static str {
        match self {
            CpusPolicy::Shared => "shared",
            CpusPolicy::Split => "split",
        }
    }
}

/// The CPUs a split policy deals out: `--cpus`, or every CPU the process may use (fio splits
/// only a set it was given, so an exported job names this one).
pub fn split_set(list: Option<&CpuList>) -> CpuList {
    list.cloned().unwrap_or_else(|| CpuList(allowed()))
}

/// The CPUs each stream is pinned to, in turn (`RunPlan::stream_cpus`): the split set under
/// `split`, none under `shared`.
pub fn stream_cpus(list: Option<&CpuList>, policy: CpusPolicy) -> Vec<usize> {
    match policy {
        CpusPolicy::Shared => Vec::new(),
        CpusPolicy::Split => split_set(list).0,
    }
}

/// The CPUs of one MPI rank's streams under a split policy: the ranks on one host deal the set
/// out in turn (local rank r, s streams each: its stream k gets entry (r x s + k) mod n), so
/// rank 1's first stream does not land on rank 0's. Shared placement: unchanged (none).
pub fn for_rank(cpus: Vec<usize>, local_rank: u64, streams: usize) -> Vec<usize> {
    if cpus.is_empty() {
        return cpus;
    }
    let by = (local_rank as usize).wrapping_mul(streams) % cpus.len();
    let mut v = cpus;
    v.rotate_left(by);
    v
}

/// A set of CPU numbers, ascending, each once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl FromStr for CpuList {
    type Err = String;
    fn from_str(s: &str) -> Result<CpuList, String> {
        let bad = |why: String| format!("CPU list '{s}': {why} (e.g. 0, 0,2 or 0-3)");
        let mut v = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad("an empty entry".into()));
            }
            let num = |x: &str| -> Result<usize, String> {
                let n: usize = x
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("'{x}' is not a CPU number")))?;
                if n >= CpuSet::MAX_CPU {
                    return Err(bad(format!(
                        "CPU {n} is beyond the {} the kernel interface holds",
                        CpuSet::MAX_CPU
                    )));
                }
                Ok(n)
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(bad(format!("the range {a}-{b} runs backwards")));
                    }
                    v.extend(a..=b);
                }
                None => v.push(num(part)?),
            }
        }
        v.sort_unstable();
        v.dedup();
        Ok(CpuList(v))
    }
}

impl fmt::Display for CpuList {
    /// Ranges folded: "0-3,6".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
            i += 1;
        }
        f.write_str(&parts.join(","))
    }
}

impl CpuList {
    /// "CPU 0", "CPUs 0-3".
    pub fn phrase(&self) -> String {
        format!("CPU{} {self}", if self.0.len() == 1 { "" } else { "s" })
    }
}

/// The CPUs this process may run on now.
pub fn allowed() -> Vec<usize> {
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

fn set_of(list: &CpuList) -> CpuSet {
    let mut set = CpuSet::new();
    for &c in &list.0 {
        set.set(c);
    }
    set
}

/// Refuses (exit 2, one line) a list naming a CPU this process may not use.
pub fn check(list: &CpuList, flag: &str) -> Result<(), CliError> {
    let ok = CpuList(allowed());
    if let Some(c) = list.0.iter().find(|c| !ok.0.contains(c)) {
        return Err(usage(format!(
            "{flag} {list}: CPU {c} is not available to sanbench here (it may use {ok})"
        )));
    }
    if list.0.is_empty() {
        return Err(usage(format!("{flag}: the list names no CPU")));
    }
    Ok(())
}

/// Pins every thread of this process to `list` (and so every thread made later).
pub fn pin_process(list: &CpuList, flag: &str) -> Result<(), CliError> {
    check(list, flag)?;
    let set = set_of(list);
    let tids: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for tid in tids {
        // A thread that ended since the listing is no error.
        let _ = sched_setaffinity(Pid::from_raw(tid), &set);
    }
    sched_setaffinity(None, &set)
        .map_err(|e| usage(format!("{flag} {list}: cannot pin to them: {e}")))?;
    Ok(())
}

/// Pins every thread another process has now to `list` (the lab's targets).
pub fn pin_pid(pid: u32, list: &CpuList) -> std::io::Result<()> {
    let set = set_of(list);
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(p) = Pid::from_raw(tid) {
            // A thread that ended since the listing is no error.
            let _ = sched_setaffinity(Some(p), &set);
        }
    }
    Ok(())
}

/// Pins the calling thread (and the threads it makes) to `list`.
pub fn pin_thread(list: &CpuList) -> std::io::Result<()> {
    sched_setaffinity(None, &set_of(list)).map_err(std::io::Error::from)
}

/// The CPUs of a plan's streams (`RunPlan::stream_cpus`) under `--cpus`/`--cpus-policy`.
/// `rank`: this process's rank in an MPI job, whose ranks on one host deal the set out in
/// turn ([`for_rank`], `per_rank` streams each).
pub fn plan_streams(
    list: Option<&CpuList>,
    policy: CpusPolicy,
    rank: Option<u32>,
    per_rank: usize,
) -> Vec<usize> {
    let v = stream_cpus(list, policy);
    match rank {
        Some(rank) => {
            let env = |k: &str| std::env::var(k).ok();
            let local = crate::launcher::local_rank(&env).unwrap_or(rank as u64);
            for_rank(v, local, per_rank)
        }
        None => v,
    }
}

/// `--cpus LIST --cpus-policy P` of run, compare and crosscheck: pins the process to the list and
/// returns both, for the manifest (`Context::apply_placement` records them; a split policy
/// without a list names every CPU the process may use). `None`: nothing was chosen.
pub fn apply(
    cpus: Option<&CpuList>,
    policy: CpusPolicy,
) -> Result<Option<serde_json::Value>, CliError> {
    if let Some(list) = cpus {
        pin_process(list, "--cpus")?;
    }
    if cpus.is_some() || policy == CpusPolicy::Split {
        let by = if cpus.is_some() {
            "--cpus"
        } else {
            "--cpus-policy"
        };
        return Ok(Some(
            serde_json::json!({ "cpus": split_set(cpus).to_string(), "by": by,
            "policy": policy.name() }),
        ));
    }
    Ok(None)
}

/// The demo's `--placement auto|off|CLIENT:SERVERS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    Auto,
    Off,
    Split(CpuList, CpuList),
}

impl FromStr for Placement {
    type Err = String;
    fn from_str(s: &str) -> Result<Placement, String> {
        match s {
            "auto" => Ok(Placement::Auto),
            "off" => Ok(Placement::Off),
            _ => {
                let (c, t) = s.split_once(':').ok_or_else(|| {
                    format!("placement '{s}': use auto, off or CLIENT:SERVERS (e.g. 0:1)")
                })?;
                Ok(Placement::Split(c.parse()?, t.parse()?))
            }
        }
    }
}

/// What the demo runs where: the client's CPUs and the servers', or `None` to share all.
/// `auto` splits the CPUs this process may use in two halves (the client the first, the
/// servers the rest) when there are at least two; one CPU is shared by necessity.
pub fn demo_split(p: &Placement, cpus: &[usize]) -> Option<(CpuList, CpuList)> {
    match p {
        Placement::Off => None,
        Placement::Split(c, s) => Some((c.clone(), s.clone())),
        Placement::Auto if cpus.len() >= 2 => {
            let half = cpus.len() / 2;
            Some((
                CpuList(cpus[..half].to_vec()),
                CpuList(cpus[half..].to_vec()),
            ))
        }
        Placement::Auto => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print_folded() {
        let l: CpuList = "3,0-2,2".parse().unwrap();
        assert_eq!(l.0, vec![0, 1, 2, 3]);
        assert_eq!(l.to_string(), "0-3");
        assert_eq!("0,2,4-5".parse::<CpuList>().unwrap().to_string(), "0,2,4-5");
        assert_eq!("1".parse::<CpuList>().unwrap().phrase(), "CPU 1");
        for bad in ["", "a", "1,", "3-1", "-1", "0-x", "99999"] {
            let e = bad.parse::<CpuList>().unwrap_err();
            assert!(e.contains("e.g. 0, 0,2 or 0-3"), "{bad}: {e}");
        }
    }

    #[test]
    fn ranks_on_one_host_deal_the_split_set_in_turn() {
        // Four CPUs, two streams per rank: rank 1 starts at the third.
        assert_eq!(for_rank(vec![0, 1, 2, 3], 0, 2), vec![0, 1, 2, 3]);
        assert_eq!(for_rank(vec![0, 1, 2, 3], 1, 2), vec![2, 3, 0, 1]);
        // More streams than CPUs: the turn wraps.
        assert_eq!(for_rank(vec![4, 6], 1, 3), vec![6, 4]);
        assert_eq!(for_rank(vec![], 5, 2), Vec::<usize>::new());
        // A monitor-only rank (no streams) and a rank bound to one CPU: as they are.
        assert_eq!(for_rank(vec![0, 1], 3, 0), vec![0, 1]);
        assert_eq!(for_rank(vec![1], 1, 1), vec![1]);
    }

    #[test]
    fn the_demo_splits_the_cpus_it_has() {
        let auto = Placement::Auto;
        assert_eq!(
            demo_split(&auto, &[0, 1]),
            Some((CpuList(vec![0]), CpuList(vec![1])))
        );
        assert_eq!(
            demo_split(&auto, &[0, 1, 2, 3, 4]),
            Some((CpuList(vec![0, 1]), CpuList(vec![2, 3, 4])))
        );
        assert_eq!(demo_split(&auto, &[0]), None);
        assert_eq!(demo_split(&Placement::Off, &[0, 1]), None);
        let p: Placement = "1:0".parse().unwrap();
        assert_eq!(
            demo_split(&p, &[0, 1]),
            Some((CpuList(vec![1]), CpuList(vec![0])))
        );
        assert!("0".parse::<Placement>().is_err());
        assert!("x:1".parse::<Placement>().is_err());
    }

    #[test]
    fn a_cpu_this_process_may_not_use_is_refused() {
        let far = CpuList(vec![CpuSet::MAX_CPU - 1]);
        let e = check(&far, "--cpus").unwrap_err();
        assert!(e.message().contains("not available"), "{}", e.message());
        assert!(!allowed().is_empty());
    }
}
