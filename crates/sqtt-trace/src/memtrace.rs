//! Memory traces: every address-trace block with its active lanes' addresses, and a summary per
//! site (one code object's `addr_trace_*` marker id).
//!
//! Output shape (issue 14):
//! `{"blocks": [{"marker_id", "name", "source", "se", "cu", "simd", "wave", "instance", "time",
//! "exec", "addresses": [...]}], "sites": [{"code_object", "marker_id", "name", "source",
//! "blocks", "active_lanes", "lines_64", "lines_128", "stride"}]}`. `time` is in shader cycles;
//! `addresses` are integers in lane order (bytes). Per site: `active_lanes`, `lines_64` and
//! `lines_128` (distinct 64/128-byte lines one block touches) are `{"min","mean","max"}` over the
//! blocks; `stride` is the per-lane byte stride of blocks whose active lanes are evenly spaced:
//! `{"uniform_blocks", "most_common", "most_common_blocks"}` (`most_common` null when no block was
//! uniform). Blocks are written as they are decoded; only the per-site figures stay in memory.
//!
//! Struct-buffer blocks (issue 38, item 4) have `"addresses": []`, `"address_known": false` and
//! `"components": {"base", "stride", "soffset", "voffset": [...], "vindex": [...]}` (active lanes
//! in lane order; see [`crate::trace::BufferComponents`] for why no address is computed); they
//! are left out of the line figures and counted in the top-level `"blocks_without_addresses"`.

use crate::names::{NameId, Names};
use crate::trace::{AddressBlock, Sink, WaveInfo};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

#[derive(Debug, Default, Clone)]
struct MinMeanMax {
    min: u64,
    max: u64,
    sum: u64,
    n: u64,
}

impl MinMeanMax {
    fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.sum += v;
        self.n += 1;
    }
    fn json(&self) -> serde_json::Value {
        let mean = if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        };
        serde_json::json!({"min": self.min, "mean": (mean * 1000.0).round() / 1000.0, "max": self.max})
    }
}

#[derive(Debug, Default, Clone)]
struct Site {
    name: NameId,
    source: Option<String>,
    blocks: u64,
    lanes: MinMeanMax,
    lines64: MinMeanMax,
    lines128: MinMeanMax,
    strides: HashMap<i64, u64>,
}

/// Per-block figures: distinct 64- and 128-byte lines, and the per-lane stride when the active
/// lanes are evenly spaced (`(a[j] - a[i]) / (lane j - lane i)` equal for every consecutive
/// pair and exact).
pub fn block_figures(lanes: &[u32], addresses: &[u64]) -> (u64, u64, Option<i64>) {
    let mut l64: Vec<u64> = addresses.iter().map(|a| a >> 6).collect();
    l64.sort_unstable();
    l64.dedup();
    let mut l128: Vec<u64> = addresses.iter().map(|a| a >> 7).collect();
    l128.sort_unstable();
    l128.dedup();
    let mut stride = None;
    // Lanes without an address (never from the decoder) are not compared.
    let n = lanes.len().min(addresses.len());
    let mut uniform = n >= 2;
    for i in 1..n {
        let dl = i64::from(lanes[i]) - i64::from(lanes[i - 1]);
        let da = addresses[i].wrapping_sub(addresses[i - 1]) as i64;
        if dl == 0 || da % dl != 0 || stride.is_some_and(|s| s != da / dl) {
            uniform = false;
            break;
        }
        stride = Some(da / dl);
    }
    (
        l64.len() as u64,
        l128.len() as u64,
        if uniform { stride } else { None },
    )
}

/// Streaming writer of the memory-trace JSON into a file the caller opened (the CLI gives it a
/// temporary file and moves it into place only when the whole run succeeded).
pub struct MemTrace {
    out: std::io::BufWriter<std::fs::File>,
    first: bool,
    sites: BTreeMap<(Option<u32>, u32), Site>,
    error: Option<std::io::Error>,
    /// Blocks written.
    pub blocks: u64,
    /// Struct-buffer blocks written with their components and no addresses.
    pub without_addresses: u64,
}

impl MemTrace {
    /// A writer into `file`; nothing is written before the first block or [`MemTrace::finish`]
    /// (so that a run without blocks can write something else). Errors: none today (the
    /// signature keeps the caller's error path).
    pub fn new(file: std::fs::File) -> std::io::Result<MemTrace> {
        let out = std::io::BufWriter::new(file);
        Ok(MemTrace {
            out,
            first: true,
            sites: BTreeMap::new(),
            error: None,
            blocks: 0,
            without_addresses: 0,
        })
    }

    /// Writes the site summaries and flushes. Errors: any write of the run failed.
    pub fn finish(mut self, names: &Names, demangle: bool) -> anyhow::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e.into());
        }
        let sites: Vec<serde_json::Value> = self
            .sites
            .iter()
            .map(|((co, id), s)| {
                let best = s.strides.iter().max_by_key(|(st, n)| (**n, -(**st)));
                serde_json::json!({
                    "code_object": co,
                    "marker_id": id,
                    "name": names.display(s.name, demangle),
                    "source": s.source,
                    "blocks": s.blocks,
                    "active_lanes": s.lanes.json(),
                    "lines_64": s.lines64.json(),
                    "lines_128": s.lines128.json(),
                    "stride": {
                        "uniform_blocks": s.strides.values().sum::<u64>(),
                        "most_common": best.map(|b| *b.0),
                        "most_common_blocks": best.map_or(0, |b| *b.1),
                    },
                })
            })
            .collect();
        if self.first {
            self.out.write_all(b"{\"blocks\":[")?;
        }
        write!(
            self.out,
            "\n],\"sites\":{},\"blocks_without_addresses\":{}}}\n",
            serde_json::to_string(&sites)?,
            self.without_addresses
        )?;
        self.out.flush()?;
        Ok(())
    }
}

