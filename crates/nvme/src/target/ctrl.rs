//! State shared by the target's connections: the subsystem (namespace store, identity), and
//! the controllers the admin queues' Connects create, with their properties (CC, CSTS) and
//! keep-alive timers. Properties follow NVMe Base 2.0 §3.1.3 and the enable / shutdown
//! handshakes of §3.5: CSTS.RDY follows CC.EN at once, as nothing needs preparing.

use sanbench_io::poison;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sanbench_blockstore::BlockStore;

use super::ana::AnaStates;
use super::TargetConfig;
use crate::wire::ana::AnaState;
use crate::wire::fabrics::prop;

pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";
/// The namespace's logical block size.
pub const BLOCK: u64 = 512;
/// Admin queue entries (Linux's host asks for 32).
pub const ADMIN_QUEUE_SIZE: u16 = 32;

pub(crate) struct Shared {
    pub cfg: TargetConfig,
    pub store: BlockStore,
    /// Blocks of each namespace; namespace N starts at block (N - 1) * blocks of the store.
    pub blocks: u64,
    /// The first port (the one a single-port target has).
    pub local: SocketAddr,
    /// Every port, `local` first: one subsystem, one set of namespaces behind them all.
    pub ports: Vec<SocketAddr>,
    /// Namespace GUID, derived from the NQN and the first port so two targets differ and
    /// every port of one target shows the same.
    pub nguid: [u8; 16],
    /// The one ANA group's state at each port (`target/ana.rs`).
    pub ana: AnaStates,
    ctrls: Mutex<HashMap<u16, Arc<Ctrl>>>,
    next_cntlid: AtomicU16,
    /// I/O counters (`serve --metrics-listen`), once `Target::counters` turned them on.
    pub counters: sanbench_blockstore::counters::Switch,
}

impl Shared {
    pub fn new(
        cfg: TargetConfig,
        store: BlockStore,
        ports: Vec<SocketAddr>,
        ana: &[AnaState],
    ) -> Shared {
        let local = ports[0];
        let seed = format!("{}:{}", cfg.nqn, local);
        let a = crc32c::crc32c(seed.as_bytes());
        let b = crc32c::crc32c_append(a, b"nguid");
        let mut nguid = [0u8; 16];
        nguid[..4].copy_from_slice(&a.to_be_bytes());
        nguid[4..8].copy_from_slice(&b.to_be_bytes());
        nguid[8..16].copy_from_slice(b"sanbench");
        Shared {
            blocks: store.size() / BLOCK / cfg.namespaces.max(1) as u64,
            cfg,
            store,
            local,
            ports,
            nguid,
            ana: AnaStates::new(ana),
            ctrls: Mutex::new(HashMap::new()),
            next_cntlid: AtomicU16::new(1),
            counters: Default::default(),
        }
    }

    /// Whether `nsid` names an active namespace.
    pub fn ns_active(&self, nsid: u32) -> bool {
        nsid >= 1 && nsid <= self.cfg.namespaces
    }

    /// Byte offset of an active namespace in the store.
    pub fn ns_base(&self, nsid: u32) -> Option<u64> {
        self.ns_active(nsid)
            .then(|| (nsid as u64 - 1) * self.blocks * BLOCK)
    }

    /// Namespace `nsid`'s GUID: the subsystem's, its last four bytes XORed with the NSID
    /// (namespace 1 keeps the GUID a one-namespace target has always had).
    pub fn nguid_of(&self, nsid: u32) -> [u8; 16] {
        let mut g = self.nguid;
        if nsid > 1 {
            for (b, x) in g[12..].iter_mut().zip(nsid.to_be_bytes()) {
                *b ^= x;
            }
        }
        g
    }

    /// Blocks of namespace `nsid` that hold data (NUSE): with one namespace, the store's
    /// allocation; with several, the mapped extents within the namespace's range.
    pub fn ns_used_blocks(&self, nsid: u32) -> u64 {
        let bytes = self.blocks * BLOCK;
        if self.cfg.namespaces <= 1 {
            return self.store.allocated_bytes().min(bytes) / BLOCK;
        }
        let Some(base) = self.ns_base(nsid) else {
            return 0;
        };
        let (mut off, end, mut used) = (base, base + bytes, 0);
        while off < end {
            let (data, next) = self.store.mapped(off, end - off);
            if next <= off {
                break;
            }
            if data {
                used += next - off;
            }
            off = next;
        }
        used / BLOCK
    }

    /// Sets port `port`'s ANA state; when it changed, every controller connected through that
    /// port has an ANA change notice to report.
    pub fn set_ana(&self, port: usize, s: AnaState) {
        if !self.ana.set(port, s) {
            return;
        }
        let map = poison::lock(&self.ctrls);
        for c in map.values().filter(|c| c.port == port && !c.discovery) {
            c.ana_event.store(true, Ordering::Release);
        }
    }

    /// A new controller for a host connected through port `port`, or `None` when all ids are
    /// taken. Controller ids are unique in the subsystem, across ports (Linux's host refuses
    /// a second controller with an id it already has).
    pub fn create_ctrl(
        &self,
        hostnqn: &str,
        discovery: bool,
        kato_ms: u32,
        port: usize,
    ) -> Option<Arc<Ctrl>> {
        let mut map = poison::lock(&self.ctrls);
        for _ in 0..0xffef {
            let id = self.next_cntlid.fetch_add(1, Ordering::Relaxed);
            // 0xfff0..=0xffff are reserved (0xffff: "any controller" in Connect).
            let id = (id % 0xffef) + 1;
            if let std::collections::hash_map::Entry::Vacant(v) = map.entry(id) {
                let mut c = Ctrl::new(id, hostnqn.to_string(), discovery, kato_ms);
                c.port = port;
                let c = Arc::new(c);
                v.insert(c.clone());
                return Some(c);
            }
        }
        None
    }

