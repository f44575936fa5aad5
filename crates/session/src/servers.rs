//! sanbench's built-in servers, for `serve` and `demo`.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::CliError;
use crate::placement::CpuList;
use anyhow::Context;

/// Starts the built-in network targets (NBD, iSCSI, NVMe/TCP) on loopback ports chosen by the
/// kernel and adds their URIs (named) to `targets`.
pub fn start_demo_servers(
    size: u64,
    prealloc: bool,
    targets: &mut Vec<String>,
    shutdown: &Arc<AtomicBool>,
    threads: &mut Vec<JoinHandle<()>>,
    cpus: Option<&CpuList>,
) -> Result<(), CliError> {
    // Each server's accept thread pins itself first: its connection threads inherit that.
    let pin = |cpus: &Option<CpuList>| {
        if let Some(c) = cpus {
            if let Err(e) = crate::placement::pin_thread(c) {
                eprintln!("sanbench demo: cannot pin a server to {}: {e}", c.phrase());
            }
        }
    };
    let loopback: SocketAddr = "127.0.0.1:0".parse().expect("loopback address");
    // All three keep their bytes in the same kind of store (sanbench-blockstore): they differ
    // by transport.
    let mut cfg = sanbench_nbd::ServerConfig::ram(loopback, size);
    cfg.prealloc = prealloc;
    let nbd = sanbench_nbd::Server::bind(cfg).context("starting the NBD server")?;
    targets.push(format!("NBD (loopback)=nbd://{}", nbd.local_addr()));
    let (stop, on) = (shutdown.clone(), cpus.cloned());
    threads.push(
        std::thread::Builder::new()
            .name("demo-nbd".into())
            .spawn(move || {
                pin(&on);
                if let Err(e) = nbd.run(stop) {
                    eprintln!("sanbench demo: NBD server: {e}");
                }
            })
            .context("spawning the NBD server")?,
    );
    let iscsi = sanbench_iscsi::target::Target::bind(sanbench_iscsi::target::TargetConfig {
        listen: loopback,
        lun_size: size,
        prealloc,
        ..Default::default()
    })
    .context("starting the iSCSI target")?;
    targets.push(format!(
        "iSCSI (loopback)=iscsi://{}/{}/0",
        iscsi.local_addr(),
        sanbench_iscsi::target::TargetConfig::default().iqn
    ));
    let (stop, on) = (shutdown.clone(), cpus.cloned());
    threads.push(
        std::thread::Builder::new()
            .name("demo-iscsi".into())
            .spawn(move || {
                pin(&on);
                if let Err(e) = iscsi.run(stop) {
                    eprintln!("sanbench demo: iSCSI target: {e}");
                }
            })
            .context("spawning the iSCSI target")?,
    );
    let nvme = sanbench_nvme::target::Target::bind(sanbench_nvme::target::TargetConfig {
        listen: loopback,
        size,
        prealloc,
        ..Default::default()
    })
    .context("starting the NVMe/TCP target")?;
    targets.push(format!(
        "NVMe-TCP (loopback)=nvme+tcp://{}/{}/1",
        nvme.local_addr(),
        sanbench_nvme::target::TargetConfig::default().nqn
    ));
    let (stop, on) = (shutdown.clone(), cpus.cloned());
    threads.push(
        std::thread::Builder::new()
            .name("demo-nvme".into())
            .spawn(move || {
                pin(&on);
                if let Err(e) = nvme.run(stop) {
                    eprintln!("sanbench demo: NVMe/TCP target: {e}");
                }
            })
            .context("spawning the NVMe/TCP target")?,
    );
    Ok(())
}
