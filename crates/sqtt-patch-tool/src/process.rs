//! One code object, from the bytes the application handed to the runtime to the bytes the
//! loader gets: hash, cache, the verified rewrite shared with the command line
//! ([`sqtt_pipeline::rewrite_and_verify`]), saved copies, the report line and the counts.

use crate::cache;
use crate::config::Config;
use crate::record::Record;
use crate::stats::Stats;
use serde::Serialize;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Where a code object came from (the entry it reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `hsa_code_object_reader_create_from_memory`.
    Memory,
    /// `hsa_code_object_reader_create_from_file`.
    File,
    /// `hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size`.
    FileSlice,
    /// `hsa_code_object_deserialize`.
    Deserialize,
}

/// The tool's state for the process's life.
pub struct State {
    config: Config,
    stats: Mutex<Stats>,
    report: Mutex<Option<std::fs::File>>,
    build: OnceLock<Option<String>>,
}

static STATE: OnceLock<State> = OnceLock::new();

/// Installs the configuration; false when one is already installed.
pub fn init(config: Config) -> bool {
    STATE
        .set(State {
            config,
            stats: Mutex::default(),
            report: Mutex::new(None),
            build: OnceLock::new(),
        })
        .is_ok()
}

/// A lock that survives a panic of another holder (the counts stay usable).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The summary line, when the tool is active.
pub fn summary() -> Option<String> {
    STATE.get().map(|s| lock(&s.stats).line())
}

/// Counts an object the loader got unchanged for a reason outside the rewrite.
pub fn count_unchanged(why: &str) {
    if let Some(s) = STATE.get() {
        lock(&s.stats).add_unchanged(why);
    }
}

/// The result of [`process`], finished by [`Outcome::finish`] once the loader answered.
pub struct Outcome {
    /// What the rewrite (or the cache) said.
    pub record: Record,
    /// The instrumented bytes, when there are any; they must live until the reader is destroyed.
    pub bytes: Option<Arc<[u8]>>,
    cached: bool,
    source: Source,
    input_sha256: String,
    size: usize,
}

/// One report line.
#[derive(Serialize)]
struct Line<'a> {
    tool: &'static str,
    source: Source,
    input_sha256: &'a str,
    size: usize,
    cached: bool,
    #[serde(flatten)]
    record: &'a Record,
}

/// Rewrites one code object (or takes it from the cache). `None` when the tool is not active.
pub fn process(source: Source, input: &[u8]) -> Option<Outcome> {
    let st = STATE.get()?;
    if st.config.test_panic {
        panic!(
            "{}=1: a panic inside the tool, for the tests",
            crate::config::TEST_PANIC_VAR
        );
    }
    let input_sha256 = cache::sha256_hex(input);
    let key = st.config.cache.as_ref().and_then(|d| {
        build_id(st).map(|b| {
            (
                d,
                cache::key(b, &format!("{:?}", st.config.opts), &input_sha256),
            )
        })
    });
    let hit = key.as_ref().and_then(|(d, k)| cache::load(d, k));
    let cached = hit.is_some();
    let (record, payload) = match hit {
        Some(h) => h,
        None => {
            let (r, p) = rewrite(st, source, &input_sha256, input);
            if let Some((d, k)) = &key {
                if cache::store(d, k, &r, &p).is_err() {
                    output_error(st, "cache write failed");
                }
            }
            (r, p)
        }
    };
    let bytes = (record.instrumented() && payload != input).then(|| Arc::from(payload));
    save(st, &input_sha256, input, bytes.as_deref());
    Some(Outcome {
        record,
        bytes,
        cached,
        source,
        input_sha256,
        size: input.len(),
    })
}

