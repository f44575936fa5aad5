//! Ctrl-C and SIGTERM end a run early but cleanly: the window ends where it stopped, results
//! are still written, servers and labs are torn down. A second one ends the process at once
//! (exit 130), for a run whose clean stop is itself stuck. Through signal-hook: the handlers
//! only store to atomics.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

/// Process-wide by nature, unlike the run state in context.rs: a signal reaches the process,
/// and its handler has no context to find (one flag for every run the process holds).
static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Installs the handlers (once) and returns the flag they set.
pub fn stop_flag() -> Arc<AtomicBool> {
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // The order matters: the exit is armed first, so it sees the flag as the first
            // signal left it, and fires only on the second.
            let armed = signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone())
                .and_then(|_| signal_hook::flag::register(sig, flag.clone()));
            if let Err(e) = armed {
                eprintln!("sanbench: cannot handle signal {sig}: {e} (Ctrl-C will kill at once)");
            }
        }
        flag
    })
    .clone()
}
