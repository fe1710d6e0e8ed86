//! Field edits on address-builder instructions that the ISA crate's generic API does not cover.

use amdgpu_isa::Instruction;

/// Scalar source encoding of an inline integer constant (ISA manuals, "Scalar ALU operands":
/// 128..=192 encode 0..=64, 193..=208 encode -1..=-16); `None` when `v` is not inline.
fn inline_code(v: u32) -> Option<u32> {
    let i = v as i32;
    match i {
        0..=64 => Some(128 + v),
        -16..=-1 => Some((192 - i) as u32),
        _ => None,
    }
}

/// Returns a copy of the high add of an address builder (`s_addc_u32` / `s_add_co_ci_u32`,
/// SOP2) whose constant source now encodes `hi` (the high 32 bits of the new offset).
///
/// The constant is a 32-bit literal or an inline constant in `ssrc1` (or `ssrc0`); the encoding
/// size never changes: a literal gets the new value, an inline constant must stay inline (0 and
/// -1, the only high halves a code object under 2 GiB produces). SOP2 field positions: `ssrc0`
/// bits 7:0, `ssrc1` bits 15:8 of dword 0 (ISA manuals, "SOP2").
pub fn with_high_offset(inst: &Instruction, hi: u32) -> Result<Instruction, String> {
    if inst.literal().is_some() {
        return inst.with_literal(u64::from(hi)).map_err(|e| e.to_string());
    }
    let is_inline = |f: &str| matches!(inst.field(f), Some(128..=208));
    let shift = if is_inline("ssrc1") {
        8
    } else if is_inline("ssrc0") {
        0
    } else {
        return Err(format!("{} has no constant operand", inst.mnemonic()));
    };
    let code = inline_code(hi).ok_or_else(|| {
        format!("high offset {hi:#x} needs a literal where the original used an inline constant")
    })?;
    let mut bytes = inst.bytes().to_vec();
    let mut w = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    w = (w & !(0xff << shift)) | (code << shift);
    bytes[..4].copy_from_slice(&w.to_le_bytes());
    amdgpu_isa::decode(&bytes, inst.target()).map_err(|e| e.to_string())
}
