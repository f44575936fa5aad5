//! `lab`: the software test bed's command line.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use sanbench_engine::units::Bytes;

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Build the links, start the targets inside them, write the state (= lab) file.
    #[command(after_help = "LINKS: NAME=RATE[,mtu=N][,offload=off][,switched]
  NAME     up to 8 of a-z 0-9 -; namespace sblab-NAME, host interface sbl-NAME-h
  RATE     10gbit, 1gbit, 100mbit, ... shaped by htb in both directions
  mtu=N    MTU on every interface of the path (default 1500)
  offload=off  TSO, GSO, GRO and checksum offloads off on every interface
  switched one more forwarding element: a bridge in namespace sblab-NAME-sw

Addresses: link N (0-based) is 10.213.N.0/30, host .1, targets .2. Targets are named
KIND@LINK (nbd@ten) in the lab file. Needs root, ip and tc (iproute2).

PATHS (multipath): --paths a,b puts ONE target namespace (sblab-a+b) behind links a and b,
each still its own veth pair, /30 and shaping; the targets there listen on every path's
address (serve --listen per path, tgtd with one portal per path, nbdkit on all). The lab file
then names KIND@a+b with a multipath URI over every path (iscsi://10.213.0.2:3260,10.213.1.2:3260/IQN/0)
and KIND@a, KIND@b over one path each (the same store). Several groups may be given
(--paths a,b --paths c,d); a link is in one group at most; links in no group keep a
namespace of their own.
Example: sanbench lab up --link one=1gbit --link ten=10gbit --targets nbd
         sanbench compare --lab /run/sanbench/lab.json --suite lab
         sanbench lab up --link a=1gbit --link b=1gbit --paths a,b --targets iscsi
         sanbench run --fault 10s:b:down,20s:b:up --time 30s 'iscsi://...,...?path_timeout=1s'")]
    Up(LabUpArgs),
    /// Stop every target and remove every namespace and link the lab made.
    Down(LabStateArgs),
    /// What exists: namespaces, links with their shaped rate and MTU, faults, processes.
    Status(LabStateArgs),
    /// Fault a link at once: down, up, loss=PCT, delay=D or clear (one line, then exit).
    #[command(
        after_help = "ACTIONS (on both shaped ends of the link, under its htb class, so the rate stays):
  down        every packet dropped in silence (a blackhole qdisc): TCP sees no reset and no
              error, only silence, as behind a pulled cable
  up          packets flow again (loss and delay set before 'down' come back with it)
  loss=PCT    netem loses PCT % of the packets, each direction (loss=0 removes it)
  delay=D     netem holds each packet D (10ms, 250us), each direction: the round trip
              grows by 2 D (delay=0 removes it)
  clear       no fault at all
loss= and delay= need the kernel's netem (sch_netem). The fault is recorded in the lab file
and shown by 'lab status'. During a run: run/compare --fault AT:LINK:ACTION."
    )]
    Fault(LabFaultArgs),
}

#[derive(Args, Debug, Clone)]
pub struct LabFaultArgs {
    /// The link (a --link name of the running lab).
    #[arg(value_name = "LINK")]
    pub link: String,
    /// down, up, loss=PCT, delay=D or clear.
    #[arg(value_name = "ACTION", allow_hyphen_values = true)]
    pub action: String,
    #[command(flatten)]
    pub state: LabStateArgs,
}

#[derive(Args, Debug, Clone)]
pub struct LabUpArgs {
    /// A link: NAME=RATE[,mtu=N][,offload=off][,switched]; repeatable.
    #[arg(long = "link", required = true, value_name = "SPEC")]
    pub links: Vec<String>,
    /// Targets to start behind every link (or path group): nbd, iscsi, nvme (sanbench's
    /// own), nbdkit, tgtd.
    #[arg(long, default_value = "nbd,iscsi", value_name = "LIST")]
    pub targets: String,
    /// A path group: one target namespace reached over each of these links (multipath);
    /// repeatable for several groups.
    #[arg(long = "paths", value_name = "LINK,LINK,...")]
    pub paths: Vec<String>,
    /// Size of each RAM disk.
    #[arg(long, default_value = "1G", value_name = "SIZE")]
    pub size: Bytes,
    /// Pin every target the lab starts (its processes and their threads) to these CPUs
    /// (0, 0,2, 0-3), e.g. away from the CPUs compare --cpus gives the initiator.
    #[arg(long, value_name = "LIST")]
    pub target_cpus: Option<sanbench_session::placement::CpuList>,
    #[command(flatten)]
    pub state: LabStateArgs,
}

#[derive(Args, Debug, Clone)]
pub struct LabStateArgs {
    /// State file (default /run/sanbench/lab.json; $XDG_RUNTIME_DIR/sanbench/lab.json for
    /// non-root).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
}
