//! Our entries in the runtime's tables. Each one keeps the entry it replaced and calls it (the
//! chain of tools stays whole); each catches panics and falls back to the previous entry with
//! the application's own arguments (fail open).
//!
//! Instrumented bytes are handed to the saved `hsa_code_object_reader_create_from_memory` (or
//! `hsa_code_object_deserialize`) and kept alive until the matching destroy returns (HSA
//! Runtime Programmer's Reference Manual 1.2, `hsa_code_object_reader_create_from_memory`: the
//! memory must stay valid for the reader's life).

use crate::ffi::{self, Handle, Status};
use crate::process::{self, Source};
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The entry each of ours replaced (0: none).
pub static FROM_MEMORY: AtomicUsize = AtomicUsize::new(0);
/// See [`FROM_MEMORY`].
pub static FROM_FILE: AtomicUsize = AtomicUsize::new(0);
/// See [`FROM_MEMORY`].
pub static READER_DESTROY: AtomicUsize = AtomicUsize::new(0);
/// See [`FROM_MEMORY`].
pub static DESERIALIZE: AtomicUsize = AtomicUsize::new(0);
/// See [`FROM_MEMORY`].
pub static CODE_OBJECT_DESTROY: AtomicUsize = AtomicUsize::new(0);
/// See [`FROM_MEMORY`].
pub static GET_MAJOR_EXTENSION_TABLE: AtomicUsize = AtomicUsize::new(0);
/// See [`FROM_MEMORY`].
pub static GET_EXTENSION_TABLE: AtomicUsize = AtomicUsize::new(0);
/// The loader table's offset-size entry, saved when a loader table passes through us.
pub static FROM_FILE_SLICE: AtomicUsize = AtomicUsize::new(0);

/// `HSA_STATUS_ERROR` (`hsa.h`): returned only when no previous entry exists to call.
const ERROR: Status = 0x1000;
/// Largest object read from a file (bytes); a larger one goes to the loader unchanged.
const MAX_FILE_OBJECT: u64 = 1 << 30;

/// Kept instrumented bytes: (0 = reader, 1 = deserialized code object; handle).
type Kept = HashMap<(u8, u64), Arc<[u8]>>;
static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

fn kept() -> std::sync::MutexGuard<'static, Option<Kept>> {
    KEPT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The saved entry as a function pointer of type `F`.
fn saved<F: Copy>(slot: &AtomicUsize) -> Option<F> {
    let v = slot.load(Ordering::Acquire);
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>()) };
    // SAFETY: the slot only ever holds 0 or an entry of type F taken from the runtime's table.
    (v != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&v) })
}

/// Runs `f`, turning a panic into `None` (counted as unchanged).
fn guarded<T>(f: impl FnOnce() -> Option<T>) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            let _ = catch_unwind(|| process::count_unchanged("panic caught"));
            None
        }
    }
}

/// Hands `out` to the saved memory entry `load`; on failure, `fallback` (the application's own
/// call). Keeps `out` under `(kind, handle)` when the loader took it.
fn load_instrumented(
    outcome: process::Outcome,
    kind: u8,
    handle: *mut Handle,
    load: impl FnOnce(&[u8]) -> Status,
    fallback: impl FnOnce() -> Status,
) -> Status {
    let Some(out) = outcome.bytes.clone() else {
        outcome.finish(true);
        return fallback();
    };
    let st = load(&out);
    if st == ffi::SUCCESS {
        // SAFETY: the loader wrote the handle on success; `handle` was checked non-null.
        let h = unsafe { (*handle).handle };
        kept()
            .get_or_insert_with(HashMap::new)
            .insert((kind, h), out);
        outcome.finish(true);
        st
    } else {
        outcome.finish(false);
        fallback()
    }
}

/// Our `hsa_code_object_reader_create_from_memory`.
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn from_memory(
    ptr: *const c_void,
    size: usize,
    reader: *mut Handle,
) -> Status {
    let Some(prev) = saved::<ffi::FromMemory>(&FROM_MEMORY) else {
        return ERROR;
    };
    if !ptr.is_null() && size > 0 && !reader.is_null() {
        // SAFETY: the application vouches for `size` bytes at `ptr` (the entry's contract).
        let input = std::slice::from_raw_parts(ptr as *const u8, size);
        if let Some(o) = guarded(|| process::process(Source::Memory, input)) {
            return load_instrumented(
                o,
                0,
                reader,
                |b| prev(b.as_ptr().cast(), b.len(), reader),
                || prev(ptr, size, reader),
            );
        }
    }
    prev(ptr, size, reader)
}

/// Our `hsa_code_object_reader_create_from_file`: the file is read (not moved: `pread`) and,
/// when instrumented, loaded from memory through the saved memory entry.
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn from_file(fd: i32, reader: *mut Handle) -> Status {
    let Some(prev) = saved::<ffi::FromFile>(&FROM_FILE) else {
        return ERROR;
    };
    let mem = saved::<ffi::FromMemory>(&FROM_MEMORY);
    if let (Some(mem), false) = (mem, reader.is_null()) {
        let o = guarded(|| {
            read_whole(fd)
                .map(|b| process::process(Source::File, &b))
                .unwrap_or_else(|| {
                    process::count_unchanged("file not readable");
                    None
                })
        });
        if let Some(o) = o {
            return load_instrumented(
                o,
                0,
                reader,
                |b| mem(b.as_ptr().cast(), b.len(), reader),
                || prev(fd, reader),
            );
        }
    }
    prev(fd, reader)
}

