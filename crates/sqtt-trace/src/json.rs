//! Readers for the JSON files of a UI directory (att-format note §1.3–§1.6).
//!
//! `shaderdata_*.json` and `occupancy.json` are read with serde visitors straight from a buffered
//! reader: records are handed to a callback one by one and never collected, so a file of any size
//! is read in bounded memory. Every reader tolerates wrong input: a record that is not an array of
//! integers is counted as malformed and skipped; a truncated or invalid file keeps what was read
//! before the error and reports the error text.

use foldhash::HashMap;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;
use std::io::Read;

/// One `s_ttracedata` record (shaderdata row `[time, value, cu, simd, wave_id, flags]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Shader-clock cycles.
    pub time: i64,
    /// Low 32 bits of the M0/IMM value.
    pub value: u32,
    /// Bits 32..63 of the value as the file gives it (0 in captures: the hardware records 32
    /// bits); kept so that a message shows the value untruncated ([`Record::full_value`]).
    pub high: u32,
    /// CU id (gfx9) or WGP id with the shader array at bit 7 (gfx10+).
    pub cu: u32,
    /// SIMD 0..3.
    pub simd: u32,
    /// Wave slot within the SIMD.
    pub wave: u32,
    /// Bit 0 IMM, bit 1 PRIV (trap handler).
    pub flags: u32,
}

impl Record {
    /// The value as the file gives it, all 64 bits (session-17 fresh tester: a warning showed
    /// a 64-bit value truncated to its low 32 bits).
    pub fn full_value(&self) -> u64 {
        u64::from(self.high) << 32 | u64::from(self.value)
    }
}

/// Bit of `flags` set on records written by the trap handler (`FLAGS_PRIV = 1`).
pub const FLAG_PRIV: u32 = 2;

/// A JSON scalar cell of a row: an integer, or anything else.
#[derive(Clone, Copy, Default)]
enum Cell {
    I(i64),
    U(u64),
    #[default]
    Other,
}

