//! Analyse: CFGs and PC-relative sequences ([`crate::analysis`]), the whole-object safety
//! decisions (functions left alone, code outside functions) and the markers already present.

use super::{is_padding, Decoded, Source};
use crate::analysis::{analyse_decoded, Program};
use crate::report::Report;
use crate::verbatim::Verbatim;
use amdgpu_isa::{Family, Special};
use sqtt_funcmap::Row;
use std::collections::{BTreeMap, BTreeSet};

/// Output of [`analyse`].
pub(crate) struct Analysed {
    /// The input object.
    pub src: Source,
    /// Every function analysed; `prog.target` is the target the code decodes as (true16
    /// settled on gfx11+).
    pub prog: Program,
    /// Functions left alone and moved verbatim ([`crate::verbatim::decide`]).
    pub verbatim: Verbatim,
    /// Marker ids in use in the input (existing markers and funcmap rows): never allocated.
    pub reserved: BTreeSet<u32>,
    /// The input's funcmap rows (kept in the output's funcmap).
    pub existing_rows: Vec<Row>,
}

/// Analyses the decoded functions. On gfx11+ a program with problems is decoded again with the
/// other true16 setting, and the setting with fewer problem functions is kept. A problem costs
/// only its function (left alone), and bytes outside functions that are not padding keep
/// `.text` in place, so no object fails closed here. `keep_text`: `.text` is kept in place
/// even when every function can move (`--keep-text`). Fills `left_alone`, `existing_markers`
/// and `notes`. The functions whose entries (original addresses, bytes) are in `leave` get
/// their reason there as one more problem, so they are left alone too.
pub(crate) fn analyse(
    d: Decoded,
    leave: &BTreeMap<u64, String>,
    keep_text: bool,
    report: &mut Report,
) -> Analysed {
    let Decoded {
        src,
        target,
        specs,
        program,
    } = d;
    let (text_addr, text_end, text_bytes) = (src.text_addr, src.text_end, src.text_bytes());
    let mut prog = analyse_decoded(program);
    if matches!(
        target.family(),
        Family::Gfx11 | Family::Gfx12 | Family::Gfx1250
    ) && prog.funcs.iter().any(|f| !f.problems.is_empty())
    {
        let alt = crate::analysis::analyse(
            target.with_true16(!target.true16()),
            text_bytes,
            text_addr,
            specs,
        );
        let bad = |p: &Program| p.funcs.iter().filter(|f| !f.problems.is_empty()).count();
        if bad(&alt) < bad(&prog) {
            prog = alt;
        }
    }
    let target = prog.target;
    for f in &mut prog.funcs {
        if let Some(why) = leave.get(&f.spec.start) {
            f.problems.push(crate::analysis::Problem {
                addr: f.spec.start,
                why: why.clone(),
            });
        }
    }
    // Whole-object safety: functions with problems are left alone when they can move verbatim.
    let mut verbatim = crate::verbatim::decide(&prog, text_end);
    verbatim.kept_in_place |= keep_text;
    report.left_alone = verbatim.left_alone.clone();
    // Bytes outside functions that are not padding: code before the first function, a word
    // that does not decode or is not padding in a gap. Gaps are copied verbatim with the
    // function before them, and the verifier accepts only padding there; so such bytes stay
    // where they are instead: `.text` is kept in place (nothing outside functions is copied).
    let mut outside = Vec::new();
    let first_fn = prog.funcs.first().map_or(text_end, |f| f.spec.start);
    if first_fn > text_addr && !is_padding(&text_bytes[..(first_fn - text_addr) as usize], target) {
        outside.push(format!("code before the first function at {text_addr:#x}"));
    }
    for (k, f) in prog.funcs.iter().enumerate() {
        let gap_end = prog.funcs.get(k + 1).map_or(text_end, |n| n.spec.start);
        if verbatim.blocks[k] == Some(gap_end) {
            continue; // copied inside the function's verbatim block
        }
        let (lo, hi) = (
            (f.spec.end - text_addr) as usize,
            (gap_end - text_addr) as usize,
        );
        let Some(gap) = text_bytes.get(lo..hi) else {
            continue;
        };
        match amdgpu_isa::decode_all(gap, target) {
            Err(e) => outside.push(format!(
                "undecodable word in the gap after {} at {:#x}: {}",
                f.spec.name,
                f.spec.end + e.offset as u64,
                e.kind
            )),
            // Damaged padding that decodes fails closed the same way (issue 17 item 7): a gap
            // that is not padding would be copied verbatim, and the verifier accepts only
            // padding after a function's end. Named: the first word that is not padding.
            Ok(insts) if !is_padding(gap, target) => {
                let mut at = f.spec.end;
                for i in &insts {
                    let pad = matches!(i.special(), Special::Nop | Special::CodeEnd)
                        || (0..i.len() / 4).all(|k| i.word(k) == 0);
                    if !pad {
                        outside.push(format!(
                            "damaged padding in the gap after {} at {at:#x}: {} (padding is s_nop or s_code_end)",
                            f.spec.name,
                            i.mnemonic()
                        ));
                        break;
                    }
                    at += i.len() as u64;
                }
            }
            Ok(_) => {}
        }
    }
    if !outside.is_empty() {
        verbatim.kept_in_place = true;
        report.notes.extend(
            outside
                .into_iter()
                .map(|w| format!("{w}: kept in place with .text")),
        );
    }
    report
        .notes
        .extend(crate::verbatim::kept_in_place_notes(&prog, &verbatim));
    report.text_kept_in_place = verbatim.kept_in_place;
    let existing_rows = src
        .co
        .funcmap()
        .map(sqtt_funcmap::parse)
        .unwrap_or_default()
        .rows;
    let reserved = existing_markers(&prog, &existing_rows, report);
    Analysed {
        src,
        prog,
        verbatim,
        reserved,
        existing_rows,
    }
}

/// Existing markers and funcmap rows: kept, their ids never reused. Returns the ids in use and
/// lists every `s_ttracedata`/`s_ttracedata_imm` of the input in `report.existing_markers`.
fn existing_markers(prog: &Program, rows: &[Row], report: &mut Report) -> BTreeSet<u32> {
    let mut reserved: BTreeSet<u32> = BTreeSet::new();
    for r in rows {
        if let Some(id) = r.id() {
            reserved.insert(id);
        }
    }
    for f in &prog.funcs {
        // M0 constants only for functions with an `s_ttracedata` (most have none).
        let mut facts = None;
        for (i, (a, inst)) in f.insts.iter().enumerate() {
            match inst.special() {
                Special::TtraceDataImm(v) => {
                    reserved.insert(u32::from(v) >> 2);
                    report.existing_markers.push(format!(
                        "{}+{:#x}: s_ttracedata_imm {v:#x}",
                        f.spec.name,
                        a - f.spec.start
                    ));
                }
                Special::TtraceData => match facts
                    .get_or_insert_with(|| crate::analysis::m0_facts(f))
                    .constant[i]
                {
                    Some(v) => {
                        reserved.insert(v >> 2);
                        report.existing_markers.push(format!(
                            "{}+{:#x}: s_ttracedata m0={v:#x}",
                            f.spec.name,
                            a - f.spec.start
                        ));
                    }
                    None => report.existing_markers.push(format!(
                        "{}+{:#x}: s_ttracedata with an unknown M0 value",
                        f.spec.name,
                        a - f.spec.start
                    )),
                },
                _ => {}
            }
        }
    }
    reserved
}
