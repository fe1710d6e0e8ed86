//! `sqtt-patch extract FILE -o DIR`: writes every embedded AMDGPU code object of a bundle or host
//! binary (or the bare code object itself) as `DIR/<bundle-index>-<entry id sanitized>.co`, and
//! every TOC entry of a kpack archive as `DIR/<ordinal>-<binary@arch sanitized>.co`. Each file
//! is written atomically ([`crate::output::write`]); every name is checked first.

use anyhow::Context;
use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::container::open_listing;

/// Arguments of `sqtt-patch extract`.
#[derive(clap::Args)]
pub struct ExtractArgs {
    /// Input file: code object, offload bundle (plain or CCOB), kpack archive or host ELF.
    pub file: std::path::PathBuf,
    /// Output directory (created when missing).
    #[arg(short, long)]
    pub output: std::path::PathBuf,
    /// Extract the entries that load and name each one that does not (bad input otherwise:
    /// nothing is extracted).
    #[arg(long)]
    pub skip_bad_entries: bool,
}

/// Why the embedded code object `e` cannot be extracted or described, `None` when it loads:
/// the sentence names where it is (bundle, entry index, id and file offset, as
/// [`hsaco::container::Embedded::location`]) and its size, then the loader's reason
/// ([`hsaco::container::code_object_problem`], else [`hsaco::CodeObject::parse`]'s error, whose
/// offsets count from the entry's start). Shared by `extract` and `info` so that both name a
/// broken entry in the same words.
pub(crate) fn load_problem(e: &hsaco::container::Embedded) -> Option<String> {
    let at = match e.location() {
        at if at.is_empty() => "the code object".to_string(),
        at => format!("{} ({} bytes)", at.escape_debug(), e.data.len()),
    };
    if let Some(why) = hsaco::container::code_object_problem(&e.data) {
        return Some(format!("{at} is not an AMDGPU code object: {why}"));
    }
    let err = hsaco::CodeObject::parse(&e.data).err()?;
    let from = match e.id.is_empty() {
        true => "",
        false => " (offsets count from the entry's start)",
    };
    Some(format!("{at} cannot be loaded{from}: {err}"))
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: ExtractArgs) -> anyhow::Result<i32> {
    let name = args.file.display().to_string();
    let bytes =
        crate::sniff::read_input(&args.file).with_context(|| format!("{name}: cannot read"))?;
    if hsaco::kpack::is_kpack(&bytes) {
        return extract_archive(&name, &bytes, &args.output);
    }
    let hipk = crate::kpack::wrappers_of(&name, &bytes[..])?;
    if !hipk.is_empty() {
        let l = crate::kpack::find_archives(
            &args.file,
            &hipk,
            &[],
            &crate::kpack::KpackEnv::from_env(),
        );
        let found: Vec<String> = l
            .found
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        anyhow::bail!(
            "{name}: kpack-split (HIPK) host binary: its code objects are in .kpack archives ({}); extract those",
            match found.is_empty() {
                true => "none found: see `sqtt-patch info`".to_string(),
                false => found.join(", "),
            }
        );
    }
    let l = open_listing(&bytes, DEFAULT_DECOMPRESS_LIMIT)
        .with_context(|| format!("{name}: cannot parse"))?;
    // An entry whose id is malformed is not taken for a code object, but is named; an empty
    // AMDGPU entry is bad input (below).
    let mut bad: Vec<String> = Vec::new();
    for m in &l.malformed {
        let at = m.location().escape_debug().to_string();
        match m.size {
            0 => bad.push(format!("{at} (0 bytes): {}", m.why)),
            n => eprintln!(
                "sqtt-patch: {name}: warning: {at} ({n} bytes) not extracted: {}",
                m.why
            ),
        }
    }
    // An entry that should be a code object and is not (an entry offset pointing at other
    // bytes of the bundle, an entry size cut short), or a bare code object that does not load,
    // is bad input: it is loaded as every other command loads it, and nothing is written, as
    // for any other error, unless --skip-bad-entries asks for the others (each bad one named).
    let mut cos = l.objects;
    cos.retain(|e| match load_problem(e) {
        Some(why) => {
            bad.push(why);
            false
        }
        None => true,
    });
    if !bad.is_empty() && !args.skip_bad_entries {
        let hint = match cos.len() {
            0 => String::new(),
            n => format!(" (--skip-bad-entries extracts the {n} code object(s) that load)"),
        };
        anyhow::bail!("{name}: {}; nothing extracted{hint}", bad.join("; "));
    }
    for why in &bad {
        eprintln!("sqtt-patch: {name}: warning: not extracted (--skip-bad-entries): {why}");
    }
    if cos.is_empty() {
        let is = crate::sniff::describe(&bytes).unwrap_or_default();
        anyhow::bail!("{name}: no embedded code object to extract ({is})");
    }
    let files = cos
        .iter()
        .map(|e| (e.file_name(), e.data.as_slice()))
        .collect();
    write_files(&args.output, files)
}

/// Writes `files` (name, bytes) into `dir` (created when missing) as every output is written
/// (`output.rs`, issue 32): every destination is checked before the first is written (a name
/// taken by a directory, say), and each file goes through a temporary file renamed over its
/// name when complete, so that a write error leaves no partial file. A directory this run
/// created is removed again when nothing could be written into it. Prints the list of files.
fn write_files(dir: &std::path::Path, files: Vec<(String, &[u8])>) -> anyhow::Result<i32> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("-o {}: not a directory", dir.display());
    }
    let created = !dir.exists();
    std::fs::create_dir_all(dir)
        .with_context(|| format!("-o {}: cannot create the directory", dir.display()))?;
    let mut written = 0;
    let res = (|| {
        let mut dests = Vec::new();
        for (name, data) in &files {
            dests.push((crate::output::check("-o", &dir.join(name))?, *data));
        }
        let mut report = String::new();
        for (d, data) in dests {
            crate::output::write(&d, data, None)?;
            written += 1;
            report.push_str(&format!("{} ({} bytes)\n", d.path.display(), data.len()));
        }
        Ok(report)
    })();
    match res {
        Ok(report) => crate::cmd_patch::write_stdout(&report),
        Err(e) => {
            if created && written == 0 {
                // Only an empty directory goes (remove_dir refuses any other).
                let _ = std::fs::remove_dir(dir);
            }
            Err(e)
        }
    }
}

/// Writes every TOC entry of a kpack archive (its blob, decompressed) to `dir`.
fn extract_archive(name: &str, bytes: &[u8], dir: &std::path::Path) -> anyhow::Result<i32> {
    let a = hsaco::kpack::read(bytes, DEFAULT_DECOMPRESS_LIMIT)
        .with_context(|| format!("{name}: cannot parse"))?;
    if a.entries.is_empty() {
        anyhow::bail!("{name}: no entry to extract (an empty kpack table of contents)");
    }
    let mut files = Vec::new();
    for e in &a.entries {
        let data = &a.blobs[e.ordinal];
        let id = hsaco::container::Embedded {
            bundle_index: e.ordinal,
            id: e.label(),
            entry_index: 0,
            entry_offset: 0,
            bundle_offset: 0,
            storage: None,
            wrapper_offset: None,
            data: Vec::new(),
        };
        files.push((id.file_name(), data.as_slice()));
    }
    write_files(dir, files)
}
