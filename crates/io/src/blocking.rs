//! A queue's threads for system calls that block (the sync engine's `pread`/`pwrite`, the sg
//! engine's `SG_IO`): one thread per slot takes the next job, so that `depth` I/Os really are
//! in flight at once, as with fio's `psync` and `numjobs`. The engine says what a job is and
//! how it is done; the pool queues jobs, hands completions back, and closes.
//!
//! Dropping the pool never hangs: after a stream failed or the target died, a thread may sit
//! in its system call on a device that will not answer. Work not yet started is discarded, the
//! threads get [`EXIT_GRACE`] (at most the I/O timeout) to finish, and any still blocked are
//! detached with a note on stderr; whatever they use (the file, the arena) they hold by their
//! own `Arc`s, so memory they may still write into stays valid.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::Completion;
use crate::error::EngineError;
use crate::poison;

/// How long a dropped pool waits for its threads before detaching those still blocked.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Threads detached by dropped pools in this process (for the note and for tests).
static DETACHED: AtomicUsize = AtomicUsize::new(0);

/// How many pool threads dropped pools left blocked in a system call.
pub fn detached_threads() -> usize {
    DETACHED.load(Ordering::Relaxed)
}

/// What the pool's messages call its threads and their call.
#[derive(Clone, Copy, Debug)]
pub struct Names {
    /// The engine, for the timeout's peer and the note: `sync engine`.
    pub engine: &'static str,
    /// The call its threads block in: `pread/pwrite`.
    pub call: &'static str,
    /// Threads are named `{prefix}{worker}-{i}`.
    pub prefix: &'static str,
}

struct Chan<J> {
    /// Jobs not yet taken, and whether the pool is closing.
    todo: Mutex<(VecDeque<J>, bool)>,
    todo_cv: Condvar,
    done: Mutex<Vec<Completion>>,
    done_cv: Condvar,
    /// Threads that have returned; signalled on `exited_cv`.
    exited: Mutex<usize>,
    exited_cv: Condvar,
}

/// `depth` threads doing jobs of type `J`.
pub struct Pool<J> {
    chan: Arc<Chan<J>>,
    threads: Vec<JoinHandle<()>>,
    timeout: Duration,
    names: Names,
}

impl<J: Send + 'static> Pool<J> {
    /// Starts `depth` threads of stream `worker`; each does a job with `run`, which pushes
    /// the job's completions (one per I/O it carried).
    pub fn spawn<F>(names: Names, worker: usize, depth: usize, timeout: Duration, run: F) -> Pool<J>
    where
        F: Fn(&J, &mut Vec<Completion>) + Send + Sync + 'static,
    {
        let chan = Arc::new(Chan {
            todo: Mutex::new((VecDeque::with_capacity(depth), false)),
            todo_cv: Condvar::new(),
            done: Mutex::new(Vec::with_capacity(depth)),
            done_cv: Condvar::new(),
            exited: Mutex::new(0),
            exited_cv: Condvar::new(),
        });
        let run = Arc::new(run);
        let threads = (0..depth)
            .map(|i| {
                let (c, run) = (chan.clone(), run.clone());
                std::thread::Builder::new()
                    .name(format!("{}{worker}-{i}", names.prefix))
                    .spawn(move || {
                        work(&c, &*run);
                        *poison::lock(&c.exited) += 1;
                        c.exited_cv.notify_all();
                    })
                    .unwrap_or_else(|e| panic!("spawn {} thread: {e}", names.engine))
            })
            .collect();
        Pool {
            chan,
            threads,
            timeout,
            names,
        }
    }

    /// Queues `jobs` for the threads.
    pub fn submit(&self, jobs: impl IntoIterator<Item = J>) {
        let mut g = poison::lock(&self.chan.todo);
        let before = g.0.len();
        g.0.extend(jobs);
        let n = g.0.len() - before;
        drop(g);
        if n == 1 {
            self.chan.todo_cv.notify_one();
        } else if n > 1 {
            self.chan.todo_cv.notify_all();
        }
    }

    /// Waits for at least `min` completions (at most the I/O timeout) and takes all there are.
    pub fn reap(&self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let deadline = Instant::now() + self.timeout;
        let mut g = poison::lock(&self.chan.done);
        while g.len() < min {
            let now = Instant::now();
            if now >= deadline {
                return Err(EngineError::Timeout {
                    peer: self.names.engine.into(),
                    secs: self.timeout.as_secs_f64(),
                });
            }
            g = poison::wait_timeout(&self.chan.done_cv, g, deadline - now);
        }
        out.append(&mut g);
        Ok(())
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

fn work<J>(c: &Chan<J>, run: &dyn Fn(&J, &mut Vec<Completion>)) {
    let mut mine = Vec::new();
    loop {
        let job = {
            let mut g = poison::lock(&c.todo);
            loop {
                if let Some(job) = g.0.pop_front() {
                    break job;
                }
                if g.1 {
                    return;
                }
                g = poison::wait(&c.todo_cv, g);
            }
        };
        run(&job, &mut mine);
        poison::lock(&c.done).append(&mut mine);
        c.done_cv.notify_one();
    }
}

impl<J> Drop for Pool<J> {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        {
            let mut g = poison::lock(&self.chan.todo);
            // Nothing not yet started is started now: the run is over.
            g.0.clear();
            g.1 = true;
        }
        self.chan.todo_cv.notify_all();
        let n = self.threads.len();
        let grace = EXIT_GRACE.min(self.timeout);
        let deadline = Instant::now() + grace;
        let mut exited = poison::lock(&self.chan.exited);
        while *exited < n {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            exited = poison::wait_timeout(&self.chan.exited_cv, exited, deadline - now);
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
            "note: sanbench: {running} {} thread(s) still blocked in {} after {:.1} s were \
             left behind (the target is not answering)",
            self.names.engine,
            self.names.call,
            grace.as_secs_f64()
        );
    }
}