impl<'de> Deserialize<'de> for Cell {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Cell;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Cell, E> {
                Ok(Cell::I(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Cell, E> {
                Ok(Cell::U(v))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Cell, E> {
                Ok(Cell::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Cell, E> {
                Ok(Cell::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Cell, E> {
                Ok(Cell::Other)
            }
            fn visit_unit<E>(self) -> Result<Cell, E> {
                Ok(Cell::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Cell, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Cell::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Cell, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Cell::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// Up to `ROW` leading cells of a row; `len` is the row's full length, `None` if not an array.
const ROW: usize = 8;
struct Row {
    cells: [Cell; ROW],
    len: Option<usize>,
}

impl Row {
    fn int(&self, i: usize) -> Option<i128> {
        if i >= self.len.unwrap_or(0) {
            return None;
        }
        match self.cells.get(i)? {
            Cell::I(v) => Some(i128::from(*v)),
            Cell::U(v) => Some(i128::from(*v)),
            Cell::Other => None,
        }
    }
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Row;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a row")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Row, A::Error> {
                let mut row = Row {
                    cells: [Cell::Other; ROW],
                    len: Some(0),
                };
                let mut n = 0;
                while n < ROW {
                    match s.next_element::<Cell>()? {
                        Some(c) => row.cells[n] = c,
                        None => break,
                    }
                    n += 1;
                }
                if n == ROW {
                    while s.next_element::<IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                }
                row.len = Some(n);
                Ok(row)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Row, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Row {
                    cells: [Cell::Other; ROW],
                    len: None,
                })
            }
            fn visit_i64<E>(self, _: i64) -> Result<Row, E> {
                Ok(Row::not_array())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Row, E> {
                Ok(Row::not_array())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Row, E> {
                Ok(Row::not_array())
            }
            fn visit_str<E>(self, _: &str) -> Result<Row, E> {
                Ok(Row::not_array())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Row, E> {
                Ok(Row::not_array())
            }
            fn visit_unit<E>(self) -> Result<Row, E> {
                Ok(Row::not_array())
            }
        }
        d.deserialize_any(V)
    }
}

impl Row {
    fn not_array() -> Row {
        Row {
            cells: [Cell::Other; ROW],
            len: None,
        }
    }
}

/// What reading one shaderdata file gave besides its records.
#[derive(Debug, Default, Clone)]
pub struct ShaderdataFile {
    /// Records handed to the callback.
    pub records: u64,
    /// Rows skipped: not an array of integers, or values out of range.
    pub malformed: u64,
    /// The `"type"` string when it was neither `"shaderdata"` nor `"S_TTRACEDATA"`.
    pub unexpected_type: Option<String>,
    /// `"records_count"` when it differs from the records read.
    pub count_mismatch: Option<u64>,
    /// A `"records_schema"` without the six columns: no record was used.
    pub bad_schema: Option<String>,
    /// Parse error (truncated or invalid JSON, not an object); records before it were used.
    pub error: Option<String>,
}

const SCHEMA: [&str; 6] = ["time", "value", "cu", "simd", "wave_id", "flags"];

struct FileSeed<'a, F> {
    cb: &'a mut F,
    out: &'a mut ShaderdataFile,
    columns: [usize; 6],
    count: Option<u64>,
}

impl<F: FnMut(Record)> FileSeed<'_, F> {
    /// Turns one row into a record (columns from the schema) or counts it as malformed.
    fn take(&mut self, row: &Row) {
        if self.out.bad_schema.is_some() {
            self.out.malformed += 1;
            return;
        }
        let c = self.columns;
        let small = |i: usize| row.int(c[i]).and_then(|v| u32::try_from(v).ok());
        let rec = (|| {
            let value = u64::try_from(row.int(c[1])?).ok()?;
            Some(Record {
                time: i64::try_from(row.int(c[0])?).ok()?,
                value: value as u32,
                high: (value >> 32) as u32,
                cu: small(2)?,
                simd: small(3)?,
                wave: small(4)?,
                flags: small(5)?,
            })
        })();
        match rec {
            Some(r) => {
                self.out.records += 1;
                (self.cb)(r);
            }
            None => self.out.malformed += 1,
        }
    }
}

impl<'de, F: FnMut(Record)> Visitor<'de> for FileSeed<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a shaderdata object")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut m: A) -> Result<(), A::Error> {
        while let Some(key) = m.next_key::<String>()? {
            match key.as_str() {
                "type" | "records_schema" | "records_count" => self.field(&key, m.next_value()?),
                "records" => m.next_value_seed(RecordsSeed { file: &mut self })?,
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        self.finish();
        Ok(())
    }
}

impl<F: FnMut(Record)> FileSeed<'_, F> {
    /// Takes the value of the `"type"`, `"records_schema"` or `"records_count"` key.
    fn field(&mut self, key: &str, v: Value) {
        match key {
            "type" => {
                if !matches!(v.as_str(), Some("shaderdata" | "S_TTRACEDATA")) {
                    self.out.unexpected_type = Some(v.to_string());
                }
            }
            "records_schema" => {
                let names: Vec<&str> = v
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                for (i, want) in SCHEMA.iter().enumerate() {
                    match names.iter().position(|n| n == want) {
                        Some(p) => self.columns[i] = p,
                        None => {
                            self.out.bad_schema = Some(v.to_string());
                            break;
                        }
                    }
                }
            }
            _ => self.count = v.as_u64(),
        }
    }

    /// At the end of the document: compares `"records_count"` with the rows read.
    fn finish(&mut self) {
        if let Some(c) = self.count {
            if c != self.out.records + self.out.malformed {
                self.out.count_mismatch = Some(c);
            }
        }
    }
}

struct RecordsSeed<'a, 'b, F> {
    file: &'a mut FileSeed<'b, F>,
}

impl<'de, F: FnMut(Record)> DeserializeSeed<'de> for RecordsSeed<'_, '_, F> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(Record)> Visitor<'de> for RecordsSeed<'_, '_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of records")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while let Some(row) = s.next_element::<Row>()? {
            self.file.take(&row);
        }
        Ok(())
    }
}

/// Streams the records of one shaderdata JSON document from `reader` into `cb`, in file order.
/// Columns follow `"records_schema"` when it comes before `"records"` (as every writer orders
/// them), else the documented order. Never fails: problems are reported in the result.
pub fn read_shaderdata<R: Read>(reader: R, cb: impl FnMut(Record)) -> ShaderdataFile {
    shaderdata_from(serde_json::Deserializer::from_reader(reader), cb)
}

/// [`read_shaderdata`] over a document in memory (callers use it for files up to
/// [`IN_MEMORY_LIMIT`] bytes), with the same records and result.
///
/// Fast path ([`scan_document`]): the top-level object and the `"records"` array are walked
/// directly, rows of plain integers are read by [`plain_row`], and every other value (keys,
/// `"type"`, the schema, rows of another shape) goes to serde_json, so each byte is checked once.
/// A document the fast path cannot take whole (invalid, truncated, not an object, too deep) is
/// read again by the streaming visitor, which is then the answer; the records the fast path
/// already delivered (always a prefix of the visitor's) are not delivered twice.
pub fn read_shaderdata_slice(bytes: &[u8], mut cb: impl FnMut(Record)) -> ShaderdataFile {
    let mut delivered = 0u64;
    let mut out = ShaderdataFile::default();
    let mut count = |r| {
        delivered += 1;
        cb(r);
    };
    let mut seed = FileSeed {
        cb: &mut count,
        out: &mut out,
        columns: [0, 1, 2, 3, 4, 5],
        count: None,
    };
    if scan_document(bytes, &mut seed).is_some() {
        return out;
    }
    let mut skip = delivered;
    shaderdata_from(serde_json::Deserializer::from_slice(bytes), |r| {
        if skip > 0 {
            skip -= 1;
        } else {
            cb(r);
        }
    })
}

/// The fast path of [`read_shaderdata_slice`]: `{ "key": value, ... }` with `"records"` read
/// by [`scan_records`] and the other values by serde_json, as [`FileSeed`] takes them. `None`:
/// not a complete valid document of at most [`MAX_ELEMENT_DEPTH`] nesting per value.
fn scan_document<F: FnMut(Record)>(b: &[u8], seed: &mut FileSeed<F>) -> Option<()> {
    let mut i = skip_ws(b, 0);
    (b.get(i) == Some(&b'{')).then_some(())?;
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            (b.get(i) == Some(&b'"')).then_some(())?;
            let end = string_end(b, i);
            let key: String = serde_json::from_slice(&b[i..end]).ok()?;
            let colon = skip_ws(b, end);
            (b.get(colon) == Some(&b':')).then_some(())?;
            i = skip_ws(b, colon + 1);
            if key == "records" {
                i = scan_records(b, i, |row| seed.take(row)).ok()?;
            } else {
                let (end, depth) = value_end(b, i);
                (depth <= MAX_ELEMENT_DEPTH).then_some(())?;
                let text = &b[i..end];
                match key.as_str() {
                    "type" | "records_schema" | "records_count" => {
                        seed.field(&key, serde_json::from_slice(text).ok()?)
                    }
                    _ => {
                        serde_json::from_slice::<IgnoredAny>(text).ok()?;
                    }
                }
                i = end;
            }
            i = skip_ws(b, i);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    (skip_ws(b, i) == b.len()).then_some(())?;
    seed.finish();
    Some(())
}

/// JSON whitespace (RFC 8259 §2) from `i` on; the index of the next other byte.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Deepest nesting [`scan_records`] hands to serde_json for one element; deeper elements make
/// it fail, so that the visitor (whose recursion limit counts from the document root) decides.
const MAX_ELEMENT_DEPTH: u32 = 64;

/// The index after the closing quote of the JSON string whose opening quote is at `b[i]`
/// (`b.len()` when it is not closed); escapes are skipped, not checked.
fn string_end(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return i + 1,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    b.len()
}

/// End of the JSON value starting at `b[i]` in valid JSON (the index of the `,` or `]` that
/// follows it, or `b.len()`) and its nesting depth.
fn value_end(b: &[u8], mut i: usize) -> (usize, u32) {
    let (mut depth, mut deepest) = (0u32, 0u32);
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                i = string_end(b, i);
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' if depth == 0 => return (i, deepest),
            b']' | b'}' => depth -= 1,
            b',' if depth == 0 => return (i, deepest),
            _ => {}
        }
        i += 1;
    }
    (i, deepest)
}

/// Reads the row starting with `[` at `b[i]` into `row` when every element is an integer
/// serde_json reads as `u64` (at most 19 digits) or negative `i64` (at most 18 digits, not
/// `-0`, which it reads as a float), without fraction or exponent; returns the index after its
/// `]`. `None`: not such a row (`row` is then partly overwritten). Cells at or past the row's
/// length are left as they were: [`Row::int`] never reads them, so `row` is reused unreset.
fn plain_row(b: &[u8], i: usize, row: &mut Row) -> Option<usize> {
    let mut i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        row.len = Some(0);
        return Some(i + 1);
    }
    let mut n = 0;
    loop {
        let neg = b.get(i) == Some(&b'-');
        i += usize::from(neg);
        let start = i;
        let mut v = 0u64;
        while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
            if i - start == 19 {
                return None;
            }
            v = v * 10 + u64::from(d - b'0');
            i += 1;
        }
        let digits = i - start;
        // JSON has no leading zeros (`0362` is invalid: serde_json must see it and fail).
        if digits == 0
            || (digits > 1 && b[start] == b'0')
            || matches!(b.get(i), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let cell = if neg {
            if digits > 18 || v == 0 {
                return None;
            }
            Cell::I(-(v as i64))
        } else {
            Cell::U(v)
        };
        if let Some(c) = row.cells.get_mut(n) {
            *c = cell;
        }
        n += 1;
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => {
                row.len = Some(n);
                return Some(i + 1);
            }
            _ => return None,
        }
    }
}

