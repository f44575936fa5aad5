//! `compare` as an MPI job: each cell is one synchronized phase (every rank runs the cell's
//! plan in step), and rank 0 merges the cell's outputs into the cell's one result with its
//! `hosts[]`. Rank 0 decides before each cell whether the comparison goes on (Ctrl-C on any
//! launcher reaches it), so no rank waits at a barrier the others never reach.

use std::sync::Arc;

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use sanbench_engine::result::RunDoc;
use sanbench_engine::run::sync::PhaseSync;
use sanbench_engine::{RunOutput, Workload};

use super::run::{exchange, merged_doc, RankReport};
use super::sync::MpiSync;
use super::Job;
use crate::context::Context;
use crate::error::CliError;
use crate::ranks::Ranked;

struct MpiRanked<'a>(&'a Job, &'a Context);

pub fn ranked(cx: &Context) -> Option<Box<dyn Ranked + '_>> {
    cx.mpi_job()
        .map(|j| Box::new(MpiRanked(j, cx)) as Box<dyn Ranked + '_>)
}

impl Ranked for MpiRanked<'_> {
    fn rank(&self) -> u32 {
        self.0.rank
    }

    fn host(&self) -> &str {
        &self.0.host
    }

    fn sync(&self) -> Arc<dyn PhaseSync> {
        Arc::new(MpiSync {
            rank: self.0.rank,
            size: self.0.size,
        })
    }

    fn go_on(&self, mine: bool) -> bool {
        let mut flag = u8::from(mine);
        SimpleCommunicator::world()
            .process_at_rank(0)
            .broadcast_into(&mut flag);
        flag != 0
    }

    fn gather(
        &self,
        w: &Workload,
        templates: &[String],
        doc: RunDoc,
        out: RunOutput,
    ) -> Result<Option<RunDoc>, CliError> {
        let mine = RankReport {
            bytes: 0,
            rank: self.0.rank,
            host: self.0.host.clone(),
            monitor_only: false,
            output: out,
            doc,
        };
        match exchange(self.0, mine, self.1.watch().as_deref())? {
            Some((all, gather_ms)) => merged_doc(w, templates, self.0, all, gather_ms).map(Some),
            None => Ok(None),
        }
    }
}
