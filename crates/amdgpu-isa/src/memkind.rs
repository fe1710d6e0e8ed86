//! [`MemKind`]: what a memory instruction does (issue 31), from LLVM's mayLoad/mayStore flags
//! corrected by mnemonic where those flags say more than the operation does.

/// What a memory instruction does: load, store, read-modify-write, prefetch. From LLVM's
/// mayLoad/mayStore flags (the ISA tables), except where they say more than the operation does
/// (issue 31): prefetches are marked both, and LDS DMA both (a global read and an LDS write, or
/// the reverse), see [`mem_kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemKind {
    /// Reads memory into registers; also LDS DMA from global memory (`global_load_lds_*`,
    /// `*_load_async_to_lds_*`, `buffer_load_* ... lds`): its global address is what it reads.
    Load,
    /// Writes memory; also LDS DMA to global memory (`global_store_async_from_lds_*`,
    /// gfx9 `buffer_store_lds_dword`).
    Store,
    /// Read-modify-write (returning or not).
    Atomic,
    /// Moves data toward the caches and returns nothing (`global_prefetch_b8`,
    /// `flat_prefetch_b8`, `s_prefetch_*`): neither a load, a store nor an atomic.
    Prefetch,
    /// Neither loads nor stores per LLVM (cache control such as `buffer_wbl2`, `buffer_inv`,
    /// `global_inv`, `global_wb`; `s_memtime`).
    Other,
}

/// The [`MemKind`] of `mnemonic` with LLVM's mayLoad (`load`) and mayStore (`store`) flags.
/// Prefetches (every mnemonic with `prefetch`) and LDS DMA are named by their mnemonics in the
/// ISA tables of every target (`tests::lds_dma_and_prefetch_kinds` lists them per table).
pub fn mem_kind(mnemonic: &str, load: bool, store: bool) -> MemKind {
    if mnemonic.contains("prefetch") {
        return MemKind::Prefetch;
    }
    if load && store {
        if mnemonic.contains("_load_lds_") || mnemonic.contains("_load_async_to_lds_") {
            return MemKind::Load;
        }
        // gfx9 `buffer_store_lds_dword`: one dword from LDS to buffer memory (Vega ISA,
        // "MUBUF Instructions"); it reads LDS and writes global memory.
        if mnemonic.contains("_store_async_from_lds_") || mnemonic.starts_with("buffer_store_lds_")
        {
            return MemKind::Store;
        }
    }
    match (load, store) {
        (true, true) => MemKind::Atomic,
        (true, false) => MemKind::Load,
        (false, true) => MemKind::Store,
        (false, false) => MemKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::{MCID_LOAD, MCID_STORE, TARGETS};
    use crate::Format;
    use std::collections::BTreeSet;

    /// The VMEM operations of every table that LLVM marks neither mayLoad nor mayStore.
    const OTHER_VMEM: [&str; 10] = [
        "buffer_gl0_inv",
        "buffer_gl1_inv",
        "buffer_inv",
        "buffer_invl2",
        "buffer_wbinvl1",
        "buffer_wbinvl1_vol",
        "buffer_wbl2",
        "global_inv",
        "global_wb",
        "global_wbinv",
    ];

    /// Every FLAT/GLOBAL/SCRATCH and buffer opcode of every target's ISA table: it is an
    /// atomic exactly when its name says so (LLVM marks prefetches and LDS DMA mayLoad and
    /// mayStore too); the prefetches and the LDS DMA operations are these.
    #[test]
    fn lds_dma_and_prefetch_kinds() {
        let mut prefetch = BTreeSet::new();
        let mut dma = BTreeSet::new();
        let mut other = BTreeSet::new();
        for t in TARGETS.iter() {
            for r in t.ops.iter().chain(t.ops_t16.into_iter().flatten()) {
                let vmem = matches!(
                    t.formats[usize::from(r.fmt)].format,
                    Format::Flat
                        | Format::Global
                        | Format::Scratch
                        | Format::Mubuf
                        | Format::Mtbuf
                        | Format::Vbuffer
                );
                if !vmem {
                    continue;
                }
                let (load, store) = (r.mcid & MCID_LOAD != 0, r.mcid & MCID_STORE != 0);
                let k = mem_kind(r.mnemonic, load, store);
                let atomic = r.mnemonic.contains("atomic");
                assert_eq!(k == MemKind::Atomic, atomic, "{} {}", t.name, r.mnemonic);
                match k {
                    MemKind::Prefetch => {
                        prefetch.insert(r.mnemonic);
                    }
                    MemKind::Load | MemKind::Store if load && store => {
                        dma.insert(format!("{} {k:?}", r.mnemonic));
                    }
                    MemKind::Other => {
                        other.insert(r.mnemonic);
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(
            prefetch.into_iter().collect::<Vec<_>>(),
            ["flat_prefetch_b8", "global_prefetch_b8"]
        );
        let mut want: Vec<String> = ["b128", "b32", "b64", "b8"]
            .iter()
            .flat_map(|w| {
                [
                    format!("cluster_load_async_to_lds_{w} Load"),
                    format!("global_load_async_to_lds_{w} Load"),
                    format!("global_store_async_from_lds_{w} Store"),
                ]
            })
            .chain(
                [
                    "dword", "dwordx3", "dwordx4", "sbyte", "sshort", "ubyte", "ushort",
                ]
                .iter()
                .map(|w| format!("global_load_lds_{w} Load")),
            )
            .chain(
                ["dword", "sbyte", "sshort", "ubyte", "ushort"]
                    .iter()
                    .map(|w| format!("scratch_load_lds_{w} Load")),
            )
            .chain(std::iter::once("buffer_store_lds_dword Store".to_string()))
            .collect();
        want.sort();
        assert_eq!(dma.into_iter().collect::<Vec<_>>(), want);
        // Cache control (write-back, invalidate) of every table is neither a load, a store nor
        // an atomic: these are all the VMEM operations that are none of them.
        assert_eq!(other.into_iter().collect::<Vec<_>>(), OTHER_VMEM);
    }
}
