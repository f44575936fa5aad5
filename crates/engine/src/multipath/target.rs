//! The multipath [`Target`]: one inner target per portal, checked to lead to one logical
//! unit before any I/O (opening one again for a reconnection is in `paths.rs`).

use std::sync::{Arc, Mutex};

use super::paths::{Opener, Shared, LU_ID};
use super::selector::Failback;
use super::uri::Options;
use crate::engine::{Allocation, Queue, QueueConfig, Target, TargetInfo};
use crate::error::EngineError;
use crate::poison::lock;
use crate::uri::redact;

pub use sanbench_io::params::{MULTI_CONN, PATHS};

/// The engine info's word on the paths' io_uring: `shared` (one ring per queue for all its
/// paths), present only when the paths are on io_uring.
pub const SOCKET_RING: &str = "socket_ring";

/// A target reached over several paths.
pub struct MultipathTarget {
    shared: Arc<Shared>,
    info: TargetInfo,
}

impl MultipathTarget {
    /// Opens every path; refuses (as bad input) paths that do not lead to one logical unit,
    /// or to one that forbids several connections.
    pub fn new(
        uri: &str,
        openers: Vec<Opener>,
        options: Options,
    ) -> Result<MultipathTarget, EngineError> {
        if openers.is_empty() {
            return Err(EngineError::Invalid(format!("{}: no path", redact(uri))));
        }
        let paths = openers.iter().map(|o| o()).collect::<Result<Vec<_>, _>>()?;
        let uris: Vec<String> = paths.iter().map(|p| redact(&p.info().uri)).collect();
        let lu = same_lu(&paths, &uris)?;
        let mut info = paths[0].info().clone();
        info.uri = redact(uri);
        let p = &mut info.params;
        p.insert(PATHS.into(), uris.clone().into());
        p.insert("multipath.policy".into(), options.policy.name().into());
        p.insert(
            "multipath.failback".into(),
            match options.failback {
                Failback::Immediate => "immediate",
                Failback::Manual => "manual",
            }
            .into(),
        );
        if let Some(t) = options.path_timeout {
            p.insert("multipath.path_timeout_s".into(), t.as_secs_f64().into());
        }
        p.insert(
            "multipath.no_path_retry_s".into(),
            options.no_path_retry.as_secs_f64().into(),
        );
        // Paths on io_uring share one ring per queue (what each queue ran: its facts'
        // `multipath.socket_ring`).
        if p.get("socket").and_then(|v| v.as_str()) == Some("uring") {
            p.insert(SOCKET_RING.into(), "shared".into());
        }
        Ok(MultipathTarget {
            shared: Arc::new(Shared {
                paths: paths.into_iter().map(Mutex::new).collect(),
                openers,
                lu,
                uris,
                options,
                epoch: std::time::Instant::now(),
                epoch_unix_ns: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
            }),
            info,
        })
    }
}

/// Every path names the same logical unit, of the same geometry: returns its name.
fn same_lu(paths: &[Arc<dyn Target>], uris: &[String]) -> Result<String, EngineError> {
    let id = |i: usize| {
        paths[i]
            .info()
            .params
            .get(LU_ID)
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                EngineError::Invalid(format!(
                    "{}: the engine does not say which logical unit it reached, so its paths \
                     cannot be checked",
                    uris[i]
                ))
            })
    };
    let first = id(0)?;
    let i0 = paths[0].info();
    for i in 0..paths.len() {
        let info = paths[i].info();
        if paths.len() > 1 && info.params.get(MULTI_CONN) == Some(&false.into()) {
            return Err(EngineError::Invalid(format!(
                "{}: the server does not allow several connections to the export \
                 (no CAN_MULTI_CONN): it cannot be used over several paths",
                uris[i]
            )));
        }
        let this = id(i)?;
        if this != first || info.size != i0.size || info.block_size != i0.block_size {
            return Err(EngineError::Invalid(format!(
                "{} and {} lead to different logical units ({first}, {} bytes in {} B blocks \
                 vs {this}, {} bytes in {} B blocks): refusing to use them as paths of one",
                uris[0], uris[i], i0.size, i0.block_size, info.size, info.block_size
            )));
        }
    }
    Ok(first)
}

impl Target for MultipathTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    /// The first path that can answer.
    fn allocation(&self, offset: u64, len: u64) -> Result<Option<Allocation>, EngineError> {
        let mut last = Ok(None);
        for p in &self.shared.paths {
            let p = lock(p).clone();
            last = p.allocation(offset, len);
            if last.is_ok() {
                return last;
            }
        }
        last
    }

    /// Every path must carry the op out: any may take the I/O.
    fn supports(&self, op: crate::engine::Op) -> bool {
        self.shared.paths.iter().all(|p| lock(p).supports(op))
    }

    fn invalidate_cache(&self, span: u64) -> Result<Option<String>, EngineError> {
        let first = lock(&self.shared.paths[0]).clone();
        first.invalidate_cache(span)
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        super::queue::open(self.shared.clone(), cfg)
    }
}
