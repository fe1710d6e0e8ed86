//! [`Check::Metadata`]: the metadata note (AMDGPUUsage "Code Object Metadata"): every key
//! unchanged except `.sgpr_count` / `.vgpr_count`, which may grow within the descriptor's
//! allocation.

use rmpv::Value;

use hsaco::CodeObject;

use crate::{Check, Finding};

/// The metadata notes outside `amdhsa.kernels` (`amdhsa.version`, `amdhsa.target`,
/// `amdhsa.printf`, ...) must be unchanged: no rewrite edits them.
pub(crate) fn check_metadata_root(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    let mut report = |message: String| {
        findings.push(Finding {
            check: Check::Metadata,
            function: None,
            original_address: None,
            new_address: None,
            message,
        })
    };
    for (om, nm) in o.metadata.iter().zip(&n.metadata) {
        compare_entries(
            om.root_entries().into_iter(),
            nm.root_entries().into_iter(),
            &[],
            &mut report,
        );
    }
    if o.metadata.len() != n.metadata.len() {
        report(format!(
            "{} metadata notes became {}",
            o.metadata.len(),
            n.metadata.len()
        ));
    }
}

/// Reports (through `report`) every key of two msgpack maps (metadata note entries) that is
/// missing from the new map, added to it, repeated more often than in the old one, or whose
/// value differs; keys in `own_rules` are checked for presence only (their values have rules of
/// their own).
fn compare_entries<'a>(
    old: impl Iterator<Item = &'a (Value, Value)>,
    new: impl Iterator<Item = &'a (Value, Value)>,
    own_rules: &[&str],
    report: &mut dyn FnMut(String),
) {
    let name = |k: &Value| k.as_str().map_or_else(|| k.to_string(), str::to_string);
    let value_checked = |k: &Value| !k.as_str().is_some_and(|k| own_rules.contains(&k));
    let old: Vec<&(Value, Value)> = old.collect();
    let new: Vec<&(Value, Value)> = new.collect();
    let count = |m: &[&(Value, Value)], k: &Value| m.iter().filter(|(x, _)| x == k).count();
    for (i, (k, _)) in new.iter().enumerate() {
        let (a, b) = (count(&old, k), count(&new, k));
        if b > 1 && b != a && !new[..i].iter().any(|(x, _)| x == k) {
            report(format!("{} appears {b} times (was {a})", name(k)));
        }
    }
    for (k, v) in &old {
        match new.iter().find(|(nk, _)| nk == k) {
            Some((_, nv)) if value_checked(k) && nv != v => {
                let (path, a, b) = first_difference(name(k), v, nv);
                report(format!("{path} changed from {a} to {b}"))
            }
            Some(_) => {}
            None => report(format!("{} ({v}) removed", name(k))),
        }
    }
    for (k, v) in &new {
        if !old.iter().any(|(ok, _)| ok == k) {
            report(format!("{} ({v}) added", name(k)));
        }
    }
}

/// The innermost place where two msgpack values differ, as (path, old part, new part): arrays of
/// the same length descend into their first differing element (`.args[3]`), maps with the same
/// keys in the same order into their first differing value (`.args[3].size`); anything else is
/// the difference itself. `path` names `old` and `new`.
fn first_difference<'a>(
    mut path: String,
    mut old: &'a Value,
    mut new: &'a Value,
) -> (String, &'a Value, &'a Value) {
    loop {
        let inner = match (old, new) {
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .enumerate()
                .find(|(_, (x, y))| x != y)
                .map(|(i, (x, y))| (format!("{path}[{i}]"), x, y)),
            (Value::Map(a), Value::Map(b))
                if a.len() == b.len() && a.iter().zip(b).all(|((x, _), (y, _))| x == y) =>
            {
                a.iter()
                    .zip(b)
                    .find(|((_, x), (_, y))| x != y)
                    .map(|((k, x), (_, y))| {
                        let key = k.as_str().map_or_else(|| format!("[{k}]"), str::to_string);
                        (format!("{path}{key}"), x, y)
                    })
            }
            _ => None,
        };
        match inner {
            Some((p, a, b)) => (path, old, new) = (p, a, b),
            None => return (path, old, new),
        }
    }
}