/// Our `hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size` (how CLR loads
/// the code objects of a host binary: file, offset, size).
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn from_file_slice(
    fd: i32,
    offset: usize,
    size: usize,
    reader: *mut Handle,
) -> Status {
    let Some(prev) = saved::<ffi::FromFileSlice>(&FROM_FILE_SLICE) else {
        return ERROR;
    };
    let mem = saved::<ffi::FromMemory>(&FROM_MEMORY);
    if let (Some(mem), false) = (mem, reader.is_null()) {
        let o = guarded(|| {
            read_at(fd, offset as u64, size as u64)
                .map(|b| process::process(Source::FileSlice, &b))
                .unwrap_or_else(|| {
                    process::count_unchanged("file not readable");
                    None
                })
        });
        if let Some(o) = o {
            return load_instrumented(
                o,
                0,
                reader,
                |b| mem(b.as_ptr().cast(), b.len(), reader),
                || prev(fd, offset, size, reader),
            );
        }
    }
    prev(fd, offset, size, reader)
}

/// Our `hsa_code_object_deserialize` (deprecated since HSA 1.1, still in the table).
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn deserialize(
    ptr: *mut c_void,
    size: usize,
    options: *const c_char,
    co: *mut Handle,
) -> Status {
    let Some(prev) = saved::<ffi::Deserialize>(&DESERIALIZE) else {
        return ERROR;
    };
    if !ptr.is_null() && size > 0 && !co.is_null() {
        // SAFETY: as in `from_memory`.
        let input = std::slice::from_raw_parts(ptr as *const u8, size);
        if let Some(o) = guarded(|| process::process(Source::Deserialize, input)) {
            return load_instrumented(
                o,
                1,
                co,
                |b| prev(b.as_ptr() as *mut c_void, b.len(), options, co),
                || prev(ptr, size, options, co),
            );
        }
    }
    prev(ptr, size, options, co)
}

/// Destroys through `prev`, releasing the kept bytes of `(kind, h)` only after it returned
/// (and keeping them when it failed).
fn destroy(kind: u8, h: Handle, prev: Option<ffi::Destroy>) -> Status {
    let Some(prev) = prev else { return ERROR };
    let mine = guarded(|| kept().as_mut().and_then(|k| k.remove(&(kind, h.handle))));
    // SAFETY: the runtime's own entry with the application's argument.
    let st = unsafe { prev(h) };
    if st != ffi::SUCCESS {
        if let Some(b) = mine {
            kept()
                .get_or_insert_with(HashMap::new)
                .insert((kind, h.handle), b);
        }
    }
    st
}

/// Our `hsa_code_object_reader_destroy`.
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn reader_destroy(r: Handle) -> Status {
    destroy(0, r, saved(&READER_DESTROY))
}

/// Our `hsa_code_object_destroy`.
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn code_object_destroy(c: Handle) -> Status {
    destroy(1, c, saved(&CODE_OBJECT_DESTROY))
}

/// Puts our offset-size entry into a loader table the runtime just filled, saving its own.
unsafe fn patch_loader_table(table: *mut c_void) {
    let t = table as *mut u8;
    let cur = ffi::get(t, ffi::LOADER_FROM_FILE_SLICE);
    let ours = from_file_slice as ffi::FromFileSlice as usize;
    if cur != 0 && cur != ours {
        FROM_FILE_SLICE.store(cur, Ordering::Release);
        ffi::set(t, ffi::LOADER_FROM_FILE_SLICE, ours);
    }
}

/// Our `hsa_system_get_major_extension_table`.
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn get_major_extension_table(
    ext: u16,
    major: u16,
    len: usize,
    table: *mut c_void,
) -> Status {
    let Some(prev) = saved::<ffi::GetMajorExtensionTable>(&GET_MAJOR_EXTENSION_TABLE) else {
        return ERROR;
    };
    let st = prev(ext, major, len, table);
    if st == ffi::SUCCESS
        && ext == ffi::EXTENSION_AMD_LOADER
        && major == 1
        && !table.is_null()
        && len >= ffi::LOADER_FROM_FILE_SLICE + 8
    {
        patch_loader_table(table);
    }
    st
}

/// Our `hsa_system_get_extension_table` (deprecated; the table size follows the minor version).
///
/// # Safety
/// The contract of the HSA entry it replaces: pointers valid as that entry requires.
pub unsafe extern "C" fn get_extension_table(
    ext: u16,
    major: u16,
    minor: u16,
    table: *mut c_void,
) -> Status {
    let Some(prev) = saved::<ffi::GetExtensionTable>(&GET_EXTENSION_TABLE) else {
        return ERROR;
    };
    let st = prev(ext, major, minor, table);
    if st == ffi::SUCCESS
        && ext == ffi::EXTENSION_AMD_LOADER
        && major == 1
        && !table.is_null()
        && minor >= ffi::LOADER_SLICE_MINOR
    {
        patch_loader_table(table);
    }
    st
}

/// Reads all of `fd` without moving its offset; `None` when it cannot be read or is larger
/// than 1 GiB.
fn read_whole(fd: i32) -> Option<Vec<u8>> {
    // SAFETY: fstat fills `st`; a bad descriptor makes it fail.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    read_at(fd, 0, u64::try_from(st.st_size).ok()?)
}

/// Reads `size` bytes at `offset` of `fd` with `pread`; `None` when short, failed or too large.
fn read_at(fd: i32, offset: u64, size: u64) -> Option<Vec<u8>> {
    if size == 0 || size > MAX_FILE_OBJECT {
        return None;
    }
    let mut buf = vec![0u8; size as usize];
    let mut done = 0usize;
    while done < buf.len() {
        let off = libc::off_t::try_from(offset.checked_add(done as u64)?).ok()?;
        // SAFETY: writes at most the remaining length into `buf`.
        let n = unsafe { libc::pread(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done, off) };
        match n {
            n if n > 0 => done += n as usize,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                && n < 0 => {}
            _ => return None,
        }
    }
    Some(buf)
}