impl Outcome {
    /// Counts the object and writes its report line; `loader_accepted`: false when the loader
    /// refused the instrumented bytes (the original went in instead).
    pub fn finish(mut self, loader_accepted: bool) {
        let Some(st) = STATE.get() else { return };
        if !loader_accepted && self.bytes.is_some() {
            self.record.status = crate::record::UNCHANGED.into();
            self.record.unchanged_because =
                Some("the loader refused the instrumented object".into());
            self.record.size_after = self.size;
        }
        lock(&st.stats).add(&self.record, self.cached);
        let Some(path) = &st.config.report else {
            return;
        };
        let line = Line {
            tool: "sqtt-patch-tool",
            source: self.source,
            input_sha256: &self.input_sha256,
            size: self.size,
            cached: self.cached,
            record: &self.record,
        };
        let Ok(mut text) = serde_json::to_string(&line) else {
            return;
        };
        text.push('\n');
        let mut f = lock(&st.report);
        if f.is_none() {
            *f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok();
        }
        let ok = f
            .as_mut()
            .is_some_and(|f| f.write_all(text.as_bytes()).is_ok());
        drop(f);
        if !ok {
            output_error(st, "report line not written");
        }
    }
}

fn output_error(st: &State, what: &'static str) {
    *lock(&st.stats).output_errors.entry(what).or_default() += 1;
}

/// The verified rewrite: the record and the bytes for the loader (empty when unchanged).
fn rewrite(st: &State, source: Source, sha: &str, input: &[u8]) -> (Record, Vec<u8>) {
    if !input.starts_with(b"\x7fELF") {
        let r = Record::unchanged(
            "not an ELF code object",
            "the bytes do not start with the ELF magic".into(),
            input.len(),
        );
        return (r, Vec::new());
    }
    let name = format!("{} code object {}", serde_name(source), &sha[..16]);
    let mut t = sqtt_rewrite::timings::Timings::off();
    match sqtt_pipeline::rewrite_and_verify(&name, input, &st.config.opts, &mut t) {
        Err(e) => (
            Record::unchanged("bad input", format!("{e:#}"), input.len()),
            Vec::new(),
        ),
        Ok(p) => {
            let r = Record::from_report(&p.report, p.verifier_rejected, p.bytes.len());
            if r.instrumented() {
                (r, p.bytes)
            } else {
                let mut r = r;
                r.size_after = input.len();
                (r, Vec::new())
            }
        }
    }
}

fn serde_name(s: Source) -> &'static str {
    match s {
        Source::Memory => "memory",
        Source::File => "file",
        Source::FileSlice => "file_slice",
        Source::Deserialize => "deserialize",
    }
}

/// `SQTT_PATCH_SAVE`: `<hash16>.orig.co` and, when instrumented, `<hash16>.instr.co`, each
/// written atomically once.
fn save(st: &State, sha: &str, input: &[u8], out: Option<&[u8]>) {
    let Some(dir) = &st.config.save else { return };
    let files = [("orig", Some(input)), ("instr", out)];
    for (kind, bytes) in files {
        let Some(bytes) = bytes else { continue };
        let p = dir.join(format!("{}.{kind}.co", &sha[..16]));
        if p.exists() {
            continue;
        }
        let ok = std::fs::create_dir_all(dir).is_ok()
            && tempfile::NamedTempFile::new_in(dir)
                .and_then(|mut f| {
                    f.write_all(bytes)?;
                    f.persist(&p).map_err(|e| e.error)?;
                    Ok(())
                })
                .is_ok();
        if !ok {
            output_error(st, "saved copy not written");
        }
    }
}

/// The build identity in cache keys: the crate version and the identity of this library's own
/// file (found with `dladdr`): path, size, modification time and inode, so a rebuilt or
/// replaced tool never reads entries of another build (hashing the whole library instead would
/// cost a tenth of a second per process). `None` (no cache) when the file cannot be found.
fn build_id(st: &State) -> Option<&str> {
    st.build
        .get_or_init(|| {
            use std::os::unix::fs::MetadataExt;
            let path = own_path()?;
            let m = std::fs::metadata(&path).ok()?;
            Some(format!(
                "{} {} {} {}.{} {}",
                env!("CARGO_PKG_VERSION"),
                path.display(),
                m.size(),
                m.mtime(),
                m.mtime_nsec(),
                m.ino()
            ))
        })
        .as_deref()
}

/// The path of the loaded object that holds this function.
fn own_path() -> Option<std::path::PathBuf> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`.
    let found = unsafe { libc::dladdr(own_path as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the dynamic linker.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    use std::os::unix::ffi::OsStrExt;
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
        name.to_bytes(),
    )))
}
