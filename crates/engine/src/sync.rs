//! The thread engine: blocking `pread`/`pwrite`, for kernels without io_uring and for comparing
//! against it (`--engine sync`).
//!
//! At queue depth 1 the I/O runs inline in `submit` (nothing between the generator and the
//! system call, the lowest-latency path). Deeper queues get one thread per slot, so that
//! `depth` I/Os really are in flight at once, as with fio's `psync` and `numjobs`.
//!
//! Dropping the queue never hangs: after a stream failed or the target died, a thread may sit
//! in `pread`/`pwrite` on a device that will not answer. Work not yet started is discarded, the
//! threads get [`EXIT_GRACE`] (at most the I/O timeout) to finish, and any still blocked are
//! detached with a note on stderr; they hold their own `Arc`s of the file and the arena, so
//! the memory they may still write into stays valid.

use crate::poison;
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::arena::Arena;
use crate::engine::{Completion, Io, Op, Queue, QueueConfig};
use crate::error::EngineError;

/// The sync engine's I/O threads are named `sb-sync{worker}-{i}`: the bottleneck attribution
/// (crates/cli/src/bottleneck.rs) counts them as the initiator's.
pub const SYNC_THREAD_PREFIX: &str = "sb-sync";

/// How long a dropped queue waits for its threads before detaching those still blocked.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Threads detached by dropped queues in this process (for the note and for tests).
static DETACHED: AtomicUsize = AtomicUsize::new(0);

/// How many sync engine threads were left blocked in a system call by dropped queues.
pub fn detached_threads() -> usize {
    DETACHED.load(Ordering::Relaxed)
}

/// One I/O, done by the calling thread (a function value so tests can stand in a device
/// that never answers).
type DoIo = fn(&File, &Arena, &Io) -> i32;

