//! Target URIs: `null:[SIZE]`, `mem:SIZE`, `file:PATH`, a bare path, and the network schemes
//! (`nbd://`, `iscsi://`, ...) that other crates open.

use std::sync::Arc;

use crate::engine::Target;
use crate::error::EngineError;
use crate::file::{FileOptions, FileTarget};
use crate::mem::MemTarget;
use crate::null::NullTarget;

pub use sanbench_io::redact::redact;
/// Target URIs are parsed in `sanbench-units` (below the fio job writer too); re-exported
/// here at their old paths.
pub use sanbench_units::target::{parse_target, TargetUri};

/// Opens a local target (null, mem, file or block device).
pub fn open_local(
    uri: &str,
    t: &TargetUri,
    opts: &FileOptions,
) -> Result<Arc<dyn Target>, EngineError> {
    Ok(match t {
        TargetUri::Null { size } => Arc::new(NullTarget::new(uri, *size)),
        TargetUri::Mem { size } => Arc::new(MemTarget::new(uri, *size)?),
        TargetUri::File { path } => Arc::new(FileTarget::open(uri, path, opts)?),
        TargetUri::Passthrough { kind, .. } => {
            return Err(EngineError::Invalid(format!(
                "{uri}: the {} engine is not built into this sanbench",
                kind.scheme()
            )))
        }
        TargetUri::Network { scheme, .. } => {
            return Err(EngineError::Invalid(format!(
                "{uri}: the {scheme} engine is not built into this sanbench"
            )))
        }
    })
}
