//! Refusing to destroy data: before a workload writes to a block device, check that the device
//! is not mounted, not in use as swap or by another block layer (holders), and holds no
//! filesystem or partition-table signature. The user overrides with `--force`.
//!
//! The signature list covers what a storage lab's disks are likely to hold; it reads the same
//! magic numbers as blkid/libblkid at the same offsets.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::error::EngineError;

/// "a" or "an" before a signature's name, as it is read aloud ("an XFS", "an LVM").
fn article(name: &str) -> &'static str {
    // Lower case: a word ("swap", "bcache", "exFAT"); upper case: letters spelled out ("an
    // XFS", "an LVM"), except FAT and LUKS, which are said as words.
    let word = name.starts_with("FAT") || name.starts_with("LUKS");
    let vowel_sound = match name.chars().next() {
        Some(c) if c.is_lowercase() => "aeiou".contains(c),
        Some(c) => !word && "AEFHILMNORSX".contains(c),
        None => false,
    };
    if vowel_sound {
        "an"
    } else {
        "a"
    }
}

/// (name, byte offset, magic bytes)
const SIGNATURES: &[(&str, usize, &[u8])] = &[
    ("ext2/3/4 filesystem", 1080, &[0x53, 0xEF]),
    ("XFS filesystem", 0, b"XFSB"),
    ("btrfs filesystem", 65600, b"_BHRfS_M"),
    ("LUKS volume", 0, b"LUKS\xba\xbe"),
    ("LVM physical volume", 536, b"LVM2 001"),
    ("LVM physical volume", 24, b"LVM2 001"),
    ("NTFS filesystem", 3, b"NTFS    "),
    ("FAT filesystem", 82, b"FAT32   "),
    ("FAT filesystem", 54, b"FAT16   "),
    ("FAT filesystem", 54, b"FAT12   "),
    ("exFAT filesystem", 3, b"EXFAT   "),
    ("ISO 9660 filesystem", 32769, b"CD001"),
    ("squashfs filesystem", 0, b"hsqs"),
    ("swap space", 4086, b"SWAPSPACE2"),
    ("swap space", 4086, b"SWAP-SPACE"),
    (
        "bcache device",
        4120,
        &[0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca],
    ),
    ("GPT partition table", 512, b"EFI PART"),
    ("GPT partition table", 4096, b"EFI PART"),
    ("Linux RAID member", 4096, &[0xfc, 0x4e, 0x2b, 0xa9]),
    ("F2FS filesystem", 1024, &[0x10, 0x20, 0xf5, 0xf2]),
];

/// How many bytes of the device the signature check reads.
const PROBE_LEN: usize = 72 * 1024;

/// What, if anything, makes writing to the device destructive.
pub fn find_signature(head: &[u8]) -> Option<&'static str> {
    for (name, off, magic) in SIGNATURES {
        if head.len() >= off + magic.len() && &head[*off..off + magic.len()] == *magic {
            return Some(name);
        }
    }
    // MBR (DOS) partition table: boot signature plus at least one non-empty partition entry.
    if head.len() >= 512 && head[510] == 0x55 && head[511] == 0xAA {
        let has_part = (0..4).any(|i| {
            let e = &head[446 + 16 * i..446 + 16 * (i + 1)];
            e[4] != 0 && e[12..16] != [0, 0, 0, 0]
        });
        if has_part {
            return Some("DOS partition table");
        }
    }
    None
}

fn dev_numbers(rdev: u64) -> (u64, u64) {
    (libc::major(rdev) as u64, libc::minor(rdev) as u64)
}