fn do_io(file: &File, arena: &Arena, io: &Io) -> i32 {
    let len = io.len as usize;
    let r = match io.op {
        Op::Read => {
            // SAFETY: the scheduler gives this I/O exclusive use of its arena region.
            let buf = unsafe { arena.slice_mut(io.buf, len) };
            file.read_exact_at(buf, io.offset)
        }
        Op::Write => {
            // SAFETY: write sources are only read.
            let buf = unsafe { arena.slice(io.buf, len) };
            if io.fua {
                write_dsync(file, buf, io.offset)
            } else {
                file.write_all_at(buf, io.offset)
            }
        }
        Op::Flush => file.sync_data(),
        Op::Trim | Op::WriteZeroes => return crate::discard::fallocate(file, io),
    };
    match r {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => -libc::ENXIO,
        Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// A FUA write: `pwritev2` with RWF_DSYNC until every byte is written.
fn write_dsync(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    while !buf.is_empty() {
        let iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: one iovec over a live buffer; the fd is open for writing.
        let n = unsafe {
            libc::pwritev2(
                file.as_raw_fd(),
                &iov,
                1,
                offset as libc::off_t,
                libc::RWF_DSYNC,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n as usize..];
        offset += n as u64;
    }
    Ok(())
}

struct Chan {
    todo: Mutex<(VecDeque<Io>, bool)>,
    todo_cv: Condvar,
    done: Mutex<Vec<Completion>>,
    done_cv: Condvar,
    /// Threads that have returned; signalled on `exited_cv`.
    exited: Mutex<usize>,
    exited_cv: Condvar,
}

pub struct SyncQueue {
    file: Arc<File>,
    arena: Arc<Arena>,
    inline_done: Vec<Completion>,
    chan: Option<Arc<Chan>>,
    threads: Vec<JoinHandle<()>>,
    timeout: Duration,
}

/// The same on a block device: a trim is a discard (BLKDISCARD), not a punched hole.
fn do_io_block(file: &File, arena: &Arena, io: &Io) -> i32 {
    match io.op {
        Op::Trim => crate::discard::blkdiscard(file, io),
        _ => do_io(file, arena, io),
    }
}

impl SyncQueue {
    pub fn open(file: Arc<File>, cfg: &QueueConfig) -> SyncQueue {
        SyncQueue::open_with(file, cfg, do_io)
    }

    /// A queue on a block device (trims are discards).
    pub fn open_block(file: Arc<File>, cfg: &QueueConfig) -> SyncQueue {
        SyncQueue::open_with(file, cfg, do_io_block)
    }

    fn open_with(file: Arc<File>, cfg: &QueueConfig, io_fn: DoIo) -> SyncQueue {
        let mut q = SyncQueue {
            file,
            arena: cfg.arena.clone(),
            inline_done: Vec::with_capacity(1),
            chan: None,
            threads: Vec::new(),
            timeout: cfg.io_timeout,
        };
        if cfg.depth > 1 {
            let chan = Arc::new(Chan {
                todo: Mutex::new((VecDeque::with_capacity(cfg.depth as usize), false)),
                todo_cv: Condvar::new(),
                done: Mutex::new(Vec::with_capacity(cfg.depth as usize)),
                done_cv: Condvar::new(),
                exited: Mutex::new(0),
                exited_cv: Condvar::new(),
            });
            for i in 0..cfg.depth {
                let (c, f, a) = (chan.clone(), q.file.clone(), q.arena.clone());
                let h = std::thread::Builder::new()
                    .name(format!("{SYNC_THREAD_PREFIX}{}-{i}", cfg.worker))
                    .spawn(move || {
                        worker(&c, &f, &a, io_fn);
                        *poison::lock(&c.exited) += 1;
                        c.exited_cv.notify_all();
                    })
                    .expect("spawn sync engine thread");
                q.threads.push(h);
            }
            q.chan = Some(chan);
        }
        q
    }
}

fn worker(c: &Chan, file: &File, arena: &Arena, io_fn: DoIo) {
    loop {
        let io = {
            let mut g = poison::lock(&c.todo);
            loop {
                if let Some(io) = g.0.pop_front() {
                    break io;
                }
                if g.1 {
                    return;
                }
                g = poison::wait(&c.todo_cv, g);
            }
        };
        let result = io_fn(file, arena, &io);
        poison::lock(&c.done).push(Completion {
            tag: io.tag,
            result,
        });
        c.done_cv.notify_one();
    }
}

impl Queue for SyncQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        match &self.chan {
            None => {
                for io in ios {
                    let result = do_io(&self.file, &self.arena, io);
                    self.inline_done.push(Completion {
                        tag: io.tag,
                        result,
                    });
                }
            }
            Some(c) => {
                let mut g = poison::lock(&c.todo);
                g.0.extend(ios.iter().copied());
                drop(g);
                if ios.len() == 1 {
                    c.todo_cv.notify_one();
                } else {
                    c.todo_cv.notify_all();
                }
            }
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let Some(c) = &self.chan else {
            out.append(&mut self.inline_done);
            return Ok(());
        };
        let deadline = Instant::now() + self.timeout;
        let mut g = poison::lock(&c.done);
        while g.len() < min {
            let now = Instant::now();
            if now >= deadline {
                return Err(EngineError::Timeout {
                    peer: "sync engine".into(),
                    secs: self.timeout.as_secs_f64(),
                });
            }
            g = poison::wait_timeout(&c.done_cv, g, deadline - now);
        }
        out.append(&mut g);
        Ok(())
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert("threads".into(), self.threads.len().into());
        m
    }
}

impl Drop for SyncQueue {
    fn drop(&mut self) {
        let Some(c) = &self.chan else {
            return;
        };
        {
            let mut g = poison::lock(&c.todo);
            // Nothing not yet started is started now: the run is over.
            g.0.clear();
            g.1 = true;
        }
        c.todo_cv.notify_all();
        let n = self.threads.len();
        let deadline = Instant::now() + EXIT_GRACE.min(self.timeout);
        let mut exited = poison::lock(&c.exited);
        while *exited < n {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            exited = poison::wait_timeout(&c.exited_cv, exited, deadline - now);
        }
        let stuck = n - *exited;
        drop(exited);
        if stuck == 0 {
            for h in self.threads.drain(..) {
                let _ = h.join();
            }
            return;
        }
        // Joining would wait on the device; the handles are dropped, which detaches them.
        let running = self.threads.drain(..).filter(|h| !h.is_finished()).count();
        DETACHED.fetch_add(running, Ordering::Relaxed);
        eprintln!(
            "note: sanbench: {running} sync engine thread(s) still blocked in pread/pwrite \
             after {:.1} s were left behind (the target is not answering)",
            EXIT_GRACE.min(self.timeout).as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A device that never answers until the test releases it.
    static RELEASE: Mutex<Option<mpsc::Receiver<()>>> = Mutex::new(None);
    static BLOCKED: AtomicUsize = AtomicUsize::new(0);

    fn hang(_: &File, _: &Arena, _: &Io) -> i32 {
        BLOCKED.fetch_add(1, Ordering::SeqCst);
        // Holding the lock keeps the other threads blocked too, behind it.
        let g = poison::lock(&RELEASE);
        if let Some(rx) = g.as_ref() {
            let _ = rx.recv();
        }
        -libc::EIO
    }

    #[test]
    fn drop_does_not_wait_on_a_device_that_never_answers() {
        let (tx, rx) = mpsc::channel();
        *RELEASE.lock().unwrap() = Some(rx);
        let file = Arc::new(File::open("/dev/null").unwrap());
        let cfg = QueueConfig {
            worker: 0,
            depth: 4,
            max_len: 4096,
            arena: Arc::new(Arena::new(4 * 4096)),
            io_timeout: Duration::from_secs(30),
        };
        let mut q = SyncQueue::open_with(file, &cfg, hang);
        let ios: Vec<Io> = (0..6u32)
            .map(|i| Io {
                tag: i,
                op: Op::Read,
                offset: 0,
                len: 512,
                buf: 0,
                fua: false,
            })
            .collect();
        q.submit(&ios).unwrap();
        while BLOCKED.load(Ordering::SeqCst) < 4 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Dropped on a thread of its own, so that a drop that hangs fails the test instead of
        // hanging it.
        let (done_tx, done_rx) = mpsc::channel();
        let t0 = Instant::now();
        std::thread::spawn(move || {
            drop(q);
            let _ = done_tx.send(());
        });
        done_rx
            .recv_timeout(EXIT_GRACE + Duration::from_secs(10))
            .expect("SyncQueue::drop hung on threads blocked in the device");
        let took = t0.elapsed();
        assert!(
            took >= EXIT_GRACE && took < EXIT_GRACE + Duration::from_secs(2),
            "drop took {took:?}"
        );
        assert_eq!(detached_threads(), 4);
        // The two I/Os not started were discarded, not started on the way out.
        drop(tx);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(BLOCKED.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn drop_of_an_idle_queue_is_immediate() {
        let file = Arc::new(File::open("/dev/null").unwrap());
        let cfg = QueueConfig {
            worker: 0,
            depth: 8,
            max_len: 4096,
            arena: Arc::new(Arena::new(8 * 4096)),
            io_timeout: Duration::from_secs(30),
        };
        let q = SyncQueue::open(file, &cfg);
        let t0 = Instant::now();
        drop(q);
        assert!(t0.elapsed() < Duration::from_millis(500));
    }
}
