//! The stages of one rewrite, in pipeline order: [`load()`] → [`decode()`] → [`analyse()`] →
//! [`instrument()`] → [`lay_out()`] → [`encode()`]; verify and write belong to the caller (crate
//! `sqtt-verify`, the CLI). Each stage is a function from the typed output of the stage before
//! it to its own typed output, and sees nothing else of earlier stages. A stage that returns
//! `None` ends the rewrite with the output equal to the input, its reason in the [`Report`].
//!
//! The report is filled as the stages run, each stage its own fields:
//! - load: `target`, `text_size_before`, `reasons` and `notes` about the object as a whole;
//! - analyse: `left_alone`, `existing_markers`, `notes` (functions and bytes kept in place);
//! - instrument: `inlined`, `skipped`, `notes` (unused options), `reasons` (marker ids, scope
//!   flags);
//! - lay out: `relaxed_branches`, `reasons` (branches that cannot be relaxed);
//! - encode: `inserted_sgprs`, `dwarf_sections_remapped`, `funcmap_rows`, `ids`, `functions`,
//!   `kernels`, `text_size_after`, `reasons` (edits that cannot be made);
//! - the driver ([`crate::rewrite`]): `status` on success and `coverage`.
//!
//! [`Report`]: crate::report::Report

mod analyse;
mod decode;
mod encode;
mod instrument;
mod lay_out;
mod load;

pub(crate) use analyse::{analyse, Analysed};
pub(crate) use decode::{decode, Decoded};
pub(crate) use encode::encode;
pub(crate) use instrument::{instrument, Instrumented};
pub(crate) use lay_out::{lay_out, LaidOut, NotLaidOut};
pub(crate) use load::{load, Loaded, Source};

use crate::analysis::Program;
use amdgpu_isa::{Special, Target};
use hsaco::CodeObject;
use std::collections::HashMap;

/// True when `bytes` hold only padding: `s_nop`, `s_code_end` or zero dwords (the analyse stage
/// accepts only padding outside functions; the lay-out stage drops padding between functions).
fn is_padding(bytes: &[u8], target: Target) -> bool {
    bytes.len().is_multiple_of(4)
        && bytes.chunks_exact(4).all(|w| {
            let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            v == 0
                || v == crate::layout::PAD_WORD
                || amdgpu_isa::decode(w, target)
                    .is_ok_and(|i| matches!(i.special(), Special::Nop | Special::CodeEnd))
        })
}

/// Every code-object kernel with the index of its function in `prog` (several kernels may share
/// one entry when the linker folded identical code).
fn kernel_funcs<'a>(
    prog: &'a Program,
    co: &'a CodeObject,
) -> impl Iterator<Item = (usize, &'a hsaco::Kernel)> + 'a {
    let kernel_fn = first_index(
        prog.funcs
            .iter()
            .enumerate()
            .filter(|(_, f)| f.spec.kernel.is_some())
            .map(|(fi, f)| (f.spec.start, fi)),
    );
    co.kernels
        .iter()
        .filter_map(move |k| kernel_fn.get(&k.entry).map(|&fi| (fi, k)))
}

/// The map from each key to the value of its first occurrence in `pairs` (the answer of a
/// `find`/`position` scan, as one lookup).
fn first_index<K: std::hash::Hash + Eq, V>(pairs: impl Iterator<Item = (K, V)>) -> HashMap<K, V> {
    let mut m = HashMap::new();
    for (k, v) in pairs {
        m.entry(k).or_insert(v);
    }
    m
}
