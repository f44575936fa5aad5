//! The results store against real SQLite files: round trips, a writer killed halfway, readers
//! running beside a writer, migrations and errors.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use sanbench_store::fixture::sample_comparison;
use sanbench_store::{default_path_from, RunId, Store, StoreError, SCHEMA_VERSION};

#[test]
fn round_trip_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/results.db");
    let cmp = sample_comparison();
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&cmp).unwrap();
    store.finish_run(run, false).unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    let back = store.load(run).unwrap();
    // Field by field, floats included: re-rendering must give identical figures.
    assert_eq!(back, cmp);
    assert_eq!(
        serde_json::to_string(&back).unwrap(),
        serde_json::to_string(&cmp).unwrap()
    );
    let list = store.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, run);
    assert_eq!(list[0].suite, "thirdio-2008");
    assert_eq!(
        list[0].targets,
        vec!["FC 8G", "iSCSI 10G", "NBD <ram> & co"]
    );
    assert_eq!(list[0].cells, cmp.cells.len());
    assert!(!list[0].incomplete);
    assert_eq!(store.latest().unwrap(), Some(run));
}

#[test]
fn the_final_header_replaces_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let cmp = sample_comparison();
    let mut header = cmp.clone();
    header.cells.clear();
    // As compare begins, the header holds what is known then (in compare: a design that has
    // run no rounds yet); the end knows more.
    header.suite_description = "at the start".into();
    let mut store = Store::open(dir.path().join("r.db")).unwrap();
    let run = store.begin_run(&header).unwrap();
    for cell in &cmp.cells {
        store.add_cell(run, cell).unwrap();
    }
    store.finish_run_with(run, &cmp).unwrap();
    assert_eq!(store.load(run).unwrap(), cmp);
    assert!(!store.list().unwrap()[0].incomplete);
    assert!(matches!(
        store.finish_run_with(RunId(99), &cmp),
        Err(StoreError::NoSuchRun(_))
    ));
}

#[test]
fn cells_added_one_by_one_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let cmp = sample_comparison();
    let mut header = cmp.clone();
    header.cells.clear();
    let mut store = Store::open(dir.path().join("r.db")).unwrap();
    let run = store.begin_run(&header).unwrap();
    for cell in &cmp.cells {
        store.add_cell(run, cell).unwrap();
    }
    store.finish_run(run, false).unwrap();
    assert_eq!(store.load(run).unwrap(), cmp);
    let second = store.save(&cmp).unwrap();
    assert!(second > run);
    assert_eq!(store.list().unwrap().len(), 2);
    store.delete(run).unwrap();
    assert!(matches!(store.load(run), Err(StoreError::NoSuchRun(r)) if r == run));
    assert_eq!(store.list().unwrap().len(), 1);
}

#[test]
fn unknown_runs_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("r.db")).unwrap();
    let cell = sample_comparison().cells[0].clone();
    assert!(matches!(
        store.add_cell(RunId(42), &cell),
        Err(StoreError::NoSuchRun(RunId(42)))
    ));
    assert!(matches!(
        store.finish_run(RunId(7), false),
        Err(StoreError::NoSuchRun(_))
    ));
    assert!(store.list().unwrap().is_empty());
    assert_eq!(store.latest().unwrap(), None);
    assert!("0".parse::<RunId>().is_err());
    assert!("x".parse::<RunId>().is_err());
    assert_eq!(" 12 ".parse::<RunId>().unwrap(), RunId(12));
}

#[test]
fn newer_schema_is_refused_and_migration_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    drop(store);
    // Opening again runs no migration twice.
    assert_eq!(
        Store::open(&path).unwrap().schema_version().unwrap(),
        SCHEMA_VERSION
    );
    // Mark the file as written by a future sanbench.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE schema_version SET version = ?1",
        [SCHEMA_VERSION + 1],
    )
    .unwrap();
    drop(conn);
    match Store::open(&path) {
        Err(StoreError::TooNew { found, .. }) => assert_eq!(found, SCHEMA_VERSION + 1),
        other => panic!("expected TooNew, got {other:?}"),
    }
}

