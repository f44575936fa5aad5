//! The `base:allocation` metadata context of our server: the hole/data map as libnbd's
//! `nbdinfo --map` sees it after partial writes with `nbdcopy`, and the negotiation rules
//! (LIST, SET, BLOCK_STATUS without a context, REQ_ONE) from a client written here.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::FileExt;
use std::process::Command;
use std::time::Duration;

use common::{pattern, require, OurServer};
use sanbench_nbd::server::CHUNK;
use sanbench_nbd::wire::handshake::*;
use sanbench_nbd::wire::meta::{state, BlockStatus, MetaContextRequest, BASE_ALLOCATION};
use sanbench_nbd::wire::transmission::{chunk, cmd, cmd_flags, ReplyHeader, Request};
use sanbench_nbd::wire::{errno, Parsed, SIMPLE_REPLY_MAGIC};
use sanbench_nbd::ServerConfig;

const MIB: u64 = 1 << 20;

/// `nbdinfo --map` lines as (offset, length, type).
fn nbdinfo_map(uri: &str) -> Vec<(u64, u64, u32)> {
    let out = Command::new("nbdinfo")
        .args(["--map", uri])
        .output()
        .expect("run nbdinfo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nbdinfo --map: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// A sparse 8 MiB file with data at 1 MiB (4 KiB) and 5..6 MiB, copied onto the export by
/// nbdcopy, which writes the data and zeroes (punches) the holes.
fn copy_partial(uri: &str) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("sparse.img");
    let f = std::fs::File::create(&src).unwrap();
    f.set_len(8 * MIB).unwrap();
    f.write_all_at(&pattern(4096, 1), MIB).unwrap();
    f.write_all_at(&pattern(MIB as usize, 2), 5 * MIB).unwrap();
    drop(f);
    let st = Command::new("nbdcopy").arg(&src).arg(uri).status().unwrap();
    assert!(st.success(), "nbdcopy failed");
}

const HOLE: u32 = state::HOLE | state::ZERO;

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs nbdinfo and nbdcopy"
)]
fn nbdinfo_map_shows_written_chunks_as_data_and_the_rest_as_holes() {
    require("nbdinfo", "libnbd-bin");
    require("nbdcopy", "libnbd-bin");
    let srv = OurServer::ram(8 * MIB, "");
    assert_eq!(nbdinfo_map(&srv.uri("")), vec![(0, 8 * MIB, HOLE)]);
    copy_partial(&srv.uri(""));
    let c = CHUNK as u64;
    assert_eq!(
        nbdinfo_map(&srv.uri("")),
        vec![
            (0, MIB, HOLE),
            (MIB, c, 0),
            (MIB + c, 4 * MIB - c, HOLE),
            (5 * MIB, MIB, 0),
            (6 * MIB, 2 * MIB, HOLE),
        ]
    );
    assert_eq!(srv.stats.allocated_bytes(), MIB + c);
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs nbdinfo and nbdcopy"
)]
fn nbdinfo_map_of_a_file_backed_export_follows_the_file_holes() {
    require("nbdinfo", "libnbd-bin");
    require("nbdcopy", "libnbd-bin");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("export.img");
    std::fs::File::create(&img).unwrap();
    let cfg = ServerConfig::file("127.0.0.1:0".parse().unwrap(), img, 8 * MIB);
    assert!(cfg.description.contains("sanbench"));
    let srv = OurServer::start(cfg);
    copy_partial(&srv.uri(""));
    let map = nbdinfo_map(&srv.uri(""));
    // File systems allocate in blocks of their own: data covers the written ranges, holes
    // elsewhere.
    let data_at = |off: u64| {
        map.iter()
            .find(|(o, l, _)| (*o..o + l).contains(&off))
            .unwrap()
            .2
            == 0
    };
    assert!(
        data_at(MIB) && data_at(5 * MIB) && data_at(6 * MIB - 1),
        "{map:?}"
    );
    assert!(
        !data_at(0) && !data_at(3 * MIB) && !data_at(7 * MIB),
        "{map:?}"
    );
}

/// A raw client: handshake with structured replies, then `options` answered in turn.
struct Raw(TcpStream);

impl Raw {
    fn connect(addr: SocketAddr) -> Raw {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut g = [0u8; GREETING_LEN];
        s.read_exact(&mut g).unwrap();
        let mut out = Vec::new();
        encode_client_flags(cflags::FIXED_NEWSTYLE | cflags::NO_ZEROES, &mut out);
        s.write_all(&out).unwrap();
        Raw(s)
    }

    /// Sends an option and returns its replies up to and including the final one.
    fn option(&mut self, o: ClientOption) -> Vec<ReplyBody> {
        let mut out = Vec::new();
        o.encode(&mut out);
        self.0.write_all(&out).unwrap();
        let mut replies = Vec::new();
        let mut buf = Vec::new();
        loop {
            match OptionReply::decode(&buf).unwrap() {
                Parsed::Done { value, len } => {
                    buf.drain(..len);
                    let last = !matches!(value.body, ReplyBody::MetaContext { .. })
                        && !matches!(value.body, ReplyBody::Info(_));
                    replies.push(value.body);
                    if last {
                        return replies;
                    }
                }
                Parsed::Incomplete { needed } => {
                    let at = buf.len();
                    buf.resize(needed, 0);
                    self.0.read_exact(&mut buf[at..]).unwrap();
                }
            }
        }
    }

