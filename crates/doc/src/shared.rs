//! Version 3 of the comparison document writes once per target what repeats in every cell of
//! that target, and the loader puts it back, so that every reader sees each cell whole.
//!
//! A demo's cells of one target carry the same target facts (`info`: ~1.2 kB, differing at most
//! in a controller id), the same precondition report, the same power source and its note, the
//! same clock tick, core count and idle baseline. Version 3 writes, for each target, the blocks
//! its cells have in common as `targets[].shared` (the deepest part of [`SHARED_BLOCKS`] that
//! every one of its cells holds), and each cell's `result` as a JSON merge patch (RFC 7386)
//! over it: a cell leaves out what it shares, writes what differs (`"info": {"params":
//! {"cntlid": 4}}`), and `null` for a shared field it lacks. [`expand`] applies the patches
//! when the document loads and drops `shared`, so the typed document is the one that was
//! written; [`compact`] computes them when a version 3 document is written. A target whose
//! cells a patch cannot express exactly (a `null` inside a shared block that a cell replaces by
//! a value is fine; the opposite is not) gets no `shared`, and its cells are written whole.
//!
//! Only optional blocks whose types load a missing field as its default are shared, so a
//! cell's result stays a valid `TargetResult` for the published schema; `target`, `engine`
//! and the figures stay in every cell, where `jq '.cells[].result.iops'` finds them.
//!
//! Also written by version 3 only, without loss: the per-core and all-core CPU shares
//! (`cpu.per_core[]`, `cpu.breakdown`) leave out the shares that are 0 (they load as 0), and
//! keep the digits down to a tenth of one clock tick of the cell's window ([`tick_decimals`];
//! for all cores together, of one tick of all of them): they are counts of ticks, and the
//! digits below one are noise of the division.

use serde_json::{Map, Value};

/// The result blocks a target's cells may share (all optional, all loading a missing field as
/// its default).
pub const SHARED_BLOCKS: [&str; 6] = ["info", "precondition", "cpu", "power", "net", "efficiency"];

/// The shares of a [`crate::host::CpuBreakdown`] that load as 0 when absent
/// (`tick_busy_pct` is an `Option`: absent means not measured, so it is always written).
const ZERO_OMITTED: [&str; 9] = [
    "busy_pct",
    "user_pct",
    "nice_pct",
    "system_pct",
    "irq_pct",
    "softirq_pct",
    "steal_pct",
    "iowait_pct",
    "idle_pct",
];

/// The part of `a` and `b` that is the same: objects by their common keys (recursively, a key
/// dropped when nothing of it is common), anything else when equal.
fn common(a: &Value, b: &Value) -> Option<Value> {
    if a == b {
        return Some(a.clone());
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let m: Map<String, Value> = x
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), common(v, y.get(k)?)?)))
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        _ => None,
    }
}

/// What applied to `base` as a merge patch gives `full` (`None`: nothing to change), or
/// `Err(())` when a merge patch cannot say it (a `null` where `base` has a value: a patch's
/// `null` removes the key). A `null` of `full` where `base` has no key is left out, which
/// `nulls` records: a struct's `Option` loads the same from either, a map does not
/// ([`same_blocks`] tells).
fn diff(base: &Value, full: &Value, nulls: &mut bool) -> Result<Option<Value>, ()> {
    match (base, full) {
        (Value::Object(b), Value::Object(f)) => {
            let mut m = Map::new();
            for (k, fv) in f {
                match b.get(k) {
                    None if fv.is_null() => *nulls = true,
                    None => {
                        m.insert(k.clone(), fv.clone());
                    }
                    Some(bv) => {
                        if let Some(d) = diff(bv, fv, nulls)? {
                            m.insert(k.clone(), d);
                        }
                    }
                }
            }
            for k in b.keys().filter(|k| !f.contains_key(*k)) {
                m.insert(k.clone(), Value::Null);
            }
            Ok((!m.is_empty()).then_some(Value::Object(m)))
        }
        _ if base == full => Ok(None),
        // A whole value replaced: an object of a patch would merge, a null would remove.
        (_, Value::Object(_) | Value::Null) => Err(()),
        _ => Ok(Some(full.clone())),
    }
}

