//! `.debug_line` (DWARF 5 section 6.2, DWARF 4 section 6.2): every line-number program is
//! decoded to rows with gimli and re-encoded row by row with mapped addresses. The program
//! header (file and directory tables, opcode lengths) is copied byte for byte; only the unit
//! length and the opcode stream change. Programs grow or shrink, so unit offsets change: the
//! returned map from old to new unit offset is used to patch `DW_AT_stmt_list`.

use std::collections::BTreeMap;

use gimli::{ColumnType, DebugLine, DebugLineOffset, LineInstruction, LittleEndian};

use crate::bytes::{push_sleb, push_uint, push_uleb, Reader};
use crate::{map_code, AddressMap, Error};

pub(crate) const SECTION: &str = ".debug_line";

const DW_LNS_COPY: u8 = 1;
const DW_LNS_ADVANCE_PC: u8 = 2;
const DW_LNS_ADVANCE_LINE: u8 = 3;
const DW_LNS_SET_FILE: u8 = 4;
const DW_LNS_SET_COLUMN: u8 = 5;
const DW_LNS_NEGATE_STMT: u8 = 6;
const DW_LNS_SET_BASIC_BLOCK: u8 = 7;
const DW_LNS_CONST_ADD_PC: u8 = 8;
const DW_LNS_FIXED_ADVANCE_PC: u8 = 9;
const DW_LNS_SET_PROLOGUE_END: u8 = 10;
const DW_LNS_SET_EPILOGUE_BEGIN: u8 = 11;
const DW_LNS_SET_ISA: u8 = 12;
const DW_LNE_END_SEQUENCE: u8 = 1;
const DW_LNE_SET_ADDRESS: u8 = 2;
const DW_LNE_SET_DISCRIMINATOR: u8 = 4;
/// Operand counts of standard opcodes 1..=12 (DWARF 5 section 6.2.5.2).
const STANDARD_LENGTHS: [u8; 12] = [0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1];

/// Result of rewriting `.debug_line`.
pub(crate) struct LineOut {
    pub bytes: Vec<u8>,
    /// Old unit offset -> new unit offset.
    pub offsets: BTreeMap<u64, u64>,
}

/// Header parameters that drive the encoder.
struct Params {
    min_inst: u64,
    line_base: i64,
    line_range: u64,
    opcode_base: u8,
    default_is_stmt: bool,
    addr_size: usize,
}

/// Register state of the line-number state machine as seen by the encoder.
struct State {
    address: Option<u64>,
    file: u64,
    line: u64,
    column: u64,
    is_stmt: bool,
    isa: u64,
}

impl State {
    fn initial(p: &Params) -> Self {
        State {
            address: None,
            file: 1,
            line: 1,
            column: 0,
            is_stmt: p.default_is_stmt,
            isa: 0,
        }
    }
}

