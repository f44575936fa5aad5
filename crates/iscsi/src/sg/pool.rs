//! The bsg queue (and sg's when [`super::SG_QUEUE_ENV`] asks): `SG_IO` blocks its caller, so a
//! queue of depth N runs N threads, each taking
//! the next job (sanbench-io's [`Pool`], the sync engine's too; as fio's sg engine with
//! `numjobs`). The trims of one submit that UNMAP carries go as one command, a descriptor
//! each, on one thread (`super::jobs`). At depth 1 the command runs inline in `submit`.
//! Dropping the queue never waits without a bound on a device that does not answer: threads
//! still blocked after a grace are detached (they hold their own `Arc`s of the file and the
//! arena).

use std::collections::BTreeMap;
use std::fs::File;
use std::sync::{Arc, Mutex};

use sanbench_io::blocking::{Names, Pool};
use sanbench_io::engine::{Completion, Io, Op, Queue, QueueConfig};
use sanbench_io::params::CommandTally;
use sanbench_io::poison;
use sanbench_io::{Arena, EngineError};

use super::exec::{do_job, jobs, Done};
use super::Geometry;

/// The sg engine's threads are named `sb-sg{worker}-{i}`.
pub const SG_THREAD_PREFIX: &str = "sb-sg";

const NAMES: Names = Names {
    engine: "sg",
    call: "SG_IO",
    prefix: SG_THREAD_PREFIX,
};

struct Ctx {
    file: Arc<File>,
    geo: Geometry,
    arena: Arc<Arena>,
    zero_block: Vec<u8>,
    tally: Mutex<CommandTally>,
}

impl Ctx {
    /// Carries out `job`, counts it, and pushes a completion for each of its I/Os.
    fn run(&self, job: &[Io], out: &mut Vec<Completion>) {
        let done = do_job(&self.file, &self.geo, &self.arena, &self.zero_block, job);
        self.count(job, &done);
        out.extend(job.iter().map(|io| Completion {
            tag: io.tag,
            result: done.errno,
        }));
    }

    fn count(&self, job: &[Io], done: &Done) {
        let mut t = poison::lock(&self.tally);
        if job.first().is_some_and(|io| io.op == Op::Trim) {
            t.trims += job.len() as u64;
            t.trim_commands += u64::from(done.commands);
        }
        if let Some(why) = &done.why {
            t.failed(why.clone());
        }
    }
}

pub struct SgQueue {
    ctx: Arc<Ctx>,
    pool: Option<Pool<Vec<Io>>>,
    inline_done: Vec<Completion>,
    /// UNMAP descriptors one command carries at most.
    max_descriptors: usize,
}

impl SgQueue {
    pub(crate) fn open(file: Arc<File>, geo: Geometry, cfg: &QueueConfig) -> SgQueue {
        let ctx = Arc::new(Ctx {
            file,
            geo,
            arena: cfg.arena.clone(),
            zero_block: vec![0u8; geo.block as usize],
            tally: Mutex::new(CommandTally::default()),
        });
        let pool = (cfg.depth > 1).then(|| {
            let c = ctx.clone();
            Pool::spawn(
                NAMES,
                cfg.worker,
                cfg.depth as usize,
                cfg.io_timeout,
                move |job: &Vec<Io>, out: &mut Vec<Completion>| c.run(job, out),
            )
        });
        SgQueue {
            ctx,
            pool,
            inline_done: Vec::new(),
            max_descriptors: geo.disc.descriptors(cfg.depth as usize),
        }
    }
}

impl Queue for SgQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let jobs = jobs(&self.ctx.geo, self.max_descriptors, ios);
        match &self.pool {
            None => {
                for job in &jobs {
                    self.ctx.run(job, &mut self.inline_done);
                }
            }
            Some(p) => p.submit(jobs),
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
        let t = poison::lock(&self.ctx.tally);
        let mut m = BTreeMap::new();
        m.insert(
            "threads".into(),
            self.pool.as_ref().map_or(0, Pool::threads).into(),
        );
        t.record(&mut m);
        m
    }
}
