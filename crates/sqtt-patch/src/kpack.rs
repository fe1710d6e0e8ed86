//! ROCm 7 kpack packaging on the command line (format and search rules in [`hsaco::kpack`]):
//! instrumenting every code object of a `.kpack` archive ([`instrument_archive`]), finding the
//! archives of a kpack-split (HIPK) host binary the way the loader does ([`find_archives`]), and
//! `--fatbin` on such a binary ([`run_host`]): its archives instrumented and written beside the
//! output, where the instrumented binary's loader finds them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::kpack::hipk::{self, HipkWrapper, GFXARCH};
use hsaco::kpack::{self, Archive};
use rayon::prelude::*;
use serde::Serialize;
use sqtt_rewrite::config::Options;

use crate::cmd_patch::PatchArgs;
use crate::fatbin::{self, ArchFilter, ContainerReport, ObjectOutcome};
use crate::output;
use crate::progress::Progress;

/// An instrumented archive.
pub struct ArchiveOutcome {
    /// The new archive (equal to the input when nothing changed).
    pub bytes: Vec<u8>,
    /// Every selected code object, by ordinal (`bundle_index` is the ordinal, `entry_id`
    /// `binary@arch`).
    pub objects: Vec<ObjectOutcome>,
    /// Code objects the target filter left out.
    pub filtered_out: usize,
}

/// Instruments every code object of the archive `data` (named `name` in messages) whose TOC
/// architecture a selected target loads ([`ArchFilter::loads`]): each blob goes through [`fatbin::instrument_container`] (a
/// bare code object, or an offload bundle), so through the rewriter and the verifier; a blob
/// that cannot be instrumented stays as it was (failed closed, with the reason). The archive is
/// rewritten in its storage, then read back and compared. Errors: a malformed archive (file and
/// offset named), an already instrumented code object, an archive that does not read back.
pub fn instrument_archive(
    name: &str,
    data: &[u8],
    opts: &Options,
    filter: &ArchFilter,
    progress: &Progress,
) -> Result<ArchiveOutcome> {
    let a = kpack::read(data, DEFAULT_DECOMPRESS_LIMIT).with_context(|| name.to_string())?;
    let labels: Vec<(String, bool)> = (0..a.blobs.len())
        .map(|i| {
            let es: Vec<_> = a.entries.iter().filter(|e| e.ordinal == i).collect();
            let label = es.iter().map(|e| e.label()).collect::<Vec<_>>().join(",");
            let selected = es.is_empty() || es.iter().any(|e| filter.loads(&e.arch));
            (label, selected)
        })
        .collect();
    progress.found(labels.iter().filter(|l| l.1).count() as u64);
    let results: Vec<(Option<Vec<u8>>, Vec<ObjectOutcome>)> = a
        .blobs
        .par_iter()
        .zip(&labels)
        .enumerate()
        .map(|(i, (blob, (label, selected)))| -> Result<_> {
            if !selected {
                return Ok((None, Vec::new()));
            }
            let what = format!("{name}: {label}");
            let r = fatbin::instrument_container(&what, blob, opts, &ArchFilter::default());
            progress.objects_done(1);
            match r {
                Ok(c) => {
                    let objects = c
                        .objects
                        .into_iter()
                        .map(|mut o| {
                            o.bundle_index = i;
                            o.in_kpack = true;
                            o.entry_id = match o.entry_id.is_empty() {
                                true => label.clone(),
                                false => format!("{label} {}", o.entry_id),
                            };
                            o
                        })
                        .collect();
                    Ok(((c.bytes != *blob).then_some(c.bytes), objects))
                }
                Err(e) if fatbin::already_instrumented(&e) => Err(e),
                Err(e) => Ok((
                    None,
                    vec![ObjectOutcome {
                        bundle_index: i,
                        entry_id: label.clone(),
                        target: a
                            .entries
                            .iter()
                            .find(|x| x.ordinal == i)
                            .map_or(String::new(), |x| x.arch.clone()),
                        report: fatbin::unparsable(label, &e),
                        verifier_rejected: false,
                        in_kpack: true,
                    }],
                )),
            }
        })
        .collect::<Result<_>>()?;
    let filtered_out = labels.iter().filter(|l| !l.1).count();
    let changed = results.iter().any(|r| r.0.is_some());
    let new: Vec<&[u8]> = results
        .iter()
        .zip(&a.blobs)
        .map(|(r, b)| r.0.as_deref().unwrap_or(b))
        .collect();
    let bytes = if changed {
        let out =
            kpack::write::write(&a, &new).with_context(|| format!("{name}: cannot rewrite"))?;
        check_written(name, &a, &new, &out)?;
        out
    } else {
        data.to_vec()
    };
    progress.bytes_done(data.len() as u64);
    Ok(ArchiveOutcome {
        bytes,
        objects: results.into_iter().flat_map(|r| r.1).collect(),
        filtered_out,
    })
}