/// Rewrites all line-number programs. `addr_size` (bytes) is used for DWARF 4 headers, which do
/// not record it.
pub(crate) fn rewrite(old: &[u8], map: &AddressMap, addr_size: u8) -> Result<LineOut, Error> {
    let mut out = Vec::with_capacity(old.len() + old.len() / 4);
    let mut offsets = BTreeMap::new();
    let debug_line = DebugLine::new(old, LittleEndian);
    let mut r = Reader::new(old, 0, SECTION);
    while r.pos < old.len() {
        let unit = r.pos;
        let (len, osize) = r.initial_length()?;
        let body = r.pos;
        let end = body + len;
        let version = r.uint(2)?;
        if !(2..=5).contains(&version) {
            return Err(unsupported(unit, format!("line table version {version}")));
        }
        if version >= 5 {
            r.bytes(2)?;
        }
        let header_length = r.uint(osize)?;
        let program = usize::try_from(header_length)
            .ok()
            .and_then(|h| r.pos.checked_add(h))
            .filter(|&p| p <= end)
            .ok_or(Error::Truncated {
                section: SECTION,
                offset: unit as u64,
            })?;
        let prog = debug_line
            .program(DebugLineOffset(unit), addr_size, None, None)
            .map_err(|e| gimli_err(unit, e))?;
        let header = prog.header();
        let params = Params {
            min_inst: u64::from(header.minimum_instruction_length()),
            line_base: i64::from(header.line_base()),
            line_range: u64::from(header.line_range()),
            opcode_base: header.opcode_base(),
            default_is_stmt: header.default_is_stmt(),
            addr_size: usize::from(header.address_size()),
        };
        if params.min_inst == 0 || params.line_range == 0 {
            return Err(unsupported(
                unit,
                "minimum_instruction_length or line_range of 0".into(),
            ));
        }
        if header.maximum_operations_per_instruction() != 1 {
            return Err(unsupported(
                unit,
                "VLIW line table (maximum_operations_per_instruction != 1)".into(),
            ));
        }
        let lengths = header.standard_opcode_lengths().slice();
        for (i, (&have, &want)) in lengths.iter().zip(STANDARD_LENGTHS.iter()).enumerate() {
            if have != want {
                return Err(unsupported(
                    unit,
                    format!("standard opcode {} declared with {have} operands", i + 1),
                ));
            }
        }
        // Reject instructions the row model cannot reproduce.
        let mut insns = header.instructions();
        while let Some(insn) = insns
            .next_instruction(header)
            .map_err(|e| gimli_err(unit, e))?
        {
            match insn {
                LineInstruction::UnknownStandard0(op)
                | LineInstruction::UnknownStandard1(op, _)
                | LineInstruction::UnknownStandardN(op, _) => {
                    return Err(unsupported(
                        unit,
                        format!("line program standard opcode {}", op.0),
                    ))
                }
                LineInstruction::UnknownExtended(op, _) => {
                    return Err(unsupported(
                        unit,
                        format!("line program extended opcode {}", op.0),
                    ))
                }
                LineInstruction::DefineFile(_) => {
                    return Err(unsupported(unit, "DW_LNE_define_file".into()))
                }
                _ => {}
            }
        }

        let new_unit = out.len();
        offsets.insert(unit as u64, new_unit as u64);
        // Initial length placeholder, patched below.
        if osize == 8 {
            out.extend_from_slice(&[0xff; 4]);
        }
        out.extend_from_slice(&[0; 8][..osize]);
        let header_bytes = old.get(body..program).ok_or(Error::Truncated {
            section: SECTION,
            offset: body as u64,
        })?;
        out.extend_from_slice(header_bytes);

        let mut state = State::initial(&params);
        let mut seq_not_code = false;
        let mut rows = prog.rows();
        while let Some((_, row)) = rows.next_row().map_err(|e| gimli_err(unit, e))? {
            let old_addr = row.address();
            if state.address.is_none() {
                seq_not_code = !map.covers(old_addr) && crate::is_not_code(old_addr);
            }
            let new_addr = if seq_not_code {
                old_addr
            } else {
                // Compilers start rows at instructions. A row inside one would map into the
                // code inserted in front of it and move the instruction's source position.
                if map.shifts_inside(old_addr) {
                    return Err(unsupported(
                        unit,
                        format!("line row at {old_addr:#x}, inside an instruction"),
                    ));
                }
                map_code(map, old_addr, SECTION, unit)?
            };
            emit_row(&mut out, &params, &mut state, row, new_addr, unit)?;
            if row.end_sequence() {
                state = State::initial(&params);
            }
        }
        let unit_len = (out.len() - new_unit - if osize == 8 { 12 } else { 4 }) as u64;
        let len_pos = new_unit + if osize == 8 { 4 } else { 0 };
        let mut len_bytes = Vec::with_capacity(8);
        push_uint(&mut len_bytes, osize, unit_len, SECTION, unit)?;
        if let Some(dst) = out.get_mut(len_pos..len_pos + osize) {
            dst.copy_from_slice(&len_bytes);
        }
        r.pos = end;
    }
    Ok(LineOut {
        bytes: out,
        offsets,
    })
}

fn unsupported(unit: usize, what: String) -> Error {
    Error::Unsupported {
        section: SECTION,
        offset: unit as u64,
        what,
    }
}

fn gimli_err(unit: usize, source: gimli::Error) -> Error {
    Error::Gimli {
        section: SECTION,
        offset: unit as u64,
        source,
    }
}

fn extended(out: &mut Vec<u8>, op: u8, operand: &[u8]) {
    out.push(0);
    push_uleb(out, 1 + operand.len() as u64);
    out.push(op);
    out.extend_from_slice(operand);
}

