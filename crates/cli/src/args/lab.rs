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
Example: sanbench lab up --link one=1gbit --link ten=10gbit --targets nbd
         sanbench compare --lab /run/sanbench/lab.json --suite lab")]
    Up(LabUpArgs),
    /// Stop every target and remove every namespace and link the lab made.
    Down(LabStateArgs),
    /// What exists: namespaces, links with their shaped rate and MTU, processes.
    Status(LabStateArgs),
}

#[derive(Args, Debug, Clone)]
pub struct LabUpArgs {
    /// A link: NAME=RATE[,mtu=N][,offload=off][,switched]; repeatable.
    #[arg(long = "link", required = true, value_name = "SPEC")]
    pub links: Vec<String>,
    /// Targets to start behind every link: nbd, iscsi (sanbench's own), nbdkit, tgtd.
    #[arg(long, default_value = "nbd,iscsi", value_name = "LIST")]
    pub targets: String,
    /// Size of each RAM disk.
    #[arg(long, default_value = "1G", value_name = "SIZE")]
    pub size: Bytes,
    /// Pin every target the lab starts (its processes and their threads) to these CPUs
    /// (0, 0,2, 0-3), e.g. away from the CPUs compare --cpus gives the initiator.
    #[arg(long, value_name = "LIST")]
    pub target_cpus: Option<crate::placement::CpuList>,
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
