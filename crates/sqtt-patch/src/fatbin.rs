//! `sqtt-patch --fatbin IN -o OUT`: instruments every code object inside an offload bundle file
//! (plain or CCOB v1/v2/v3, zlib or zstd) or an x86-64 host executable / shared library with
//! HIP fat binaries (`.hip_fatbin` + `.hipFatBinSegment`, classic and new offload driver).
//!
//! Every selected code object goes through [`crate::cmd_patch::patch_code_object`] (rewrite and
//! independent verification), in parallel with rayon; bundles are rebuilt in their input format
//! and the host ELF is written back in place or append-only ([`hsaco::hostwrite::HostWriter`]).
//!
//! Memory (issues #6 and #15): a regular input file is read by offset
//! ([`hsaco::source::FileSource`]), never whole: its ELF headers, wrappers and relocations, then
//! one bundle at a time (a pipe or a device is read whole). Bundles are processed one at a time
//! and the output is streamed to its file, unchanged ranges copied from the input in chunks. A
//! bundle's bytes are read, then opened without copying its entries ([`hsaco::bundle::open`]:
//! borrowed from those bytes when plain, one decompressed buffer when compressed); only the
//! entries that changed are held as new buffers; the rebuilt plain bundle is written, the
//! entries and the bundle's bytes dropped, then it is compressed if needed and handed to the
//! writer, which writes it and drops it before the next bundle. Peak: about three times the
//! largest decompressed bundle plus the rewriter's working set. Measurements in
//! `docs/fatbin.md`.

use crate::exit;
use std::collections::BTreeMap;
use std::io::Cursor;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use hsaco::bundle::{self, DEFAULT_DECOMPRESS_LIMIT};
use hsaco::hostwrite::{self, BundleFormat, BundleLocation, HostWriteMode, HostWriter, Output};
use hsaco::source::{FileSource, Source};
use rayon::prelude::*;
use serde::Serialize;
use sqtt_rewrite::config::Options;
use sqtt_rewrite::rewrite::{Report, Status};
use sqtt_rewrite::timings::Stage;

use crate::cmd_patch::{self, PatchArgs};
use crate::output;
use crate::progress::Progress;

/// Bytes read from the start of an input to tell what it is: an ELF64 header (64 bytes) holds
/// the ELF magic and `e_machine`; a bundle magic is 24 bytes.
const ELF_MAGIC_AND_MORE: u64 = 64;

/// `--offload-arch` style target filter. An entry matches a filter item when the item equals
/// the entry's target ID (the part of the bundle entry id after `amdgcn-amd-amdhsa--`), or names
/// the same processor and every feature setting it lists (`gfx90a:xnack+`) appears in the
/// entry's target ID. An empty filter matches every entry.
#[derive(Debug, Clone, Default)]
pub struct ArchFilter {
    items: Vec<String>,
}

