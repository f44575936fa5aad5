//! The SQLite results store.
//!
//! One database file (by default `$XDG_DATA_HOME/sanbench/results.db`) holds every comparison
//! run. A run is written as it goes: [`Store::begin_run`] stores the document's header,
//! [`Store::add_cell`] commits each finished cell at once (so a run killed halfway keeps what it
//! measured), and [`Store::finish_run`] marks it complete. Every cell is kept as the exact JSON
//! the comparison holds, so loading a run and rendering it again gives identical figures.
//!
//! The file is in WAL mode: a report can read while a run writes. Its layout is versioned in
//! `schema_version`; [`MIGRATIONS`] brings an older file up to date when it is opened, and a file
//! written by a newer sanbench is refused rather than misread.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::model::{Cell, Comparison};

/// Schema migrations, in order: entry `i` takes the file from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: runs and their cells.
    "CREATE TABLE runs (
         id          INTEGER PRIMARY KEY AUTOINCREMENT,
         started_at  TEXT NOT NULL,
         suite       TEXT NOT NULL,
         targets     TEXT NOT NULL,   -- JSON array of target names
         header      TEXT NOT NULL,   -- the Comparison without its cells, as JSON
         incomplete  INTEGER NOT NULL DEFAULT 1,
         finished_at TEXT
     );
     CREATE TABLE cells (
         run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         seq      INTEGER NOT NULL,  -- order in which the cells ran
         workload TEXT NOT NULL,
         target   TEXT NOT NULL,
         repeat   INTEGER NOT NULL,
         json     TEXT NOT NULL,     -- the Cell, as JSON
         PRIMARY KEY (run_id, seq)
     );
     CREATE INDEX cells_by_workload ON cells(run_id, workload, target);",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the results directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("results database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("results database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("results database holds malformed JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no run {0} in the results database")]
    NoSuchRun(RunId),
    #[error(
        "results database {path} has schema version {found}, newer than this sanbench \
         understands ({supported}): upgrade sanbench"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("cannot find a data directory: set XDG_DATA_HOME or HOME")]
    NoDataDir,
    #[error("not a run id: {0:?} (expected a positive integer)")]
    BadRunId(String),
}

/// The id of a stored run (SQLite rowid, increasing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RunId(pub i64);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for RunId {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<RunId, StoreError> {
        match s.trim().parse::<i64>() {
            Ok(n) if n > 0 => Ok(RunId(n)),
            _ => Err(StoreError::BadRunId(s.to_string())),
        }
    }
}

/// One line of [`Store::list`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub id: RunId,
    pub started_at: String,
    pub suite: String,
    pub targets: Vec<String>,
    /// Cells stored so far.
    pub cells: usize,
    /// True until `finish_run(.., false)`: a run killed halfway stays incomplete.
    pub incomplete: bool,
}

/// An open results database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// `$XDG_DATA_HOME/sanbench/results.db`, else `$HOME/.local/share/sanbench/results.db`
/// (the XDG base directory rules: a relative `XDG_DATA_HOME` is ignored).
pub fn default_path_from(
    xdg_data_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    let base = match xdg_data_home.map(Path::new) {
        Some(p) if p.is_absolute() => p.to_path_buf(),
        _ => Path::new(home.filter(|h| !h.is_empty())?).join(".local/share"),
    };
    Some(base.join("sanbench").join("results.db"))
}

impl Store {
    /// Where results go unless the user says otherwise.
    pub fn default_path() -> Result<PathBuf, StoreError> {
        default_path_from(
            std::env::var_os("XDG_DATA_HOME").as_deref(),
            std::env::var_os("HOME").as_deref(),
        )
        .ok_or(StoreError::NoDataDir)
    }