    fn go(&mut self) {
        let r = self.option(ClientOption::Go(GoRequest {
            name: String::new(),
            requests: vec![],
        }));
        assert_eq!(r.last(), Some(&ReplyBody::Ack), "{r:?}");
    }

    /// BLOCK_STATUS: the error, or the context and extents.
    fn block_status(&mut self, flags: u16, offset: u64, len: u32) -> Result<BlockStatus, u32> {
        let mut out = Vec::new();
        Request {
            flags,
            cmd: cmd::BLOCK_STATUS,
            cookie: 5,
            offset,
            len,
        }
        .encode(&mut out);
        self.0.write_all(&out).unwrap();
        let mut h = [0u8; 20];
        self.0.read_exact(&mut h[..4]).unwrap();
        let n = if h[..4] == SIMPLE_REPLY_MAGIC.to_be_bytes() {
            16
        } else {
            20
        };
        self.0.read_exact(&mut h[4..n]).unwrap();
        match ReplyHeader::decode(&h[..n]).unwrap().done().unwrap().0 {
            ReplyHeader::Simple { error, .. } => Err(error),
            ReplyHeader::Structured {
                kind, len, flags, ..
            } => {
                assert_eq!(flags, chunk::FLAG_DONE);
                let mut p = vec![0u8; len as usize];
                self.0.read_exact(&mut p).unwrap();
                if kind == chunk::BLOCK_STATUS {
                    Ok(BlockStatus::decode(&p).unwrap())
                } else {
                    Err(u32::from_be_bytes(p[..4].try_into().unwrap()))
                }
            }
        }
    }
}

fn meta(export: &str, queries: &[&str]) -> MetaContextRequest {
    MetaContextRequest {
        export: export.into(),
        queries: queries.iter().map(|q| q.to_string()).collect(),
    }
}

#[test]
fn meta_context_negotiation_and_block_status_rules() {
    let srv = OurServer::ram(4 * MIB, "disk");
    // Before structured replies: refused.
    let mut c = Raw::connect(srv.addr);
    let r = c.option(ClientOption::SetMetaContext(meta("", &[BASE_ALLOCATION])));
    assert!(
        matches!(
            r[..],
            [ReplyBody::Error {
                code: rep::ERR_INVALID,
                ..
            }]
        ),
        "{r:?}"
    );
    assert_eq!(
        c.option(ClientOption::StructuredReply),
        vec![ReplyBody::Ack]
    );
    // LIST without queries, and with the `base:` wildcard: base:allocation, id 0.
    for q in [&[][..], &["base:"][..]] {
        let r = c.option(ClientOption::ListMetaContext(meta("disk", q)));
        let want = ReplyBody::MetaContext {
            id: 0,
            name: BASE_ALLOCATION.into(),
        };
        assert_eq!(r, vec![want, ReplyBody::Ack]);
    }
    // Unknown export; unknown contexts are ignored, not errors.
    let r = c.option(ClientOption::SetMetaContext(meta(
        "other",
        &[BASE_ALLOCATION],
    )));
    assert!(
        matches!(
            r[..],
            [ReplyBody::Error {
                code: rep::ERR_UNKNOWN,
                ..
            }]
        ),
        "{r:?}"
    );
    let r = c.option(ClientOption::SetMetaContext(meta(
        "",
        &["qemu:dirty-bitmap:x", "base:"],
    )));
    assert_eq!(r, vec![ReplyBody::Ack]);
    c.go();
    // Nothing selected: BLOCK_STATUS is EINVAL.
    assert_eq!(c.block_status(0, 0, 4096).unwrap_err(), errno::EINVAL);

    let mut c = Raw::connect(srv.addr);
    c.option(ClientOption::StructuredReply);
    let r = c.option(ClientOption::SetMetaContext(meta(
        "disk",
        &[BASE_ALLOCATION],
    )));
    let ReplyBody::MetaContext { id, ref name } = r[0] else {
        panic!("{r:?}")
    };
    assert_eq!((name.as_str(), r.len()), (BASE_ALLOCATION, 2));
    c.go();
    let whole = c.block_status(0, 0, 4 * MIB as u32).unwrap();
    assert_eq!(whole.context, id);
    assert_eq!(whole.extents.len(), 1);
    assert_eq!(
        (whole.extents[0].len, whole.extents[0].flags),
        (4 * MIB as u32, HOLE)
    );
    // Past the end, zero length, unknown flags: EINVAL as structured error chunks.
    assert_eq!(c.block_status(0, 4 * MIB, 512).unwrap_err(), errno::EINVAL);
    assert_eq!(c.block_status(0, 0, 0).unwrap_err(), errno::EINVAL);
    assert_eq!(
        c.block_status(cmd_flags::NO_HOLE, 0, 512).unwrap_err(),
        errno::EINVAL
    );
    // REQ_ONE: exactly one extent, never longer than asked.
    let one = c
        .block_status(cmd_flags::REQ_ONE, 512, 3 * MIB as u32)
        .unwrap();
    assert_eq!(one.extents.len(), 1);
    assert!(one.extents[0].len <= 3 * MIB as u32);
}
