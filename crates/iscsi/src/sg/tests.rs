use super::exec::*;
use super::*;
use crate::scsi::vpd::{BlockLimits, Provisioning};
use sanbench_io::engine::Io;

fn geo(trim: bool, unmap: bool, max_unmap: u32, max_ws: u64) -> Geometry {
    let limits = BlockLimits {
        max_unmap_lbas: max_unmap,
        max_unmap_descriptors: 1,
        max_write_same: max_ws,
        ..BlockLimits::default()
    };
    let prov = Provisioning {
        unmap,
        write_same_unmap: true,
        lbprz: 1,
        kind: 2,
    };
    Geometry {
        iface: Interface::Sg,
        block: 512,
        disc: Discard::new(trim, Some(limits), Some(prov)),
        timeout_ms: 1000,
    }
}

fn io(op: Op, offset: u64, len: u32) -> Io {
    Io {
        tag: 0,
        op,
        offset,
        len,
        buf: 0,
        fua: false,
    }
}

#[test]
fn reads_and_writes_are_one_16_byte_command() {
    let g = geo(true, true, 1024, 0);
    let c = commands(&g, &io(Op::Read, 4096, 8192)).unwrap();
    assert_eq!(c.len(), 1);
    let (b, n) = c[0].encode();
    assert_eq!((n, b[0]), (16, 0x88));
    assert_eq!(u64::from_be_bytes(b[2..10].try_into().unwrap()), 8);
    assert_eq!(u32::from_be_bytes(b[10..14].try_into().unwrap()), 16);
    let w = Io {
        fua: true,
        ..io(Op::Write, 0, 512)
    };
    let (b, _) = commands(&g, &w).unwrap()[0].encode();
    assert_eq!((b[0], b[1] & 0x08), (0x8a, 0x08), "WRITE(16) with FUA");
    assert_eq!(commands(&g, &io(Op::Read, 100, 512)), Err(-libc::EINVAL));
    let (b, _) = commands(&g, &io(Op::Flush, 0, 0)).unwrap()[0].encode();
    assert_eq!(b[0], 0x91);
}

#[test]
fn trims_unmap_within_the_lba_count_and_zeroes_write_same() {
    let g = geo(true, true, 1000, 300);
    let t = io(Op::Trim, 0, 2500 * 512);
    let c = commands(&g, &t).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(unmap_ranges(&g, &t), [(0, 1000), (1000, 1000), (2000, 500)]);
    let (b, _) = c[0].encode();
    assert_eq!((b[0], u16::from_be_bytes([b[7], b[8]])), (0x42, 24));
    let z = commands(&g, &io(Op::WriteZeroes, 512, 700 * 512)).unwrap();
    let spans: Vec<(u64, u32, bool)> = z
        .iter()
        .map(|c| match *c {
            Cdb::WriteSame {
                lba, blocks, unmap, ..
            } => (lba, blocks, unmap),
            _ => panic!("{c:?}"),
        })
        .collect();
    assert_eq!(
        spans,
        [(1, 300, false), (301, 300, false), (601, 100, false)]
    );
    // Without LBPU: WRITE SAME(16) with UNMAP.
    let g = geo(true, false, 0, 0);
    let c = commands(&g, &io(Op::Trim, 0, 4096)).unwrap();
    assert!(
        matches!(
            c[..],
            [Cdb::WriteSame {
                unmap: true,
                blocks: 8,
                ..
            }]
        ),
        "{c:?}"
    );
    // Not thin provisioned: no trim at all.
    let g = geo(false, true, 1000, 0);
    assert!(!g.disc.supports(Op::Trim));
    assert_eq!(commands(&g, &io(Op::Trim, 0, 4096)), Err(-libc::EOPNOTSUPP));
}

#[test]
fn a_submits_trims_go_as_one_unmap_within_the_limits() {
    // Up to 4 descriptors and 1000 blocks an UNMAP.
    let mut g = geo(true, true, 1000, 0);
    g.disc.limits.max_unmap_descriptors = 4;
    let max_d = g.disc.descriptors(8);
    assert_eq!(max_d, 4);
    let t = |tag: u32, lba: u64, blocks: u32| Io {
        tag,
        ..io(Op::Trim, lba * 512, blocks * 512)
    };
    let ios = [
        t(0, 0, 8),
        t(1, 100, 8),
        Io {
            tag: 2,
            ..io(Op::Read, 0, 4096)
        },
        t(3, 200, 8),
        t(4, 300, 8),
        t(5, 400, 8),
        // Beyond one UNMAP's blocks: alone, as a chain of commands.
        t(6, 1000, 1500),
        t(7, 5000, 8),
        // The LBA count: 995 more do not fit beside the 16 before them.
        t(8, 6000, 995),
    ];
    let tags: Vec<Vec<u32>> = jobs(&g, max_d, &ios)
        .iter()
        .map(|j| j.iter().map(|io| io.tag).collect())
        .collect();
    let want: [&[u32]; 5] = [&[2], &[0, 1, 3, 4], &[6], &[5, 7], &[8]];
    assert_eq!(tags, want);
    // Where trims go by WRITE SAME with UNMAP, each goes alone.
    let g = geo(true, false, 0, 0);
    assert!(jobs(&g, 8, &ios[..2]).iter().all(|j| j.len() == 1));
}