/// Reads the rows of the `"records"` array starting at `b[i]`, in order: rows of plain integers
/// with [`plain_row`], any other element with serde_json as a [`Row`] (which checks it). Returns
/// the index after the closing `]`. Errors: not an array, an element that is not valid JSON or
/// nested deeper than [`MAX_ELEMENT_DEPTH`], a missing `,` or `]`.
fn scan_records(b: &[u8], mut i: usize, mut each: impl FnMut(&Row)) -> Result<usize, String> {
    if b.get(i) != Some(&b'[') {
        return Err("records is not an array".into());
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Ok(i + 1);
    }
    let mut row = Row::not_array();
    loop {
        let fast = if b.get(i) == Some(&b'[') {
            plain_row(b, i, &mut row)
        } else {
            None
        };
        let next = match fast {
            Some(next) => next,
            None => {
                let (end, depth) = value_end(b, i);
                if depth > MAX_ELEMENT_DEPTH {
                    return Err("records element nested too deep for the fast path".into());
                }
                row = serde_json::from_slice(&b[i..end]).map_err(|e| e.to_string())?;
                end
            }
        };
        each(&row);
        i = skip_ws(b, next);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => return Ok(i + 1),
            _ => return Err("records array not closed".into()),
        }
    }
}

/// Shaderdata files up to this size (bytes) are read whole and parsed from memory; larger ones
/// are streamed, so memory stays bounded by this figure whatever the file size.
pub const IN_MEMORY_LIMIT: u64 = 64 << 20;

