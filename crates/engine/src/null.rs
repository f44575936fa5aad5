//! `null:`: completes every I/O at once and moves no data. It measures sanbench itself, like
//! fio's null engine.

use std::collections::BTreeMap;

use crate::engine::{Completion, Io, Queue, QueueConfig, Target, TargetInfo};
use crate::error::EngineError;

/// Size a `null:` target reports when none is given (`sanbench_units::target`, where target
/// URIs are parsed).
pub use sanbench_units::target::DEFAULT_NULL_SIZE;

pub struct NullTarget {
    info: TargetInfo,
}

impl NullTarget {
    pub fn new(uri: &str, size: u64) -> NullTarget {
        NullTarget {
            info: TargetInfo {
                uri: uri.to_string(),
                engine: "null".into(),
                size,
                block_size: 1,
                max_transfer: None,
                read_only: false,
                params: BTreeMap::new(),
            },
        }
    }
}

impl Target for NullTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    fn supports(&self, _op: crate::engine::Op) -> bool {
        true
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(NullQueue {
            done: Vec::with_capacity(cfg.depth as usize),
        }))
    }
}

struct NullQueue {
    done: Vec<Completion>,
}

impl Queue for NullQueue {
    #[inline]
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        self.done.extend(ios.iter().map(|io| Completion {
            tag: io.tag,
            result: 0,
        }));
        Ok(())
    }

    #[inline]
    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        out.append(&mut self.done);
        Ok(())
    }
}