/// Reads a rewritten archive back: same entries, same storage, the new blobs.
fn check_written(name: &str, a: &Archive, blobs: &[&[u8]], out: &[u8]) -> Result<()> {
    let b = kpack::read(out, DEFAULT_DECOMPRESS_LIMIT).with_context(|| {
        format!("{name}: internal error: the rewritten archive does not read back")
    })?;
    let same = b.storage == a.storage
        && b.blobs.iter().map(Vec::as_slice).eq(blobs.iter().copied())
        && b.entries
            .iter()
            .map(|e| (&e.binary, &e.arch, e.ordinal))
            .eq(a.entries.iter().map(|e| (&e.binary, &e.arch, e.ordinal)));
    if !same {
        bail!("{name}: internal error: the rewritten archive reads back different");
    }
    Ok(())
}

/// `ROCM_KPACK_PATH` and `ROCM_KPACK_PATH_PREFIX` (`:`-separated archive paths; empty items
/// skipped).
#[derive(Debug, Clone, Default)]
pub struct KpackEnv {
    /// `ROCM_KPACK_PATH`: when non-empty, the only archives tried.
    pub path: Vec<PathBuf>,
    /// `ROCM_KPACK_PATH_PREFIX`: tried before the binary's own search paths.
    pub prefix: Vec<PathBuf>,
}

