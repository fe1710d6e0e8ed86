//! `sqtt-patch info FILE [--json]`: one block per embedded code object (target, code object
//! version, kernels with descriptor fields, register counts, occupancy, device functions, DWARF
//! and `.sqtt_funcmap` presence). Works on bare code objects, bundles and host ELFs.

use std::fmt::Write as _;

use anyhow::Context;
use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::container::{open, open_listing, Embedded, InputKind, MalformedEntry};
use hsaco::CodeObject;
use serde_json::{json, Value};

/// Arguments of `sqtt-patch info`.
#[derive(clap::Args)]
pub struct InfoArgs {
    /// Input file: code object, offload bundle (plain or CCOB) or host ELF.
    pub file: std::path::PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn describe(e: &Embedded, co: &CodeObject) -> Value {
    let kernels: Vec<Value> = co
        .kernels
        .iter()
        .map(|k| {
            let d = &k.descriptor;
            let regs = d.registers(&co.target);
            let md = co.kernel_metadata(k);
            let md_u = |key: &str| md.and_then(|(m, i)| m.kernel_u64(i, key));
            let sgprs = md_u(".sgpr_count").map_or(regs.sgprs.unwrap_or(0), |v| v as u32);
            let occ = hsaco::kd::occupancy(&co.target, d.wave32(), regs.vgprs_allocated, sgprs, d.group_segment_fixed_size);
            json!({
                "name": k.name, "kd_address": k.kd_address, "entry": k.entry, "code_size": k.code_size,
                "wave_size": d.wave_size(),
                "lds_bytes": d.group_segment_fixed_size, "scratch_bytes": d.private_segment_fixed_size,
                "kernarg_size": d.kernarg_size,
                "kernarg_preload": {"length": d.kernarg_preload_length(), "offset": d.kernarg_preload_offset()},
                "uses_dynamic_stack": d.uses_dynamic_stack(),
                "descriptor": {"vgprs_allocated": regs.vgprs_allocated, "arch_vgprs": regs.arch_vgprs,
                               "agprs": regs.agprs, "sgprs": regs.sgprs,
                               "inst_pref_size": d.inst_pref_size(co.target.generation()),
                               "rsrc1": d.compute_pgm_rsrc1, "rsrc2": d.compute_pgm_rsrc2, "rsrc3": d.compute_pgm_rsrc3},
                "metadata": {"sgpr_count": md_u(".sgpr_count"), "vgpr_count": md_u(".vgpr_count"),
                             "agpr_count": md_u(".agpr_count"),
                             "private_segment_fixed_size": md_u(".private_segment_fixed_size")},
                "occupancy": occ,
            })
        })
        .collect();
    let funcs: Vec<Value> = co
        .functions
        .iter()
        .map(|f| json!({"name": f.name, "address": f.address, "size": f.size, "local": f.local, "ocl_clone": f.ocl_clone}))
        .collect();
    let mut warnings = co.input_warnings();
    warnings.extend(hsaco::bundle::id_processor_mismatch(
        &e.id,
        &co.target.processor,
    ));
    json!({
        "bundle_index": e.bundle_index, "entry_index": e.entry_index, "entry_id": e.id,
        "bundle_offset": e.bundle_offset,
        "target": co.target.target_id(), "processor": co.target.processor, "mach": co.target.mach,
        "xnack": co.target.xnack, "sramecc": co.target.sramecc, "generic_version": co.target.generic_version,
        "code_object_version": co.version.number(),
        "text_size": co.text().map_or(0, |t| t.size),
        "dwarf": co.has_dwarf(), "sqtt_funcmap": co.funcmap().is_some(),
        "kernels": kernels, "device_functions": funcs,
        "warnings": warnings,
    })
}

/// One text block; `n` numbers the code objects of the file from 1.
fn print_text(out: &mut String, n: usize, v: &Value) {
    let s = |k: &str| v[k].to_string();
    // A bundle entry is named by its index in the bundle too: with an entry that does not
    // load, the code objects listed are no longer numbered as the entries (session-24 fresh
    // tester).
    let (entry, index) = match v["entry_id"].as_str().unwrap_or("") {
        "" => (String::new(), String::new()),
        id => (format!(" {id}"), format!(" entry {}", s("entry_index"))),
    };
    let _ = writeln!(out, "code object {n}{entry} (bundle {}{index}, cov{}, target {}, .text {} bytes, dwarf {}, .sqtt_funcmap {})",
        s("bundle_index"), s("code_object_version"),
        v["target"].as_str().unwrap_or(""), s("text_size"), s("dwarf"), s("sqtt_funcmap"));
    // An absent value (no SGPR field in gfx10+ descriptors, no metadata note) prints as `-`.
    let t = |x: &Value| match x {
        Value::Null => "-".to_string(),
        x => x.to_string(),
    };
    for w in v["warnings"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  warning: {}", w.as_str().unwrap_or(""));
    }
    for k in v["kernels"].as_array().into_iter().flatten() {
        let d = &k["descriptor"];
        let m = &k["metadata"];
        let _ = writeln!(
            out,
            "  kernel {} entry {:#x} wave{} vgprs {} (arch {}, agprs {}) sgprs {} [note: sgpr {} vgpr {} agpr {}] lds {} scratch {} kernarg {} preload {} dyn_stack {} occupancy {} waves/SIMD",
            k["name"].as_str().unwrap_or(""), k["entry"].as_u64().unwrap_or(0), k["wave_size"], d["vgprs_allocated"],
            d["arch_vgprs"], t(&d["agprs"]), t(&d["sgprs"]), t(&m["sgpr_count"]), t(&m["vgpr_count"]), t(&m["agpr_count"]),
            k["lds_bytes"], k["scratch_bytes"], k["kernarg_size"], k["kernarg_preload"]["length"],
            k["uses_dynamic_stack"], k["occupancy"]["waves_per_simd"]
        );
    }
    for f in v["device_functions"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  function {} at {:#x} size {}{}",
            f["name"].as_str().unwrap_or(""),
            f["address"].as_u64().unwrap_or(0),
            f["size"],
            if f["local"] == true { " (local)" } else { "" }
        );
    }
}

/// Number of images of LLVM offload binaries (a bare file, or the `.llvm.offloading` sections
/// of a host ELF) that are not AMDGPU code objects; 0 when unreadable.
fn other_offload_images(bytes: &[u8]) -> usize {
    use hsaco::offload::{is_offload_binary, parse_all, SECTION};
    let mut images = Vec::new();
    if is_offload_binary(bytes) {
        images = parse_all(bytes, 0).unwrap_or_default();
    } else if let Ok(e) = hsaco::elf::Elf::parse(bytes) {
        for s in e.sections.iter().filter(|s| s.name == SECTION) {
            images.extend(parse_all(e.section_data(bytes, s), s.offset).unwrap_or_default());
        }
    }
    images.iter().filter(|i| !i.is_amdgcn_code_object()).count()
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: InfoArgs) -> anyhow::Result<i32> {
    let name = args.file.display().to_string();
    let bytes =
        crate::sniff::read_input(&args.file).with_context(|| format!("{name}: cannot read"))?;
    let mut blocks = Vec::new();
    let mut malformed: Vec<MalformedEntry> = Vec::new();
    // Bundle entries that are not code objects the loader reads: `why` names each.
    let mut unloadable: Vec<Value> = Vec::new();
    let mut kpack = None;
    // Warnings about the file rather than one code object (a host's fat binary wrappers).
    let mut file_warnings: Vec<String> = Vec::new();
    let kind = if hsaco::kpack::is_kpack(&bytes) {
        let a = hsaco::kpack::read(&bytes, DEFAULT_DECOMPRESS_LIMIT)
            .with_context(|| format!("{name}: cannot parse"))?;
        let mut k = crate::kpack::archive_json(&a);
        for (i, blob) in a.blobs.iter().enumerate() {
            // A blob that is not a code object or a bundle is listed, not fatal: the format
            // does not require code objects (the reference tests store plain bytes).
            let cos = match open(blob, DEFAULT_DECOMPRESS_LIMIT) {
                Ok((_, cos)) => cos,
                Err(e) => {
                    let note = json!({"ordinal": i, "error": e.to_string()});
                    k["archive"]["not_code_objects"]
                        .as_array_mut()
                        .map(|v| v.push(note.clone()))
                        .unwrap_or_else(|| k["archive"]["not_code_objects"] = json!([note]));
                    continue;
                }
            };
            for mut e in cos {
                e.bundle_index = i;
                // One damaged code object is listed with its reason after the others, as a
                // bundle entry is (session-14 tester: it stopped the whole listing).
                match CodeObject::parse(&e.data) {
                    Ok(co) => blocks.push(describe(&e, &co)),
                    Err(err) => unloadable.push(json!({"kpack_ordinal": i,
                        "entry_id": e.id, "size": e.data.len(),
                        "why": format!("kpack entry {i} (code object {}): {err}", e.file_name())})),
                }
            }
        }
        kpack = Some(k);
        "Kpack"
    } else {
        let hipk = crate::kpack::wrappers_of(&name, &bytes[..])?;
        if !hipk.is_empty() {
            kpack = Some(crate::kpack::host_json(&args.file, &hipk));
            "Host"
        } else {
            let l = open_listing(&bytes, DEFAULT_DECOMPRESS_LIMIT)
                .with_context(|| format!("{name}: cannot parse"))?;
            if l.kind == InputKind::Host && !hsaco::pe::is_pe(&bytes) {
                // The wrappers' odd fields, as `--fatbin` warns about them (a host it cannot
                // scan fails there with its own message; the listing above read it).
                if let Ok(img) = hsaco::hostwrite::scan_host(&bytes[..]) {
                    file_warnings = img.warnings;
                }
            }
            let (kind, cos) = (l.kind, l.objects);
            malformed = l.malformed;
            for e in &cos {
                // A bare code object that does not load is the input's error; an entry of a
                // bundle that does not load is listed with the reason, after the others
                // (session-23 fresh tester: one broken entry hid every other one).
                if !e.id.is_empty() {
                    if let Some(why) = crate::cmd_extract::load_problem(e) {
                        unloadable.push(json!({"bundle_index": e.bundle_index,
                            "entry_index": e.entry_index, "entry_id": e.id,
                            "bundle_offset": e.bundle_offset, "entry_offset": e.entry_offset,
                            "size": e.data.len(), "why": why}));
                        continue;
                    }
                }
                // A bare code object is the file itself: no inner name (session-28 tester:
                // "code object 0-code-object.co", a file that exists nowhere).
                let co = CodeObject::parse(&e.data).with_context(|| match e.id.is_empty() {
                    true => name.clone(),
                    false => format!("{name}: code object {}", e.file_name()),
                })?;
                blocks.push(describe(e, &co));
            }
            match kind {
                _ if hsaco::offload::is_offload_binary(&bytes) => "OffloadBinary",
                InputKind::CodeObject => "CodeObject",
                InputKind::Bundle => "Bundle",
                InputKind::Host => "Host",
            }
        }
    };
    let mut out = String::new();
    if args.json {
        let mut v = json!({"file": name, "kind": kind, "code_objects": blocks});
        if !malformed.is_empty() {
            v["malformed_entries"] = malformed
                .iter()
                .map(|m| {
                    json!({"bundle_index": m.bundle_index, "entry_index": m.entry_index,
                           "entry_id": m.id, "bundle_offset": m.bundle_offset,
                           "entry_offset": m.entry_offset, "size": m.size, "why": m.why})
                })
                .collect();
        }
        if !unloadable.is_empty() {
            v["unloadable_entries"] = json!(unloadable);
        }
        if !file_warnings.is_empty() {
            v["warnings"] = json!(file_warnings);
        }
        if let Some(k) = kpack {
            v["kpack"] = k;
        }
        out = serde_json::to_string_pretty(&v)?;
        out.push('\n');
    } else {
        let kind = match kind {
            "CodeObject" => "AMDGPU code object",
            "Bundle" => "offload bundle",
            "Kpack" => "kpack archive",
            "OffloadBinary" => "LLVM offload binary",
            _ if hsaco::pe::is_pe(&bytes) => "Windows PE (x64) host binary",
            _ => "x86-64 host binary",
        };
        let _ = write!(out, "{name}: {kind}, {} code object(s)", blocks.len());
        if !unloadable.is_empty() {
            let _ = match unloadable.len() {
                1 => write!(out, ", 1 entry that does not load"),
                n => write!(out, ", {n} entries that do not load"),
            };
        }
        let _ = match malformed.len() {
            0 => writeln!(out),
            n => writeln!(
                out,
                ", {n} malformed bundle entr{} (not read)",
                if n == 1 { "y" } else { "ies" }
            ),
        };
        for w in &file_warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        for m in &malformed {
            let _ = writeln!(
                out,
                "note: {} ({} bytes) was not read as a code object: {}",
                m.location().escape_debug(),
                m.size,
                m.why
            );
        }
        for u in &unloadable {
            let _ = writeln!(out, "error: {}", u["why"].as_str().unwrap_or_default());
        }
        let other = other_offload_images(&bytes);
        if other > 0 {
            let _ = writeln!(
                out,
                "note: {other} offload image(s) that are not AMDGPU code objects (LLVM IR of \
                 -fgpu-rdc / -foffload-lto objects, other targets) were skipped: link first"
            );
        }
        if let Some(k) = &kpack {
            crate::kpack::print_text(&mut out, k);
        }
        for (i, b) in blocks.iter().enumerate() {
            print_text(&mut out, i + 1, b);
        }
    }
    let code = crate::cmd_patch::write_stdout(&out)?;
    if unloadable.is_empty() {
        return Ok(code);
    }
    // The listing is printed; the input is still bad input (exit 2), said on stderr too.
    let whys: Vec<&str> = unloadable
        .iter()
        .map(|u| u["why"].as_str().unwrap_or_default())
        .collect();
    let msg = format!(
        "sqtt-patch: error: {name}: {}; the code objects that load are listed",
        whys.join("; ")
    );
    eprintln!("{}", crate::output::terminal_safe(&msg));
    Ok(crate::exit::INPUT)
}
