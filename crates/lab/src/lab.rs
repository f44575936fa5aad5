//! `up` and `down`: build the links and sites, start the targets, record everything in the
//! state file as it goes, and remove exactly that again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cmd::{argv, is_gone, which, Runner};
use crate::error::LabError;
use crate::impairment::Impairment;
use crate::plan::{IF_PREFIX, NS_PREFIX};
use crate::procs;
use crate::site::{self, Site};
use crate::spec::{parse_size, LinkSpec, TargetKind};
use crate::state::{LabPath, LabState, LabTarget, LinkState, ProcState};

/// How long a target may take to accept connections.
const PORT_WAIT: Duration = Duration::from_secs(15);

/// What `up` needs besides the links and targets.
pub struct LabConfig<'a> {
    pub state_path: PathBuf,
    /// Size of each RAM disk ("1G").
    pub size: String,
    pub runner: &'a dyn Runner,
}

/// A running lab: its state and where it is recorded.
#[derive(Debug)]
pub struct Lab {
    pub state: LabState,
    pub path: PathBuf,
    /// What `up` cleaned away from an earlier lab first.
    pub cleaned: Vec<String>,
}

/// Checks that the reference peers asked for are installed.
pub fn check_peers(targets: &[TargetKind]) -> Result<(), LabError> {
    for k in targets {
        let needs: &[(&str, &str)] = match k {
            TargetKind::Nbdkit => &[("nbdkit", "nbdkit")],
            TargetKind::Tgtd => &[("tgtd", "tgt"), ("tgtadm", "tgt")],
            _ => &[],
        };
        for (prog, pkg) in needs {
            if which(prog).is_none() {
                return Err(LabError::Missing(format!(
                    "--targets {k}: `{prog}` is not installed (package {pkg})"
                )));
            }
        }
    }
    Ok(())
}

/// Builds the links and starts the targets. `groups` are the path groups (`--paths`, as
/// [`parse_paths`](crate::site::parse_paths) returns them): each is one target namespace
/// reached over all its links. Whatever an earlier lab left (by its state file, and by the
/// `sblab-`/`sbl-` prefixes) is removed first. On failure, everything this call made is
/// removed again before the error returns.
pub fn up(
    cfg: &LabConfig<'_>,
    specs: &[LinkSpec],
    groups: &[Vec<usize>],
    targets: &[TargetKind],
    sanbench_exe: &str,
) -> Result<Lab, LabError> {
    check_peers(targets)?;
    parse_size(&cfg.size)?;
    let cleaned = down(cfg.runner, &cfg.state_path)?;
    let mut st = LabState::new(sanbench_exe);
    match build(cfg, &site::sites(specs, groups), targets, &mut st) {
        Ok(()) => {
            st.save(&cfg.state_path)?;
            Ok(Lab {
                state: st,
                path: cfg.state_path.clone(),
                cleaned,
            })
        }
        Err(e) => {
            teardown(cfg.runner, &st);
            let _ = std::fs::remove_file(&cfg.state_path);
            Err(e)
        }
    }
}

fn build(
    cfg: &LabConfig<'_>,
    sites: &[Site],
    targets: &[TargetKind],
    st: &mut LabState,
) -> Result<(), LabError> {
    for s in sites {
        // Recorded before it exists, so a failure half-way still knows what to remove.
        st.namespaces.extend(s.namespaces());
        for p in &s.links {
            st.host_links.push(p.host_if());
            st.links.push(LinkState {
                info: crate::state::link_info(&p.spec),
                rate: p.spec.rate(),
                namespace: p.namespace(),
                switch_namespace: p.switch_namespace(),
                host_if: p.host_if(),
                target_if: p.target_if(),
                host_addr: p.host_addr().to_string(),
                target_addr: p.target_addr().to_string(),
                group: p.group.clone(),
                impairment: Impairment::default(),
            });
        }
        st.save(&cfg.state_path)?;
        for c in s.build() {
            cfg.runner.run(&c)?;
        }
    }
    let log_dir = log_dir(&cfg.state_path);
    std::fs::create_dir_all(&log_dir).map_err(|e| LabError::File {
        path: log_dir.clone(),
        reason: format!("cannot create: {e}"),
    })?;
    for s in sites {
        for &k in targets {
            start_target(cfg, s, k, &log_dir, st)?;
        }
    }
    Ok(())
}