impl KpackEnv {
    /// From the process environment.
    pub fn from_env() -> KpackEnv {
        let split = |k: &str| -> Vec<PathBuf> {
            std::env::var_os(k)
                .map(|v| {
                    std::env::split_paths(&v)
                        .filter(|p| !p.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        KpackEnv {
            path: split("ROCM_KPACK_PATH"),
            prefix: split("ROCM_KPACK_PATH_PREFIX"),
        }
    }
}

/// Where an instrumented archive goes, relative to the output binary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Placement {
    /// The binary's search path with `@GFXARCH@` replaced: resolved against the output, where
    /// the instrumented binary's loader looks.
    SearchPath(String),
    /// Found through the environment or an absolute path: the output's directory, same name.
    Beside,
}

/// An archive the loader would open.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    /// Its path.
    pub path: PathBuf,
    /// How it was found (`ROCM_KPACK_PATH`, or the search path and target).
    pub via: String,
    /// Where its instrumented copy goes.
    pub placement: Placement,
}

/// What [`find_archives`] found, and what it looked for in vain.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Lookup {
    /// Archives found, each once, in the loader's order.
    pub found: Vec<Found>,
    /// Archives looked for and not found that `--fatbin` needs (one line each).
    pub missing: Vec<String>,
    /// Archives the loader would skip when absent (a direct search path; one line each).
    pub absent: Vec<String>,
}

/// Finds the archives of a HIPK binary at `binary` as the loader does ([`hipk`] module
/// documentation): `env.path` alone when set, else `env.prefix` then each distinct search path
/// of `wrappers` resolved against the binary's directory, `@GFXARCH@` replaced by each of
/// `targets` and its feature subsets (most specific first, the first existing file taken). With
/// no `targets` (no device here), a `@GFXARCH@` in the file name matches every file of that
/// directory with the same prefix and suffix and a `gfx` target in the middle.
pub fn find_archives(
    binary: &Path,
    wrappers: &[HipkWrapper],
    targets: &[String],
    env: &KpackEnv,
) -> Lookup {
    let mut l = Lookup::default();
    let mut seen = BTreeSet::new();
    let mut add = |l: &mut Lookup, path: PathBuf, via: String, placement: Placement| {
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen.insert(key) {
            l.found.push(Found {
                path,
                via,
                placement,
            });
        }
    };
    let direct = |l: &mut Lookup,
                  list: &[PathBuf],
                  var: &str,
                  add: &mut dyn FnMut(&mut Lookup, PathBuf, String, Placement)| {
        for p in list {
            if p.is_file() {
                add(l, p.clone(), var.to_string(), Placement::Beside);
            } else {
                l.missing.push(format!("{} (from {var})", p.display()));
            }
        }
    };
    if !env.path.is_empty() {
        direct(&mut l, &env.path, "ROCM_KPACK_PATH", &mut add);
        return l;
    }
    direct(&mut l, &env.prefix, "ROCM_KPACK_PATH_PREFIX", &mut add);
    let mut paths: Vec<&str> = Vec::new();
    for w in wrappers {
        for p in &w.search_paths {
            if !paths.contains(&p.as_str()) {
                paths.push(p);
            }
        }
    }
    for sp in paths {
        let placement = |s: String| match Path::new(sp).is_absolute() {
            true => Placement::Beside,
            false => Placement::SearchPath(s),
        };
        if !sp.contains(GFXARCH) {
            let p = hipk::resolve(binary, sp);
            match p.is_file() {
                true => add(
                    &mut l,
                    p,
                    format!("search path {sp}"),
                    placement(sp.to_string()),
                ),
                false => l.absent.push(format!("{} (search path {sp})", p.display())),
            }
            continue;
        }
        if targets.is_empty() {
            match_any_target(binary, sp, &mut l, &mut |l, p, t| {
                add(
                    l,
                    p,
                    format!("search path {sp}, {t}"),
                    placement(sp.replace(GFXARCH, &t)),
                )
            });
            continue;
        }
        for t in targets {
            let tried: Vec<(String, PathBuf)> = hipk::compatible_targets(t)
                .into_iter()
                .map(|c| (c.clone(), hipk::resolve(binary, &sp.replace(GFXARCH, &c))))
                .collect();
            match tried.iter().find(|(_, p)| p.is_file()) {
                Some((c, p)) => add(
                    &mut l,
                    p.clone(),
                    format!("search path {sp}, {c}"),
                    placement(sp.replace(GFXARCH, c)),
                ),
                None => l.missing.push(format!(
                    "{} (search path {sp}, target {t})",
                    tried
                        .iter()
                        .map(|(_, p)| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(" or ")
                )),
            }
        }
    }
    l
}

/// Every file matching a `@GFXARCH@` search path whose placeholder is in the file name.
fn match_any_target(
    binary: &Path,
    sp: &str,
    l: &mut Lookup,
    add: &mut dyn FnMut(&mut Lookup, PathBuf, String),
) {
    let pattern = hipk::resolve(binary, sp);
    let dir = pattern.parent().map(Path::to_path_buf).unwrap_or_default();
    let file = pattern
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    let Some((pre, suf)) = file.split_once(GFXARCH) else {
        l.missing.push(format!(
            "{} (search path {sp}: {GFXARCH} outside the file name needs --offload-arch)",
            pattern.display()
        ));
        return;
    };
    let mut hits: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            let mid = n.strip_prefix(pre)?.strip_suffix(suf)?;
            (mid.starts_with("gfx") && e.path().is_file()).then(|| (mid.to_string(), e.path()))
        })
        .collect();
    hits.sort();
    if hits.is_empty() {
        l.missing.push(format!(
            "{} for any target (search path {sp}; no {pre}gfx*{suf} in {})",
            pattern.display(),
            dir.display()
        ));
    }
    for (t, p) in hits {
        add(l, p, t);
    }
}

