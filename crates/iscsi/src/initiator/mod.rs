//! The `iscsi://` engine: an iSCSI initiator (RFC 7143) behind sanbench's
//! [`Target`]/[`Queue`] traits.
//!
//! [`open`] logs in once, asks the LUN what it is (INQUIRY, READ CAPACITY, Block Limits VPD,
//! MODE SENSE), records the negotiated parameters in [`TargetInfo::params`] and logs out. Each
//! [`Target::open_queue`] then logs in a session of its own (one connection, its own ISID), so
//! workers never share a socket or a sequence number space.
//!
//! * [`uri`]: parses `iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN`.
//! * `link`: connect, login exchange, non-blocking send, buffered receive.
//! * `session`: the task table, CmdSN window, PDU handling (the [`Queue`] impl).
//! * `pump`: the send/receive loop with the I/O timeout.
//! * `queue`: the `Queue` impl, NOP-Out ping, Logout, `stats()`.
//! * `probe`: the SCSI questions asked at open time.
//! * `discard`: which commands carry trims and write-zeroes, within the LUN's limits.
//! * `provisioning`: GET LBA STATUS for [`Target::allocation`], on a session of its own.
//!
//! Only loopback or lab addresses are expected; nothing here retries or recovers a connection
//! (ErrorRecoveryLevel 0): any protocol violation ends the run with an error naming the peer.

pub(crate) mod discard;
mod link;
mod probe;
mod provisioning;
mod pump;
mod queue;
mod session;
pub mod uri;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sanbench_io::{
    Allocation, Arena, EngineError, Queue, QueueConfig, SocketLayer, Target, TargetInfo,
};

use crate::wire::chap::Credentials;
use crate::wire::login_initiator::InitiatorLoginConfig;
pub use session::Session;
pub use uri::IscsiUri;

/// Digest preference for one direction of the header or data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Digest {
    #[default]
    None,
    /// Offer `CRC32C,None`: CRC32C when the target agrees.
    Crc32c,
}

/// What the initiator asks for at login.
#[derive(Clone, Debug)]
pub struct InitiatorOptions {
    pub initiator_name: String,
    pub header_digest: Digest,
    pub data_digest: Digest,
    /// Bound on connecting and on each login step (and on the probe's commands at open).
    pub login_timeout: Duration,
    /// Largest Data-In segment we accept (declared to the target).
    pub max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    /// Up to this many new commands wait to be sent together while more than half the queue
    /// depth is still outstanding at the target (1 = send every batch at once). Fewer send
    /// calls and target wake-ups per I/O; the target still always has at least half the depth.
    /// Held commands count as outstanding, so against a target that is not saturated (its
    /// latency does not grow with depth) a batch of N costs up to N-1 of the queue depth: the
    /// default of 2 keeps that to one command (about 1.5 % of QD 32).
    pub submit_batch: u32,
    /// Mutual CHAP: the name and secret the target must prove (libiscsi's `target_user` and
    /// `target_password`). The initiator's own credentials come from the URI.
    pub target_chap: Option<Credentials>,
    /// The sessions' socket layer asked for (`sockio=`): the poll loop or io_uring where the
    /// kernel has what it needs.
    pub socket: SocketLayer,
}

impl Default for InitiatorOptions {
    fn default() -> Self {
        InitiatorOptions {
            initiator_name: "iqn.2026-11.io.sanbench:initiator".into(),
            header_digest: Digest::None,
            data_digest: Digest::None,
            login_timeout: Duration::from_secs(10),
            max_recv_data_segment_length: 256 * 1024,
            max_burst_length: 1 << 20,
            first_burst_length: 256 * 1024,
            submit_batch: 2,
            target_chap: None,
            socket: SocketLayer::from_env(),
        }
    }
}

impl InitiatorOptions {
    fn validate(&self) -> Result<(), EngineError> {
        let range = 512..=(1 << 24) - 1;
        for (k, v) in [
            (
                "MaxRecvDataSegmentLength",
                self.max_recv_data_segment_length,
            ),
            ("MaxBurstLength", self.max_burst_length),
            ("FirstBurstLength", self.first_burst_length),
        ] {
            if !range.contains(&v) {
                return Err(EngineError::Invalid(format!(
                    "iSCSI {k} {v} outside 512..=16777215"
                )));
            }
        }
        if self.first_burst_length > self.max_burst_length {
            return Err(EngineError::Invalid(
                "iSCSI FirstBurstLength must not exceed MaxBurstLength".into(),
            ));
        }
        if self.initiator_name.is_empty() || self.login_timeout.is_zero() {
            return Err(EngineError::Invalid(
                "iSCSI initiator name and login timeout must be set".into(),
            ));
        }
        Ok(())
    }
}

struct Spec {
    uri: IscsiUri,
    addr: std::net::SocketAddr,
    peer: String,
    opts: InitiatorOptions,
}

