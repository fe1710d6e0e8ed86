//! Address-trace blocks (spec "Address Tracing", "Framing protocol"): the payload words after
//! an `addr_trace_*` header, decoded into EXEC, active lanes and their addresses, or, for struct
//! buffers, their components (issue 38, item 4).

/// The words of an `addr_trace_struct_buffer_*` block (spec "Address Tracing"), for the active
/// lanes. No address is computed from them (issue 38, item 4): the buffer address of the ISA
/// manuals (the buffer-addressing section of the vector-memory chapter of AMD's CDNA3 and RDNA3
/// ISA reference guides) is `base + soffset + inst_offset + voffset + (vindex + lane id when
/// ADD_TID_ENABLE) * stride`, and swizzled buffers interleave it by index stride and element
/// size; ADD_TID_ENABLE and the swizzle fields are in descriptor word 3, which the block does not
/// carry. The `voffset` words already include the instruction's `inst_offset` (our emitter adds
/// it; AMD's pass records the IR offset operand, before instruction selection splits it). AMD's
/// readers decline these blocks too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferComponents {
    /// Descriptor base address (words 0-1, bits 47:0).
    pub base: u64,
    /// Descriptor stride (word 1 bits 29:16), bytes.
    pub stride: u64,
    /// The `soffset` word.
    pub soffset: u32,
    /// Per active lane: `voffset` (with `inst_offset`).
    pub voffset: Vec<u32>,
    /// Per active lane: `vindex`.
    pub vindex: Vec<u32>,
}

/// A decoded address block: EXEC, active lanes, their addresses (empty for a struct buffer) and
/// a struct buffer's components.
pub type BlockParts = (u64, Vec<u32>, Vec<u64>, Option<BufferComponents>);