#[test]
fn default_path_follows_xdg() {
    use std::ffi::OsStr;
    let p = default_path_from(Some(OsStr::new("/x/data")), Some(OsStr::new("/home/u")));
    assert_eq!(
        p.unwrap(),
        std::path::Path::new("/x/data/sanbench/results.db")
    );
    let p = default_path_from(Some(OsStr::new("relative")), Some(OsStr::new("/home/u")));
    assert_eq!(
        p.unwrap(),
        std::path::Path::new("/home/u/.local/share/sanbench/results.db")
    );
    assert_eq!(default_path_from(None, None), None);
    assert_eq!(default_path_from(None, Some(OsStr::new(""))), None);
}

/// The child half of `killed_writer_keeps_finished_cells`: writes three cells, says so, then
/// waits to be killed. Does nothing unless the parent test started it.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os("SANBENCH_STORE_CHILD_DB") else {
        return;
    };
    let cmp = sample_comparison();
    let mut header = cmp.clone();
    header.cells.clear();
    let mut store = Store::open(path).unwrap();
    let run = store.begin_run(&header).unwrap();
    for cell in &cmp.cells[..3] {
        store.add_cell(run, cell).unwrap();
    }
    println!("READY {run}");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn killed_writer_keeps_finished_cells() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env("SANBENCH_STORE_CHILD_DB", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut run = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // libtest prints "test child_writer ... " before the test's own output.
        if let Some((_, id)) = line.split_once("READY ") {
            run = Some(id.parse::<RunId>().unwrap());
            break;
        }
    }
    let run = run.expect("child wrote its cells");
    child.kill().unwrap(); // SIGKILL: no destructor, no finish_run
    child.wait().unwrap();
    let store = Store::open(&path).unwrap();
    let back = store.load(run).unwrap();
    assert_eq!(back.cells, sample_comparison().cells[..3].to_vec());
    assert!(back.incomplete);
    let list = store.list().unwrap();
    assert_eq!((list[0].cells, list[0].incomplete), (3, true));
}

#[test]
fn dropped_without_finish_is_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let cmp = sample_comparison();
    let run = {
        let mut store = Store::open(&path).unwrap();
        let mut header = cmp.clone();
        header.cells.clear();
        let run = store.begin_run(&header).unwrap();
        store.add_cell(run, &cmp.cells[0]).unwrap();
        run
    };
    let back = Store::open(&path).unwrap().load(run).unwrap();
    assert_eq!(back.cells.len(), 1);
    assert!(back.incomplete);
}

/// Another process holding the write lock (a second `sanbench compare` storing a cell, say) makes
/// a writer wait, not fail. A transaction that reads before it writes would get SQLITE_BUSY at
/// once here, without waiting: CI saw that as "database is locked" in the test below.
#[test]
fn a_writer_waits_for_the_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let cmp = sample_comparison();
    let mut header = cmp.clone();
    header.cells.clear();
    let mut writer = Store::open(&path).unwrap();
    let run = writer.begin_run(&header).unwrap();
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let holder_path = path.clone();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&holder_path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        conn.execute_batch("COMMIT").unwrap();
    });
    locked.recv().unwrap();
    let started = std::time::Instant::now();
    writer.add_cell(run, &cmp.cells[0]).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
    holder.join().unwrap();
    // Opening a current file takes no write lock: a reader opens while a writer holds it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let reader = Store::open(&path).unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(reader.load(run).unwrap().cells.len(), 1);
    conn.execute_batch("COMMIT").unwrap();
}

#[test]
fn readers_run_beside_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let cmp = sample_comparison();
    let mut header = cmp.clone();
    header.cells.clear();
    let mut writer = Store::open(&path).unwrap();
    let run = writer.begin_run(&header).unwrap();
    let reader_path = path.clone();
    let reader = std::thread::spawn(move || {
        let store = Store::open(&reader_path).unwrap();
        let mut seen = 0;
        let mut loads = 0;
        while seen < 24 {
            let doc = store.load(run).unwrap();
            assert!(doc.cells.len() >= seen, "cells never disappear");
            seen = doc.cells.len();
            let list = store.list().unwrap();
            assert_eq!(list[0].cells, list[0].cells.max(seen));
            loads += 1;
        }
        loads
    });
    for cell in &cmp.cells {
        writer.add_cell(run, cell).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    writer.finish_run(run, false).unwrap();
    assert!(reader.join().unwrap() > 1);
    assert_eq!(writer.load(run).unwrap(), cmp);
}