/// ISID type 0b10, "random" (RFC 7143 §11.12.5): B and C (24 bits) drawn from getrandom(2)
/// once per process, D a per-process counter, so each queue is a new session rather than a
/// reinstatement of another, and two processes (or hosts) with one initiator name do not
/// collide by construction. Without random bytes the login fails.
fn new_isid() -> Result<u64, EngineError> {
    static BC: std::sync::OnceLock<Result<u64, String>> = std::sync::OnceLock::new();
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let bc = BC
        .get_or_init(|| {
            let mut b = [0u8; 3];
            crate::os_random(&mut b)
                .map(|()| u64::from_be_bytes([0, 0, 0, 0, 0, b[0], b[1], b[2]]))
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| EngineError::sys("getrandom for the iSCSI ISID", std::io::Error::other(e)))?;
    let d = NEXT.fetch_add(1, Ordering::Relaxed) as u64 & 0xffff;
    Ok(0x80 << 40 | bc << 16 | d)
}

fn connect(
    spec: &Spec,
    arena: Arc<Arena>,
    depth: u32,
    block_size: u32,
    io_timeout: Duration,
    ring: Option<&sanbench_io::SharedRing>,
) -> Result<Session, EngineError> {
    let o = &spec.opts;
    let cfg = InitiatorLoginConfig {
        initiator_name: o.initiator_name.clone(),
        target_name: Some(spec.uri.iqn.clone()),
        isid: new_isid()?,
        chap: spec.uri.chap.clone(),
        target_chap: o.target_chap.clone(),
        header_digest: o.header_digest == Digest::Crc32c,
        data_digest: o.data_digest == Digest::Crc32c,
        max_recv_data_segment_length: o.max_recv_data_segment_length,
        max_burst_length: o.max_burst_length,
        first_burst_length: o.first_burst_length,
        immediate_data: true,
        initial_r2t: false,
        cmd_sn: 1,
        itt: 0,
    };
    let li = link::login(spec.addr, spec.peer.clone(), cfg, o.login_timeout)?;
    let mut s = Session::new(
        li,
        arena,
        depth,
        spec.uri.lun,
        block_size,
        io_timeout,
        o.submit_batch,
    )?;
    // The probe at open said the kernel has what the ring needs.
    if o.socket == SocketLayer::Uring {
        s.use_ring(ring);
    }
    Ok(s)
}

/// Opens `iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN`: one login to learn the LUN's size and the
/// negotiated parameters, then logout. Queues log in sessions of their own.
pub fn open(uri: &str, opts: &InitiatorOptions) -> Result<Box<dyn Target>, EngineError> {
    opts.validate()?;
    let u = IscsiUri::parse(uri)?;
    let invalid =
        |why: &str| EngineError::Invalid(format!("{}: {why}", sanbench_io::redact::redact(uri)));
    match (&u.chap, &opts.target_chap) {
        (None, Some(_)) => {
            return Err(invalid(
                "mutual CHAP (target_user, target_password) needs the initiator's own \
                 credentials too: iscsi://USER%SECRET@HOST/IQN/LUN",
            ))
        }
        // RFC 7143 §12.1.3: never the same secret in both directions.
        (Some(ours), Some(theirs)) if ours.secret == theirs.secret => {
            return Err(invalid(
                "target_password must differ from the initiator's own secret",
            ))
        }
        _ => {}
    }
    let addr = u.resolve()?;
    let (socket, fallback) = opts.socket.choose();
    let spec = Spec {
        peer: format!("{} ({})", u.portal(), u.iqn),
        uri: u,
        addr,
        opts: InitiatorOptions {
            socket,
            ..opts.clone()
        },
    };
    let arena = Arc::new(Arena::new(probe::ARENA));
    let mut s = connect(&spec, arena, 1, 1, opts.login_timeout, None)?;
    let (mut info, disc) = probe::probe(&mut s, &spec.uri)?;
    info.uri = sanbench_io::redact::redact(uri);
    probe::session_params(&s, &spec, &mut info);
    info.params.insert("socket".into(), socket.name().into());
    for (k, v) in sanbench_io::RingFeatures::info_params(socket) {
        info.params.insert(k.into(), v.into());
    }
    if let Some(f) = fallback {
        info.params
            .insert("socket_fallback".into(), format!("uring asked: {f}").into());
    }
    s.logout()?;
    Ok(Box::new(IscsiTarget { spec, info, disc }))
}

struct IscsiTarget {
    spec: Spec,
    info: TargetInfo,
    disc: discard::Discard,
}

impl Target for IscsiTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    fn allocation(&self, offset: u64, len: u64) -> Result<Option<Allocation>, EngineError> {
        provisioning::allocation(&self.spec, &self.info, offset, len)
    }

    /// UNMAP or WRITE SAME with UNMAP for trims, WRITE SAME(16) for write-zeroes, as the
    /// LUN's provisioning and Block Limits pages offer them (`discard`).
    fn supports(&self, op: sanbench_io::Op) -> bool {
        self.disc.supports(op)
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        let mut s = connect(
            &self.spec,
            cfg.arena.clone(),
            cfg.depth,
            self.info.block_size,
            cfg.io_timeout,
            cfg.socket_ring.as_ref(),
        )?;
        s.set_discard(self.disc);
        Ok(Box::new(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isids_are_random_type_and_distinct() {
        let a = new_isid().unwrap();
        let b = new_isid().unwrap();
        assert_eq!(a >> 40, 0x80, "type 0b10 (random), A = 0");
        assert_ne!(a, b);
        // Same process: same random B and C, next D.
        assert_eq!(a >> 16, b >> 16);
        assert!(a < 1 << 48);
    }

    #[test]
    fn debug_of_the_options_hides_the_target_secret() {
        let o = InitiatorOptions {
            target_chap: Some(Credentials::new("tgt", "target-secret-8")),
            ..InitiatorOptions::default()
        };
        let d = format!("{o:?}");
        assert!(d.contains("tgt") && !d.contains("target-secret-8"), "{d}");
    }
}
