//! `sanbench demo`: the README's main job. Starts sanbench's own targets on loopback, runs the
//! `quick` suite across them, writes the report and prints the findings. Everything it starts
//! (server threads, a tmpfs file) is stopped and removed when it ends, also on Ctrl-C.

use std::time::Duration;

use sanbench_engine::units::Dur;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::args::{CompareArgs, DemoArgs, EngineArgs};
use crate::context::Context;
use crate::error::CliError;
use crate::placement::{self, CpuList};

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
fn place(cx: &Context, a: &DemoArgs) -> Result<Option<CpuList>, CliError> {
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

pub fn run(cx: &Context, a: DemoArgs) -> Result<(), CliError> {
    let server_cpus = place(cx, &a)?;
    let mut started = Started::default();
    // RAM and tmpfs are ceilings (references): the findings compare the transports.
    let mut targets = vec![format!("ref:RAM (in-process)=mem:{}", a.size)];
    let shm = PathBuf::from(format!("/dev/shm/sanbench-demo-{}.img", std::process::id()));
    started.files.push(shm.clone());
    targets.push(format!("ref:tmpfs file (io_uring)={}", shm.display()));
    crate::servers::start_demo_servers(
        &a,
        &mut targets,
        &started.shutdown,
        &mut started.threads,
        server_cpus.as_ref(),
    )?;
    let args = CompareArgs {
        targets,
        reference: Vec::new(),
        lab: None,
        faults: Vec::new(),
        suite: a.suite.clone(),
        fio: None,
        fio_ignore: Vec::new(),
        repeat: a.repeat,
        max_repeat: a.max_repeat,
        budget: Some(a.budget),
        min_effect: a.min_effect,
        curve: None,
        curve_stop: Dur(Duration::from_millis(100)),
        out: a.out.clone(),
        db: a.db.clone(),
        no_store: a.no_store,
        against: None,
        time: Some(a.time),
        ramp: Some(a.ramp),
        size: Some(a.size),
        engine: EngineArgs {
            engine: "auto".into(),
            buffered: false,
            direct: false,
            force: false,
            no_invalidate: false,
            io_timeout: Dur(Duration::from_secs(30)),
        },
        data: crate::args::DataArgs::default(),
        monitor: crate::args::MonitorArgs::default(),
        watch: crate::args::WatchArgs::default(),
        live: crate::args::LiveArgs::default(),
        seed: crate::args::DEFAULT_SEED,
        cpus: None,
        cpus_policy: Default::default(),
        require_headroom: a.require_headroom,
        quiet: a.quiet,
    };
    let r = crate::compare::run(cx, args);
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