    /// Opens (creating it and its directories if needed) the database at `path` and brings its
    /// schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(open_err)?;
        // Another process may hold the write lock for the length of one cell's insert.
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        let mut store = Store { conn, path };
        store.migrate()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every write goes through here. The write lock is taken at BEGIN, where SQLite waits for
    /// it (the busy timeout); a deferred transaction that reads first and writes later gets
    /// SQLITE_BUSY at once, without waiting, when another connection holds the lock then.
    fn write_tx(conn: &mut Connection) -> Result<rusqlite::Transaction<'_>, StoreError> {
        Ok(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?)
    }

    /// The version recorded in the file, 0 for a new one.
    fn stored_version(conn: &Connection) -> Result<i64, StoreError> {
        let has_table: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master
                            WHERE type = 'table' AND name = 'schema_version')",
            [],
            |r| r.get(0),
        )?;
        if !has_table {
            return Ok(0);
        }
        let found: Option<i64> =
            conn.query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))?;
        Ok(found.unwrap_or(0))
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        // A reader opening a current file takes no write lock, so it never holds up a writer.
        if Self::stored_version(&self.conn)? == SCHEMA_VERSION {
            return Ok(());
        }
        let tx = Self::write_tx(&mut self.conn)?;
        tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
        let found: Option<i64> = tx
            .query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))
            .optional()?
            .flatten();
        let found = found.unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(sql)?;
            tx.execute("DELETE FROM schema_version", [])?;
            tx.execute(
                "INSERT INTO schema_version (version) VALUES (?1)",
                params![i as i64 + 1],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))?)
    }

    /// Records a new run from the comparison's header (everything but its cells; cells already
    /// in `header` are stored too, in order). The run is incomplete until [`Store::finish_run`].
    pub fn begin_run(&mut self, header: &Comparison) -> Result<RunId, StoreError> {
        let mut bare = header.clone();
        bare.cells.clear();
        let targets: Vec<&str> = header.targets.iter().map(|t| t.name.as_str()).collect();
        let tx = Self::write_tx(&mut self.conn)?;
        tx.execute(
            "INSERT INTO runs (started_at, suite, targets, header, incomplete)
             VALUES (?1, ?2, ?3, ?4, 1)",
            params![
                header.started_at,
                header.suite,
                serde_json::to_string(&targets)?,
                serde_json::to_string(&bare)?,
            ],
        )?;
        let run = RunId(tx.last_insert_rowid());
        for cell in &header.cells {
            insert_cell(&tx, run, cell)?;
        }
        tx.commit()?;
        Ok(run)
    }

    /// Stores one finished cell, committed before returning.
    pub fn add_cell(&mut self, run: RunId, cell: &Cell) -> Result<(), StoreError> {
        let tx = Self::write_tx(&mut self.conn)?;
        check_run(&tx, run)?;
        insert_cell(&tx, run, cell)?;
        tx.commit()?;
        Ok(())
    }

    /// Marks the run finished; `incomplete` says whether every cell ran.
    pub fn finish_run(&mut self, run: RunId, incomplete: bool) -> Result<(), StoreError> {
        let now = sanbench_doc::run::rfc3339(std::time::SystemTime::now());
        let n = self.conn.execute(
            "UPDATE runs SET incomplete = ?1, finished_at = ?2 WHERE id = ?3",
            params![incomplete, now, run.0],
        )?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(run));
        }
        Ok(())
    }

    /// Marks the run finished with the comparison's final header: what only the end knows
    /// (the design's rounds and why it stopped) replaces what `begin_run` recorded, so that a
    /// stored run judges as the report written at the end did.
    pub fn finish_run_with(&mut self, run: RunId, header: &Comparison) -> Result<(), StoreError> {
        let mut bare = header.clone();
        bare.cells.clear();
        let now = sanbench_doc::run::rfc3339(std::time::SystemTime::now());
        let n = self.conn.execute(
            "UPDATE runs SET header = ?1, incomplete = ?2, finished_at = ?3 WHERE id = ?4",
            params![serde_json::to_string(&bare)?, header.incomplete, now, run.0],
        )?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(run));
        }
        Ok(())
    }

    /// Stores a whole comparison at once (e.g. a `results.json` imported from elsewhere).
    pub fn save(&mut self, cmp: &Comparison) -> Result<RunId, StoreError> {
        let run = self.begin_run(cmp)?;
        self.finish_run(run, cmp.incomplete)?;
        Ok(run)
    }

    /// The run as a comparison document: its header, every stored cell in the order they ran,
    /// and `incomplete` set when the run never finished (or finished incomplete).
    pub fn load(&self, run: RunId) -> Result<Comparison, StoreError> {
        let (header, incomplete): (String, bool) = self
            .conn
            .query_row(
                "SELECT header, incomplete FROM runs WHERE id = ?1",
                params![run.0],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .ok_or(StoreError::NoSuchRun(run))?;
        let mut cmp: Comparison = serde_json::from_str(&header)?;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT json FROM cells WHERE run_id = ?1 ORDER BY seq")?;
        let rows = stmt.query_map(params![run.0], |r| r.get::<_, String>(0))?;
        for json in rows {
            cmp.cells.push(serde_json::from_str(&json?)?);
        }
        cmp.incomplete = cmp.incomplete || incomplete;
        Ok(cmp)
    }

    /// Every stored run, oldest first.
    pub fn list(&self) -> Result<Vec<RunSummary>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.id, r.started_at, r.suite, r.targets, r.incomplete,
                    (SELECT COUNT(*) FROM cells c WHERE c.run_id = r.id)
             FROM runs r ORDER BY r.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, bool>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, started_at, suite, targets, incomplete, cells) = row?;
            out.push(RunSummary {
                id: RunId(id),
                started_at,
                suite,
                targets: serde_json::from_str(&targets)?,
                cells: cells.max(0) as usize,
                incomplete,
            });
        }
        Ok(out)
    }

    /// The newest run, if any.
    pub fn latest(&self) -> Result<Option<RunId>, StoreError> {
        let id: Option<i64> = self
            .conn
            .query_row("SELECT MAX(id) FROM runs", [], |r| r.get(0))?;
        Ok(id.map(RunId))
    }

    /// Removes a run and its cells.
    pub fn delete(&mut self, run: RunId) -> Result<(), StoreError> {
        let tx = Self::write_tx(&mut self.conn)?;
        tx.execute("DELETE FROM cells WHERE run_id = ?1", params![run.0])?;
        let n = tx.execute("DELETE FROM runs WHERE id = ?1", params![run.0])?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(run));
        }
        tx.commit()?;
        Ok(())
    }
}

fn check_run(conn: &Connection, run: RunId) -> Result<(), StoreError> {
    let exists: Option<i64> = conn
        .query_row("SELECT id FROM runs WHERE id = ?1", params![run.0], |r| {
            r.get(0)
        })
        .optional()?;
    exists.map(|_| ()).ok_or(StoreError::NoSuchRun(run))
}

fn insert_cell(conn: &Connection, run: RunId, cell: &Cell) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO cells (run_id, seq, workload, target, repeat, json)
         VALUES (?1, (SELECT COALESCE(MAX(seq), -1) + 1 FROM cells WHERE run_id = ?1),
                 ?2, ?3, ?4, ?5)",
        params![
            run.0,
            cell.workload,
            cell.target,
            cell.repeat,
            serde_json::to_string(cell)?
        ],
    )?;
    Ok(())
}