/// The HIPK wrappers of `src` when it is an x86-64 ELF (empty otherwise).
pub fn wrappers_of<S: hsaco::source::Source + ?Sized>(
    name: &str,
    src: &S,
) -> Result<Vec<HipkWrapper>> {
    let head = src
        .read_at(0, src.size().min(64), "file header")
        .with_context(|| format!("{name}: cannot read"))?;
    // A corrupt ELF is left to the caller's own reader, whose message is about the ELF.
    if crate::sniff::kind(&head) != Some(hsaco::container::InputKind::Host)
        || hsaco::elf::Elf::read(src).is_err()
    {
        return Ok(Vec::new());
    }
    hipk::scan(src).with_context(|| name.to_string())
}

/// The text of an unsuccessful lookup: what was looked for.
fn lookup_error(name: &str, l: &Lookup) -> String {
    let mut s = format!("{name}: kpack-split host binary (HIPK wrappers); ");
    if l.found.is_empty() && l.missing.is_empty() {
        s += "no archive found; looked for:";
        for a in &l.absent {
            s += &format!("\n  {a}");
        }
    } else {
        s += "archive(s) not found:";
        for m in &l.missing {
            s += &format!("\n  {m}");
        }
    }
    s + "\n(set ROCM_KPACK_PATH to the archives, or install them where the search paths point)"
}

/// `--fatbin` on the HIPK binary `args.input` (its `wrappers`): finds its archives ([`find_archives`], targets from
/// `--offload-arch`), instruments each ([`instrument_archive`]), then writes the binary
/// (unchanged: it holds no device code) to `-o` and each archive at its [`Placement`] from it,
/// all or nothing. Errors: an archive looked for and not found (each named), an output archive
/// that would overwrite an input one, the errors of [`instrument_archive`].
pub fn run_host(
    args: &PatchArgs,
    dest: &output::Dest,
    opts: &Options,
    filter: &ArchFilter,
    wrappers: &[HipkWrapper],
    started: Instant,
) -> Result<i32> {
    let (Some(input), Some(output_path)) = (args.input.as_deref(), args.output.as_deref()) else {
        bail!("usage: sqtt-patch --fatbin IN -o OUT");
    };
    let name = input.display().to_string();
    let targets = &args.common.offload_arch;
    let l = find_archives(input, wrappers, targets, &KpackEnv::from_env());
    if !l.missing.is_empty() || l.found.is_empty() {
        bail!("{}", lookup_error(&name, &l));
    }
    let out_dir = output_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut objects = Vec::new();
    let mut filtered_out = 0;
    let mut outputs: Vec<(PathBuf, Vec<u8>, PathBuf)> = Vec::new();
    let keys: Vec<String> = wrappers.iter().map(HipkWrapper::lookup_key).collect();
    for f in &l.found {
        let aname = f.path.display().to_string();
        let data = std::fs::read(&f.path).with_context(|| format!("{aname}: cannot read"))?;
        let progress = Progress::new(data.len() as u64);
        let r = instrument_archive(&aname, &data, opts, filter, &progress);
        progress.finish();
        let r = r?;
        let a = kpack::read(&data, DEFAULT_DECOMPRESS_LIMIT).with_context(|| aname.clone())?;
        let held: Vec<&String> = keys
            .iter()
            .filter(|k| a.entries.iter().any(|e| &e.binary == *k))
            .collect();
        if held.is_empty() {
            eprintln!("sqtt-patch: {name}: warning: {aname} holds none of this binary's code objects ({}); the loader finds nothing there", keys.join(", "));
        }
        let out = match &f.placement {
            Placement::SearchPath(s) => hipk::resolve(output_path, s),
            Placement::Beside => out_dir.join(f.path.file_name().unwrap_or_default()),
        };
        for o in r.objects {
            objects.push(ObjectOutcome {
                entry_id: format!(
                    "{} {}",
                    f.path.file_name().unwrap_or_default().to_string_lossy(),
                    o.entry_id
                ),
                ..o
            });
        }
        filtered_out += r.filtered_out;
        outputs.push((out, r.bytes, f.path.clone()));
    }
    let inputs: Vec<PathBuf> = std::iter::once(input.to_path_buf())
        .chain(l.found.iter().map(|f| f.path.clone()))
        .collect();
    for (k, (out, _, from)) in outputs.iter().enumerate() {
        if let Some((_, _, other)) = outputs[..k].iter().find(|o| o.0 == *out) {
            bail!(
                "archive output {}: both {} and {} would be written there; give them distinct names (ROCM_KPACK_PATH)",
                out.display(),
                other.display(),
                from.display()
            );
        }
        output::check_not_input("archive output", out, &inputs)?;
        if inputs.iter().any(|i| i == out) {
            bail!("archive output {}: is an input of this run; write the binary elsewhere (-o in another directory)", out.display());
        }
    }
    let report = ContainerReport {
        objects,
        filtered_out,
        host_write: None,
        warnings: Vec::new(),
    };
    let archives: Vec<(String, String)> = outputs
        .iter()
        .map(|(o, _, i)| (i.display().to_string(), o.display().to_string()))
        .collect();
    let commit = |json: Option<(&str, &Path)>| -> Result<()> {
        let host = std::fs::read(input).with_context(|| format!("{name}: cannot read"))?;
        let mut sinks = Vec::new();
        for (out, bytes, _) in &outputs {
            let dir = out
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "archive output {}: cannot create {}",
                    out.display(),
                    dir.display()
                )
            })?;
            let d = output::check("archive output", out)?;
            let mut s = output::Sink::new(&d)?;
            std::io::Write::write_all(s.file(), bytes)
                .with_context(|| format!("archive output {}: cannot write", out.display()))?;
            sinks.push(s);
        }
        let mut s = output::Sink::new(dest)?;
        std::io::Write::write_all(s.file(), &host)
            .with_context(|| format!("{}: cannot write", dest.label))?;
        output::write_report_if(json)?;
        output::commit_all(sinks)?;
        s.commit(Some(input))
    };
    fatbin::finish(args, &name, report, &archives, started, commit)
}

