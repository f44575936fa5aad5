//! How documents are written as text: JSON indented down to the blocks of a result and
//! compact below them, and arrays of plain values on one line.
//!
//! Fully indented, a version 1 results.json spent three quarters of its bytes on indentation
//! and one number per line (a demo's: 1.97 MB, 0.52 MB of it without whitespace). Here a
//! comparison's cell, its result and each block of the result get a line per field, and
//! what is inside a block (a `breakdown`, a `top_threads` entry, a sample) stays on one line:
//! still readable with a pager, greppable by field, and `jq` reads it like any JSON.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

/// Containers opened at this depth or deeper are written compactly (the document is depth 0;
/// a comparison's `cells` 1, a cell 2, its `result` 3, a block such as `cpu` 4, inside it 5).
pub const INDENT_DEPTH: usize = 5;

/// `value` as text (see the module docs), without a final newline.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(64 << 10);
    to_writer(&mut out, value)?;
    // The serializer writes only UTF-8.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// `value` written to `w` (see the module docs).
pub fn to_writer<W: io::Write, T: Serialize + ?Sized>(w: W, value: &T) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, Readable::new(INDENT_DEPTH));
    value.serialize(&mut ser)
}

/// Significant digits a floating-point figure keeps in a written document: a relative error
/// below 5e-7, a thousandth of the smallest difference a comparison can resolve. Times that
/// must be exact (`*_unix_ms`, `*_unix_ns`) and counts are integers and keep every digit.
pub const SIGNIFICANT: usize = 7;

/// `v` rounded to [`SIGNIFICANT`] digits (0, infinities and NaN as they are).
pub fn significant(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    format!("{:.*e}", SIGNIFICANT - 1, v).parse().unwrap_or(v)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    /// A line per element.
    Indent,
    /// On one line.
    Inline,
    /// An array whose first element decides: a container gets a line each, a plain value
    /// keeps the array on one line.
    Undecided,
}

/// The formatter: a stack of the open containers' modes.
pub struct Readable {
    open: Vec<(Mode, bool)>,
    depth: usize,
    /// The first element of an `Undecided` array is about to be written.
    first_pending: bool,
}

impl Readable {
    pub fn new(depth: usize) -> Readable {
        Readable {
            open: Vec::new(),
            depth,
            first_pending: false,
        }
    }

    fn newline<W: ?Sized + io::Write>(&self, w: &mut W, level: usize) -> io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..level {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    /// Called before any value: settles an undecided array by what its first element is.
    fn before_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        container: bool,
    ) -> io::Result<()> {
        if !self.first_pending {
            return Ok(());
        }
        self.first_pending = false;
        if let Some(top) = self.open.last_mut() {
            if container {
                top.0 = Mode::Indent;
                let level = self.open.len();
                self.newline(w, level)?;
            } else {
                top.0 = Mode::Inline;
            }
        }
        Ok(())
    }

    /// The mode of a container opened now.
    fn child(&self, array: bool) -> Mode {
        let inside_inline = self.open.last().is_some_and(|t| t.0 == Mode::Inline);
        if inside_inline || self.open.len() >= self.depth {
            Mode::Inline
        } else if array {
            Mode::Undecided
        } else {
            Mode::Indent
        }
    }

    fn close<W: ?Sized + io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.first_pending = false;
        if let Some((mode, any)) = self.open.pop() {
            if mode == Mode::Indent && any {
                let level = self.open.len();
                self.newline(w, level)?;
            }
        }
        w.write_all(bracket)
    }

    fn element<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        let level = self.open.len();
        if let Some(top) = self.open.last_mut() {
            top.1 = true;
            match top.0 {
                Mode::Indent => self.newline(w, level)?,
                Mode::Undecided => self.first_pending = true,
                Mode::Inline => {}
            }
        }
        Ok(())
    }
}

macro_rules! plain {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        fn $name<W: ?Sized + io::Write>(&mut self, w: &mut W, v: $t) -> io::Result<()> {
            self.before_value(w, false)?;
            serde_json::ser::CompactFormatter.$name(w, v)
        }
    )*};
}