/// Device numbers (major, minor) of the device and of its partitions, from sysfs.
fn device_and_partitions(rdev: u64) -> Vec<(u64, u64)> {
    let (maj, min) = dev_numbers(rdev);
    let mut out = vec![(maj, min)];
    let dir = format!("/sys/dev/block/{maj}:{min}");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.join("partition").exists() {
                if let Ok(dev) = std::fs::read_to_string(p.join("dev")) {
                    if let Some((a, b)) = dev.trim().split_once(':') {
                        if let (Ok(a), Ok(b)) = (a.parse(), b.parse()) {
                            out.push((a, b));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Returns the mount point of the first mount of any of `devs`, from /proc/self/mountinfo.
fn mounted_at(devs: &[(u64, u64)]) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in info.lines() {
        let mut f = line.split_whitespace();
        let (_, _, majmin, _, mnt) = (f.next(), f.next(), f.next()?, f.next(), f.next()?);
        if let Some((a, b)) = majmin.split_once(':') {
            if let (Ok(a), Ok(b)) = (a.parse::<u64>(), b.parse::<u64>()) {
                if devs.contains(&(a, b)) {
                    return Some(mnt.to_string());
                }
            }
        }
    }
    None
}

fn holders(devs: &[(u64, u64)]) -> Vec<String> {
    let mut out = Vec::new();
    for (a, b) in devs {
        if let Ok(rd) = std::fs::read_dir(format!("/sys/dev/block/{a}:{b}/holders")) {
            out.extend(
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            );
        }
    }
    out
}

/// Refuses (with the reason and the way out) when writing to `path` would destroy data.
pub fn check_writable(path: &Path) -> Result<(), EngineError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|source| EngineError::Open {
        path: shown.to_string(),
        source,
    })?;
    if !meta.file_type().is_block_device() {
        return Ok(());
    }
    let refuse = |why: String| {
        Err(EngineError::Refused(format!(
            "refusing to write to {shown}: {why} (use --force to write anyway)"
        )))
    };
    let devs = device_and_partitions(meta.rdev());
    if let Some(mnt) = mounted_at(&devs) {
        return refuse(format!("it is mounted at {mnt}"));
    }
    let h = holders(&devs);
    if !h.is_empty() {
        return refuse(format!("it is in use by {}", h.join(", ")));
    }
    if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if swaps
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().next() == Some(&*canon.to_string_lossy()))
        {
            return refuse("it is in use as swap".into());
        }
    }
    let mut head = vec![0u8; PROBE_LEN];
    let mut f = File::open(path).map_err(|source| EngineError::Open {
        path: shown.to_string(),
        source,
    })?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(EngineError::sys(format!("{shown}: reading signatures"), e)),
        }
    }
    if let Some(sig) = find_signature(&head[..n]) {
        return refuse(format!("it holds {} {sig}", article(sig)));
    }
    if devs.len() > 1 {
        return refuse("it has partitions".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_signatures() {
        let mut head = vec![0u8; PROBE_LEN];
        assert_eq!(find_signature(&head), None);
        head[1080] = 0x53;
        head[1081] = 0xEF;
        assert_eq!(find_signature(&head), Some("ext2/3/4 filesystem"));
        let said: Vec<String> = [
            "ext2/3/4 filesystem",
            "XFS filesystem",
            "LUKS volume",
            "LVM physical volume",
            "NTFS filesystem",
            "FAT filesystem",
            "exFAT filesystem",
            "ISO 9660 filesystem",
            "squashfs filesystem",
            "bcache device",
            "GPT partition table",
            "DOS partition table",
        ]
        .iter()
        .map(|n| format!("{} {n}", article(n)))
        .collect();
        assert_eq!(
            said,
            [
                "an ext2/3/4 filesystem",
                "an XFS filesystem",
                "a LUKS volume",
                "an LVM physical volume",
                "an NTFS filesystem",
                "a FAT filesystem",
                "an exFAT filesystem",
                "an ISO 9660 filesystem",
                "a squashfs filesystem",
                "a bcache device",
                "a GPT partition table",
                "a DOS partition table"
            ]
        );
        let mut head = vec![0u8; PROBE_LEN];
        head[512..520].copy_from_slice(b"EFI PART");
        assert_eq!(find_signature(&head), Some("GPT partition table"));
        let mut head = vec![0u8; PROBE_LEN];
        head[510] = 0x55;
        head[511] = 0xAA;
        assert_eq!(
            find_signature(&head),
            None,
            "boot signature alone is not a table"
        );
        head[446 + 4] = 0x83;
        head[446 + 12] = 1;
        assert_eq!(find_signature(&head), Some("DOS partition table"));
    }

    #[test]
    fn random_data_has_no_signature() {
        let mut head = vec![0u8; PROBE_LEN];
        crate::arena::fill_random(&mut head, 99);
        assert_eq!(find_signature(&head), None);
    }
}
