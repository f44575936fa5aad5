//! What the built-in servers count for `serve --metrics-listen`: per connection and per store
//! (an NBD export, an iSCSI LUN, an NVMe namespace), per op, the I/Os, bytes and errors;
//! per connection the I/Os in flight; connections accepted and open.
//!
//! Cost on a connection's data path: a connection's counters are its own (one writer, its
//! thread; a plain load and store each, no locked instruction, no line shared with another
//! connection), and a store's figures are the sum over connections, made at a scrape from
//! the open connections and the totals of those that ended (folded in when a connection's
//! [`ConnCounters`] is dropped). A server without `--metrics-listen` counts nothing.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The ops counted, in [`Op`] order.
pub const OPS: [&str; 5] = ["read", "write", "flush", "trim", "zero"];

/// An I/O's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read = 0,
    Write = 1,
    Flush = 2,
    /// Deallocation: NBD TRIM, SCSI UNMAP, NVMe Dataset Management (deallocate).
    Trim = 3,
    /// Zeroing: NBD WRITE_ZEROES, SCSI WRITE SAME, NVMe Write Zeroes.
    Zero = 4,
}

/// One op's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
}

impl Figures {
    fn add(&mut self, o: &Figures) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.errors += o.errors;
    }
}

#[derive(Default)]
struct Cell {
    ios: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

/// Adds `n` to a counter only its connection's thread writes.
#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Cell {
    fn get(&self) -> Figures {
        Figures {
            ios: self.ios.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// One connection's counters.
struct Conn {
    id: u64,
    peer: String,
    portal: String,
    /// Per store, per op.
    cells: Box<[[Cell; 5]]>,
    inflight: AtomicU64,
}

/// A server's counters.
pub struct ServerCounters {
    stores: Vec<String>,
    accepted: AtomicU64,
    open: Mutex<Vec<Arc<Conn>>>,
    /// Per store, per op: the figures of connections that ended.
    ended: Mutex<Vec<[Figures; 5]>>,
}

/// A server's counters: off until `serve --metrics-listen` turns them on, then counting every
/// connection accepted from that moment. The one switch of the three servers (NBD, iSCSI,
/// NVMe/TCP), held in their shared state.
#[derive(Default)]
pub struct Switch(OnceLock<Arc<ServerCounters>>);

impl Switch {
    /// Turns the counters on, for the stores `stores` names (asked only the first time), and
    /// returns them.
    pub fn turn_on(&self, stores: impl FnOnce() -> Vec<String>) -> Arc<ServerCounters> {
        self.0.get_or_init(|| ServerCounters::new(stores())).clone()
    }

    /// The counters, when they are on.
    pub fn get(&self) -> Option<&Arc<ServerCounters>> {
        self.0.get()
    }

    /// Counters for connection `id` on TCP stream `s` (its peer and the server's address it
    /// came to, empty when the kernel cannot say), when they are on.
    pub fn connect_tcp(&self, id: u64, s: &TcpStream) -> Option<ConnCounters> {
        let addr = |a: std::io::Result<SocketAddr>| a.map_or(String::new(), |a| a.to_string());
        self.get()
            .map(|c| c.connect(id, addr(s.peer_addr()), addr(s.local_addr())))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters stay meaningful whatever thread panicked while holding them.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One open connection as a scrape sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnSnapshot {
    pub id: u64,
    pub peer: String,
    pub portal: String,
    /// Per op, all stores together.
    pub ops: [Figures; 5],
    pub inflight: u64,
}

/// Everything a scrape shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub accepted: u64,
    pub open: Vec<ConnSnapshot>,
    /// Per store (its name), per op: every connection's, ended or open.
    pub stores: Vec<(String, [Figures; 5])>,
}

impl ServerCounters {
    /// Counters for a server of these stores (named as a scrape shows them: `lun0`, `ns1`).
    pub fn new(stores: Vec<String>) -> Arc<ServerCounters> {
        let n = stores.len();
        Arc::new(ServerCounters {
            stores,
            accepted: AtomicU64::new(0),
            open: Mutex::new(Vec::new()),
            ended: Mutex::new(vec![[Figures::default(); 5]; n]),
        })
    }

    /// A connection accepted from `peer` on `portal` (the server's address it came to),
    /// numbered `id` as the server numbers its connections.
    pub fn connect(self: &Arc<Self>, id: u64, peer: String, portal: String) -> ConnCounters {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id,
            peer,
            portal,
            cells: (0..self.stores.len()).map(|_| Default::default()).collect(),
            inflight: AtomicU64::new(0),
        });
        lock(&self.open).push(conn.clone());
        ConnCounters {
            conn,
            server: self.clone(),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        // Both locks, in `Drop`'s order: a connection that ends meanwhile is counted once,
        // open or ended, never neither (a store's counter never goes down).
        let ended = lock(&self.ended);
        let open: Vec<Arc<Conn>> = lock(&self.open).clone();
        let mut stores: Vec<(String, [Figures; 5])> = self
            .stores
            .iter()
            .cloned()
            .zip(ended.iter().copied())
            .collect();
        drop(ended);
        let mut conns = Vec::with_capacity(open.len());
        for c in &open {
            let mut ops = [Figures::default(); 5];
            for (s, cells) in c.cells.iter().enumerate() {
                for (o, cell) in cells.iter().enumerate() {
                    let f = cell.get();
                    ops[o].add(&f);
                    stores[s].1[o].add(&f);
                }
            }
            conns.push(ConnSnapshot {
                id: c.id,
                peer: c.peer.clone(),
                portal: c.portal.clone(),
                ops,
                inflight: c.inflight.load(Ordering::Relaxed),
            });
        }
        conns.sort_by_key(|c| c.id);
        Snapshot {
            accepted: self.accepted.load(Ordering::Relaxed),
            open: conns,
            stores,
        }
    }
}

/// A connection's handle on its counters; dropped when the connection ends, which folds its
/// figures into its stores' and removes it from the open ones.
pub struct ConnCounters {
    conn: Arc<Conn>,
    server: Arc<ServerCounters>,
}

impl ConnCounters {
    /// One I/O on store `store` (an index into the server's stores; others are ignored).
    #[inline]
    pub fn io(&self, store: usize, op: Op, bytes: u64, ok: bool) {
        let Some(cells) = self.conn.cells.get(store) else {
            return;
        };
        let c = &cells[op as usize];
        bump(&c.ios, 1);
        bump(&c.bytes, bytes);
        if !ok {
            bump(&c.errors, 1);
        }
    }

    /// The I/Os received and not yet answered on this connection.
    #[inline]
    pub fn set_inflight(&self, n: u64) {
        self.conn.inflight.store(n, Ordering::Relaxed);
    }
}

impl Drop for ConnCounters {
    fn drop(&mut self) {
        // Folded in and removed under the `ended` lock first: a scrape that sees the
        // connection gone sees its figures in the stores.
        let mut ended = lock(&self.server.ended);
        for (s, cells) in self.conn.cells.iter().enumerate() {
            for (o, cell) in cells.iter().enumerate() {
                ended[s][o].add(&cell.get());
            }
        }
        lock(&self.server.open).retain(|c| !Arc::ptr_eq(c, &self.conn));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_add_every_connection_ended_or_open() {
        let s = ServerCounters::new(vec!["lun0".into(), "lun1".into()]);
        let a = s.connect(0, "127.0.0.1:5000".into(), "127.0.0.1:3260".into());
        let b = s.connect(1, "127.0.0.1:5001".into(), "127.0.0.1:3261".into());
        a.io(0, Op::Read, 4096, true);
        a.io(1, Op::Write, 512, false);
        b.io(0, Op::Read, 8192, true);
        b.io(7, Op::Read, 1, true);
        b.set_inflight(3);
        let snap = s.snapshot();
        assert_eq!(snap.accepted, 2);
        assert_eq!(snap.open.len(), 2);
        assert_eq!(snap.open[1].inflight, 3);
        assert_eq!(snap.open[0].ops[Op::Write as usize].errors, 1);
        let read = |snap: &Snapshot| snap.stores[0].1[Op::Read as usize];
        assert_eq!(
            read(&snap),
            Figures {
                ios: 2,
                bytes: 12288,
                errors: 0
            }
        );
        drop(a);
        let snap2 = s.snapshot();
        assert_eq!(snap2.open.len(), 1);
        assert_eq!(snap2.open[0].portal, "127.0.0.1:3261");
        assert_eq!(read(&snap2), read(&snap));
        assert_eq!(snap2.stores[1].1[Op::Write as usize].ios, 1);
        drop(b);
        let snap3 = s.snapshot();
        assert!(snap3.open.is_empty());
        assert_eq!(read(&snap3), read(&snap));
        assert_eq!(snap3.accepted, 2);
    }
}
