//! The histogram log under MPI: every rank's intervals in rank 0's one log. The ranks other
//! than 0 spool their lines (watch.rs: tagged with their rank, timestamps from the Unix
//! epoch) and, after each run (each cell in `compare`), send them to rank 0 in chunks; rank 0
//! moves each line to its log's base time and appends it. Chunks keep the memory flat
//! however long the run: a spool lives in a file, and rank 0 holds one chunk at a time.
//!
//! The bytes come from another process: rank 0 appends only lines that parse as interval
//! lines (`sanbench_stats::hist_log::rebase`, fuzzed as `hist_log_rebase`).

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::MpiJob;
use crate::error::CliError;
use crate::watch::Watch;

/// Tag of a chunk of a rank's spooled log lines (an empty chunk ends a rank's).
pub const TAG_HLOG: i32 = 0x5b03;
/// Largest chunk sent.
const CHUNK: usize = 1 << 20;

/// Sends this rank's spooled lines to rank 0 (ranks other than 0) or appends every other
/// rank's to the log (rank 0), when `--hist-log` was given (on every rank alike).
/// `window_start`: this rank's, the log's base time on rank 0 unless its intervals set it.
/// `watch`: the context's (`Context::watch`).
pub fn exchange(
    job: &MpiJob,
    watch: Option<&Watch>,
    window_start: std::time::SystemTime,
) -> Result<(), CliError> {
    let Some(watch) = watch else {
        return Ok(());
    };
    if !watch.logs() {
        return Ok(());
    }
    let world = SimpleCommunicator::world();
    if job.rank != 0 {
        let bytes = watch.take_spool()?;
        let root = world.process_at_rank(0);
        for c in bytes.chunks(CHUNK) {
            root.send_with_tag(c, TAG_HLOG);
        }
        root.send_with_tag(&[] as &[u8], TAG_HLOG);
        return Ok(());
    }
    watch.set_base(window_start);
    let mut dropped = 0;
    for r in 1..job.size {
        let from = world.process_at_rank(r as i32);
        // A line cut by a chunk's end waits for the rest.
        let mut carry: Vec<u8> = Vec::new();
        loop {
            let (chunk, _) = from.receive_vec_with_tag::<u8>(TAG_HLOG);
            if chunk.is_empty() {
                break;
            }
            carry.extend_from_slice(&chunk);
            if let Some(end) = carry.iter().rposition(|&b| b == b'\n') {
                let rest = carry.split_off(end + 1);
                dropped += watch.append_spooled(&String::from_utf8_lossy(&carry));
                carry = rest;
            }
        }
        dropped += watch.append_spooled(&String::from_utf8_lossy(&carry));
    }
    if dropped > 0 {
        eprintln!("sanbench: --hist-log: {dropped} lines from other ranks did not parse and were left out");
    }
    watch.finish()
}
