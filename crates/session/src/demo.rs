//! `sanbench demo`: the README's main job. Starts sanbench's own targets on loopback, runs the
//! `quick` suite across them, writes the report and prints the findings. Everything it starts
//! (server threads, a tmpfs file) is stopped and removed when it ends, also on Ctrl-C.

use std::time::Duration;

use crate::compare::Compared;
use sanbench_engine::units::{Dur, Pct};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::compare::config::CompareConfig;
use crate::compare::config::RepeatArg;
use crate::compare::prepared;
use crate::context::Context;
use crate::error::{usage, CliError};
use crate::monitoring::MonitorSetup;
use crate::placement::{self, CpuList, Placement};

/// What the demo started; dropping it stops and removes everything.
#[derive(Default)]
struct Started {
    shutdown: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    files: Vec<PathBuf>,
}

impl Drop for Started {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Keeps the client and the servers on different CPUs where the host has them (pinning the
/// client now, before any server thread exists), says what it chose and records it.
fn place(cx: &Context, a: &DemoConfig) -> Result<Option<CpuList>, CliError> {
    let cpus = placement::allowed();
    let all = CpuList(cpus.clone());
    let split = placement::demo_split(&a.placement, &cpus);
    let (line, servers) = match split {
        Some((client, servers)) => {
            placement::check(&servers, "--placement")?;
            placement::pin_process(&client, "--placement")?;
            cx.record_placement(serde_json::json!({
                "client": client.to_string(),
                "servers": servers.to_string(),
                "by": "demo --placement",
            }));
            (split_line(&client, &servers, &all), Some(servers))
        }
        None => {
            cx.record_placement(serde_json::json!({
                "client": all.to_string(),
                "servers": all.to_string(),
                "by": "demo --placement",
            }));
            (
                format!(
                    "placement: the client and the built-in servers share {}{}",
                    all.phrase(),
                    if cpus.len() < 2 {
                        " (one CPU: nothing to keep apart)"
                    } else {
                        " (--placement off)"
                    }
                ),
                None,
            )
        }
    };
    if !a.quiet {
        eprintln!("{}", crate::fit::wrap(&line, crate::fit::width(), "", "  "));
    }
    Ok(servers)
}

/// The line that says where the client and the servers run when they are kept apart.
fn split_line(client: &CpuList, servers: &CpuList, all: &CpuList) -> String {
    format!(
        "placement: the client (sanbench's stream threads) on {}, the built-in servers on {} \
         ({} available; --placement off shares them)",
        client.phrase(),
        servers.phrase(),
        all.phrase()
    )
}

/// Everything the demo needs, typed.
pub struct DemoConfig {
    /// Where the report and results go.
    pub out: PathBuf,
    /// The suite, by name or file.
    pub suite: String,
    /// Each target's size in bytes.
    pub size: u64,
    /// The servers' stores allocated before the clock starts.
    pub prealloc: bool,
    pub repeat: RepeatArg,
    pub max_repeat: u32,
    /// The comparison's time budget.
    pub budget: Duration,
    pub min_effect: Pct,
    /// Each workload's measured window and ramp.
    pub time: Duration,
    pub ramp: Duration,
    pub db: Option<PathBuf>,
    pub no_store: bool,
    /// Where the client and the servers run.
    pub placement: Placement,
    pub require_headroom: bool,
    pub quiet: bool,
}

/// Starts the built-in targets, compares them on the suite, stops them: the comparison as
/// [`crate::compare::execute`] returns it.
pub fn execute(cx: &Context, a: &DemoConfig) -> Result<Option<Compared>, CliError> {
    let server_cpus = place(cx, a)?;
    let mut started = Started::default();
    // RAM and tmpfs are ceilings (references): the findings compare the transports.
    let mut targets = vec![format!(
        "ref:RAM (in-process)=mem:{}",
        sanbench_engine::units::Bytes(a.size)
    )];
    let shm = PathBuf::from(format!("/dev/shm/sanbench-demo-{}.img", std::process::id()));
    started.files.push(shm.clone());
    targets.push(format!("ref:tmpfs file (io_uring)={}", shm.display()));
    crate::servers::start_demo_servers(
        a.size,
        a.prealloc,
        &mut targets,
        &started.shutdown,
        &mut started.threads,
        server_cpus.as_ref(),
    )?;
    let mut suite = sanbench_engine::suite::load(&a.suite).map_err(usage)?;
    prepared::scale(&mut suite, Some(a.time), Some(a.ramp), None, None)?;
    let p = prepared::prepare(suite, &targets, &[], None)?;
    let mut c = CompareConfig::of(p, a.out.clone());
    c.repeat = a.repeat;
    c.max_repeat = a.max_repeat;
    c.budget = Some(Dur(a.budget));
    c.min_effect = a.min_effect;
    c.db = a.db.clone();
    c.no_store = a.no_store;
    c.files.size = Some(a.size);
    c.monitor = Some(MonitorSetup::auto(Duration::from_secs(1)));
    c.require_headroom = a.require_headroom;
    c.quiet = a.quiet;
    let r = crate::compare::execute(cx, &c);
    drop(started);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placement_line_is_one_sentence() {
        let l = split_line(&CpuList(vec![0]), &CpuList(vec![1]), &CpuList(vec![0, 1]));
        assert_eq!(
            l,
            "placement: the client (sanbench's stream threads) on CPU 0, the built-in servers \
             on CPU 1 (CPUs 0-1 available; --placement off shares them)"
        );
    }
}
