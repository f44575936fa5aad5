//! The state file, `"schema": "sanbench.lab/1"`: everything a lab made, so that `down` removes
//! exactly that. It is also the lab file `compare --lab` reads: its `targets` list names each
//! target (`nbd@ten`), its URI and the link it sits behind. Field names are public interface:
//! extend, never rename.
//!
//! It is written after every step of `up`, so a lab that crashes half-built still leaves a
//! record of what to remove.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::impairment::Impairment;
use crate::spec::{LinkSpec, TargetKind};

pub const LAB_SCHEMA: &str = "sanbench.lab/1";

pub use sanbench_doc::compare::LinkInfo;

/// A link's facts as a comparison records them (`targets[].link`).
pub fn link_info(s: &LinkSpec) -> LinkInfo {
    LinkInfo {
        name: s.name.clone(),
        rate_bits: s.rate_bits,
        mtu: s.mtu,
        offload: s.offload,
        switched: s.switched,
    }
}

/// One target of the lab: what `compare --lab` adds to its targets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabTarget {
    /// `KIND@LINK`, e.g. `nbd@ten`, `iscsi@one`, `nbdkit@ten`; behind a path group
    /// `KIND@a+b` (every path) and `KIND@a`, `KIND@b` (one path each, the same store).
    pub name: String,
    /// For a path group's `KIND@a+b`, a multipath URI naming every path.
    pub uri: String,
    /// For `KIND@a+b`, the paths together (name `a+b`, the sum of the rates; see
    /// `Site::link_info`).
    pub link: LinkInfo,
    /// For `KIND@a+b`: each path's link and single-path URI, in the multipath URI's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<LabPath>,
}

/// One path of a path group's target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabPath {
    pub link: LinkInfo,
    pub uri: String,
}

/// One link as built: names and addresses, and the fault it carries now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkState {
    #[serde(flatten)]
    pub info: LinkInfo,
    /// tc's spelling of the rate ("1gbit").
    pub rate: String,
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_namespace: Option<String>,
    pub host_if: String,
    pub target_if: String,
    pub host_addr: String,
    pub target_addr: String,
    /// The path group (`a+b`) whose namespace (`namespace` above) this link leads to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What `lab fault` (or a run's `--fault`) has done to the link and not undone.
    #[serde(default, skip_serializing_if = "Impairment::is_clear")]
    pub impairment: Impairment,
}

/// A process the lab started (inside a namespace).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcState {
    /// The target it serves (`nbd@ten`).
    pub name: String,
    pub kind: TargetKind,
    pub pid: u32,
    /// Field 22 of /proc/PID/stat when started: a recycled pid has another, and is left alone.
    pub start_time: u64,
    pub namespace: String,
    pub argv: Vec<String>,
    /// Signal that stops it: 15 (SIGTERM) or 9 (SIGKILL: tgtd ignores SIGTERM).
    pub stop_signal: i32,
    pub log: PathBuf,
}

/// The whole state file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub schema: String,
    /// Seconds since the Unix epoch when `up` began.
    pub created_unix: u64,
    /// The sanbench binary that serves the built-in targets.
    pub sanbench: String,
    /// The private range every lab address comes from.
    pub address_range: String,
    pub links: Vec<LinkState>,
    /// Namespaces created, in creation order.
    pub namespaces: Vec<String>,
    /// Interfaces created in the host namespace.
    pub host_links: Vec<String>,
    pub processes: Vec<ProcState>,
    /// Files created (RAM-disk images in /dev/shm, logs).
    pub files: Vec<PathBuf>,
    pub targets: Vec<LabTarget>,
}

impl LabState {
    pub fn new(sanbench: &str) -> LabState {
        LabState {
            schema: LAB_SCHEMA.into(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            sanbench: sanbench.into(),
            address_range: crate::plan::ADDR_RANGE.into(),
            links: Vec::new(),
            namespaces: Vec::new(),
            host_links: Vec::new(),
            processes: Vec::new(),
            files: Vec::new(),
            targets: Vec::new(),
        }
    }

    /// Writes the state atomically (a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> Result<(), LabError> {
        let err = |reason: String| LabError::File {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create directory: {e}")))?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n")
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| err(format!("cannot write: {e}")))
    }

    /// Reads a state file; `Ok(None)` when there is none.
    pub fn load(path: &Path) -> Result<Option<LabState>, LabError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(LabError::File {
                    path: path.to_path_buf(),
                    reason: format!("cannot read: {e}"),
                })
            }
        };
        let s: LabState = serde_json::from_str(&text).map_err(|e| LabError::File {
            path: path.to_path_buf(),
            reason: format!("not a sanbench lab state file: {e}"),
        })?;
        if s.schema != LAB_SCHEMA {
            return Err(LabError::File {
                path: path.to_path_buf(),
                reason: format!("schema '{}', expected '{LAB_SCHEMA}'", s.schema),
            });
        }
        Ok(Some(s))
    }
}

