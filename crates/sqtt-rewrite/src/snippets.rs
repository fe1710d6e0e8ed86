//! Instruction snippets for address tracing, HW_ID scope checks and gfx12 shader-clock packing
//! (placeholder: being written).
