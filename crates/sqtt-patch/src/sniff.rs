//! What an input file is, from its first bytes: for dispatch (`batch`) and for messages that
//! name the file's kind when a command gets the wrong one (issue 17, items 9 and 10).
//!
//! Facts: ELF identification and `e_machine` at offset 18 of the ELF64 header (ELF
//! specification; LLVM `BinaryFormat/ELF.h`: `EM_X86_64` 62, `EM_AMDGPU` 224); offload bundle
//! magics `__CLANG_OFFLOAD_BUNDLE__` and `CCOB` (clang `OffloadBundler.cpp`); `KPAK` of kpack
//! archives ([`hsaco::kpack`]).

use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::container::InputKind;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// Most bytes read from an input that is not a regular file (bytes): 256 MiB, above any code
/// object or host binary met so far, and a bound on `/dev/zero` or `/dev/urandom`.
pub const STREAM_INPUT_LIMIT: u64 = 256 << 20;

/// Reads an input file whole. A regular file is read as it is; anything else (a FIFO, process
/// substitution, character device) up to [`STREAM_INPUT_LIMIT`] bytes. A FIFO that no process
/// has open for writing is waited for with a message on stderr naming it ([`open_fifo`]; Ctrl-C
/// stops the wait with exit 130, [`crate::interrupt`]). Errors: the I/O error, or an input that
/// is not a regular file and longer than the limit (`/dev/zero` never ends).
pub fn read_input(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    let file = if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo()) {
        open_fifo(path, &mut v)?
    } else {
        std::fs::File::open(path)?
    };
    let meta = file.metadata()?;
    if meta.is_file() {
        let mut v = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        (&file).read_to_end(&mut v)?;
        return Ok(v);
    }
    file.take(STREAM_INPUT_LIMIT + 1 - v.len() as u64)
        .read_to_end(&mut v)?;
    if v.len() as u64 > STREAM_INPUT_LIMIT {
        return Err(std::io::Error::other(format!(
            "not a regular file and longer than {} MiB (the limit for devices and pipes)",
            STREAM_INPUT_LIMIT >> 20
        )));
    }
    Ok(v)
}