/// The default state file: `/run/sanbench/lab.json` for root (the lab needs root), else
/// `$XDG_RUNTIME_DIR/sanbench/lab.json`.
pub fn default_path() -> PathBuf {
    // SAFETY: geteuid() has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !root && !d.is_empty() => PathBuf::from(d).join("sanbench/lab.json"),
        _ => PathBuf::from("/run/sanbench/lab.json"),
    }
}

/// The lab file as `compare --lab` reads it: any JSON object with a `targets` list of
/// `{name, uri, link: {name, rate_bits, mtu, offload, switched}}` (a state file is one).
pub fn load_lab_targets(path: &Path) -> Result<Vec<LabTarget>, LabError> {
    #[derive(Deserialize)]
    struct LabFile {
        targets: Vec<LabTarget>,
    }
    let err = |reason: String| LabError::File {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        err(if e.kind() == std::io::ErrorKind::NotFound {
            "no such lab file (start one with 'sanbench lab up')".into()
        } else {
            format!("cannot read: {e}")
        })
    })?;
    let f: LabFile = serde_json::from_str(&text)
        .map_err(|e| err(format!("not a lab file (want {{\"targets\": [...]}}): {e}")))?;
    if f.targets.is_empty() {
        return Err(err("the lab has no targets".into()));
    }
    Ok(f.targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LabState {
        let mut s = LabState::new("/bin/sanbench");
        let info = LinkInfo {
            name: "one".into(),
            rate_bits: 1_000_000_000,
            mtu: 1500,
            offload: true,
            switched: false,
        };
        s.targets.push(LabTarget {
            name: "nbd@one".into(),
            uri: "nbd://10.213.0.2:10809".into(),
            link: info.clone(),
            paths: Vec::new(),
        });
        s.targets.push(LabTarget {
            name: "iscsi@a+b".into(),
            uri: "iscsi://10.213.1.2:3260,10.213.2.2:3260/iqn.x:a.b/0".into(),
            link: info.clone(),
            paths: vec![LabPath {
                link: info.clone(),
                uri: "iscsi://10.213.2.2:3260/iqn.x:a.b/0".into(),
            }],
        });
        s.links.push(LinkState {
            info,
            rate: "1gbit".into(),
            namespace: "sblab-one".into(),
            switch_namespace: None,
            host_if: "sbl-one-h".into(),
            target_if: "sbl-one-t".into(),
            host_addr: "10.213.0.1".into(),
            target_addr: "10.213.0.2".into(),
            group: None,
            impairment: Impairment::default(),
        });
        s
    }

    #[test]
    fn state_round_trips_and_is_a_lab_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/lab.json");
        assert_eq!(LabState::load(&p).unwrap(), None);
        let s = sample();
        s.save(&p).unwrap();
        assert_eq!(LabState::load(&p).unwrap(), Some(s.clone()));
        let t = load_lab_targets(&p).unwrap();
        assert_eq!(t, s.targets);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["links"][0]["rate_bits"], 1_000_000_000u64);
        assert_eq!(v["targets"][0]["link"]["mtu"], 1500);
        // Fields of path groups and faults are left out where they have nothing to say, so a
        // lab of single links writes the file it always wrote.
        assert!(v["targets"][0].get("paths").is_none());
        assert!(v["links"][0].get("group").is_none());
        assert!(v["links"][0].get("impairment").is_none());
        assert_eq!(
            v["targets"][1]["paths"][0]["uri"],
            "iscsi://10.213.2.2:3260/iqn.x:a.b/0"
        );
    }

    #[test]
    fn bad_lab_files_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        assert!(load_lab_targets(&p)
            .unwrap_err()
            .to_string()
            .contains("lab up"));
        std::fs::write(&p, "{\"targets\": 3}").unwrap();
        assert!(load_lab_targets(&p).unwrap_err().is_usage());
        std::fs::write(&p, "{\"targets\": []}").unwrap();
        assert!(load_lab_targets(&p)
            .unwrap_err()
            .to_string()
            .contains("no targets"));
        std::fs::write(&p, "{\"schema\": \"other\"}").unwrap();
        assert!(LabState::load(&p).is_err());
        // A hand-written lab file with only targets is fine.
        std::fs::write(
            &p,
            r#"{"targets":[{"name":"a","uri":"nbd://127.0.0.1:1","link":{"name":"l","rate_bits":1,"mtu":1500,"offload":true,"switched":false}}]}"#,
        )
        .unwrap();
        assert_eq!(load_lab_targets(&p).unwrap().len(), 1);
    }
}