/// The shareable blocks, typed: what a reader gets from them.
#[derive(serde::Deserialize, PartialEq)]
struct Blocks {
    info: Option<sanbench_io::TargetInfo>,
    precondition: Option<crate::precondition::Report>,
    cpu: Option<crate::host::CpuReport>,
    power: Option<crate::host::PowerReport>,
    net: Option<crate::host::NetReport>,
    efficiency: Option<crate::efficiency::Efficiency>,
}

/// Whether two JSON forms of a result's blocks load as the same blocks.
fn same_blocks(a: &Value, b: &Value) -> bool {
    let typed = |v: &Value| serde_json::from_value::<Blocks>(v.clone()).ok();
    matches!((typed(a), typed(b)), (Some(x), Some(y)) if x == y)
}

/// The patch that gives `full`'s blocks over `base`, when one gives exactly them.
fn patch(base: &Value, full: &Value) -> Option<Option<Value>> {
    let mut nulls = false;
    let d = diff(base, full, &mut nulls).ok()?;
    if nulls {
        let mut merged = base.clone();
        merge_patch(
            &mut merged,
            d.as_ref().unwrap_or(&Value::Object(Map::new())),
        );
        if !same_blocks(&merged, full) {
            return None;
        }
    }
    Some(d)
}

/// RFC 7386: `patch` applied to `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Decimals that keep a tenth of one clock tick of a `seconds` long window, in percent
/// (`clk_tck` ticks a second): 2 for a 2 s window at 100 Hz, where one tick is 0.5 %.
pub fn tick_decimals(clk_tck: f64, seconds: f64) -> i32 {
    let tick_pct = 100.0 / (clk_tck * seconds);
    if !tick_pct.is_finite() || tick_pct <= 0.0 {
        return 7;
    }
    (-(tick_pct / 10.0).log10()).ceil().clamp(0.0, 7.0) as i32
}

fn round_to(v: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    let r = (v * f).round() / f;
    if r.is_finite() {
        r
    } else {
        v
    }
}

/// One breakdown of shares: zeros left out, the rest to `decimals`.
fn shares(row: &mut Map<String, Value>, decimals: i32) {
    for k in ZERO_OMITTED.iter().chain(&["tick_busy_pct"]) {
        if let Some(v) = row.get_mut(*k) {
            if let Some(x) = v.as_f64() {
                *v = Value::from(round_to(x, decimals));
            }
        }
    }
    row.retain(|k, v| !(ZERO_OMITTED.contains(&k.as_str()) && v.as_f64() == Some(0.0)));
}

/// A result's CPU shares written as version 3 writes them (see the module's docs).
fn cpu_shares(result: &mut Value) {
    let seconds = result.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
    let Some(Value::Object(cpu)) = result.get_mut("cpu") else {
        return;
    };
    let clk = cpu.get("clk_tck").and_then(Value::as_f64).unwrap_or(0.0);
    // All cores together count a tick of each: their shares resolve `cores` times finer.
    let cores = cpu
        .get("cores")
        .and_then(Value::as_f64)
        .unwrap_or(1.0)
        .max(1.0);
    if let Some(Value::Object(b)) = cpu.get_mut("breakdown") {
        shares(b, tick_decimals(clk * cores, seconds));
    }
    if let Some(Value::Array(rows)) = cpu.get_mut("per_core") {
        for row in rows.iter_mut().filter_map(Value::as_object_mut) {
            shares(row, tick_decimals(clk, seconds));
        }
    }
}

/// The shareable blocks of one result.
fn blocks(result: &Value) -> Value {
    let m: Map<String, Value> = SHARED_BLOCKS
        .iter()
        .filter_map(|k| Some((k.to_string(), result.get(*k)?.clone())))
        .collect();
    Value::Object(m)
}