/// Checks the metadata-note entry of original kernel `ok` against its rewritten `nk` (one pair
/// of [`crate::program::kernel_pairs`]): every key unchanged except `.sgpr_count` /
/// `.vgpr_count`, which may grow within the descriptor's allocation; `reserved`: the highest
/// SGPR inserted code of the kernel writes, if any.
pub(crate) fn check_metadata(
    o: &CodeObject,
    n: &CodeObject,
    ok: &hsaco::Kernel,
    nk: &hsaco::Kernel,
    reserved: Option<u16>,
    findings: &mut Vec<Finding>,
    warnings: &mut Vec<Finding>,
) {
    let (Some((om, oi)), Some((nm, ni))) = (o.kernel_metadata(ok), n.kernel_metadata(nk)) else {
        if ok.metadata_index.is_some() {
            findings.push(Finding {
                check: Check::Metadata,
                function: Some(ok.name.clone()),
                original_address: None,
                new_address: None,
                message: "kernel missing from the metadata note".into(),
            });
        }
        return;
    };
    let mf = |message: String| Finding {
        check: Check::Metadata,
        function: Some(ok.name.clone()),
        original_address: None,
        new_address: None,
        message,
    };
    // Every other key is the compiler's and no rewrite changes it (`.kernarg_segment_size`,
    // `.wavefront_size`, `.args`, ...): the rewriter edits `.sgpr_count` only, and the register
    // counts and segment sizes have their own value rules below (but must stay present, once).
    let own_rules = [
        ".sgpr_count",
        ".vgpr_count",
        ".group_segment_fixed_size",
        ".private_segment_fixed_size",
    ];
    if let (Some(oe), Some(ne)) = (om.kernel_entry(oi), nm.kernel_entry(ni)) {
        compare_entries(oe.iter(), ne.iter(), &own_rules, &mut |m| {
            findings.push(mf(m))
        });
    }
    let (od, d) = (&ok.descriptor, &nk.descriptor);
    for (key, old_desc, desc) in [
        (
            ".group_segment_fixed_size",
            od.group_segment_fixed_size,
            d.group_segment_fixed_size,
        ),
        (
            ".private_segment_fixed_size",
            od.private_segment_fixed_size,
            d.private_segment_fixed_size,
        ),
    ] {
        let (a, b) = (om.kernel_u64(oi, key), nm.kernel_u64(ni, key));
        if a != b {
            findings.push(mf(format!("{key} changed from {a:?} to {b:?}")));
        }
        let Some(b) = b.filter(|&b| b != u64::from(desc)) else {
            continue;
        };
        // What the input says is the input's business: a disagreement the input already had,
        // with the same two values, is kept as it is and only warned about; any other
        // disagreement is one the rewrite made.
        if a == Some(b) && old_desc == desc {
            warnings.push(mf(format!(
                "{key} {b} in the metadata note disagrees with the descriptor ({desc}), as in the input"
            )));
        } else {
            findings.push(mf(format!(
                "{key} Some({b}) disagrees with the descriptor ({desc})"
            )));
        }
    }
    let regs = d.registers(&n.target);
    // A grown VGPR allocation is for VGPRs inserted code uses beyond the input's allocation:
    // the note's `.vgpr_count` must say so too (issue 31: note, report and descriptor agree).
    let old_alloc = od.registers(&o.target).vgprs_allocated;
    if regs.vgprs_allocated > old_alloc {
        match nm.kernel_u64(ni, ".vgpr_count") {
            Some(v) if v > u64::from(old_alloc) => {}
            v => findings.push(mf(format!(
                ".vgpr_count {v:?} does not cover the VGPR allocation grown from {old_alloc} to {}",
                regs.vgprs_allocated
            ))),
        }
    }
    for (key, cap) in [
        (".sgpr_count", regs.sgprs),
        (".vgpr_count", Some(regs.vgprs_allocated)),
    ] {
        let (a, b) = (om.kernel_u64(oi, key), nm.kernel_u64(ni, key));
        if let (Some(a), Some(b)) = (a, b) {
            if b < a {
                findings.push(mf(format!("{key} decreased from {a} to {b}")));
            }
            if let Some(c) = cap.filter(|&c| b > u64::from(c) && b != a) {
                findings.push(mf(format!(
                    "{key} {b} exceeds the descriptor allocation {c}"
                )));
            }
            if key == ".sgpr_count" {
                // gfx10+ descriptors carry no SGPR bound: the target's ceiling is the guard.
                let most = n.target.max_sgpr_count();
                if b > u64::from(most) && b > a {
                    findings.push(mf(format!(
                        ".sgpr_count {b} exceeds the {most} SGPRs {} can have",
                        n.target.processor
                    )));
                }
                if let Some(r) = reserved.filter(|r| b < u64::from(*r) + 1) {
                    findings.push(mf(format!(
                        ".sgpr_count {b} does not cover s{r}, which inserted code writes"
                    )));
                }
            }
        }
    }
}