/// `info` of an archive: header, storage, TOC fields and entries (JSON; see [`print_text`]).
pub fn archive_json(a: &Archive) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = a
        .entries
        .iter()
        .map(|e| {
            serde_json::json!({
                "binary": e.binary, "arch": e.arch, "type": e.kind, "ordinal": e.ordinal,
                "size": a.blobs.get(e.ordinal).map(Vec::len),
                "stored_size": a.stored_sizes.get(e.ordinal),
            })
        })
        .collect();
    serde_json::json!({
        "archive": {
            "version": a.version, "toc_offset": a.toc_offset, "storage": a.storage.name(),
            "group_name": a.field_str("group_name"), "gfx_arch_family": a.field_str("gfx_arch_family"),
            "gfx_arches": a.gfx_arches(), "blobs": a.blobs.len(), "entries": entries,
        }
    })
}

/// `info` of a HIPK host binary: its wrappers and metadata, and the archives the loader would
/// open from where it is (any target; `ROCM_KPACK_PATH` and `ROCM_KPACK_PATH_PREFIX` honoured),
/// each with the lookup keys it holds (JSON; see [`print_text`]).
pub fn host_json(path: &Path, wrappers: &[HipkWrapper]) -> serde_json::Value {
    let l = find_archives(path, wrappers, &[], &KpackEnv::from_env());
    let keys: Vec<String> = wrappers.iter().map(HipkWrapper::lookup_key).collect();
    let found: Vec<serde_json::Value> = l
        .found
        .iter()
        .map(|f| {
            let read = std::fs::read(&f.path)
                .map_err(|e| e.to_string())
                .and_then(|d| kpack::read(&d, DEFAULT_DECOMPRESS_LIMIT).map_err(|e| e.to_string()));
            match read {
                Ok(a) => serde_json::json!({
                    "path": f.path, "via": f.via, "gfx_arches": a.gfx_arches(),
                    "holds": keys.iter().filter(|k| a.entries.iter().any(|e| &e.binary == *k)).collect::<Vec<_>>(),
                }),
                Err(e) => serde_json::json!({"path": f.path, "via": f.via, "error": e}),
            }
        })
        .collect();
    serde_json::json!({
        "hipk_wrappers": wrappers.iter().map(|w| serde_json::json!({
            "index": w.index, "wrapper_offset": w.wrapper_offset, "co_index": w.co_index,
            "lookup_key": w.lookup_key(), "metadata_offset": w.metadata_offset,
            "kernel_name": w.kernel_name, "search_paths": w.search_paths,
        })).collect::<Vec<_>>(),
        "archives_found": found, "archives_missing": l.missing, "archives_absent": l.absent,
    })
}