fn shaderdata_from<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
    mut cb: impl FnMut(Record),
) -> ShaderdataFile {
    let mut out = ShaderdataFile::default();
    let seed = FileSeed {
        cb: &mut cb,
        out: &mut out,
        columns: [0, 1, 2, 3, 4, 5],
        count: None,
    };
    let r = de::Deserializer::deserialize_map(&mut de, seed).and_then(|()| de.end());
    if let Err(e) = r {
        out.error = Some(e.to_string());
    }
    out
}

/// A wave slot: (shader engine, cu, simd, wave slot).
pub type SlotKey = (u32, u32, u32, u32);

/// `occupancy.json`: wave launches and the kernel-name map.
#[derive(Debug, Default, Clone)]
pub struct Occupancy {
    /// (se, cu, simd, slot) -> launches `(time, kernel_id)` sorted by time (rows with start = 1).
    pub launches: HashMap<SlotKey, Vec<(i64, i64)>>,
    /// (se, cu, simd, slot) -> wave end times sorted (rows with start = 0).
    pub ends: HashMap<SlotKey, Vec<i64>>,
    /// kernel_id -> kernel name (`"dispatches"`).
    pub dispatches: HashMap<i64, String>,
    /// kernel_id -> code-object id from `att_tool.py` dispatch events (`entry_point`).
    pub kernel_code_object: HashMap<i64, u32>,
    /// The file has the 11-column `"occupancy_fields"` of `att_tool.py` (rcv.py).
    pub att_tool_style: bool,
    /// Rows shorter than 6 integers, skipped.
    pub malformed: u64,
    /// Shader engine -> packet-loss times (shader cycles), sorted: the `"events"` entries with
    /// `"kind": "event"` and `"type"` [`EVENT_PACKET_LOSS`].
    pub losses: HashMap<u32, Vec<i64>>,
    /// Packet-loss events without an integer `"time"` or under a key that is not a shader
    /// engine number, ignored.
    pub malformed_losses: u64,
}