impl ArchFilter {
    /// Builds a filter. Errors: an item that is not `gfx<...>` or `gfx<...>-generic` optionally
    /// followed by `:feature+`/`:feature-` settings, or whose processor is not one of
    /// [`amdgpu_isa::Target::all`] (a typo would otherwise select nothing).
    pub fn new(items: &[String]) -> Result<ArchFilter> {
        for i in items {
            let mut parts = i.split(':');
            let proc_ok = parts.next().is_some_and(|p| {
                p.starts_with("gfx")
                    && p.len() > 3
                    && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
            // Target features of AMDGPU target IDs: `xnack` and `sramecc`, each `+` or `-`
            // (AMDGPUUsage, "Target Features"); any other name selects nothing.
            let feats_ok =
                parts.all(|f| matches!(f, "xnack+" | "xnack-" | "sramecc+" | "sramecc-"));
            if !proc_ok || !feats_ok {
                bail!("--offload-arch {i:?}: expected a target such as gfx942 or gfx90a:xnack+ (features: xnack+, xnack-, sramecc+, sramecc-)");
            }
            if amdgpu_isa::Target::from_name(i).is_none() {
                let known: Vec<&str> = amdgpu_isa::Target::all().map(|t| t.name()).collect();
                bail!(
                    "--offload-arch {i:?}: not a processor sqtt-patch supports ({})",
                    known.join(", ")
                );
            }
        }
        Ok(ArchFilter {
            items: items.to_vec(),
        })
    }

    /// True when a device of a selected target loads a kpack entry of architecture `arch`: the
    /// filter is empty, `arch` is selected ([`ArchFilter::matches`]), or `arch` is an item or
    /// one of its feature subsets ([`hsaco::kpack::hipk::compatible_targets`]: a `gfx942`
    /// entry serves a `gfx942:xnack-` device).
    pub fn loads(&self, arch: &str) -> bool {
        self.matches(arch)
            || self.items.iter().any(|i| {
                hsaco::kpack::hipk::compatible_targets(i)
                    .iter()
                    .any(|t| t == arch)
            })
    }

    /// True when the entry with this target ID is selected.
    pub fn matches(&self, target_id: &str) -> bool {
        if self.items.is_empty() {
            return true;
        }
        let mut have = target_id.split(':');
        let proc = have.next().unwrap_or_default();
        let feats: Vec<&str> = have.collect();
        self.items.iter().any(|item| {
            if item == target_id {
                return true;
            }
            let mut want = item.split(':');
            want.next() == Some(proc) && want.all(|f| feats.contains(&f))
        })
    }
}

/// Result of one code object of a container.
#[derive(Debug, Serialize)]
pub struct ObjectOutcome {
    /// Index of the bundle in the container (file order; 0 for a bare code object).
    pub bundle_index: usize,
    /// Bundle entry id (`hipv4-amdgcn-amd-amdhsa--gfx942`; empty for a bare code object).
    pub entry_id: String,
    /// Target ID of the entry (`gfx942:sramecc+:xnack-`).
    pub target: String,
    /// What `patch_code_object` did (or, for an object it could not parse, status
    /// `failed_closed` with the error as reason).
    pub report: Report,
    /// True when the rewrite was rejected by the verifier (the object was kept unchanged).
    pub verifier_rejected: bool,
    /// True for an entry of a kpack archive (`bundle_index` is then the blob's ordinal): its
    /// lines say `kpack entry N`, not `bundle N` (session-14 tester).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_kpack: bool,
}

impl ObjectOutcome {
    /// Where the object sits: `bundle 3`, or `kpack entry 3`.
    pub fn place(&self) -> String {
        let what = if self.in_kpack {
            "kpack entry"
        } else {
            "bundle"
        };
        format!("{what} {}", self.bundle_index)
    }
}

/// Result of [`instrument_container`] (the rest of a [`ContainerReport`] is available from
/// [`instrument_container_into`]).
#[derive(Debug)]
pub struct ContainerOutcome {
    /// The rewritten container (equal to the input when nothing changed).
    pub bytes: Vec<u8>,
    /// Every selected code object, in container order.
    pub objects: Vec<ObjectOutcome>,
}

/// Result of [`instrument_container_into`]: a [`ContainerOutcome`] whose bytes went to the
/// output.
#[derive(Debug)]
pub struct ContainerReport {
    /// Every selected code object, in container order.
    pub objects: Vec<ObjectOutcome>,
    /// AMDGPU code objects left out by the target filter (copied unchanged).
    pub filtered_out: usize,
    /// How a host ELF was written (`None` for bundle files and bare code objects).
    pub host_write: Option<HostWriteMode>,
    /// Odd fields of the container itself, kept as they are (a host's fat binary wrapper
    /// version other than 1: [`HostImage::warnings`](hsaco::hostwrite::HostImage)).
    pub warnings: Vec<String>,
}

/// Instruments every code object of a bundle file, a host ELF or a bare code object with the
/// same options, producing the output in memory (the batch mode and tests; the CLI streams with
/// [`instrument_container_into`]). Errors: as [`instrument_container_into`].
pub fn instrument_container(
    name: &str,
    input: &[u8],
    opts: &Options,
    filter: &ArchFilter,
) -> Result<ContainerOutcome> {
    let mut out = Cursor::new(Vec::new());
    let r = instrument_container_into(
        name,
        input,
        opts,
        filter,
        BundleFormat::Keep,
        &Progress::hidden(),
        &mut out,
    )?;
    Ok(ContainerOutcome {
        bytes: out.into_inner(),
        objects: r.objects,
    })
}

/// Instruments every code object of `input` (named `name` in messages) and writes the result
/// to `out` (expected empty; a file or a `Cursor<Vec<u8>>`): a bundle file (one or more
/// concatenated plain/CCOB bundles), an x86-64 host ELF, or a bare code object. Objects passing
/// `filter` go through `patch_code_object` in parallel; a failed-closed or unparsable object
/// stays original and is reported. Changed bundles are rebuilt in `format`; unchanged bundles
/// keep their bytes. Bundles are processed and written one at a time (see the module
/// documentation for the memory bound). `input` is read by offset ([`Source`]): only the
/// headers and one bundle at a time are read, and unchanged ranges are copied to `out` in
/// chunks. Errors (the output is then incomplete: callers discard it): container structure
/// errors of `hsaco` (missing `.hip_fatbin`, wrapper pointing outside the file, truncated
/// bundles, bad CCOB), each naming the file and the offset; input and output I/O.
pub fn instrument_container_into<S: Source + Sync + ?Sized, W: Output>(
    name: &str,
    input: &S,
    opts: &Options,
    filter: &ArchFilter,
    format: BundleFormat,
    progress: &Progress,
    out: &mut W,
) -> Result<ContainerReport> {
    let mut objects = Vec::new();
    let mut filtered_out = 0;
    let size = input.size();
    let head = input
        .read_at(0, size.min(ELF_MAGIC_AND_MORE), "file header")
        .with_context(|| format!("{name}: cannot read"))?;
    if hsaco::kpack::is_kpack(&head) {
        let data = crate::timings::time(Stage::Load, || input.read_at(0, size, "kpack archive"))
            .with_context(|| format!("{name}: cannot read"))?;
        let r = crate::kpack::instrument_archive(name, &data, opts, filter, progress)?;
        out.write_all(&r.bytes)
            .with_context(|| format!("{name}: cannot write the output"))?;
        return Ok(ContainerReport {
            objects: r.objects,
            filtered_out: r.filtered_out,
            host_write: None,
            warnings: Vec::new(),
        });
    }
    if bundle::is_bundle(&head) {
        let locs = hostwrite::locate_bundles(input, 0..size).with_context(|| name.to_string())?;
        pipelined(
            locs.len(),
            |bi| process_bundle(name, bi, input, &locs[bi], opts, filter, progress),
            |bi, r| {
                let loc = &locs[bi];
                let r = r.rebuild(name, bi, format)?;
                objects.extend(r.objects);
                filtered_out += r.filtered_out;
                crate::timings::time(Stage::Write, || match &r.bytes {
                    Some(b) => hostwrite::push_bundle_file(out, b),
                    None => hostwrite::copy_bundle_file(out, input, loc),
                })
                .with_context(|| format!("{name}: cannot write bundle {bi}"))?;
                progress.bytes_done(loc.extent);
                Ok(())
            },
        )?;
        return Ok(ContainerReport {
            objects,
            filtered_out,
            host_write: None,
            warnings: Vec::new(),
        });
    }
    let e = hsaco::elf::Elf::read(input).map_err(|e| {
        let what = match (&e, head.starts_with(b"\x7fELF")) {
            // Not corrupt: a class we do not read (worded as every command words it).
            (hsaco::Error::Elf32, _) => name.to_string(),
            (_, true) => format!("{name}: a corrupt or truncated ELF file"),
            (_, false) => format!("{name}: not a bundle or ELF"),
        };
        anyhow::Error::new(e).context(what)
    })?;
    if e.header.e_machine == hsaco::elf::EM_AMDGPU {
        // A code object is rewritten in memory: read it whole.
        let data = input
            .read_at(0, size, "code object")
            .with_context(|| format!("{name}: cannot read"))?;
        return bare_object(name, &data, opts, filter, progress, out);
    }
    // hsaco's message says "not a HIP host binary" for an ELF without `.hip_fatbin`.
    let img = hostwrite::scan_host(input).with_context(|| name.to_string())?;
    // A structure of the input found malformed only while rewriting it (a `.dynsym` name
    // outside `.dynstr`) is the input's fault, not a failure to write.
    let cannot = |e: hsaco::Error| {
        let what = match e {
            hsaco::Error::Malformed { .. } => "malformed host ELF (found while rewriting it)",
            _ => "cannot write the host ELF",
        };
        anyhow::Error::new(e).context(format!("{name}: {what}"))
    };
    let mut w = HostWriter::new(input, &img, out).map_err(cannot)?;
    pipelined(
        img.bundles.len(),
        |bi| {
            process_bundle(
                name,
                bi,
                input,
                &img.bundles[bi].location,
                opts,
                filter,
                progress,
            )
        },
        |bi, r| {
            let r = r.rebuild(name, bi, format)?;
            objects.extend(r.objects);
            filtered_out += r.filtered_out;
            crate::timings::time(Stage::Write, || w.push(r.bytes.as_deref())).map_err(cannot)?;
            progress.bytes_done(img.bundles[bi].location.extent);
            Ok(())
        },
    )?;
    let (_, mode) = crate::timings::time(Stage::Write, || w.finish()).map_err(cannot)?;
    Ok(ContainerReport {
        objects,
        filtered_out,
        host_write: Some(mode),
        warnings: img.warnings,
    })
}

/// Runs `produce` for items `0..n` in order on a second thread while `consume` takes the
/// results in order on this one, one item behind: item `i`'s compression and writing overlap
/// with item `i + 1`'s instrumentation. The channel is a rendezvous, so one finished item waits
/// at most and memory grows by one bundle at most. The first error of either side stops both
/// and is returned.
///
/// On a rayon worker (`batch` processes its inputs in parallel) the items run one after the
/// other on this thread instead: a worker blocked waiting for the producer, whose instrumentation
/// needs rayon workers itself, deadlocks the pool once every worker waits.
fn pipelined<T: Send>(
    n: usize,
    produce: impl Fn(usize) -> Result<T> + Sync,
    mut consume: impl FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    if rayon::current_thread_index().is_some() {
        for i in 0..n {
            consume(i, produce(i)?)?;
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<T>>(0);
        let produce = &produce;
        scope.spawn(move || {
            for i in 0..n {
                let r = produce(i);
                let failed = r.is_err();
                // A closed channel: the consumer stopped on an error.
                if tx.send(r).is_err() || failed {
                    break;
                }
            }
        });
        let mut consumed = || -> Result<()> {
            for i in 0..n {
                match rx.recv() {
                    Ok(r) => consume(i, r?)?,
                    Err(_) => bail!("internal error: bundle {i} was not produced"),
                }
            }
            Ok(())
        };
        let r = consumed();
        // Unblocks a producer waiting to hand over its next item, so the scope can end.
        drop(rx);
        r
    })
}

/// A bundle whose entries were instrumented, before its rebuild ([`Processed::rebuild`]).
struct Processed {
    /// The new plain bundle and what its storing needs of the input, `None` when no entry
    /// changed.
    plain: Option<crate::fatbin_store::Rebuilt>,
    objects: Vec<ObjectOutcome>,
    filtered_out: usize,
}

impl Processed {
    /// Stores the new plain bundle in `format` (compressed like the input, or as asked).
    /// Errors: a bundle too large for the CCOB version's size fields, naming bundle `bi`.
    fn rebuild(self, name: &str, bi: usize, format: BundleFormat) -> Result<BundleResult> {
        let bytes = match self.plain {
            None => None,
            Some(r) => Some(crate::timings::time(Stage::Write, || {
                crate::fatbin_store::store(name, bi, r, format)
            })?),
        };
        Ok(BundleResult {
            bytes,
            objects: self.objects,
            filtered_out: self.filtered_out,
        })
    }
}

struct BundleResult {
    /// Rebuilt bundle, `None` when no entry changed.
    bytes: Option<Vec<u8>>,
    objects: Vec<ObjectOutcome>,
    filtered_out: usize,
}

/// One entry after processing: new contents when changed, the outcome (None: not selected),
/// and whether the target filter left it out.
type EntryResult = (Option<Vec<u8>>, Option<ObjectOutcome>, bool);

/// Reads bundle `bi` at `loc` of `input`, instruments its selected code objects in parallel
/// and builds the new plain bundle when one changed (stored by [`Processed::rebuild`]). The
/// input bundle's bytes are held only here.
fn process_bundle<S: Source + ?Sized>(
    name: &str,
    bi: usize,
    input: &S,
    loc: &BundleLocation,
    opts: &Options,
    filter: &ArchFilter,
    progress: &Progress,
) -> Result<Processed> {
    let raw = crate::timings::time(Stage::Load, || {
        input.read_at(loc.offset, loc.extent, "offload bundle")
    })
    .with_context(|| format!("{name}: bundle {bi}: cannot read"))?;
    let b = crate::timings::time(Stage::Load, || {
        bundle::open(&raw, loc.offset, DEFAULT_DECOMPRESS_LIMIT)
    })
    .with_context(|| format!("{name}: bundle {bi}"))?;
    let selected = b
        .entries
        .iter()
        .filter(|en| {
            en.is_amdgcn()
                && !b.data(en).is_empty()
                && filter.matches(en.target_id().unwrap_or_default())
        })
        .count();
    progress.found(selected as u64);
    let results: Vec<EntryResult> = b
        .entries
        .par_iter()
        .enumerate()
        .map(|(ei, en)| -> Result<EntryResult> {
            let data = b.data(en);
            if let Some(why) = bundle::entry_problem(&en.id, data) {
                let o = ObjectOutcome {
                    bundle_index: bi,
                    entry_id: en.id.escape_debug().to_string(),
                    target: String::new(),
                    report: malformed_entry(&b, bi, ei, en, &why),
                    verifier_rejected: false,
                    in_kpack: false,
                };
                return Ok((None, Some(o), false));
            }
            let target = en.target_id().unwrap_or_default().to_string();
            if !en.is_amdgcn() || data.is_empty() {
                return Ok((None, None, false));
            }
            if !filter.matches(&target) {
                return Ok((None, None, true));
            }
            let what = format!("{name}: bundle {bi} entry {}", en.id);
            let (bytes, report, verifier_rejected) =
                match cmd_patch::patch_code_object(&what, data, opts) {
                    // An unchanged copy is dropped here: the input bytes stay the entry.
                    Ok(p) => (
                        (p.bytes != data).then_some(p.bytes),
                        p.report,
                        p.verifier_rejected,
                    ),
                    // Instrumenting twice is a usage error for the whole input, as for one code
                    // object: nothing is written unless `--force` says so.
                    Err(err) if already_instrumented(&err) => return Err(err),
                    Err(err) => (None, unparsable(&target, &err), false),
                };
            progress.objects_done(1);
            let mut report = report;
            let at = entry_at(&b, en);
            if let Some(why) = bundle::id_processor_mismatch(&en.id, &report.target) {
                report
                    .notes
                    .push(format!("bundle {bi} entry {ei} {at}: {why}"));
            }
            // Standard output has one line per object; the warning on standard error says
            // where the entry is, as for a malformed one (session-22 fresh tester).
            if report.status == Status::FailedClosed {
                // The first reason; the report lists them all.
                let more = match report.reasons.len() {
                    0 | 1 => String::new(),
                    n => format!(" (and {} more reason(s): --report lists them)", n - 1),
                };
                report.notes.push(format!(
                    "bundle {bi} entry {ei} {at} left unchanged (failed closed; offsets in the \
                     reason count from the entry's start): {}{more}",
                    report.reasons.first().map_or("", String::as_str)
                ));
            }
            let o = ObjectOutcome {
                bundle_index: bi,
                entry_id: en.id.clone(),
                target,
                report,
                verifier_rejected,
                in_kpack: false,
            };
            Ok((bytes, Some(o), false))
        })
        .collect::<Result<_>>()?;
    let changed = results.iter().any(|r| r.0.is_some());
    let filtered_out = results.iter().filter(|r| r.2).count();
    if !changed {
        return Ok(Processed {
            plain: None,
            objects: results.into_iter().filter_map(|r| r.1).collect(),
            filtered_out,
        });
    }
    let plain = {
        let entries: Vec<(&str, &[u8])> = results
            .iter()
            .zip(&b.entries)
            .map(|(r, en)| (en.id.as_str(), r.0.as_deref().unwrap_or_else(|| b.data(en))))
            .collect();
        bundle::write_plain(&entries)
    };
    let rebuilt = crate::fatbin_store::Rebuilt::new(plain, &b, &raw);
    // The changed entries and the decompressed input are freed here, before compressing.
    Ok(Processed {
        plain: Some(rebuilt),
        objects: results.into_iter().filter_map(|r| r.1).collect(),
        filtered_out,
    })
}

/// Whether `err` is the rewriter's "already instrumented" refusal (an input sqtt-patch wrote,
/// given again without `--force`).
pub(crate) fn already_instrumented(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        matches!(
            c.downcast_ref::<sqtt_rewrite::rewrite::RewriteError>(),
            Some(sqtt_rewrite::rewrite::RewriteError::AlreadyInstrumented(_))
        )
    })
}

