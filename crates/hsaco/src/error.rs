//! Typed errors of the `hsaco` crate. Every variant that comes from input data names the file
//! offset (bytes from the start of the container being parsed) where the problem was found.

/// Errors from parsing or writing code objects, offload bundles and host ELFs.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A read of `need` bytes at `offset` runs past the end of the data (`len` bytes).
    #[error("truncated input: {what} needs {need} bytes at offset {offset:#x}, but the data is {len} bytes long")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// File offset of the read (bytes).
        offset: u64,
        /// Bytes needed.
        need: u64,
        /// Length of the data (bytes).
        len: u64,
    },
    /// The first four bytes are not `\x7fELF`.
    #[error("not an ELF file: bad magic at offset 0x0")]
    NotElf,
    /// An input of a format none of the readers knows: no ELF, offload-bundle, offload-binary
    /// or PE magic at offset 0 (the main job's and `info`'s words for it are the same).
    #[error("neither an ELF file nor an offload bundle ({len} bytes, no ELF or bundle magic)")]
    UnknownFormat {
        /// Length of the input (bytes).
        len: u64,
    },
    /// `EI_CLASS` (offset 0x4) is ELFCLASS32; code objects and supported hosts are ELF64.
    #[error("ELF32 is not supported (EI_CLASS=1 at offset 0x4): code objects are ELF64")]
    Elf32,
    /// `EI_CLASS`/`EI_DATA` (offset 0x4/0x5) hold values other than ELFCLASS64/ELFDATA2LSB.
    #[error("unsupported ELF identification at offset {offset:#x}: value {value}")]
    BadIdent {
        /// Offset of the byte (0x4 EI_CLASS or 0x5 EI_DATA).
        offset: u64,
        /// Value found.
        value: u8,
    },
    /// `e_machine` (offset 0x12) is not the one expected.
    #[error("wrong e_machine {found} at offset 0x12: expected {expected}")]
    WrongMachine {
        /// Value found.
        found: u16,
        /// Value expected (224 = EM_AMDGPU, 62 = EM_X86_64).
        expected: u16,
    },
    /// `EI_OSABI` (offset 0x7) is not 64 (ELFOSABI_AMDGPU_HSA).
    #[error("unsupported OS ABI {0} at offset 0x7: expected 64 (ELFOSABI_AMDGPU_HSA)")]
    WrongOsAbi(u8),
    /// `EI_ABIVERSION` 0 (offset 0x8): the HSAIL-era legacy code object format (code object v2).
    #[error("legacy HSAIL-era code object (EI_ABIVERSION 0 at offset 0x8, e_flags {e_flags:#x}) is not supported: only code object v4, v5 and v6 are")]
    LegacyAbi0 {
        /// `e_flags` of the object.
        e_flags: u32,
    },
    /// `EI_ABIVERSION` (offset 0x8) other than 2, 3, 4.
    #[error("unsupported code object ABI version {0} at offset 0x8 (2 = v4, 3 = v5, 4 = v6)")]
    UnsupportedAbiVersion(u8),
    /// A structure lies outside the data.
    #[error("{what} at offset {offset:#x} with size {size:#x} extends past the end of the data ({len:#x} bytes)")]
    OutOfBounds {
        /// Structure description (e.g. "section .text").
        what: String,
        /// Start offset (bytes).
        offset: u64,
        /// Size (bytes).
        size: u64,
        /// Data length (bytes).
        len: u64,
    },
    /// Two sections with file contents overlap.
    #[error("sections {first} and {second} overlap in the file at offset {offset:#x}")]
    OverlappingSections {
        /// Name of the section that starts first.
        first: String,
        /// Name of the overlapping section.
        second: String,
        /// File offset of the second section (bytes).
        offset: u64,
    },
    /// A kernel descriptor whose entry point lies outside every loaded executable section
    /// (`SHF_ALLOC | SHF_EXECINSTR`: kernel code must be mapped by a `PT_LOAD`).
    #[error("kernel descriptor {name} at offset {offset:#x}: entry address {entry:#x} (kernel_code_entry_byte_offset {entry_offset}) is outside every executable section")]
    BadKernelEntry {
        /// Descriptor symbol name (`name.kd`).
        name: String,
        /// File offset of the descriptor (bytes).
        offset: u64,
        /// Computed entry address.
        entry: u64,
        /// The raw `kernel_code_entry_byte_offset`.
        entry_offset: i64,
    },
    /// Malformed structure at a file offset.
    #[error("malformed {what} at offset {offset:#x}: {detail}")]
    Malformed {
        /// Structure description.
        what: &'static str,
        /// File offset (bytes).
        offset: u64,
        /// Explanation.
        detail: String,
    },
    /// A well-formed host ELF that `--fatbin` cannot write: it has no `.hip_fatbin` section
    /// (not a HIP host binary, or its section headers were stripped), or only LLVM offload
    /// binaries in `.llvm.offloading`. Not malformed: the file is fine, it is not ours to write.
    #[error("{lead} in the section header table at offset {offset:#x}{tail}")]
    NotWritableHost {
        /// File offset of the section header table (`e_shoff`, bytes).
        offset: u64,
        /// What is missing.
        lead: &'static str,
        /// Why that stops `--fatbin`, and what reads the file instead.
        tail: &'static str,
    },
    /// The metadata note could not be decoded or encoded.
    #[error("AMDGPU metadata note at offset {offset:#x}: {detail}")]
    Metadata {
        /// File offset of the note descriptor (bytes).
        offset: u64,
        /// Explanation.
        detail: String,
    },
    /// A compressed offload bundle declares sizes that do not match its contents.
    #[error("compressed offload bundle at offset {offset:#x}: {detail}")]
    Ccob {
        /// File offset of the CCOB header (bytes).
        offset: u64,
        /// Explanation.
        detail: String,
    },
    /// An editor request names something that does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// An editor request that cannot be satisfied.
    #[error("invalid edit: {0}")]
    InvalidEdit(String),
    /// Reading the input by offset failed or was cut short ([`crate::source::FileSource`]).
    #[error("input I/O at offset {offset:#x}: {detail}")]
    Input {
        /// File offset of the failed read (bytes).
        offset: u64,
        /// The I/O error.
        detail: String,
    },
    /// Writing, reading back or resizing the output failed (streaming writers of
    /// [`crate::hostwrite`]).
    #[error("output I/O at offset {offset:#x}: {detail}")]
    Output {
        /// Output file offset of the failed operation (bytes).
        offset: u64,
        /// The I/O error.
        detail: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Reads `N` bytes at `offset`, or a [`Error::Truncated`] naming `what`.
pub(crate) fn bytes_at<const N: usize>(
    data: &[u8],
    offset: u64,
    what: &'static str,
) -> Result<[u8; N]> {
    let s = slice_at(data, offset, N as u64, what)?;
    let mut out = [0u8; N];
    out.copy_from_slice(s);
    Ok(out)
}

/// Borrows `size` bytes at `offset`, or a [`Error::Truncated`] naming `what`.
pub(crate) fn slice_at<'a>(
    data: &'a [u8],
    offset: u64,
    size: u64,
    what: &'static str,
) -> Result<&'a [u8]> {
    let end = offset.checked_add(size);
    match end {
        Some(end) if end <= data.len() as u64 => Ok(&data[offset as usize..end as usize]),
        _ => Err(Error::Truncated {
            what,
            offset,
            need: size,
            len: data.len() as u64,
        }),
    }
}

/// Little-endian u16 at `offset`.
pub(crate) fn u16_at(data: &[u8], offset: u64, what: &'static str) -> Result<u16> {
    Ok(u16::from_le_bytes(bytes_at(data, offset, what)?))
}

/// Little-endian u32 at `offset`.
pub(crate) fn u32_at(data: &[u8], offset: u64, what: &'static str) -> Result<u32> {
    Ok(u32::from_le_bytes(bytes_at(data, offset, what)?))
}

/// Little-endian u64 at `offset`.
pub(crate) fn u64_at(data: &[u8], offset: u64, what: &'static str) -> Result<u64> {
    Ok(u64::from_le_bytes(bytes_at(data, offset, what)?))
}