/// The `"type"` of a packet-loss event in `occupancy.json` `"events"`:
/// `ROCPROF_TRACE_DECODER_EVENT_PACKET_LOSS`, the seventh value of
/// `rocprofiler_thread_trace_decoder_event_type_t` (rocprof-trace-decoder
/// `include/rocprof_trace_decoder/trace_decoder_types.h` and `EventType.PACKET_LOSS = 6` in
/// `python/rocprof_trace_decoder/records.py`, ROCm/rocm-systems 0218074). The decoder emits it
/// at the point of the token stream where its marker stream drops the lost waves
/// (`source/gfx9/gfx9wave.cpp`, `source/gfx10/rdna_sqtt.cpp` at 0218074); `rcv.py` writes the
/// event's type as this integer.
pub const EVENT_PACKET_LOSS: i64 = 6;

struct OccVisitor<'a> {
    occ: &'a mut Occupancy,
}

struct OccRows<'a> {
    occ: &'a mut Occupancy,
    se: u32,
}

impl<'de> DeserializeSeed<'de> for OccRows<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for OccRows<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("occupancy rows")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while let Some(row) = s.next_element::<Row>()? {
            let v = (|| {
                let mut v = [0i128; 6];
                for (i, x) in v.iter_mut().enumerate() {
                    *x = row.int(i)?;
                }
                Some(v)
            })();
            let Some([time, cu, simd, wave, start, kernel]) = v else {
                self.occ.malformed += 1;
                continue;
            };
            let small = |x: i128| u32::try_from(x).ok();
            match (
                i64::try_from(time).ok(),
                small(cu),
                small(simd),
                small(wave),
                i64::try_from(kernel).ok(),
            ) {
                (Some(t), Some(c), Some(si), Some(w), Some(k)) => {
                    if start == 1 {
                        self.occ
                            .launches
                            .entry((self.se, c, si, w))
                            .or_default()
                            .push((t, k));
                    } else if start == 0 {
                        self.occ
                            .ends
                            .entry((self.se, c, si, w))
                            .or_default()
                            .push(t);
                    }
                }
                _ => self.occ.malformed += 1,
            }
        }
        Ok(())
    }
}

impl OccVisitor<'_> {
    /// One entry of the `"events"` timeline of shader engine `se`: a dispatch gives its kernel's
    /// code object, a packet-loss event its time; other events are not used.
    fn event(&mut self, se: Option<u32>, e: &Value) {
        match e.get("kind").and_then(Value::as_str) {
            Some("event") if e.get("type").and_then(Value::as_i64) == Some(EVENT_PACKET_LOSS) => {
                match (se, e.get("time").and_then(Value::as_i64)) {
                    (Some(se), Some(t)) => self.occ.losses.entry(se).or_default().push(t),
                    _ => self.occ.malformed_losses += 1,
                }
            }
            Some("dispatch") => {
                let k = e.get("kernel_id").and_then(Value::as_i64);
                let co = e
                    .get("entry_point")
                    .and_then(|p| p.get("code_object_id"))
                    .and_then(Value::as_u64)
                    .and_then(|c| u32::try_from(c).ok());
                if let (Some(k), Some(co)) = (k, co) {
                    self.occ.kernel_code_object.insert(k, co);
                }
            }
            _ => {}
        }
    }
}