impl Sink for MemTrace {
    type Wave = ();

    fn header(&mut self, _: &WaveInfo, _: &mut (), _: &crate::trace::Header, _: &[NameId]) {}

    fn address_block(&mut self, w: &WaveInfo, _: &mut (), b: &AddressBlock) {
        self.blocks += 1;
        // A struct-buffer block has lanes but no addresses: no line or stride figures.
        let (l64, l128, stride) = if b.components.is_none() {
            block_figures(&b.lanes, &b.addresses)
        } else {
            (0, 0, None)
        };
        let site = self
            .sites
            .entry((w.code_object, b.marker_id))
            .or_insert_with(|| Site {
                name: b.name,
                source: b.source.map(str::to_string),
                ..Site::default()
            });
        site.blocks += 1;
        site.lanes.add(b.lanes.len() as u64);
        if b.components.is_none() {
            site.lines64.add(l64);
            site.lines128.add(l128);
        }
        if let Some(s) = stride {
            if site.strides.len() < 256 || site.strides.contains_key(&s) {
                *site.strides.entry(s).or_default() += 1;
            }
        }
        let mut text = String::with_capacity(160 + 20 * b.addresses.len());
        text.push_str(if self.first { "{\"blocks\":[\n" } else { ",\n" });
        self.first = false;
        let source = match b.source {
            Some(s) => serde_json::to_string(s).unwrap_or_else(|_| "null".into()),
            None => "null".into(),
        };
        text.push_str(&format!(
            "{{\"marker_id\":{},\"name\":{},\"source\":{source},\"se\":{},\"cu\":{},\"simd\":{},\"wave\":{},\"instance\":{},\"time\":{},\"exec\":{},\"addresses\":[",
            b.marker_id,
            serde_json::to_string(&b.name_text).unwrap_or_default(),
            w.se, w.cu, w.simd, w.slot, w.instance, b.time, b.exec
        ));
        for (i, a) in b.addresses.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&a.to_string());
        }
        text.push(']');
        if let Some(c) = &b.components {
            self.without_addresses += 1;
            let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            text.push_str(&format!(
                ",\"address_known\":false,\"components\":{{\"base\":{},\"stride\":{},\"soffset\":{},\"voffset\":[{}],\"vindex\":[{}]}}",
                c.base,
                c.stride,
                c.soffset,
                list(&c.voffset),
                list(&c.vindex)
            ));
        }
        text.push('}');
        if let Err(e) = self.out.write_all(text.as_bytes()) {
            self.error.get_or_insert(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::parse_block;

    /// A struct-buffer block is written with its components, no address, and counted (issue 38,
    /// item 4); a raw-buffer block keeps its addresses.
    #[test]
    fn struct_buffer_blocks_carry_components() {
        let mut names = Names::default();
        let name = names.intern("addr_trace_struct_buffer_load");
        let w = WaveInfo {
            se: 0,
            cu: 1,
            simd: 2,
            slot: 3,
            instance: 0,
            kernel_id: Some(1),
            kernel: None,
            code_object: Some(2),
            code_object_frame: None,
            end: None,
        };
        // base 0x1000, stride 8, soffset 4; lanes 0 and 1 active; voffset 16, vindex = lane.
        let mut words = vec![0b11, 0, 0x1000, 8 << 16, 4];
        words.extend([16u32; 32]);
        words.extend(0..32u32);
        let (exec, lanes, addresses, components) =
            parse_block("addr_trace_struct_buffer_load", &words, Some(32)).unwrap();
        let tmp = tempfile::tempfile().unwrap();
        let mut m = MemTrace::new(tmp.try_clone().unwrap()).unwrap();
        let b = AddressBlock {
            marker_id: 7,
            name,
            name_text: "addr_trace_struct_buffer_load",
            source: None,
            time: 10,
            exec,
            lanes,
            addresses,
            components,
        };
        m.address_block(&w, &mut (), &b);
        assert_eq!(m.without_addresses, 1);
        m.finish(&names, false).unwrap();
        let mut text = String::new();
        let mut f = tmp;
        std::io::Seek::rewind(&mut f).unwrap();
        std::io::Read::read_to_string(&mut f, &mut text).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let blk = &v["blocks"][0];
        assert_eq!(blk["addresses"], serde_json::json!([]));
        assert_eq!(blk["address_known"], false);
        assert_eq!(
            blk["components"],
            serde_json::json!({"base": 4096, "stride": 8, "soffset": 4, "voffset": [16, 16], "vindex": [0, 1]})
        );
        assert_eq!(v["blocks_without_addresses"], 1);
    }
}
