//! Decode: every function's instructions ([`crate::analysis::decode`]).

use super::{Loaded, Source};
use crate::analysis::{DecodedProgram, FnSpec};
use amdgpu_isa::Target;

/// Output of [`decode`].
pub(crate) struct Decoded {
    /// The input object.
    pub src: Source,
    /// The target the functions were decoded for (the ELF header's).
    pub target: Target,
    /// The functions' ranges, kept for decoding again with the other true16 setting.
    pub specs: Vec<FnSpec>,
    /// Every function decoded (or the problem that stopped its decoding).
    pub program: DecodedProgram,
}

/// Decodes every function of `.text` for the ELF header's target.
pub(crate) fn decode(l: Loaded) -> Decoded {
    let program = crate::analysis::decode(
        l.target,
        l.src.text_bytes(),
        l.src.text_addr,
        l.specs.clone(),
    );
    Decoded {
        src: l.src,
        target: l.target,
        specs: l.specs,
        program,
    }
}