/// Report of bundle entry `ei` of bundle `bi` whose id is malformed (`why`, from
/// [`bundle::entry_problem`]; or an empty AMDGPU entry): failed closed, kept unchanged, with a warning naming the entry
/// and its offset (so `--strict` refuses the input, as for an entry that cannot be read). Such
/// an entry used to be dropped silently (session-20 fresh tester).
fn malformed_entry(
    b: &bundle::OpenBundle,
    bi: usize,
    ei: usize,
    en: &bundle::EntryRange,
    why: &str,
) -> Report {
    let at = entry_at(b, en);
    let mut r = Report::new(String::new(), 0);
    r.status = Status::FailedClosed;
    r.reasons = vec![format!("not read as a code object: {why}")];
    r.notes = vec![format!(
        "bundle {bi} entry {ei} {at} ({} bytes) kept unchanged, not instrumented: {why}",
        en.size
    )];
    r
}

/// Where entry `en` of bundle `b` is: its file offset, or its offset in a compressed bundle.
fn entry_at(b: &bundle::OpenBundle, en: &bundle::EntryRange) -> String {
    match b.storage {
        hsaco::bundle::Storage::Plain => format!("at file offset {:#x}", b.offset + en.offset),
        hsaco::bundle::Storage::Compressed(_) => format!(
            "at offset {:#x} of the compressed bundle at file offset {:#x} (once decompressed)",
            en.offset, b.offset
        ),
    }
}