    pub fn find_ctrl(&self, cntlid: u16) -> Option<Arc<Ctrl>> {
        let map = poison::lock(&self.ctrls);
        map.get(&cntlid).cloned()
    }

    /// Ends a controller: its I/O queues see `dead` and close.
    pub fn remove_ctrl(&self, c: &Ctrl) {
        c.dead.store(true, Ordering::Relaxed);
        let mut map = poison::lock(&self.ctrls);
        map.remove(&c.cntlid);
    }
}

pub(crate) struct Ctrl {
    pub cntlid: u16,
    pub hostnqn: String,
    pub discovery: bool,
    /// The port (0-based) the admin queue connected through: whose ANA state it reports.
    pub port: usize,
    /// Asynchronous Event Configuration (Set Features 0Bh).
    pub aec: AtomicU32,
    /// An ANA change to report with the next Asynchronous Event Request.
    pub ana_event: AtomicBool,
    /// An ANA change notice was sent and the host has not read the log page since (without
    /// RAE): further changes are not announced until it has (NVMe Base 2.0 §5.2: an event
    /// type is masked until its log page is read).
    pub ana_masked: AtomicBool,
    pub cc: AtomicU32,
    pub csts: AtomicU32,
    pub kato_ms: AtomicU32,
    /// I/O queues granted by Set Features (Number of Queues), 0 until asked.
    pub queues_granted: AtomicU16,
    pub dead: AtomicBool,
    last_keep_alive: Mutex<Instant>,
    io_queues: Mutex<HashSet<u16>>,
}

impl Ctrl {
    fn new(cntlid: u16, hostnqn: String, discovery: bool, kato_ms: u32) -> Ctrl {
        Ctrl {
            cntlid,
            hostnqn,
            discovery,
            port: 0,
            aec: AtomicU32::new(0),
            ana_event: AtomicBool::new(false),
            ana_masked: AtomicBool::new(false),
            cc: AtomicU32::new(0),
            csts: AtomicU32::new(0),
            kato_ms: AtomicU32::new(kato_ms),
            queues_granted: AtomicU16::new(0),
            dead: AtomicBool::new(false),
            last_keep_alive: Mutex::new(Instant::now()),
            io_queues: Mutex::new(HashSet::new()),
        }
    }

    pub fn ready(&self) -> bool {
        self.csts.load(Ordering::Relaxed) & prop::CSTS_RDY != 0
    }

    /// A Property Set of CC: enable, disable (reset) or shut down.
    pub fn set_cc(&self, v: u32) {
        let old = self.cc.swap(v, Ordering::Relaxed);
        let mut csts = self.csts.load(Ordering::Relaxed);
        if v & prop::CC_EN != 0 && old & prop::CC_EN == 0 {
            csts |= prop::CSTS_RDY;
        }
        if v & prop::CC_EN == 0 {
            csts &= !(prop::CSTS_RDY | prop::CSTS_SHST_CMPLT);
        }
        if v & prop::CC_SHN_MASK != 0 {
            csts |= prop::CSTS_SHST_CMPLT;
        }
        self.csts.store(csts, Ordering::Relaxed);
    }

    pub fn keep_alive(&self) {
        *poison::lock(&self.last_keep_alive) = Instant::now();
    }

    /// True once the host has been silent for longer than KATO (plus a second of grace, as
    /// the host may send its keep-alive late by its own timer's granularity).
    pub fn keep_alive_expired(&self, now: Instant) -> bool {
        let kato = self.kato_ms.load(Ordering::Relaxed);
        if kato == 0 {
            return false;
        }
        let last = *poison::lock(&self.last_keep_alive);
        now.saturating_duration_since(last) > Duration::from_millis(kato as u64 + 1000)
    }

    /// Claims an I/O queue id; false if it is already connected.
    pub fn claim_queue(&self, qid: u16) -> bool {
        poison::lock(&self.io_queues).insert(qid)
    }

    pub fn release_queue(&self, qid: u16) {
        poison::lock(&self.io_queues).remove(&qid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enable_and_shutdown() {
        let c = Ctrl::new(1, "h".into(), false, 0);
        assert!(!c.ready());
        c.set_cc(prop::CC_ENABLE);
        assert!(c.ready());
        c.set_cc(prop::CC_ENABLE | 1 << 14);
        assert_ne!(c.csts.load(Ordering::Relaxed) & prop::CSTS_SHST_CMPLT, 0);
        c.set_cc(0);
        assert!(!c.ready());
    }

    #[test]
    fn keep_alive_timer() {
        let c = Ctrl::new(1, "h".into(), false, 100);
        let now = Instant::now();
        assert!(!c.keep_alive_expired(now));
        assert!(c.keep_alive_expired(now + Duration::from_millis(1200)));
        c.kato_ms.store(0, Ordering::Relaxed);
        assert!(!c.keep_alive_expired(now + Duration::from_secs(100)));
        assert!(c.claim_queue(1) && !c.claim_queue(1));
        c.release_queue(1);
        assert!(c.claim_queue(1));
    }
}
