//! Opens target URIs: local ones through the engine crate, network schemes through their
//! crates. The one place that knows which transports this binary was built with.

use std::sync::Arc;

use sanbench_engine::file::FileOptions;
use sanbench_engine::uri::{open_local, parse_target, TargetUri};
use sanbench_engine::Target;

use crate::error::{usage, CliError};

pub fn open_targets(list: &[String], opts: &FileOptions) -> Result<Vec<Arc<dyn Target>>, CliError> {
    let mut out = Vec::with_capacity(list.len());
    for s in list {
        let t = parse_target(s).map_err(usage)?;
        let target = match &t {
            TargetUri::Network { scheme, uri } if scheme == "nbd" || scheme == "nbd+unix" => {
                sanbench_nbd::open(uri, &sanbench_nbd::ClientOptions::default())?.into()
            }
            TargetUri::Network { scheme, .. } => {
                return Err(usage(format!(
                    "{s}: the {scheme} engine is not built into this sanbench yet"
                )))
            }
            _ => open_local(s, &t, opts)?,
        };
        out.push(target);
    }
    Ok(out)
}
