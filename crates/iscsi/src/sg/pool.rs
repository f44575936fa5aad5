//! The sg queue: `SG_IO` blocks its caller, so a queue of depth N runs N threads, each taking
//! the next I/O (as the engine's sync engine does for pread/pwrite, and fio's sg engine with
//! `numjobs`). At depth 1 the command runs inline in `submit`. Dropping the queue never waits
//! without a bound on a device that does not answer: threads still blocked after a grace are
//! detached (they hold their own `Arc`s of the file and the arena).

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sanbench_io::engine::{Completion, Io, Queue, QueueConfig};
use sanbench_io::poison;
use sanbench_io::{Arena, EngineError};

use super::{do_io, Geometry};

/// The sg engine's threads are named `sb-sg{worker}-{i}`.
pub const SG_THREAD_PREFIX: &str = "sb-sg";

/// How long a dropped queue waits for its threads before detaching those still blocked.
const EXIT_GRACE: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Shared {
    /// I/Os not yet taken, and whether the queue is closing.
    todo: Mutex<(VecDeque<Io>, bool)>,
    todo_cv: Condvar,
    /// Completions, and the last failure's line.
    done: Mutex<(Vec<Completion>, Option<String>, u64)>,
    done_cv: Condvar,
    exited: Mutex<usize>,
    exited_cv: Condvar,
}

struct Ctx {
    file: Arc<File>,
    geo: Geometry,
    arena: Arc<Arena>,
    zero_block: Vec<u8>,
}

impl Ctx {
    fn run(&self, io: &Io) -> (i32, Option<String>) {
        do_io(&self.file, &self.geo, &self.arena, &self.zero_block, io)
    }
}

pub struct SgQueue {
    ctx: Arc<Ctx>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    timeout: Duration,
}

impl SgQueue {
    pub(crate) fn open(file: Arc<File>, geo: Geometry, cfg: &QueueConfig) -> SgQueue {
        let ctx = Arc::new(Ctx {
            file,
            geo,
            arena: cfg.arena.clone(),
            zero_block: vec![0u8; geo.block as usize],
        });
        let shared = Arc::new(Shared::default());
        let mut threads = Vec::new();
        if cfg.depth > 1 {
            for i in 0..cfg.depth {
                let (c, s) = (ctx.clone(), shared.clone());
                let h = std::thread::Builder::new()
                    .name(format!("{SG_THREAD_PREFIX}{}-{i}", cfg.worker))
                    .spawn(move || {
                        worker(&c, &s);
                        *poison::lock(&s.exited) += 1;
                        s.exited_cv.notify_all();
                    })
                    .expect("spawn sg engine thread");
                threads.push(h);
            }
        }
        SgQueue {
            ctx,
            shared,
            threads,
            timeout: cfg.io_timeout,
        }
    }
}

fn finish(s: &Shared, tag: u32, (result, why): (i32, Option<String>)) {
    let mut g = poison::lock(&s.done);
    g.0.push(Completion { tag, result });
    if why.is_some() {
        g.1 = why;
        g.2 += 1;
    }
}

fn worker(c: &Ctx, s: &Shared) {
    loop {
        let io = {
            let mut g = poison::lock(&s.todo);
            loop {
                if let Some(io) = g.0.pop_front() {
                    break io;
                }
                if g.1 {
                    return;
                }
                g = poison::wait(&s.todo_cv, g);
            }
        };
        finish(s, io.tag, c.run(&io));
        s.done_cv.notify_one();
    }
}

impl Queue for SgQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        if self.threads.is_empty() {
            for io in ios {
                finish(&self.shared, io.tag, self.ctx.run(io));
            }
            return Ok(());
        }
        poison::lock(&self.shared.todo)
            .0
            .extend(ios.iter().copied());
        if ios.len() == 1 {
            self.shared.todo_cv.notify_one();
        } else {
            self.shared.todo_cv.notify_all();
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let deadline = Instant::now() + self.timeout;
        let mut g = poison::lock(&self.shared.done);
        while g.0.len() < min {
            let now = Instant::now();
            if now >= deadline {
                return Err(EngineError::Timeout {
                    peer: "sg".into(),
                    secs: self.timeout.as_secs_f64(),
                });
            }
            g = poison::wait_timeout(&self.shared.done_cv, g, deadline - now);
        }
        out.append(&mut g.0);
        Ok(())
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let g = poison::lock(&self.shared.done);
        let mut m = BTreeMap::new();
        m.insert("threads".into(), self.threads.len().into());
        m.insert("failed_commands".into(), g.2.into());
        if let Some(s) = &g.1 {
            m.insert("last_failure".into(), s.clone().into());
        }
        m
    }
}

impl Drop for SgQueue {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        {
            let mut g = poison::lock(&self.shared.todo);
            g.0.clear();
            g.1 = true;
        }
        self.shared.todo_cv.notify_all();
        let n = self.threads.len();
        let deadline = Instant::now() + EXIT_GRACE.min(self.timeout);
        let mut exited = poison::lock(&self.shared.exited);
        while *exited < n {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            exited = poison::wait_timeout(&self.shared.exited_cv, exited, deadline - now);
        }
        let stuck = n - *exited;
        drop(exited);
        if stuck == 0 {
            for h in self.threads.drain(..) {
                let _ = h.join();
            }
            return;
        }
        let running = self.threads.drain(..).filter(|h| !h.is_finished()).count();
        eprintln!(
            "note: sanbench: {running} sg engine thread(s) still blocked in SG_IO after {:.1} s \
             were left behind (the device is not answering)",
            EXIT_GRACE.min(self.timeout).as_secs_f64()
        );
    }
}
