//! `sanbench help TOPIC`, `sanbench completions SHELL` and `sanbench man [DIR]`:
//! everything a user reads about the command line comes from the one clap definition in
//! args/, so help, man pages and completions cannot drift apart (ripgrep's way). Topics hold
//! the long texts (target URIs, access specifications, exit codes) that would bury the
//! options in `run --help`.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;

use crate::args::{Cli, ManArgs};
use sanbench_session::error::CliError;

/// The topics of `sanbench help TOPIC`: name, one-line summary, text.
pub const TOPICS: &[(&str, &str, &str)] = &[
    (
        "targets",
        "every kind of target and URI, multipath and its options",
        TARGETS,
    ),
    (
        "spec",
        "access specifications: flags, the TOML file, sizes and durations",
        SPEC,
    ),
    ("exit-codes", "what each exit code means", EXIT_CODES),
];

const TARGETS: &str = "\
TARGETS (run, compare, crosscheck, verify)

  null:[SIZE]          completes at once, moves no data (measures sanbench itself)
  mem:SIZE             an in-process RAM disk
  PATH | file:PATH     a file (created and filled at --size when missing) or a block device
  nbd://HOST[:PORT][/EXPORT]             NBD (port 10809)
  nbd+unix:///EXPORT?socket=PATH          NBD over a Unix socket
  nbds://... , nbds+unix://...            NBD over TLS: ?tls-certificates=DIR,
                                          tls-verify-peer=false, tls-hostname=NAME,
                                          tls-psk-file=FILE (user from USER@),
                                          ktls=off (records in user space, not the kernel's)
  iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN   iSCSI (port 3260); USER%@FILE reads the secret
                                          from FILE, USER%$VAR from the environment
  nvme+tcp://HOST[:PORT]/SUBSYSNQN[/NSID] NVMe/TCP (port 4420, namespace 1)
  nvme-ng:/dev/ngXnY   NVMe passthrough: I/O commands on the namespace's generic device over
                       io_uring URING_CMD (read, write, Write Zeroes, DSM deallocate)
  sg:/dev/sgN          SCSI passthrough: READ/WRITE(16), UNMAP, WRITE SAME(16) over SG_IO,
                       a thread per queue slot
  bsg:/dev/bsg/H:C:T:L the same SCSI commands through the bsg driver (struct sg_io_v4)
  Passthrough devices skip the block layer above the driver; writes follow the block
  device's safety rules (its block device mounted or holding a filesystem or partition
  table: refused unless --force), and the manifest labels the transport underneath.

Every worker drives every target, as in Iometer. In compare, a target is [ref:][NAME=]TARGET:
NAME labels it, ref: marks a reference ceiling that is never compared in the findings.