/// Text form of [`archive_json`] or [`host_json`].
pub fn print_text(out: &mut String, v: &serde_json::Value) {
    use std::fmt::Write as _;
    let s = |x: &serde_json::Value| match x {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".into(),
        x => x.to_string(),
    };
    let a = &v["archive"];
    if a.is_object() {
        let _ = writeln!(
            out,
            "  kpack v{}, storage {}, group {}, family {}, arches {}, {} blob(s), TOC at {:#x}",
            a["version"],
            s(&a["storage"]),
            s(&a["group_name"]),
            s(&a["gfx_arch_family"]),
            s(&a["gfx_arches"]),
            a["blobs"],
            a["toc_offset"].as_u64().unwrap_or(0)
        );
        for e in a["entries"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "  entry {}@{} ordinal {} type {} size {} stored {}",
                s(&e["binary"]),
                s(&e["arch"]),
                e["ordinal"],
                s(&e["type"]),
                s(&e["size"]),
                s(&e["stored_size"])
            );
        }
        for n in a["not_code_objects"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "  blob {}: not a code object or bundle: {}",
                n["ordinal"],
                s(&n["error"])
            );
        }
        return;
    }
    let _ = writeln!(
        out,
        "  kpack-split (HIPK): device code is in .kpack archives"
    );
    for w in v["hipk_wrappers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  wrapper {} at {:#x}: key {} (metadata at {:#x}), search paths {}",
            w["index"],
            w["wrapper_offset"].as_u64().unwrap_or(0),
            s(&w["lookup_key"]),
            w["metadata_offset"].as_u64().unwrap_or(0),
            s(&w["search_paths"])
        );
    }
    for f in v["archives_found"].as_array().into_iter().flatten() {
        let _ = match f.get("error") {
            Some(e) => writeln!(
                out,
                "  archive {} ({}): unreadable: {}",
                s(&f["path"]),
                s(&f["via"]),
                s(e)
            ),
            None => writeln!(
                out,
                "  archive {} ({}): arches {}, holds {}",
                s(&f["path"]),
                s(&f["via"]),
                s(&f["gfx_arches"]),
                s(&f["holds"])
            ),
        };
    }
    for m in v["archives_missing"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  not found: {}", s(m));
    }
    for m in v["archives_absent"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  absent (skipped by the loader): {}", s(m));
    }
}

/// True when `path` names a file that starts with the `KPAK` magic (the main job then runs as
/// `--fatbin`: an archive holds many code objects).
pub fn is_archive(path: Option<&Path>) -> bool {
    let mut head = [0u8; 4];
    // Only a regular file is peeked at: reading a pipe would take its first bytes.
    path.filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .and_then(|p| std::fs::File::open(p).ok())
        .is_some_and(|mut f| {
            std::io::Read::read_exact(&mut f, &mut head).is_ok() && kpack::is_kpack(&head)
        })
}