/// Report of an object `patch_code_object` could not read: failed closed, kept unchanged.
pub(crate) fn unparsable(target: &str, err: &anyhow::Error) -> Report {
    let name = target.split(':').next().unwrap_or_default().to_string();
    let mut r = Report::new(name, 0);
    r.status = Status::FailedClosed;
    r.reasons = vec![format!("cannot instrument: {err:#}")];
    r
}

fn bare_object<W: Output>(
    name: &str,
    input: &[u8],
    opts: &Options,
    filter: &ArchFilter,
    progress: &Progress,
    out: &mut W,
) -> Result<ContainerReport> {
    let co = hsaco::CodeObject::parse(input).with_context(|| name.to_string())?;
    progress.bytes_done(input.len() as u64);
    let target = co.target.target_id();
    let write = |out: &mut W, bytes: &[u8]| -> Result<()> {
        out.write_all(bytes)
            .with_context(|| format!("{name}: cannot write the output"))
    };
    if !filter.matches(&target) {
        write(out, input)?;
        return Ok(ContainerReport {
            objects: Vec::new(),
            filtered_out: 1,
            host_write: None,
            warnings: Vec::new(),
        });
    }
    progress.found(1);
    let p = cmd_patch::patch_code_object(name, input, opts)?;
    progress.objects_done(1);
    write(out, &p.bytes)?;
    Ok(ContainerReport {
        objects: vec![ObjectOutcome {
            bundle_index: 0,
            entry_id: String::new(),
            target,
            report: p.report,
            verifier_rejected: p.verifier_rejected,
            in_kpack: false,
        }],
        filtered_out: 0,
        host_write: None,
        warnings: Vec::new(),
    })
}

