//! The thread engine: blocking `pread`/`pwrite`, for kernels without io_uring and for comparing
//! against it (`--engine sync`).
//!
//! At queue depth 1 the I/O runs inline in `submit` (nothing between the generator and the
//! system call, the lowest-latency path). Deeper queues get one thread per slot, so that
//! `depth` I/Os really are in flight at once, as with fio's `psync` and `numjobs`.
//!
//! The threads are sanbench-io's [`blocking::Pool`], which the sg engine shares: dropping the
//! queue never hangs on a device that does not answer (threads still blocked after
//! [`EXIT_GRACE`] are detached).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use sanbench_io::blocking::{self, Names, Pool};

use crate::arena::Arena;
use crate::engine::{Completion, Io, Op, Queue, QueueConfig};
use crate::error::EngineError;

/// The sync engine's I/O threads are named `sb-sync{worker}-{i}`: the bottleneck attribution
/// (crates/cli/src/bottleneck.rs) counts them as the initiator's.
pub const SYNC_THREAD_PREFIX: &str = "sb-sync";

/// How long a dropped queue waits for its threads before detaching those still blocked.
pub const EXIT_GRACE: Duration = blocking::EXIT_GRACE;

/// How many blocked threads dropped queues left behind in this process.
pub fn detached_threads() -> usize {
    blocking::detached_threads()
}

const NAMES: Names = Names {
    engine: "sync engine",
    call: "pread/pwrite",
    prefix: SYNC_THREAD_PREFIX,
};

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

pub struct SyncQueue {
    file: Arc<File>,
    arena: Arc<Arena>,
    inline_done: Vec<Completion>,
    pool: Option<Pool<Io>>,
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
        let pool = (cfg.depth > 1).then(|| {
            let (f, a) = (file.clone(), cfg.arena.clone());
            Pool::spawn(
                NAMES,
                cfg.worker,
                cfg.depth as usize,
                cfg.io_timeout,
                move |io: &Io, out: &mut Vec<Completion>| {
                    out.push(Completion {
                        tag: io.tag,
                        result: io_fn(&f, &a, io),
                    })
                },
            )
        });
        SyncQueue {
            file,
            arena: cfg.arena.clone(),
            inline_done: Vec::with_capacity(1),
            pool,
        }
    }
}

impl Queue for SyncQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        match &self.pool {
            None => {
                for io in ios {
                    let result = do_io(&self.file, &self.arena, io);
                    self.inline_done.push(Completion {
                        tag: io.tag,
                        result,
                    });
                }
            }
            Some(p) => p.submit(ios.iter().copied()),
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        match &self.pool {
            None => {
                out.append(&mut self.inline_done);
                Ok(())
            }
            Some(p) => p.reap(min, out),
        }
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert(
            "threads".into(),
            self.pool.as_ref().map_or(0, Pool::threads).into(),
        );
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poison;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::sync::Mutex;
    use std::time::Instant;

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
            socket_ring: None,
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
            socket_ring: None,
        };
        let q = SyncQueue::open(file, &cfg);
        let t0 = Instant::now();
        drop(q);
        assert!(t0.elapsed() < Duration::from_millis(500));
    }
}
