//! The sg queue on the SCSI generic driver's own asynchronous interface: a command goes in
//! with `write(2)` of its `sg_io_hdr` and its outcome comes back with `read(2)`, on the
//! stream's thread, where `SG_IO` blocks a thread per command ([`super::pool`], which bsg
//! keeps: its driver has no such interface). Two system calls per command and a `poll` when
//! the queue waits, instead of a hand-off to and from a pool thread per I/O (the pool ran at
//! 0.26-0.5x the IOPS of the disk's block device on the same LUN).
//!
//! * The driver takes at most 16 commands per open file (`SG_MAX_QUEUE`; `write` fails with
//!   EDOM beyond), so a queue opens the device once per 16 slots. A job (one I/O, or the trims
//!   one UNMAP carries) has one command in the driver at a time: job `j` always goes to file
//!   `j / 16`, so no file is ever asked for a 17th.
//! * Memory the kernel touches, and when: without SG_FLAG_DIRECT_IO the driver copies a WRITE's
//!   data in during `write` and a READ's data and the sense bytes out during `read`, both on
//!   this thread inside this queue's calls. A command still in the driver when the queue is
//!   dropped is orphaned by the close, and the driver then copies nothing to user memory, so
//!   dropping never waits on a device that does not answer.
//! * A job of several commands (a trim or write-zeroes beyond one command's limit) sends the
//!   next when the last completes; the first failure ends it with that command's errno.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sanbench_io::engine::{Completion, Io, Op, Queue, QueueConfig};
use sanbench_io::params::CommandTally;
use sanbench_io::{Arena, EngineError};

use super::exec::{failure, jobs, plan, Cmd};
use super::io_hdr::{Outcome, SgIoHdr};
use super::Geometry;

/// Commands the sg driver keeps for one open file (`SG_MAX_QUEUE`).
const PER_FILE: usize = 16;

/// Sense bytes kept per command (the driver writes at most `mx_sb_len`).
const SENSE: usize = 64;

/// A job between its first command's `write` and its last command's `read`.
struct Job {
    ios: Vec<Io>,
    cmds: Vec<Cmd>,
    /// The command in the driver.
    at: usize,
}

pub(crate) struct AsyncQueue {
    files: Vec<File>,
    geo: Geometry,
    arena: Arc<Arena>,
    zero_block: Vec<u8>,
    /// By job slot; a slot's sense buffer is `sense[slot]`.
    jobs: Vec<Option<Job>>,
    free: Vec<usize>,
    /// Commands in the driver, per file.
    busy: Vec<usize>,
    /// One per job slot, written by the driver during `read`; never resized, so the pointers
    /// the headers carry stay valid.
    sense: Box<[[u8; SENSE]]>,
    done: Vec<Completion>,
    /// I/Os handed over and not yet completed into `done`.
    in_flight: usize,
    timeout: Duration,
    pollfds: Vec<libc::pollfd>,
    max_descriptors: usize,
    commands: u64,
    tally: CommandTally,
}

impl AsyncQueue {
    /// Opens `path` once per 16 slots of `cfg.depth`, non-blocking (a `read` with nothing
    /// completed returns EAGAIN).
    pub(crate) fn open(
        path: &Path,
        geo: Geometry,
        cfg: &QueueConfig,
    ) -> Result<AsyncQueue, EngineError> {
        let depth = (cfg.depth as usize).max(1);
        let n = depth.div_ceil(PER_FILE);
        let mut files = Vec::with_capacity(n);
        for _ in 0..n {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(|source| EngineError::Open {
                    path: path.display().to_string(),
                    source,
                })?;
            files.push(f);
        }
        Ok(AsyncQueue {
            files,
            geo,
            arena: cfg.arena.clone(),
            zero_block: vec![0u8; geo.block as usize],
            jobs: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
            busy: vec![0; n],
            sense: vec![[0u8; SENSE]; depth].into_boxed_slice(),
            done: Vec::with_capacity(depth),
            in_flight: 0,
            timeout: cfg.io_timeout,
            pollfds: Vec::with_capacity(n),
            max_descriptors: geo.disc.descriptors(depth),
            commands: 0,
            tally: CommandTally::default(),
        })
    }