/// The part of [`run`] that reads the input: checks its kind from its first bytes, then streams
/// the instrumented container into a temporary file for `dest` (see [`output::Sink`]), with
/// progress on stderr. Returns the report and the uncommitted output. Errors: an input that is
/// not a bundle, an x86-64 host or an AMDGPU code object (named, with what it is); those of
/// [`instrument_container_into`].
fn instrument_file<S: Source + Sync + ?Sized>(
    name: &str,
    src: &S,
    opts: &Options,
    filter: &ArchFilter,
    format: BundleFormat,
    dest: &output::Dest,
) -> Result<(ContainerReport, output::Sink)> {
    let size = src.size();
    let cannot_read = || format!("{name}: cannot read");
    let head = src
        .read_at(0, size.min(ELF_MAGIC_AND_MORE), "file header")
        .with_context(cannot_read)?;
    if crate::sniff::kind(&head).is_none() && !hsaco::kpack::is_kpack(&head) {
        // Only for the message: read the whole file, as `describe` counts its bytes.
        let all = src.read_at(0, size, "file").with_context(cannot_read)?;
        let is = crate::sniff::describe(&all).unwrap_or_default();
        bail!("{name}: {is}; --fatbin reads offload bundles, kpack archives, x86-64 host binaries and AMDGPU code objects");
    }
    let progress = Progress::new(size);
    // The output is streamed into a temporary file, renamed over (or copied into) OUT only on
    // success; dropped, and so deleted, on error or with --strict.
    let mut sink = output::Sink::new(dest)?;
    let outcome =
        instrument_container_into(name, src, opts, filter, format, &progress, sink.file());
    progress.finish();
    Ok((outcome?, sink))
}