impl<'de> Visitor<'de> for OccVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an occupancy object")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut m: A) -> Result<(), A::Error> {
        while let Some(key) = m.next_key::<String>()? {
            if let Ok(se) = key.parse::<u32>() {
                m.next_value_seed(OccRows { occ: self.occ, se })?;
                continue;
            }
            match key.as_str() {
                "dispatches" => {
                    let v: Value = m.next_value()?;
                    for (k, name) in v.as_object().into_iter().flatten() {
                        if let (Ok(k), Some(n)) = (k.parse::<i64>(), name.as_str()) {
                            self.occ.dispatches.insert(k, n.to_string());
                        }
                    }
                }
                "events" => {
                    let v: Value = m.next_value()?;
                    for (key, list) in v.as_object().into_iter().flatten() {
                        let se = key.parse::<u32>().ok();
                        for e in list.as_array().into_iter().flatten() {
                            self.event(se, e);
                        }
                    }
                }
                "occupancy_fields" => {
                    self.occ.att_tool_style = true;
                    m.next_value::<IgnoredAny>()?;
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Reads `occupancy.json` (6-column rocprofv3 rows or 11-column `att_tool.py` rows, by position;
/// the `"events"` timeline's dispatches and packet losses).
/// On a parse error the rows read before it are kept and the error text is returned beside them.
pub fn read_occupancy<R: Read>(reader: R) -> (Occupancy, Option<String>) {
    let mut occ = Occupancy::default();
    let mut de = serde_json::Deserializer::from_reader(reader);
    let r = de::Deserializer::deserialize_map(&mut de, OccVisitor { occ: &mut occ })
        .and_then(|()| de.end());
    for v in occ.launches.values_mut() {
        v.sort_unstable();
    }
    for v in occ.ends.values_mut() {
        v.sort_unstable();
    }
    for v in occ.losses.values_mut() {
        v.sort_unstable();
    }
    (occ, r.err().map(|e| e.to_string()))
}

/// The parts of `code.json` the marker tools use; the large `"code"` rows are skipped unread.
#[derive(Debug, Default, Deserialize)]
pub struct CodeJson {
    /// `[codeobj_id, marker_id, kind, name, source_loc, vaddr]` rows.
    #[serde(default)]
    pub sqtt_funcmap: Option<Value>,
    /// `[codeobj_id, shader_clock_bits, shader_clock_shift]` rows (`att_tool.py`).
    #[serde(default)]
    pub sqtt_funcmap_layout: Option<Value>,
    /// `[codeobj_id, marker_id, extra_payload_count]` rows (`att_tool.py`).
    #[serde(default)]
    pub sqtt_funcmap_payloads: Option<Value>,
    /// `[{"address","codeobj","name","demangled"}]` (`att_tool.py`).
    #[serde(default)]
    pub kernels: Option<Value>,
}

/// Reads `code.json`.
pub fn read_code_json<R: Read>(reader: R) -> Result<CodeJson, String> {
    serde_json::from_reader(reader).map_err(|e| e.to_string())
}

/// Reads a small JSON document (`filenames.json`, `realtime.json`) as a value tree.
pub fn read_value<R: Read>(reader: R) -> Result<Value, String> {
    serde_json::from_reader(reader).map_err(|e| e.to_string())
}

/// The shader clock rates [`shader_clock_hz`] accepts (Hz): 1 MHz to 100 GHz, far around the
/// 0.1-3 GHz of real GPU shader clocks; outside it `realtime.json` is corrupt.
pub const PLAUSIBLE_CLOCK_HZ: std::ops::RangeInclusive<f64> = 1.0e6..=1.0e11;

/// Shader clock in Hz from `realtime.json`: `Δshader_clock / (Δrealtime / frequency)` over the
/// first and last `[shader_clock, realtime_clock]` pair of the first shader engine that has two
/// distinct pairs (att-format note §1.2). `Ok(None)` when the file has no frequency or no such
/// pairs. Errors: a frequency that is not a positive finite number, or a rate outside
/// [`PLAUSIBLE_CLOCK_HZ`] (session-17 fresh tester: "inf GHz"), with the value; the caller
/// warns and uses cycles.
pub fn shader_clock_hz(realtime: &Value) -> Result<Option<f64>, String> {
    let Some(f) = realtime.get("metadata").and_then(|m| m.get("frequency")) else {
        return Ok(None);
    };
    let freq = match f.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => x,
        _ => return Err(format!("metadata.frequency {f} is not a positive number")),
    };
    let Some(obj) = realtime.as_object() else {
        return Ok(None);
    };
    let mut keys: Vec<&String> = obj.keys().filter(|k| k.starts_with("SE")).collect();
    keys.sort();
    for k in keys {
        let Some(rows) = obj[k].as_array() else {
            return Ok(None);
        };
        let pair = |r: &Value| Some((r.get(0)?.as_f64()?, r.get(1)?.as_f64()?));
        let (Some(a), Some(b)) = (rows.first().and_then(pair), rows.last().and_then(pair)) else {
            continue;
        };
        let (ds, dr) = (b.0 - a.0, b.1 - a.1);
        if ds > 0.0 && dr > 0.0 {
            let hz = ds / (dr / freq);
            return match PLAUSIBLE_CLOCK_HZ.contains(&hz) {
                true => Ok(Some(hz)),
                false => Err(format!(
                    "{k}: shader clock {hz:e} Hz (frequency {freq}) is outside 1 MHz..100 GHz"
                )),
            };
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Vec<Record>, ShaderdataFile) {
        let mut v = Vec::new();
        let f = read_shaderdata(text.as_bytes(), |r| v.push(r));
        (v, f)
    }

    #[test]
    fn both_type_strings_and_schema_order() {
        let (v, f) = read(
            r#"{"type":"S_TTRACEDATA","begin_time":5,"end_time":6,"records_schema":["time","value","cu","simd","wave_id","flags"],"records_count":2,"records":[[5,6,1,2,3,0],[6,4294967297,1,2,3,2]]}"#,
        );
        assert!(f.error.is_none() && f.unexpected_type.is_none() && f.count_mismatch.is_none());
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].value, 1, "low 32 bits");
        assert_eq!(v[1].full_value(), 4294967297, "all 64 bits");
        assert_eq!(v[1].flags, FLAG_PRIV);
        let (v, _) = read(
            r#"{"type":"shaderdata","records_schema":["flags","wave_id","simd","cu","value","time"],"records":[[0,3,2,1,6,5]]}"#,
        );
        assert_eq!(
            v[0],
            Record {
                time: 5,
                value: 6,
                high: 0,
                cu: 1,
                simd: 2,
                wave: 3,
                flags: 0
            }
        );
    }

    #[test]
    fn malformed_rows_truncation_and_schema() {
        let (v, f) = read(
            r#"{"type":"x","records_count":9,"records":[[1,2,3],"s",{"a":1},[1.5,2,0,0,0,0],[-1,2,0,0,0,-3],[7,8,0,0,0,0,99,[1]],[9,9,0,0,0,0],[10,1"#,
        );
        assert_eq!(v.len(), 2);
        assert_eq!(f.malformed, 5);
        assert!(f.error.is_some());
        assert_eq!(f.unexpected_type.as_deref(), Some("\"x\""));
        let (v, f) = read(r#"{"records_schema":["t","v"],"records":[[1,2,0,0,0,0]]}"#);
        assert!(v.is_empty() && f.bad_schema.is_some() && f.malformed == 1);
        let (v, f) = read(r#"[[1,2,0,0,0,0]]"#);
        assert!(v.is_empty() && f.error.is_some());
    }

    /// The fast slice path and the streaming visitor (the reference, and the reader before the
    /// fast path existed) give the same records and result on documents of every shape: plain
    /// rows with spaces, integer edges (u64/i64 limits, 19/20 digits, `-0`), floats, strings with
    /// escapes, nested and long rows, duplicate keys, other keys, truncation and junk after it.
    #[test]
    fn slice_fast_path_agrees_with_visitor() {
        const CELLS: [&str; 26] = [
            "0",
            "1",
            "7",
            "-1",
            "4294967297",
            "18446744073709551615",
            "18446744073709551616",
            "9999999999999999999",
            "-9223372036854775808",
            "-9223372036854775809",
            "-999999999999999999",
            "-0",
            "1.5",
            "1e3",
            "2E-1",
            "\"s,]\\\"x\"",
            "null",
            "true",
            "[1,[2,{\"a\":[3]}]]",
            "{\"k\":1}",
            " 12 ",
            "\n3\t",
            "123456789012345678",
            "-1234567890123456789",
            "0362",
            "-01",
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for case in 0..3000 {
            let mut rows = Vec::new();
            for _ in 0..rnd(12) {
                let row = match rnd(10) {
                    0 => CELLS[rnd(CELLS.len())].to_string(),
                    1..=3 => {
                        let n = rnd(11);
                        let cells: Vec<&str> = (0..n).map(|_| CELLS[rnd(CELLS.len())]).collect();
                        format!("[{}]", cells.join(if rnd(2) == 0 { "," } else { " , " }))
                    }
                    _ => format!(
                        "[{},{},{},{},{},{}]",
                        rnd(1000),
                        rnd(1 << 20),
                        rnd(4),
                        rnd(4),
                        rnd(8),
                        rnd(3)
                    ),
                };
                rows.push(row);
            }
            let schema = match rnd(6) {
                0 => r#""records_schema":["flags","wave_id","simd","cu","value","time"],"#,
                1 => r#""records_schema":["time"],"#,
                2 => {
                    r#""records_schema":["a","b","c","d","e","f","g","h","time","value","cu","simd","wave_id","flags"],"#
                }
                _ => r#""records_schema":["time","value","cu","simd","wave_id","flags"],"#,
            };
            let extra = match rnd(5) {
                0 => r#""records":[[1,2,3,4,5,6]],"#,
                1 => r#""other":{"x":[1,"]"]},"type":"S_TTRACEDATA","#,
                2 => r#""type":7,"#,
                _ => "",
            };
            let mut doc = format!(
                "{{ \"type\" : \"shaderdata\",{schema}{extra}\"records_count\":{},\n\"records\": [ {} ] }}",
                rnd(14),
                rows.join(",\n")
            );
            match rnd(8) {
                0 => doc.truncate(rnd(doc.len() + 1)),
                1 => doc.push_str(" x"),
                2 => doc.push_str(" \n"),
                _ => {}
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let fa = read_shaderdata_slice(doc.as_bytes(), |r| a.push(r));
            let fb = read_shaderdata(doc.as_bytes(), |r| b.push(r));
            assert_eq!(a, b, "case {case}: {doc}");
            assert_eq!(format!("{fa:?}"), format!("{fb:?}"), "case {case}: {doc}");
        }
    }

    #[test]
    fn occupancy_six_and_eleven_columns() {
        let text = r#"{"0":[[100,1,2,3,1,1],[130,1,2,3,0,1],[300,1,2,3,1,2,0,0,0,5,0],[5,1]],
            "occupancy_fields":["time"],"dispatches":{"1":"kernel","2":"k2","x":"y"},
            "events":{"0":[{"kind":"dispatch","kernel_id":2,"entry_point":{"address":4096,"code_object_id":7}}]},
            "version":"3.1.0"}"#;
        let (o, err) = read_occupancy(text.as_bytes());
        assert!(err.is_none());
        assert_eq!(o.launches[&(0, 1, 2, 3)], vec![(100, 1), (300, 2)]);
        assert_eq!(o.malformed, 1);
        assert!(o.att_tool_style);
        assert_eq!(o.dispatches[&1], "kernel");
        assert_eq!(o.kernel_code_object[&2], 7);
    }

    #[test]
    fn realtime_gives_clock_rate() {
        let v: Value = serde_json::json!({"metadata": {"descriptor": "x", "frequency": 100_000_000},
            "SE0": [[1000, 50], [3000, 150]]});
        // 2000 shader cycles in 100 ticks of a 100 MHz clock (1 us) = 2 GHz.
        assert_eq!(shader_clock_hz(&v), Ok(Some(2.0e9)));
    }

    /// Session-17 fresh tester: an absurd frequency gave "inf GHz", a zero or negative one was
    /// dropped without a word. Both are errors now (the caller warns and uses cycles); a file
    /// without a frequency or pairs still gives no rate quietly.
    #[test]
    fn absurd_zero_or_negative_frequencies_are_errors() {
        for freq in [
            serde_json::json!(1e308),
            serde_json::json!(0),
            serde_json::json!(-5),
        ] {
            let v: Value = serde_json::json!({"metadata": {"frequency": freq},
                "SE0": [[1000, 50], [3000, 150]]});
            let e = shader_clock_hz(&v).expect_err("an unusable rate");
            assert!(e.contains("frequency"), "{e}");
        }
        let v: Value = serde_json::json!({"metadata": {"frequency": 1e8}, "SE0": [[1000, 50]]});
        assert_eq!(shader_clock_hz(&v), Ok(None));
        assert_eq!(shader_clock_hz(&serde_json::json!({})), Ok(None));
    }
}