    /// Sends command `job.at` of the job in `slot`; a job whose command cannot be sent ends
    /// with the errno.
    fn send(&mut self, slot: usize) {
        let Some(job) = self.jobs[slot].as_ref() else {
            return;
        };
        let cmd = &job.cmds[job.at];
        let (bytes, n) = cmd.cdb.encode();
        let sense = self.sense[slot].as_mut_ptr();
        // SAFETY: `sense` is this slot's buffer, which lives (unmoved: a boxed slice) as long
        // as the queue, and the driver writes it only inside a later `read` of this queue.
        let sense = unsafe { std::slice::from_raw_parts_mut(sense, SENSE) };
        let mut h = SgIoHdr::new(
            &bytes[..n],
            cmd.direction,
            (cmd.data, cmd.len),
            sense,
            self.geo.timeout_ms,
        );
        h.pack_id = slot as i32;
        let file = slot / PER_FILE;
        let fd = self.files[file].as_raw_fd();
        let size = std::mem::size_of::<SgIoHdr>();
        // SAFETY: the driver reads the header and the CDB (copied during the call) and a
        // WRITE's data (copied during the call too: no SG_FLAG_DIRECT_IO); the data pointer
        // names the I/O's arena region or the job's own buffer, both valid now.
        let r = loop {
            let r = unsafe { libc::write(fd, (&h as *const SgIoHdr).cast(), size) };
            if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break r;
            }
        };
        self.commands += 1;
        if r < 0 {
            let got = Err(std::io::Error::last_os_error());
            let (errno, why) =
                failure(&job.ios, cmd, "write", &got).unwrap_or((-libc::EIO, String::new()));
            self.finish(slot, errno, Some(why));
        } else {
            self.busy[file] += 1;
        }
    }

    /// Ends the job in `slot` with `errno`, its I/Os completed into `done`.
    fn finish(&mut self, slot: usize, errno: i32, why: Option<String>) {
        let Some(job) = self.jobs[slot].take() else {
            return;
        };
        self.free.push(slot);
        if job.ios.first().is_some_and(|io| io.op == Op::Trim) {
            self.tally.trims += job.ios.len() as u64;
            self.tally.trim_commands += (job.at + 1).min(job.cmds.len()) as u64;
        }
        if let Some(w) = why {
            self.tally.failed(w);
        }
        self.in_flight -= job.ios.len();
        self.done.extend(job.ios.iter().map(|io| Completion {
            tag: io.tag,
            result: errno,
        }));
    }

    /// Reads every outcome the driver holds on every busy file; returns how many.
    fn collect(&mut self) -> Result<usize, EngineError> {
        let mut got = 0;
        for file in 0..self.files.len() {
            while self.busy[file] > 0 {
                // SAFETY: an all-zero header is a valid buffer for the driver to fill.
                let mut h: SgIoHdr = unsafe { std::mem::zeroed() };
                let size = std::mem::size_of::<SgIoHdr>();
                // SAFETY: the driver writes one header into `h`, the outcome's sense bytes
                // into the slot's buffer and a READ's data into its arena region, which the
                // I/O still owns (it completes only below).
                let r = unsafe {
                    libc::read(
                        self.files[file].as_raw_fd(),
                        (&mut h as *mut SgIoHdr).cast(),
                        size,
                    )
                };
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    match e.kind() {
                        std::io::ErrorKind::WouldBlock => break,
                        std::io::ErrorKind::Interrupted => continue,
                        _ => return Err(EngineError::sys("sg: read of a completion", e)),
                    }
                }
                self.busy[file] -= 1;
                got += 1;
                self.outcome(&h);
            }
        }
        Ok(got)
    }

    /// Command outcome `h`: the job goes on to its next command, or ends.
    fn outcome(&mut self, h: &SgIoHdr) {
        let slot = h.pack_id as usize;
        let Some(job) = self.jobs.get(slot).and_then(Option::as_ref) else {
            return;
        };
        let o = Outcome::read(h, &self.sense[slot]);
        match failure(&job.ios, &job.cmds[job.at], "read", &Ok(o)) {
            Some((errno, why)) => self.finish(slot, errno, Some(why)),
            None if job.at + 1 < job.cmds.len() => {
                if let Some(j) = self.jobs[slot].as_mut() {
                    j.at += 1;
                }
                self.send(slot);
            }
            None => self.finish(slot, 0, None),
        }
    }

    /// Waits until a busy file has an outcome, or `limit` passes. Returns false at the limit.
    fn wait(&mut self, limit: Duration) -> Result<bool, EngineError> {
        self.pollfds.clear();
        for (f, file) in self.files.iter().enumerate() {
            if self.busy[f] > 0 {
                self.pollfds.push(libc::pollfd {
                    fd: file.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
        if self.pollfds.is_empty() {
            return Ok(true);
        }
        let ms = limit.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: a live vector of initialised pollfd entries on files this queue holds open.
        let n = unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                ms,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(true);
            }
            return Err(EngineError::sys("sg: poll", e));
        }
        Ok(n > 0)
    }
}

impl Queue for AsyncQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        for job in jobs(&self.geo, self.max_descriptors, ios) {
            let slot = self
                .free
                .pop()
                .ok_or_else(|| EngineError::Invalid("sg: more I/Os than the queue depth".into()))?;
            self.in_flight += job.len();
            match plan(&self.geo, &self.arena, &self.zero_block, &job) {
                Err(d) => {
                    self.jobs[slot] = Some(Job {
                        ios: job,
                        cmds: Vec::new(),
                        at: 0,
                    });
                    self.finish(slot, d.errno, d.why);
                }
                // A trim of no whole granule: nothing to send, done.
                Ok(cmds) if cmds.is_empty() => {
                    self.jobs[slot] = Some(Job {
                        ios: job,
                        cmds,
                        at: 0,
                    });
                    self.finish(slot, 0, None);
                }
                Ok(cmds) => {
                    self.jobs[slot] = Some(Job {
                        ios: job,
                        cmds,
                        at: 0,
                    });
                    self.send(slot);
                }
            }
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let want = min.min(self.in_flight + self.done.len());
        let mut last = Instant::now();
        loop {
            if self.collect()? > 0 {
                last = Instant::now();
            }
            if self.done.len() >= want {
                out.append(&mut self.done);
                return Ok(());
            }
            let left = self.timeout.saturating_sub(last.elapsed());
            if left.is_zero() || !self.wait(left)? {
                if self.collect()? > 0 {
                    continue;
                }
                return Err(EngineError::Timeout {
                    peer: format!(
                        "the sg driver ({} commands in it)",
                        self.busy.iter().sum::<usize>()
                    ),
                    secs: self.timeout.as_secs_f64(),
                });
            }
        }
    }

    fn reap_until(
        &mut self,
        deadline: Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        loop {
            self.collect()?;
            let now = Instant::now();
            if !self.done.is_empty() || now >= deadline || self.in_flight == 0 {
                out.append(&mut self.done);
                return Ok(());
            }
            self.wait(deadline - now)?;
        }
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert("threads".into(), 0.into());
        m.insert("queue".into(), "sg write/read".into());
        m.insert("sg_files".into(), self.files.len().into());
        m.insert("commands".into(), self.commands.into());
        self.tally.record(&mut m);
        m
    }
}