/// How a warning names one code object: `bundle 0 hipv4-amdgcn-amd-amdhsa--gfx1100`, or
/// `code object` for a host file's only object outside a bundle.
fn object_label(o: &ObjectOutcome) -> String {
    if o.entry_id.is_empty() {
        "code object".to_string()
    } else {
        format!(
            "{} {}",
            o.place(),
            crate::output::terminal_safe(&o.entry_id)
        )
    }
}

/// `1 code object(s): bundle 0 hipv4-...-gfx1100`; past three objects the rest are counted
/// (`5 code object(s): A, B, C and 2 more`).
fn objects_text(objects: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = format!(
        "{} code object(s): {}",
        objects.len(),
        objects[..objects.len().min(SHOWN)].join(", ")
    );
    if objects.len() > SHOWN {
        s += &format!(" and {} more", objects.len() - SHOWN);
    }
    s
}

/// One line per code object for stdout.
pub fn summary_line(o: &ObjectOutcome) -> String {
    let r = &o.report;
    let id = if o.entry_id.is_empty() {
        "code object".to_string()
    } else {
        o.entry_id.clone()
    };
    let inserted: u64 = r
        .functions
        .iter()
        .map(|f| u64::from(f.inserted_instructions))
        .sum();
    let status = match r.status {
        Status::Instrumented => format!(
            "instrumented: {}, +{inserted} instructions, {} sites skipped; coverage {}",
            crate::cmd_patch::code_size_text(r),
            r.skipped.len(),
            crate::cmd_patch::coverage_text(&r.coverage)
        ),
        Status::NothingToDo => crate::cmd_patch::report_status_text(r),
        Status::FailedClosed => format!(
            "{}left unchanged (failed closed): {}",
            if o.verifier_rejected {
                "VERIFIER REJECTED the rewrite; "
            } else {
                ""
            },
            r.reasons.join("; ")
        ),
    };
    format!("{} {id}: {status}", o.place())
}

#[derive(Serialize)]
struct JsonReport<'a> {
    input: String,
    output: String,
    host_write: Option<HostWriteMode>,
    filtered_out: usize,
    objects: &'a [ObjectOutcome],
    /// Archives of a kpack-split host binary: each input and where its instrumented copy went.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    kpack_archives: Vec<KpackArchive>,
}

#[derive(Serialize)]
struct KpackArchive {
    input: String,
    output: String,
}