/// Opens FIFO `path` for reading without blocking first (`O_NONBLOCK`: `open(2)` of a FIFO
/// otherwise waits for a writer without a word, issue 32). A first byte read then is put in
/// `head`. When no process has it open for writing (the read sees end of file at once), stderr
/// says so and the same descriptor is polled until a writer has come (`poll(2)` reports input,
/// or a hang-up once a writer came and went: Linux `pipe_poll` counts writers since the open).
/// Polling the descriptor already open keeps what a quick writer wrote and closed before this
/// process looked again; opening the FIFO a second time would wait for a writer that has gone.
/// Returns a blocking descriptor to read the rest from.
fn open_fifo(path: &Path, head: &mut Vec<u8>) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let probe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let mut byte = [0u8; 1];
    match (&probe).read(&mut byte) {
        Ok(0) => {
            eprintln!(
                "sqtt-patch: {}: a FIFO with no writer: waiting for one, then reading until it closes (at most {} MiB; Ctrl-C stops)",
                path.display(),
                STREAM_INPUT_LIMIT >> 20
            );
            wait_for_writer(&probe)?;
        }
        Ok(_) => head.push(byte[0]),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    // A writer is (or was) there: the same descriptor, blocking from now on (`fcntl(2)`
    // F_SETFL).
    // SAFETY: plain integer fcntl calls on a descriptor this function owns.
    let ok = unsafe {
        let fl = libc::fcntl(probe.as_raw_fd(), libc::F_GETFL);
        fl >= 0 && libc::fcntl(probe.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) == 0
    };
    if ok {
        Ok(probe)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Blocks until FIFO reader `file` (opened `O_NONBLOCK` with no writer) has input or a writer
/// came and closed (`POLLIN`/`POLLHUP`); an interrupted wait is resumed (Ctrl-C exits in
/// [`crate::interrupt`]). Errors: `poll(2)`'s.
fn wait_for_writer(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let mut fd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd for a descriptor borrowed for the call.
        if unsafe { libc::poll(&mut fd, 1, -1) } >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// ELF magic (`e_ident[EI_MAG0..3]`).
const ELF_MAGIC: &[u8] = b"\x7fELF";
/// `e_machine` of x86-64 host binaries.
const EM_X86_64: u16 = 62;
/// `e_machine` of AMDGPU code objects.
const EM_AMDGPU: u16 = 224;
/// Size of an ELF64 header (bytes).
const ELF64_HEADER: usize = 64;

/// `e_machine` of an ELF file (little-endian header), when the header is long enough.
fn machine(data: &[u8]) -> Option<u16> {
    data.get(18..20).map(|b| u16::from_le_bytes([b[0], b[1]]))
}

/// Kind of a file: bundle magic, or ELF magic with `e_machine` AMDGPU or x86-64; `None` for
/// anything else.
pub fn kind(data: &[u8]) -> Option<InputKind> {
    if hsaco::bundle::is_bundle(data) {
        return Some(InputKind::Bundle);
    }
    // ELF32 has its e_machine at the same offset, but nothing of ours reads it (session-28
    // tester: `batch` took an AMDGPU ELF32 for a code object and an x86-64 one for a host).
    if !data.starts_with(ELF_MAGIC) || hsaco::elf::is_elf32(data) {
        return None;
    }
    match machine(data) {
        Some(EM_AMDGPU) => Some(InputKind::CodeObject),
        Some(EM_X86_64) => Some(InputKind::Host),
        _ => None,
    }
}

/// Number of embedded AMDGPU code objects of a bundle or host binary. Errors: why it cannot be
/// read (the container reader's message, as `info` shows it).
fn embedded(data: &[u8]) -> Result<usize, String> {
    hsaco::container::open(data, DEFAULT_DECOMPRESS_LIMIT)
        .map(|(_, e)| e.len())
        .map_err(|e| e.to_string())
}

/// What a file that is not a bare AMDGPU code object is, in words (`None` for an AMDGPU ELF,
/// whose own parse errors are precise).
pub fn describe(data: &[u8]) -> Option<String> {
    if hsaco::bundle::is_bundle(data) {
        return Some(match embedded(data) {
            Ok(n) => format!("an offload bundle with {n} code object(s)"),
            Err(e) => format!("an offload bundle that cannot be read ({e})"),
        });
    }
    if hsaco::offload::is_offload_binary(data) {
        return Some(match embedded(data) {
            Ok(n) => format!(
                "an LLVM offload binary with {n} code object(s) (writing LLVM offload binaries \
                 is not supported; `sqtt-patch extract` reads them)"
            ),
            Err(e) => format!("an LLVM offload binary that cannot be read ({e})"),
        });
    }
    if hsaco::kpack::is_kpack(data) {
        return Some(match hsaco::kpack::read(data, DEFAULT_DECOMPRESS_LIMIT) {
            Ok(a) => format!(
                "a kpack archive with {} code object(s) ({} TOC entries)",
                a.blobs.len(),
                a.entries.len()
            ),
            Err(e) => format!("a kpack archive that cannot be read ({e})"),
        });
    }
    if hsaco::pe::is_pe(data) {
        return Some(
            match hsaco::container::open(data, DEFAULT_DECOMPRESS_LIMIT) {
                Ok((_, e)) => format!(
                    "a Windows PE image with {} embedded code object(s) (writing PE is not \
                 supported; `sqtt-patch info` and `extract` read it)",
                    e.len()
                ),
                Err(e) => format!("a Windows PE image whose HIP fat binaries cannot be read ({e})"),
            },
        );
    }
    if !data.starts_with(ELF_MAGIC) {
        return Some(
            hsaco::Error::UnknownFormat {
                len: data.len() as u64,
            }
            .to_string(),
        );
    }
    if hsaco::elf::is_elf32(data) {
        // An ELF32 file's e_machine is not at offset 18 of an ELF64 header: name the class, as
        // `info` and `extract` do (`hsaco::Error::Elf32`).
        return Some(hsaco::Error::Elf32.to_string());
    }
    if data.len() < ELF64_HEADER {
        return Some(format!(
            "a truncated ELF file ({} bytes; an ELF64 header has {ELF64_HEADER})",
            data.len()
        ));
    }
    match machine(data) {
        Some(EM_AMDGPU) => None,
        Some(EM_X86_64) => Some(match embedded(data) {
            Ok(n) if n > 0 => format!("an x86-64 host binary with {n} embedded code object(s)"),
            _ if hsaco::kpack::hipk::scan(data).is_ok_and(|w| !w.is_empty()) => {
                "a kpack-split (HIPK) x86-64 host binary: its device code is in .kpack archives"
                    .into()
            }
            _ => "an x86-64 ELF file without HIP device code (no readable .hip_fatbin)".into(),
        }),
        Some(m) => Some(format!(
            "an ELF file for e_machine {m}, not AMDGPU ({EM_AMDGPU})"
        )),
        None => None,
    }
}

/// The error of a command that reads one bare code object (`what`: `instrument` for the main
/// job, else the command name) given another kind of file; `None` when `data` is an AMDGPU ELF (or unknown: the parser reports it).
pub fn not_a_code_object(name: &str, data: &[u8], what: &str) -> Option<anyhow::Error> {
    let is = describe(data)?;
    let container = (matches!(kind(data), Some(InputKind::Bundle | InputKind::Host))
        && embedded(data).is_ok_and(|n| n > 0))
        || hsaco::kpack::is_kpack(data);
    let hipk = kind(data) == Some(InputKind::Host)
        && hsaco::kpack::hipk::scan(data).is_ok_and(|w| !w.is_empty());
    let hint = match (container || hipk, what) {
        (true, "instrument") => " pass --fatbin to instrument every code object inside it",
        (true, _) if hipk => {
            " `sqtt-patch info FILE` lists its archives; extract theirs with `sqtt-patch extract ARCHIVE -o DIR`"
        }
        (true, _) => " extract its code objects with `sqtt-patch extract FILE -o DIR`",
        _ => "",
    };
    let sep = if hint.is_empty() { "" } else { ";" };
    Some(anyhow::anyhow!(
        "{name}: not a code object: {is}{sep}{hint}"
    ))
}