/// Decodes an address block's payload words (after the header) for the `addr_trace_*` kind
/// `name` (spec "Address Tracing", "Framing protocol"): `exec_lo`, `exec_hi`, then
/// per kind: flat/global 64-bit `lo`,`hi` per lane; LDS and permutes one word per lane; raw
/// buffers `rsrc_lo`, `rsrc_hi`, `soffset`, then `voffset` per lane; struct buffers the same
/// plus `vindex` per lane. The wave size is `W:` when present, else inferred from the count.
/// Returns (exec, active lanes, their addresses, components). Raw buffer addresses are
/// `(rsrc & 0xFFFF_FFFF_FFFF) + soffset + voffset`; struct buffers get no addresses, only their
/// [`BufferComponents`].
pub fn parse_block(
    name: &str,
    words: &[u32],
    wave_size: Option<u32>,
) -> Result<BlockParts, String> {
    let kind = name.strip_prefix("addr_trace_").unwrap_or(name);
    let (fixed, per_lane) = match kind {
        "load" | "store" | "atomic" => (0usize, 2usize),
        "lds_load" | "lds_store" | "lds_atomic" | "ds_permute" | "ds_bpermute" => (0, 1),
        "buffer_load" | "buffer_store" | "buffer_atomic" => (3, 1),
        "struct_buffer_load" | "struct_buffer_store" | "struct_buffer_atomic" => (3, 2),
        _ => return Err(format!("unknown address-trace kind {name:?}")),
    };
    let data = words
        .len()
        .checked_sub(2 + fixed)
        .ok_or("payload shorter than its fixed words")?;
    if data % per_lane != 0 || !matches!(data / per_lane, 32 | 64) {
        return Err(format!(
            "{} payload words do not make a wave32/wave64 block",
            words.len()
        ));
    }
    let lanes_n = data / per_lane;
    if let Some(ws) = wave_size {
        if ws as usize != lanes_n {
            return Err(format!("W:{ws} but the payload holds {lanes_n} lanes"));
        }
    }
    let exec = u64::from(words[0]) | u64::from(words[1]) << 32;
    let body = &words[2 + fixed..];
    let (base, soffset, stride) = if fixed == 3 {
        let (lo, hi, so) = (
            u64::from(words[2]),
            u64::from(words[3]),
            u64::from(words[4]),
        );
        ((lo | hi << 32) & 0xFFFF_FFFF_FFFF, so, (hi >> 16) & 0x3FFF)
    } else {
        (0, 0, 0)
    };
    let mut lanes = Vec::new();
    let mut addrs = Vec::new();
    let comp = (fixed, per_lane) == (3, 2);
    let mut components = BufferComponents {
        base,
        stride,
        soffset: soffset as u32,
        voffset: Vec::new(),
        vindex: Vec::new(),
    };
    for lane in 0..lanes_n {
        if lane >= 64 || exec >> lane & 1 == 0 {
            continue;
        }
        lanes.push(lane as u32);
        if comp {
            components.voffset.push(body[lane]);
            components.vindex.push(body[lanes_n + lane]);
            continue;
        }
        addrs.push(match (fixed, per_lane) {
            (0, 2) => u64::from(body[2 * lane]) | u64::from(body[2 * lane + 1]) << 32,
            (0, _) => u64::from(body[lane]),
            _ => base
                .wrapping_add(soffset)
                .wrapping_add(u64::from(body[lane])),
        });
    }
    Ok((exec, lanes, addrs, comp.then_some(components)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(n: u32, f: impl Fn(u32) -> Vec<u32>) -> Vec<u32> {
        (0..n).flat_map(f).collect()
    }

    /// marker_samples_test.py@0218074 (note §2.6): LDS wave32 exec 0b101 -> [0, 2]; global exec
    /// 0b11 -> 0x100000000 + lane; buffer base 0x1000, soffset 0x20 -> [0x1020, 0x1021].
    #[test]
    fn address_known_answers() {
        let mut w = vec![0b101, 0];
        w.extend(lanes(32, |l| vec![l]));
        let (_, l, a, _) = parse_block("addr_trace_lds_load", &w, Some(32)).unwrap();
        assert_eq!((l, a), (vec![0, 2], vec![0, 2]));
        let mut w = vec![0b11, 0];
        w.extend(lanes(32, |l| vec![l, 1]));
        let (_, _, a, _) = parse_block("addr_trace_load", &w, None).unwrap();
        assert_eq!(a, vec![0x1_0000_0000, 0x1_0000_0001]);
        let mut w = vec![0b11, 0, 0x1000, 0, 0x20];
        w.extend(lanes(32, |l| vec![l]));
        let (_, _, a, _) = parse_block("addr_trace_buffer_load", &w, Some(32)).unwrap();
        assert_eq!(a, vec![0x1020, 0x1021]);
    }

    #[test]
    fn struct_buffer_and_bad_blocks() {
        // base 0x2_0000_1000 (rsrc_hi low 16 bits = 2), stride 16, soffset 4, voffset 1, vindex lane.
        let mut w = vec![0b110, 0, 0x1000, (16 << 16) | 2, 4];
        w.extend(lanes(32, |_| vec![1]));
        w.extend(lanes(32, |l| vec![l]));
        // No address: descriptor word 3 (ADD_TID_ENABLE, swizzling) is not in the block.
        let (_, l, a, c) = parse_block("addr_trace_struct_buffer_store", &w, Some(32)).unwrap();
        assert_eq!(l, vec![1, 2]);
        assert!(a.is_empty());
        let c = c.unwrap();
        assert_eq!((c.base, c.stride, c.soffset), (0x2_0000_1000, 16, 4));
        assert_eq!((c.voffset, c.vindex), (vec![1, 1], vec![1, 2]));
        assert!(parse_block("addr_trace_lds_load", &w[..20], None).is_err());
        assert!(parse_block("addr_trace_lds_load", &[0, 0], None).is_err());
        assert!(parse_block("addr_trace_frob", &w, None).is_err());
        let mut w = vec![1, 0];
        w.extend(lanes(64, |l| vec![l]));
        assert!(parse_block("addr_trace_lds_load", &w, Some(32)).is_err());
        // wave64 exec_hi bit: lane 63 active.
        let mut w = vec![0, 1 << 31];
        w.extend(lanes(64, |l| vec![l * 4]));
        let (e, l, a, _) = parse_block("addr_trace_ds_bpermute", &w, None).unwrap();
        assert_eq!((e, l, a), (1 << 63, vec![63], vec![252]));
    }
}