/// Runs `--fatbin` mode: reads `args.input`, instruments it with [`instrument_container_into`]
/// (targets limited by `--offload-arch`), writes `args.output` through [`crate::output`], prints
/// one summary line per code object on stdout, the human reports (one block per bundle entry)
/// on stderr with `--report`, the merged JSON report to `--report-json`, and progress on stderr
/// when it is a terminal. Returns the exit code: [`exit::VERIFY`] when the verifier
/// rejected some rewrite (that object kept unchanged), else [`exit::STRICT`] with
/// `--strict` when any object failed closed, skipped a site or has unreadable DWARF, else [`exit::OK`].
/// With `--strict` and lost coverage nothing is written.
pub fn run(args: &PatchArgs) -> Result<i32> {
    let input = args
        .input
        .clone()
        .context("missing input file (usage: sqtt-patch --fatbin IN -o OUT)")?;
    let output = args.output.clone().context("missing -o OUT")?;
    let common = &args.common;
    let dest = cmd_patch::check_paths(
        &input,
        &output,
        common.report_json.as_deref(),
        &common.flags.regions,
    )?;
    let opts = cmd_patch::flag_options(&common.flags)?;
    cmd_patch::require_work(&opts, &[input.as_path()])?;
    let arch = &common.offload_arch;
    let filter = ArchFilter::new(arch)?;
    let name = input.display().to_string();
    let started = Instant::now();
    if common.timings {
        crate::timings::enable(true);
    }
    let format = if args.compress_bundles {
        BundleFormat::Compressed {
            version: 3,
            method: hsaco::bundle::Method::Zstd,
        }
    } else {
        BundleFormat::Keep
    };
    let cannot_read = || format!("{name}: cannot read");
    let file = std::fs::File::open(&input).with_context(cannot_read)?;
    // A regular file is read by offset (headers, then one bundle at a time); a pipe or a device
    // cannot be, and is read whole, up to the limit every command applies to streams.
    let regular = file.metadata().with_context(cannot_read)?.is_file();
    let (outcome, sink) = if regular {
        let src = FileSource::new(file).with_context(cannot_read)?;
        let hipk = crate::kpack::wrappers_of(&name, &src)?;
        if !hipk.is_empty() {
            return crate::kpack::run_host(args, &dest, &opts, &filter, &hipk, started);
        }
        instrument_file(&name, &src, &opts, &filter, format, &dest)?
    } else {
        drop(file);
        let bytes = crate::timings::time(Stage::Load, || crate::sniff::read_input(&input))
            .with_context(cannot_read)?;
        if !crate::kpack::wrappers_of(&name, &bytes[..])?.is_empty() {
            bail!("{name}: a kpack-split (HIPK) host binary read from a pipe or device: its archives are found relative to its path; give the file itself");
        }
        instrument_file(&name, &bytes[..], &opts, &filter, format, &dest)?
    };
    let commit = |json: Option<(&str, &std::path::Path)>| {
        output::commit_with_report(sink, Some(&input), json)
    };
    finish(args, &name, outcome, &[], started, commit)
}