/// Emits the opcodes that append `row` at `new_addr`, in the order and with the address/line
/// encoding of LLVM's `MCDwarfLineTable` / `MCDwarfLineAddr::encode` (llvm/lib/MC/MCDwarf.cpp),
/// so that an unchanged program usually re-encodes to the same bytes.
fn emit_row(
    out: &mut Vec<u8>,
    p: &Params,
    st: &mut State,
    row: &gimli::LineRow,
    new_addr: u64,
    unit: usize,
) -> Result<(), Error> {
    let need = |op: u8| -> Result<(), Error> {
        if op >= p.opcode_base {
            return Err(unsupported(
                unit,
                format!("row needs standard opcode {op} beyond opcode_base"),
            ));
        }
        Ok(())
    };
    let file = row.file_index();
    if file != st.file {
        out.push(DW_LNS_SET_FILE);
        push_uleb(out, file);
        st.file = file;
    }
    let column = match row.column() {
        ColumnType::LeftEdge => 0,
        ColumnType::Column(c) => c.get(),
    };
    if column != st.column {
        out.push(DW_LNS_SET_COLUMN);
        push_uleb(out, column);
        st.column = column;
    }
    if row.discriminator() != 0 {
        let mut d = Vec::new();
        push_uleb(&mut d, row.discriminator());
        extended(out, DW_LNE_SET_DISCRIMINATOR, &d);
    }
    if row.isa() != st.isa {
        need(DW_LNS_SET_ISA)?;
        out.push(DW_LNS_SET_ISA);
        push_uleb(out, row.isa());
        st.isa = row.isa();
    }
    if row.is_stmt() != st.is_stmt {
        out.push(DW_LNS_NEGATE_STMT);
        st.is_stmt = row.is_stmt();
    }
    if row.basic_block() {
        out.push(DW_LNS_SET_BASIC_BLOCK);
    }
    if row.prologue_end() {
        need(DW_LNS_SET_PROLOGUE_END)?;
        out.push(DW_LNS_SET_PROLOGUE_END);
    }
    if row.epilogue_begin() {
        need(DW_LNS_SET_EPILOGUE_BEGIN)?;
        out.push(DW_LNS_SET_EPILOGUE_BEGIN);
    }

    // Address: DW_LNE_set_address at the start of a sequence, else an advance in units of
    // minimum_instruction_length (unscaled DW_LNS_fixed_advance_pc or DW_LNE_set_address when
    // the distance is not a multiple).
    let mut addr_adv = 0u64;
    let set_address = |out: &mut Vec<u8>| -> Result<(), Error> {
        let mut a = Vec::new();
        push_uint(&mut a, p.addr_size, new_addr, SECTION, unit)?;
        extended(out, DW_LNE_SET_ADDRESS, &a);
        Ok(())
    };
    match st.address {
        None => set_address(out)?,
        Some(cur) => {
            let delta = new_addr.checked_sub(cur).ok_or(Error::Backwards {
                section: SECTION,
                offset: unit as u64,
                address: new_addr,
            })?;
            if delta % p.min_inst == 0 {
                addr_adv = delta / p.min_inst;
            } else if delta <= 0xffff {
                out.push(DW_LNS_FIXED_ADVANCE_PC);
                out.extend_from_slice(&(delta as u16).to_le_bytes());
            } else {
                set_address(out)?;
            }
        }
    }
    st.address = Some(new_addr);

    let line = row.line().map_or(0, |l| l.get());
    let line_delta = line.wrapping_sub(st.line) as i64;
    st.line = line;
    let max_special_adv = (255 - u64::from(p.opcode_base)) / p.line_range;

    if row.end_sequence() {
        if line_delta != 0 {
            out.push(DW_LNS_ADVANCE_LINE);
            push_sleb(out, line_delta);
        }
        if addr_adv != 0 && addr_adv == max_special_adv {
            out.push(DW_LNS_CONST_ADD_PC);
        } else if addr_adv != 0 {
            out.push(DW_LNS_ADVANCE_PC);
            push_uleb(out, addr_adv);
        }
        extended(out, DW_LNE_END_SEQUENCE, &[]);
        return Ok(());
    }
    encode(out, p, line_delta, addr_adv, max_special_adv);
    Ok(())
}

/// `MCDwarfLineAddr::encode` for a row that is not an end of sequence: appends one row after
/// advancing the line by `line_delta` and the address by `addr_adv` instruction-length units.
fn encode(out: &mut Vec<u8>, p: &Params, line_delta: i64, addr_adv: u64, max_special_adv: u64) {
    let base = i128::from(p.opcode_base);
    let range = i128::from(p.line_range);
    let fits = |t: i128| t >= 0 && t < range && t + base <= 255;
    let mut line_delta = i128::from(line_delta);
    let mut temp = line_delta - i128::from(p.line_base);
    let mut need_copy = false;
    if !fits(temp) {
        out.push(DW_LNS_ADVANCE_LINE);
        push_sleb(out, line_delta as i64);
        line_delta = 0;
        temp = -i128::from(p.line_base);
        need_copy = true;
    }
    if line_delta == 0 && addr_adv == 0 {
        out.push(DW_LNS_COPY);
        return;
    }
    // Special opcodes need the biased line delta to be encodable.
    let special_ok = fits(temp);
    temp += base;
    let adv = i128::from(addr_adv);
    if special_ok {
        let op = temp + adv * range;
        if op <= 255 {
            out.push(op as u8);
            return;
        }
        let max = i128::from(max_special_adv);
        let op = temp + (adv - max) * range;
        if adv >= max && op <= 255 {
            out.push(DW_LNS_CONST_ADD_PC);
            out.push(op as u8);
            return;
        }
    }
    out.push(DW_LNS_ADVANCE_PC);
    push_uleb(out, addr_adv);
    if need_copy || !special_ok {
        out.push(DW_LNS_COPY);
    } else {
        out.push(temp as u8);
    }
}