impl Formatter for Readable {
    plain!(
        write_bool: bool, write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64,
        write_i128: i128, write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64,
        write_u128: u128, write_f32: f32, write_number_str: &str,
        write_raw_fragment: &str, write_byte_array: &[u8],
    );

    /// Measured figures to [`SIGNIFICANT`] digits: the digits beyond are noise, and written
    /// in full they were a tenth of a comparison's bytes.
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
        self.before_value(w, false)?;
        serde_json::ser::CompactFormatter.write_f64(w, significant(v))
    }

    fn write_null<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.before_value(w, false)?;
        w.write_all(b"null")
    }

    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.before_value(w, false)?;
        w.write_all(b"\"")
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        e: CharEscape,
    ) -> io::Result<()> {
        serde_json::ser::CompactFormatter.write_char_escape(w, e)
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.before_value(w, true)?;
        let mode = self.child(true);
        self.open.push((mode, false));
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(w, first)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.before_value(w, true)?;
        let mode = self.child(false);
        self.open.push((mode, false));
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let indented = self.open.last().is_some_and(|t| t.0 == Mode::Indent);
        w.write_all(if indented { b": " } else { b":" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Indented down to the depth, compact below; plain arrays on one line, arrays of
    /// containers a line per element; empty containers as `[]` / `{}`; the text reads back
    /// to the same value.
    #[test]
    fn indents_down_to_the_depth_and_reads_back() {
        let v = json!({
            "cells": [
                {"result": {"cpu": {"busy": 1.5, "inner": {"a": [1, 2], "b": "x\"y"}},
                            "buckets": [0.5, 0.25], "none": null, "empty": [], "obj": {}}},
                {"result": {}}
            ],
            "n": 3
        });
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Readable::new(4));
        v.serialize(&mut ser).unwrap();
        let text = String::from_utf8(out).unwrap();
        let want = r#"{
  "cells": [
    {
      "result": {
        "buckets": [0.5,0.25],
        "cpu": {"busy":1.5,"inner":{"a":[1,2],"b":"x\"y"}},
        "empty": [],
        "none": null,
        "obj": {}
      }
    },
    {
      "result": {}
    }
  ],
  "n": 3
}"#;
        assert_eq!(text, want);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }

    /// Floating-point figures keep seven significant digits; integers every digit.
    #[test]
    fn figures_keep_seven_digits() {
        let v = json!({"busy": 53.05045857668598, "rate": 832611030.6419048, "tiny": 1.234567891e-9,
                       "ms": 1764388800123u64, "zero": 0.0, "neg": -0.012345678});
        let text = to_string(&v).unwrap();
        assert!(text.contains("\"busy\": 53.05046,"), "{text}");
        assert!(text.contains("\"rate\": 832611000.0"), "{text}");
        assert!(text.contains("\"tiny\": 1.234568e-9"), "{text}");
        assert!(text.contains("\"ms\": 1764388800123"), "{text}");
        assert!(text.contains("\"neg\": -0.01234568"), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        for k in ["busy", "rate", "tiny", "neg"] {
            let (a, b) = (v[k].as_f64().unwrap(), back[k].as_f64().unwrap());
            assert!(((a - b) / a).abs() < 5e-7, "{k}: {a} -> {b}");
        }
    }

    /// Whatever the shape, the text is JSON of the same value (nested arrays of arrays,
    /// arrays first elements of arrays, strings needing escapes, deep nesting).
    #[test]
    fn any_value_reads_back() {
        let values = [
            json!([
                [1, [2, [3]]],
                [],
                [{}],
                [[], {}],
                "a\nb",
                null,
                true,
                -1.5e300
            ]),
            json!({"a": [[{"b": [[[]]]}]], "c": {"d": {"e": {"f": {"g": {"h": 1}}}}}}),
            json!([]),
            json!("top"),
            json!({"k\u{1}": ["\u{7f}", "é"]}),
        ];
        for v in values {
            for depth in 0..8 {
                let mut out = Vec::new();
                let mut ser =
                    serde_json::Serializer::with_formatter(&mut out, Readable::new(depth));
                v.serialize(&mut ser).unwrap();
                let text = String::from_utf8(out).unwrap();
                assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v, "{text}");
            }
        }
    }
}