/// The end of a `--fatbin` run once everything is instrumented in memory or in temporary
/// files: summary lines on stdout, reports, the `--strict` check, then `commit` (given the JSON
/// report, it writes every output and the report, all or nothing). `archives` lists
/// `(input, output)` kpack archives for the JSON report. Returns the exit code (see [`run`]).
pub(crate) fn finish(
    args: &PatchArgs,
    name: &str,
    outcome: ContainerReport,
    archives: &[(String, String)],
    started: Instant,
    commit: impl FnOnce(Option<(&str, &std::path::Path)>) -> Result<()>,
) -> Result<i32> {
    let common = &args.common;
    let arch = &common.offload_arch;
    let name = name.to_string();
    let output = args.output.clone().context("missing -o OUT")?;
    let mut lines = String::new();
    // Each distinct note once, naming the code objects it is about.
    let mut notes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for o in &outcome.objects {
        lines += &summary_line(o);
        lines.push('\n');
        if args.report {
            let what = if o.entry_id.is_empty() {
                name.clone()
            } else {
                format!("{name}: {} {}", o.place(), o.entry_id)
            };
            crate::output::write_stdout(&cmd_patch::render_report(&what, &o.report))?;
        }
        for n in &o.report.notes {
            notes.entry(n).or_default().push(object_label(o));
        }
    }
    for (n, objects) in notes {
        eprintln!(
            "sqtt-patch: {name}: warning ({}): {n}",
            objects_text(&objects)
        );
    }
    for w in &outcome.warnings {
        eprintln!("sqtt-patch: {name}: warning: {w}");
    }
    if !arch.is_empty() && outcome.objects.is_empty() {
        eprintln!(
            "sqtt-patch: {name}: warning: --offload-arch {} matched no code object; the output is an unchanged copy",
            arch.join(",")
        );
    }
    if outcome.filtered_out > 0 {
        lines += &format!(
            "{} code object(s) not selected by --offload-arch (copied unchanged)\n",
            outcome.filtered_out
        );
    }
    cmd_patch::write_stdout(&lines)?;
    // The report and the output are committed together: an interruption keeps both or neither.
    let _committing = crate::interrupt::Committing::begin();
    let mut json = None;
    if let Some(p) = &common.report_json {
        let j = JsonReport {
            input: name.clone(),
            output: output.display().to_string(),
            host_write: outcome.host_write,
            filtered_out: outcome.filtered_out,
            objects: &outcome.objects,
            kpack_archives: archives
                .iter()
                .map(|(i, o)| KpackArchive {
                    input: i.clone(),
                    output: o.clone(),
                })
                .collect(),
        };
        json = Some((serde_json::to_string_pretty(&j)? + "\n", p.as_path()));
    }
    let json = json.as_ref().map(|(text, p)| (text.as_str(), *p));
    let rejected = outcome.objects.iter().any(|o| o.verifier_rejected);
    let lost = outcome
        .objects
        .iter()
        .any(|o| cmd_patch::lost_coverage(&o.report));
    if common.strict && lost {
        output::write_report_if(json)?;
        eprintln!("sqtt-patch: {name}: --strict and some code object failed closed, skipped a site or has unreadable DWARF: nothing written");
        crate::timings::print_sum(&name, started);
        return Ok(if rejected { exit::VERIFY } else { exit::STRICT });
    }
    crate::timings::time(Stage::Write, || commit(json))?;
    crate::timings::print_sum(&name, started);
    if rejected {
        eprintln!("sqtt-patch: {name}: the verifier rejected some rewrites; those code objects were written unchanged");
        return Ok(exit::VERIFY);
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Items arrive in order; a producer error stops production at that item and is returned
    /// after the items before it were consumed; a consumer error stops the producer (no
    /// deadlock, no item produced more than one past the failing one).
    #[test]
    fn pipelined_keeps_order_and_stops_at_the_first_error() {
        let mut seen = Vec::new();
        pipelined(
            50,
            |i| Ok(i * 10),
            |i, v| {
                seen.push((i, v));
                Ok(())
            },
        )
        .expect("all items");
        assert_eq!(seen, (0..50).map(|i| (i, i * 10)).collect::<Vec<_>>());

        let produced = AtomicUsize::new(0);
        let mut consumed = Vec::new();
        let e = pipelined(
            50,
            |i| {
                produced.fetch_add(1, Ordering::SeqCst);
                if i == 3 {
                    bail!("bundle 3 is corrupt")
                }
                Ok(i)
            },
            |i, _| {
                consumed.push(i);
                Ok(())
            },
        )
        .expect_err("producer error");
        assert_eq!(e.to_string(), "bundle 3 is corrupt");
        assert_eq!(consumed, vec![0, 1, 2]);
        assert_eq!(produced.load(Ordering::SeqCst), 4);

        let produced = AtomicUsize::new(0);
        let e = pipelined(
            50,
            |i| {
                produced.fetch_add(1, Ordering::SeqCst);
                Ok(i)
            },
            |i, _| {
                if i == 5 {
                    bail!("disk full at bundle 5")
                }
                Ok(())
            },
        )
        .expect_err("consumer error");
        assert_eq!(e.to_string(), "disk full at bundle 5");
        assert!(produced.load(Ordering::SeqCst) <= 7, "producer ran on");
    }

    /// Called on every worker of a rayon pool at once (as `batch` does with its containers),
    /// with a producer that itself needs the pool (`par_iter`, as instrumenting a bundle's
    /// entries does): every call finishes. The pipeline blocked the workers in `recv` and
    /// deadlocked here (fresh tester, session 12: `batch fixtures/bundles` never ended).
    #[test]
    fn pipelined_on_rayon_workers_does_not_deadlock() {
        // The global pool, as in `batch`: the producer's `par_iter` runs there too. A deadlock
        // fails the test after a minute instead of hanging it.
        let calls = 2 * rayon::current_num_threads();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(run_on_workers(calls)));
        let sums = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("pipelined on rayon workers deadlocked");
        assert_eq!(
            sums,
            (0..calls).map(|k| 14850 + 300 * k).collect::<Vec<_>>()
        );
    }

    /// `calls` parallel [`pipelined`] runs whose producers use `par_iter`: their sums.
    fn run_on_workers(calls: usize) -> Vec<usize> {
        (0..calls)
            .into_par_iter()
            .map(|k| {
                let mut sum = 0;
                pipelined(
                    3,
                    |i| {
                        Ok((0..100usize)
                            .into_par_iter()
                            .map(|x| x * i + k)
                            .sum::<usize>())
                    },
                    |_, v| {
                        sum += v;
                        Ok(())
                    },
                )
                .expect("pipelined");
                sum
            })
            .collect()
    }
}