fn log_dir(state: &Path) -> PathBuf {
    state
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("lab-logs")
}

/// The lab file's entries for `kind` at site `s`: one for a single link; for a path group
/// the multipath target (every path) and then each path alone, all serving one store.
pub fn lab_targets(s: &Site, kind: TargetKind) -> Vec<LabTarget> {
    let mut v = vec![LabTarget {
        name: format!("{kind}@{}", s.name),
        uri: s.uri(kind),
        link: s.link_info(),
        paths: Vec::new(),
    }];
    if s.is_group() {
        let paths: Vec<LabPath> = s
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| LabPath {
                link: crate::state::link_info(&l.spec),
                uri: s.path_uri(kind, i),
            })
            .collect();
        for p in &paths {
            v.push(LabTarget {
                name: format!("{kind}@{}", p.link.name),
                uri: p.uri.clone(),
                link: p.link.clone(),
                paths: Vec::new(),
            });
        }
        v[0].paths = paths;
    }
    v
}

fn start_target(
    cfg: &LabConfig<'_>,
    s: &Site,
    k: TargetKind,
    log_dir: &Path,
    st: &mut LabState,
) -> Result<(), LabError> {
    let name = format!("{k}@{}", s.name);
    let log = log_dir.join(format!("{name}.log"));
    st.files.push(log.clone());
    if k == TargetKind::Tgtd {
        let size = parse_size(&cfg.size)?;
        let sock = PathBuf::from(format!("/var/run/tgtd/socket.{}", s.tgtd_control()));
        let lock = PathBuf::from(format!("{}.lock", sock.display()));
        if sock.exists() && std::os::unix::net::UnixStream::connect(&sock).is_err() {
            // Nobody listens: a killed tgtd's socket (its lab's state file lost). Not in use.
            let _ = std::fs::remove_file(&sock);
            let _ = std::fs::remove_file(&lock);
        }
        if sock.exists() {
            return Err(LabError::Target {
                name,
                reason: format!(
                    "{} exists: another tgtd uses control port {}",
                    sock.display(),
                    s.tgtd_control()
                ),
            });
        }
        st.files
            .push(PathBuf::from(format!("{}.lock", sock.display())));
        st.files.push(sock);
        let image = PathBuf::from(s.tgtd_image());
        st.files.push(image.clone());
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(size))
            .map_err(|e| LabError::File {
                path: image.clone(),
                reason: format!("cannot create the LUN image: {e}"),
            })?;
    }
    let exe = st.sanbench.clone();
    let pidfile = log_dir.join(format!("{name}.pid"));
    let argv = s.target_command(k, &exe, &cfg.size, &pidfile.to_string_lossy());
    let (mut pid, mut start) = procs::spawn(&argv, &log)?;
    if k == TargetKind::Nbdkit {
        st.files.push(pidfile.clone());
        (pid, start) = procs::daemon_pid(&name, pid, start, &pidfile, &log, PORT_WAIT)?;
    }
    st.processes.push(ProcState {
        name: name.clone(),
        kind: k,
        pid,
        start_time: start,
        namespace: s.namespace(),
        argv,
        stop_signal: if k == TargetKind::Tgtd {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        },
        log: log.clone(),
    });
    st.save(&cfg.state_path)?;
    if k == TargetKind::Tgtd {
        tgtd_setup(cfg.runner, s, pid, start, &name, &log)?;
    }
    // Every portal, so that each path works before anyone uses it.
    for addr in s.addrs(k) {
        procs::wait_port(&name, addr, pid, start, &log, PORT_WAIT)?;
    }
    st.targets.extend(lab_targets(s, k));
    st.save(&cfg.state_path)
}