Query options
  iSCSI: digest=crc32c, header_digest=, data_digest=, initiator=IQN,
         target_user=NAME&target_password=SECRET (mutual CHAP; target_password_file=FILE,
         target_password_env=VAR keep it off the command line)
  NVMe/TCP: digest=header,data, hostnqn=NQN, kato=MS
  NBD and iSCSI: submit_batch=N (requests that travel together; default 2, 1 sends each at once)
  NBD, iSCSI, NVMe/TCP: sockio=uring|poll (sockets on io_uring, one system call per round
       trip, or the poll loop; default poll, or SANBENCH_SOCKET; the one used is the engine
       info's socket)

Multipath: several portals before the path, one connection per path per worker
  iscsi://H1[:P1],H2[:P2]/IQN/LUN   nvme+tcp://H1,H2/NQN/NSID   nbd://H1,H2/EXPORT
  ?policy=round-robin|queue-length|service-time (default service-time)
  &failback=immediate|manual  &path_timeout=DURATION (default 5s)
  &no_path_retry=DURATION (default 30s)
  Every path must lead to the same logical unit, else exit 2. A failed path's I/Os are sent
  again on the others; NVMe ANA states are honoured. The result's `multipath` block has
  each path's I/Os, bytes and events.

Writing to block devices: refused when the device is mounted, in use, or holds a filesystem or
partition table, unless --force; a device written to is opened O_EXCL, so one mounted or
claimed is refused even with --force. Reads are always allowed.

More: docs/guide (Targets and URIs), sanbench help spec.
";

const SPEC: &str = "\
ACCESS SPECIFICATIONS

From flags (one segment): --bs SIZE (4k), --read-bs/--write-bs SIZE, --read PCT (100),
--random PCT (100), --align SIZE, --qd N (1), --workers N (1), --ramp DURATION (0s),
--time DURATION (10s), --size SIZE (whole target), --rate IOPS (open loop).

From a TOML file (--spec FILE): any number of weighted segments, as Iometer's:

  name = \"mix\"
  qd = 8
  time = \"2m\"
  [[segment]]
  weight = 67
  bs = \"4k\"
  read = 70
  random = 100
  [[segment]]
  weight = 33
  bs = \"64k\"
  read = 100
  random = 0

From a fio job file: --fio JOBFILE [--section NAME]; every option sanbench does not map is
named (exit 2) unless --fio-ignore names it. --emit-fio FILE writes the fio job of a run.

Sizes are binary: 512, 4k = 4KiB = 4096, 1M, 1.5G. Durations: 500ms, 5s, 2m, 1h (a bare
number is seconds). Percentages: 70 or 70%.

Suites (compare, demo): sanbench suite list; sanbench suite show NAME.
More: docs/SPEC.md, docs/FIO.md.
";

const EXIT_CODES: &str = "\
EXIT CODES

  0  ok (crosscheck: the tools agree within --tolerance)
  1  the run failed: a dead target timed out, an I/O failed (its offset is named), a peer
     could not be started; crosscheck: outside the tolerance
  2  bad usage or input: one line on stderr says what; nothing ran
  3  data did not verify (--verify, sanbench verify)
";

/// `sanbench help TOPIC`, answered before clap parses the command line: clap's own `help`
/// subcommand stays (`sanbench help run`, `sanbench serve help nbd`), and a word after `help`
/// that is a topic prints the topic; one that is neither a topic nor a command is one line
/// naming both (exit 2). `None`: not a topic; clap goes on.
pub fn topic(args: &[String]) -> Option<Result<(), CliError>> {
    let [_, help, word] = args else {
        return None;
    };
    if help != "help" {
        return None;
    }
    if let Some((_, _, text)) = TOPICS.iter().find(|(n, _, _)| n == word) {
        out!("{text}");
        return Some(Ok(()));
    }
    if Cli::command().find_subcommand(word).is_some() || word.starts_with('-') {
        return None;
    }
    let topics: Vec<&str> = TOPICS.iter().map(|t| t.0).collect();
    Some(Err(sanbench_session::error::usage(format!(
        "no command or help topic '{word}' (topics: {}; commands: sanbench --help)",
        topics.join(", ")
    ))))
}

/// `sanbench completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<(), CliError> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sanbench", &mut buf);
    out!("{}", String::from_utf8_lossy(&buf));
    Ok(())
}

/// `sanbench man [DIR]`: one page per command and subcommand (sanbench.1, sanbench-run.1,
/// sanbench-serve-nbd.1, ...), named as the commands' display names; prints each path.
pub fn man(a: ManArgs) -> Result<(), CliError> {
    std::fs::create_dir_all(&a.dir)
        .map_err(|e| sanbench_session::error::usage(format!("{}: {e}", a.dir.display())))?;
    let mut cmd = Cli::command();
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, &a.dir, &mut written)?;
    for p in written {
        outln!("{}", p.display());
    }
    Ok(())
}

fn write_pages(
    cmd: &clap::Command,
    dir: &Path,
    written: &mut Vec<std::path::PathBuf>,
) -> Result<(), CliError> {
    if cmd.is_hide_set() || cmd.get_name() == "help" {
        return Ok(());
    }
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .render(&mut page)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("rendering {name}.1: {e}")))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&page))
        .map_err(|e| CliError::Failed(anyhow::anyhow!("{}: {e}", path.display())))?;
    written.push(path);
    for sub in cmd.get_subcommands() {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
