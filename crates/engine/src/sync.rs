//! The thread engine: blocking `pread`/`pwrite`, for kernels without io_uring and for comparing
//! against it (`--engine sync`).
//!
//! At queue depth 1 the I/O runs inline in `submit` (nothing between the generator and the
//! system call, the lowest-latency path). Deeper queues get one thread per slot, so that
//! `depth` I/Os really are in flight at once, as with fio's `psync` and `numjobs`.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::arena::Arena;
use crate::engine::{Completion, Io, Op, Queue, QueueConfig};
use crate::error::EngineError;

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
        Op::Trim => return -libc::EOPNOTSUPP,
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
}

pub struct SyncQueue {
    file: Arc<File>,
    arena: Arc<Arena>,
    inline_done: Vec<Completion>,
    chan: Option<Arc<Chan>>,
    threads: Vec<JoinHandle<()>>,
    timeout: Duration,
}

impl SyncQueue {
    pub fn open(file: Arc<File>, cfg: &QueueConfig) -> SyncQueue {
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
            });
            for i in 0..cfg.depth {
                let (c, f, a) = (chan.clone(), q.file.clone(), q.arena.clone());
                let h = std::thread::Builder::new()
                    .name(format!("sb-sync{}-{i}", cfg.worker))
                    .spawn(move || worker(&c, &f, &a))
                    .expect("spawn sync engine thread");
                q.threads.push(h);
            }
            q.chan = Some(chan);
        }
        q
    }
}

fn worker(c: &Chan, file: &File, arena: &Arena) {
    loop {
        let io = {
            let mut g = c.todo.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(io) = g.0.pop_front() {
                    break io;
                }
                if g.1 {
                    return;
                }
                g = c.todo_cv.wait(g).unwrap_or_else(|p| p.into_inner());
            }
        };
        let result = do_io(file, arena, &io);
        c.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Completion {
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
                let mut g = c.todo.lock().unwrap_or_else(|p| p.into_inner());
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
        let mut g = c.done.lock().unwrap_or_else(|p| p.into_inner());
        while g.len() < min {
            let now = Instant::now();
            if now >= deadline {
                return Err(EngineError::Timeout {
                    peer: "sync engine".into(),
                    secs: self.timeout.as_secs_f64(),
                });
            }
            g = c
                .done_cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
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
        if let Some(c) = &self.chan {
            c.todo.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
            c.todo_cv.notify_all();
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}
