//! What the checks need of the rewritten `.sqtt_funcmap` (spec "Funcmap format"): its rows
//! by id, the marker word layout, the wave size, and the address-trace row names.

use std::collections::{BTreeMap, HashMap};

use crate::funcmap::Funcmap;

/// The rewritten funcmap and what the checks need of it (rows the original already had are not
/// re-checked).
pub(crate) struct FuncmapInfo {
    pub new: Option<Funcmap>,
    /// `R:id:extra_payload_count=N` by id (well-formed rows only).
    pub payload: BTreeMap<u32, u32>,
    /// Marker row names (`F`/`U`/`P`) by id.
    pub names: BTreeMap<u32, String>,
    /// Marker word layout from the `M:` row.
    pub layout: Layout,
    /// Wave size of the `W:` row.
    pub wave: Option<u32>,
    /// Ids of the `F` rows the rewrite added (not among `orig_rows`), by function name, in row
    /// order.
    pub added_f: HashMap<String, Vec<u32>>,
    /// Kernels (`true`) and device functions (`false`) of the rewritten object by symbol name,
    /// with their entry address there (bytes): where an `F:`/`U:` enter marker naming one of
    /// them may stand (aliased kernels share one entry).
    pub symbols: HashMap<String, (bool, u64)>,
    /// The ORIGINAL object's local labels (`STT_NOTYPE` in an executable section) by address:
    /// the names an in-kernel subroutine's `F:` row may carry.
    pub labels: BTreeMap<u64, Vec<String>>,
    /// The `F:` rows the rewrite added that name an in-kernel subroutine (a local label, or
    /// `KERNEL+0xOFFSET`) rather than a function, by id; where their scopes are entered is
    /// checked by the flow checks.
    pub sub_rows: BTreeMap<u32, String>,
}

/// The 14 address-trace row names of the spec ("Address Tracing", funcmap name prefix table).
pub(crate) const ADDR_TRACE_NAMES: [&str; 14] = [
    "addr_trace_load",
    "addr_trace_store",
    "addr_trace_atomic",
    "addr_trace_lds_load",
    "addr_trace_lds_store",
    "addr_trace_lds_atomic",
    "addr_trace_buffer_load",
    "addr_trace_buffer_store",
    "addr_trace_buffer_atomic",
    "addr_trace_struct_buffer_load",
    "addr_trace_struct_buffer_store",
    "addr_trace_struct_buffer_atomic",
    "addr_trace_ds_permute",
    "addr_trace_ds_bpermute",
];

/// Marker word layout (spec "GFX12 Shader Clock Packing").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `id = value >> 2`.
    Legacy,
    /// `id = (value >> 2) & ((1 << (30 - bits)) - 1)`, clock in the top `bits` bits, sampled
    /// from shader-cycles bit `shift` upwards.
    Packed { bits: u32, shift: u32 },
}

impl Layout {
    /// The marker word with the clock field cleared, i.e. in the legacy layout.
    pub fn strip(self, v: u32) -> u32 {
        match self {
            Layout::Legacy => v,
            Layout::Packed { bits, .. } => {
                let idmask = (1u32 << (30 - bits)) - 1;
                (((v >> 2) & idmask) << 2) | (v & 3)
            }
        }
    }
}