/// The cells of a comparison document (as JSON), the one in progress last.
fn cells_mut(doc: &mut Value) -> Vec<&mut Value> {
    let mut out = Vec::new();
    let mut in_progress = None;
    if let Some(obj) = doc.as_object_mut() {
        for (k, v) in obj.iter_mut() {
            match (k.as_str(), v) {
                ("cells", Value::Array(cells)) => out.extend(cells.iter_mut()),
                ("in_progress", c @ Value::Object(_)) => in_progress = Some(c),
                _ => {}
            }
        }
    }
    out.extend(in_progress);
    out
}

/// The names of the targets that can be referred to by name (the names given once).
fn unique_targets(doc: &Value) -> Vec<String> {
    let names: Vec<&str> = doc["targets"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    names
        .iter()
        .filter(|n| names.iter().filter(|m| m == n).count() == 1)
        .map(|n| n.to_string())
        .collect()
}

/// A version 3 document as it is written: the CPU shares trimmed, each target's shared blocks
/// in `targets[].shared` and its cells' results as merge patches over them (module docs).
pub fn compact(doc: &mut Value) {
    let names = unique_targets(doc);
    // The cell in progress comes last of `cells_mut`.
    let in_progress = doc
        .get("in_progress")
        .and_then(|c| c.get("target"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut cells = cells_mut(doc);
    for c in cells.iter_mut() {
        if let Some(r) = c.get_mut("result") {
            cpu_shares(r);
        }
    }
    let target_of = |c: &Value| c.get("target").and_then(Value::as_str).map(str::to_string);
    let mut shared: Vec<(String, Value, Vec<Option<Value>>)> = Vec::new();
    for name in &names {
        let mine = || {
            cells
                .iter()
                .filter(|c| target_of(c).as_deref() == Some(name.as_str()))
        };
        // The blocks every finished cell of the target holds: the cell in progress is patched
        // over them, but does not narrow them.
        let finished = mine().count() - usize::from(in_progress.as_deref() == Some(name));
        let mut base: Option<Value> = None;
        for (i, c) in mine().take(finished).enumerate() {
            let b = blocks(&c["result"]);
            base = if i == 0 {
                Some(b)
            } else {
                common(&base.unwrap_or_default(), &b)
            };
            if base.is_none() {
                break;
            }
        }
        // One cell shares nothing with another: it keeps its blocks.
        let Some(base) =
            base.filter(|b| finished > 1 && b.as_object().is_some_and(|m| !m.is_empty()))
        else {
            continue;
        };
        // Every cell, the one in progress too, must come back exactly from its patch.
        let patches: Option<Vec<Option<Value>>> = mine()
            .map(|c| patch(&base, &blocks(&c["result"])))
            .collect();
        if let Some(p) = patches {
            shared.push((name.clone(), base, p));
        }
    }
    for (name, _, patches) in &mut shared {
        let mine = cells
            .iter_mut()
            .filter(|c| target_of(c).as_deref() == Some(name.as_str()));
        for (c, p) in mine.zip(patches.drain(..)) {
            let Some(Value::Object(r)) = c.get_mut("result") else {
                continue;
            };
            for k in SHARED_BLOCKS {
                r.remove(k);
            }
            if let Some(Value::Object(p)) = p {
                r.extend(p);
            }
        }
    }
    drop(cells);
    if let Some(Value::Array(targets)) = doc.get_mut("targets") {
        for t in targets.iter_mut().filter_map(Value::as_object_mut) {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            if let Some((_, base, _)) = shared.iter().find(|(n, _, _)| n == name) {
                t.insert("shared".into(), base.clone());
            }
        }
    }
}

/// A version 3 document as readers see it: every cell's result merged over its target's
/// `shared` blocks, and `shared` gone (module docs).
pub fn expand(doc: &mut Value) {
    let names = unique_targets(doc);
    let mut shared: Vec<(String, Value)> = Vec::new();
    if let Some(Value::Array(targets)) = doc.get_mut("targets") {
        for t in targets.iter_mut().filter_map(Value::as_object_mut) {
            let Some(base) = t.remove("shared") else {
                continue;
            };
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            if names.iter().any(|n| n == name) && base.is_object() {
                shared.push((name.to_string(), base));
            }
        }
    }
    if shared.is_empty() {
        return;
    }
    for c in cells_mut(doc) {
        let Some(name) = c.get("target").and_then(Value::as_str).map(str::to_string) else {
            continue;
        };
        let Some((_, base)) = shared.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        let Some(Value::Object(r)) = c.get_mut("result") else {
            continue;
        };
        let mut merged = base.clone();
        let own: Map<String, Value> = SHARED_BLOCKS
            .iter()
            .filter_map(|k| Some((k.to_string(), r.remove(*k)?)))
            .collect();
        merge_patch(&mut merged, &Value::Object(own));
        if let Value::Object(m) = merged {
            r.extend(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Over a base, the patch gives back the value exactly, whatever differs: a field added,
    /// changed or dropped, a nested one, a whole array, a null over a value the base lacks.
    #[test]
    fn a_patch_over_the_base_gives_the_value_back() {
        let base = json!({"a": 1, "o": {"x": [1, 2], "y": "s", "z": {"k": true}}, "n": null});
        let values = [
            base.clone(),
            json!({"a": 2, "o": {"x": [1, 2], "y": "s", "z": {"k": true}}, "n": null}),
            json!({"o": {"x": [2], "y": "s", "z": {}}, "n": null, "new": {"q": 1}}),
            json!({"a": 1, "n": 5}),
            json!({}),
        ];
        for full in values {
            let mut nulls = false;
            let p = diff(&base, &full, &mut nulls).unwrap();
            assert!(!nulls);
            let mut merged = base.clone();
            merge_patch(&mut merged, p.as_ref().unwrap_or(&json!({})));
            assert_eq!(merged, full, "patch {p:?}");
        }
        assert_eq!(diff(&base, &base, &mut false), Ok(None));
        // A null where the base has a value, or an object where it has a plain value: not
        // expressible.
        assert_eq!(diff(&base, &json!({"a": null}), &mut false), Err(()));
        assert_eq!(diff(&base, &json!({"a": {"b": 1}}), &mut false), Err(()));
        // A null where the base has no key is left out and recorded.
        let mut nulls = false;
        assert_eq!(diff(&json!({}), &json!({"m": null}), &mut nulls), Ok(None));
        assert!(nulls);
    }

    /// The common part keeps what every value holds, equal empty objects too.
    #[test]
    fn common_keeps_what_both_hold() {
        let a = json!({"i": {"p": {"id": 3, "e": {}}, "u": "x"}, "c": 1});
        let b = json!({"i": {"p": {"id": 4, "e": {}}, "u": "x"}, "c": 2});
        assert_eq!(
            common(&a, &b),
            Some(json!({"i": {"p": {"e": {}}, "u": "x"}}))
        );
        assert_eq!(common(&json!(1), &json!(2)), None);
    }

    /// CPU shares: zeros left out, the rest to a tenth of a tick; `tick_busy_pct` kept at 0.
    #[test]
    fn cpu_shares_drop_zeros_and_noise_digits() {
        assert_eq!(tick_decimals(100.0, 2.0), 2);
        assert_eq!(tick_decimals(100.0, 60.0), 3);
        assert_eq!(tick_decimals(100.0, 0.0), 7);
        let mut r = json!({"seconds": 2.0, "cpu": {"clk_tck": 100, "cores": 16, "breakdown":
            {"busy_pct": 97.98790707, "idle_pct": 0.0, "tick_busy_pct": 0.0},
            "per_core": [{"cpu": 0, "user_pct": 75.98401952, "nice_pct": 0.0}]}});
        cpu_shares(&mut r);
        // A tick of 16 cores over 2 s is 0.03125 % of all of them: three decimals.
        assert_eq!(
            r["cpu"],
            json!({"clk_tck": 100, "cores": 16, "breakdown": {"busy_pct": 97.988, "tick_busy_pct": 0.0},
                   "per_core": [{"cpu": 0, "user_pct": 75.98}]})
        );
    }
}