/// tgtd takes a moment to open its control socket: retry the first tgtadm call.
fn tgtd_setup(
    r: &dyn Runner,
    p: &Site,
    pid: u32,
    start: u64,
    name: &str,
    log: &Path,
) -> Result<(), LabError> {
    let cmds = p.tgtd_setup(&p.tgtd_image());
    let t0 = Instant::now();
    loop {
        match r.run(&cmds[0]) {
            Ok(_) => break,
            Err(e) if t0.elapsed() > PORT_WAIT => return Err(e),
            Err(e) if !procs::alive(pid, start) => {
                return Err(LabError::Target {
                    name: name.into(),
                    reason: format!("tgtd exited ({}); {e}", procs::last_line(log)),
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    for c in &cmds[1..] {
        r.run(c)?;
    }
    Ok(())
}

/// Removes the lab recorded at `state_path` (processes by pid and start time, namespaces,
/// links, files), then anything left under the lab's name prefixes. Idempotent: with nothing
/// there it does nothing. Returns what it removed, one line each.
pub fn down(r: &dyn Runner, state_path: &Path) -> Result<Vec<String>, LabError> {
    let mut done = Vec::new();
    if let Some(st) = LabState::load(state_path)? {
        done.extend(teardown(r, &st));
        std::fs::remove_file(state_path).map_err(|e| LabError::File {
            path: state_path.to_path_buf(),
            reason: format!("cannot remove: {e}"),
        })?;
        let _ = std::fs::remove_dir(log_dir(state_path));
    }
    done.extend(sweep(r)?);
    Ok(done)
}

/// Removes what `st` records. Best effort: one failure does not stop the rest.
fn teardown(r: &dyn Runner, st: &LabState) -> Vec<String> {
    let mut done = Vec::new();
    for p in st.processes.iter().rev() {
        if procs::stop(p.pid, p.start_time, p.stop_signal) {
            done.push(format!("stopped {} (pid {})", p.name, p.pid));
        }
    }
    for ns in st.namespaces.iter().rev() {
        done.extend(remove_namespace(r, ns));
    }
    for l in &st.host_links {
        if remove_link(r, l) {
            done.push(format!("deleted link {l}"));
        }
    }
    for f in &st.files {
        if std::fs::remove_file(f).is_ok() {
            done.push(format!("removed {}", f.display()));
        }
    }
    done
}

/// Stops whatever still runs inside `ns` (only the lab starts processes there), then deletes
/// it. A namespace that still holds a process would outlive `ip netns del`, link and all.
fn remove_namespace(r: &dyn Runner, ns: &str) -> Vec<String> {
    let mut done = Vec::new();
    if let Ok(out) = r.run(&argv(["ip", "netns", "pids", ns])) {
        for pid in out.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
            if let Some(start) = procs::start_time(pid) {
                if procs::stop(pid, start, libc::SIGTERM) {
                    done.push(format!("stopped pid {pid} in {ns}"));
                }
            }
        }
    }
    match r.run(&argv(["ip", "netns", "del", ns])) {
        Ok(_) => done.push(format!("deleted namespace {ns}")),
        Err(e) if is_gone(&e) => {}
        Err(e) => done.push(format!("warning: {e}")),
    }
    done
}

/// Deletes a host interface unless it is already gone. Deleting a namespace frees its end of
/// a veth pair asynchronously, so wait a little for the host end to vanish on its own first.
fn remove_link(r: &dyn Runner, name: &str) -> bool {
    let sys = Path::new("/sys/class/net").join(name);
    let t0 = Instant::now();
    while sys.exists() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !sys.exists() {
        return false;
    }
    r.run(&argv(["ip", "link", "del", name])).is_ok()
}

/// Names of the lab's namespaces (`sblab-*`) on this host.
pub fn lab_namespaces(r: &dyn Runner) -> Result<Vec<String>, LabError> {
    let out = r.run(&argv(["ip", "netns", "list"]))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(NS_PREFIX))
        .map(String::from)
        .collect())
}

/// Names of the lab's interfaces (`sbl-*`) in the host namespace.
pub fn lab_links(r: &dyn Runner) -> Result<Vec<String>, LabError> {
    let out = r.run(&argv(["ip", "-o", "link", "show"]))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
        .filter(|n| n.starts_with(IF_PREFIX))
        .collect())
}

/// Removes every `sblab-*` namespace and `sbl-*` link: what a crashed lab left behind.
fn sweep(r: &dyn Runner) -> Result<Vec<String>, LabError> {
    let mut done = Vec::new();
    for ns in lab_namespaces(r)? {
        done.extend(remove_namespace(r, &ns));
        // The LUN image a tgtd in that namespace served (named after the link).
        let img = format!("/dev/shm/{ns}-tgtd.img");
        if std::fs::remove_file(&img).is_ok() {
            done.push(format!("removed {img}"));
        }
    }
    for l in lab_links(r)? {
        if remove_link(r, &l) {
            done.push(format!("deleted link {l}"));
        }
    }
    Ok(done)
}

#[cfg(test)]
#[path = "lab_tests.rs"]
mod tests;
