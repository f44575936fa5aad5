//! sanbench's built-in servers, for `serve` and `demo`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::args::DemoArgs;
use crate::error::CliError;

/// Starts the built-in network targets on loopback ports chosen by the kernel and adds their
/// URIs (named) to `targets`. Until the NBD and iSCSI servers land, there are none.
pub fn start_demo_servers(
    _a: &DemoArgs,
    _targets: &mut Vec<String>,
    _shutdown: &Arc<AtomicBool>,
    _threads: &mut Vec<JoinHandle<()>>,
) -> Result<(), CliError> {
    Ok(())
}
