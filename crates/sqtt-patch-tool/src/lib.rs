//! `libsqtt_patch_tool.so`: an HSA tools library (`HSA_TOOLS_LIB`) that instruments every code
//! object as the application loads it, with the same verified rewriter as `sqtt-patch`
//! ([`sqtt_pipeline`]), and fails open: whatever goes wrong, the loader gets the original bytes.
//!
//! ROCr loads each library named in the space-separated `HSA_TOOLS_LIB` when it initializes and
//! calls its `OnLoad` with the API tables (ROCr `runtime.cpp`, tools loading; the table layouts:
//! `hsa_api_trace.h`). `OnLoad` replaces the entries through which code objects reach the loader
//! ([`hooks`]), keeping the previous ones and calling them. `docs/exec.md` has the workflow.

pub mod cache;
pub mod config;
pub mod ffi;
pub mod hooks;
pub mod process;
pub mod record;
pub mod stats;

use std::ffi::{c_char, c_void};
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, Ordering};

static LOADED: AtomicBool = AtomicBool::new(false);
static SUMMARY_PRINTED: AtomicBool = AtomicBool::new(false);

/// Called by ROCr for each library in `HSA_TOOLS_LIB`. Returns false (the tool declines and
/// touches nothing; ROCr treats it as a failed tool) when the tables are of a layout we do not
/// know, the configuration is bad or asks for nothing, or it was already loaded.
///
/// # Safety
/// `table` must be ROCr's `HsaApiTable`, writable while tools load.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn OnLoad(
    table: *mut c_void,
    _runtime_version: u64,
    _failed_tool_count: u64,
    _failed_tool_names: *const *const c_char,
) -> bool {
    match catch_unwind(|| unsafe { install(table) }) {
        Ok(Ok(())) => true,
        Ok(Err(why)) => {
            eprintln!("sqtt-patch-tool: not instrumenting (the application runs unchanged): {why}");
            false
        }
        Err(_) => {
            eprintln!("sqtt-patch-tool: not instrumenting (the application runs unchanged): internal error while loading");
            false
        }
    }
}

/// Called by ROCr when it unloads the tools: prints the summary line (once; also printed at
/// process exit when the runtime never unloads).
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn OnUnload() {
    let _ = catch_unwind(print_summary);
}

extern "C" fn at_exit() {
    let _ = catch_unwind(print_summary);
}

fn print_summary() {
    if let Some(line) = process::summary() {
        if !SUMMARY_PRINTED.swap(true, Ordering::AcqRel) {
            eprintln!("{line}");
        }
    }
}

/// Checks the tables and the configuration, then replaces the entries (all checks first: a
/// refusal touches nothing).
unsafe fn install(table: *mut c_void) -> Result<(), String> {
    let core = ffi::check_tables(table)?;
    let config = config::from_env(|k| std::env::var(k).ok())?;
    if LOADED.swap(true, Ordering::AcqRel) {
        return Err("already loaded once in this process".into());
    }
    process::init(config);
    let entries: [(usize, &std::sync::atomic::AtomicUsize, usize); 7] = [
        (
            ffi::CORE_READER_FROM_MEMORY,
            &hooks::FROM_MEMORY,
            hooks::from_memory as ffi::FromMemory as usize,
        ),
        (
            ffi::CORE_READER_FROM_FILE,
            &hooks::FROM_FILE,
            hooks::from_file as ffi::FromFile as usize,
        ),
        (
            ffi::CORE_READER_DESTROY,
            &hooks::READER_DESTROY,
            hooks::reader_destroy as ffi::Destroy as usize,
        ),
        (
            ffi::CORE_DESERIALIZE,
            &hooks::DESERIALIZE,
            hooks::deserialize as ffi::Deserialize as usize,
        ),
        (
            ffi::CORE_CODE_OBJECT_DESTROY,
            &hooks::CODE_OBJECT_DESTROY,
            hooks::code_object_destroy as ffi::Destroy as usize,
        ),
        (
            ffi::CORE_GET_MAJOR_EXTENSION_TABLE,
            &hooks::GET_MAJOR_EXTENSION_TABLE,
            hooks::get_major_extension_table as ffi::GetMajorExtensionTable as usize,
        ),
        (
            ffi::CORE_GET_EXTENSION_TABLE,
            &hooks::GET_EXTENSION_TABLE,
            hooks::get_extension_table as ffi::GetExtensionTable as usize,
        ),
    ];
    for (offset, slot, ours) in entries {
        let prev = ffi::get(core, offset);
        if prev != 0 {
            slot.store(prev, std::sync::atomic::Ordering::Release);
            ffi::set(core, offset, ours);
        }
    }
    libc::atexit(at_exit);
    Ok(())
}
