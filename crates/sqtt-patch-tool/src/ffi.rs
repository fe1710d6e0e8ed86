//! The parts of ROCr's tools interface we touch, as byte offsets into AMD's tables, and the
//! checks made before touching any entry.
//!
//! Source of the layouts: `hsa/hsa_api_trace.h` (`ApiTableVersion`, `HsaApiTable`,
//! `CoreApiTable`) and `hsa/hsa_ven_amd_loader.h` (`hsa_ven_amd_loader_1_0x_pfn_t`) of ROCr.
//! Every table starts with an `ApiTableVersion {major_id, minor_id, step_id, reserved}` (four
//! `uint32_t`); `minor_id` is the size of the table in bytes (`HsaApiTableContainer` sets it to
//! `sizeof`). `CoreApiTable` only grew at its end from ROCm 5 to ROCm 7 (table major 1 in ROCm 5,
//! 2 from ROCm 6, whose root table is major 3); its entries are function pointers after the
//! version. The test `layout` checks every offset here against the installed header.

use std::ffi::c_void;

/// `hsa_status_t` (`hsa.h`): an enum, 32 bits on every ROCm target.
pub type Status = u32;
/// `HSA_STATUS_SUCCESS` (`hsa.h`).
pub const SUCCESS: Status = 0;
/// `HSA_EXTENSION_AMD_LOADER` (`hsa.h`, `hsa_extension_t`).
pub const EXTENSION_AMD_LOADER: u16 = 0x201;

/// `hsa_code_object_reader_t` / `hsa_code_object_t` (`hsa.h`): one opaque 64-bit handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle {
    /// The runtime's handle.
    pub handle: u64,
}

/// `ApiTableVersion` (`hsa_api_trace.h`): at offset 0 of every table.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiTableVersion {
    /// Table generation; a new major means an incompatible layout.
    pub major_id: u32,
    /// Size of the table in bytes.
    pub minor_id: u32,
    /// Step of the generation.
    pub step_id: u32,
    /// Unused.
    pub reserved: u32,
}

/// `hsa_code_object_reader_create_from_memory`.
pub type FromMemory = unsafe extern "C" fn(*const c_void, usize, *mut Handle) -> Status;
/// `hsa_code_object_reader_create_from_file` (`hsa_file_t` is an `int` file descriptor).
pub type FromFile = unsafe extern "C" fn(i32, *mut Handle) -> Status;
/// `hsa_code_object_reader_destroy` and `hsa_code_object_destroy`.
pub type Destroy = unsafe extern "C" fn(Handle) -> Status;
/// `hsa_code_object_deserialize` (deprecated since HSA 1.1).
pub type Deserialize =
    unsafe extern "C" fn(*mut c_void, usize, *const std::ffi::c_char, *mut Handle) -> Status;
/// `hsa_system_get_major_extension_table(extension, version_major, table_length, table)`.
pub type GetMajorExtensionTable = unsafe extern "C" fn(u16, u16, usize, *mut c_void) -> Status;
/// `hsa_system_get_extension_table(extension, version_major, version_minor, table)`.
pub type GetExtensionTable = unsafe extern "C" fn(u16, u16, u16, *mut c_void) -> Status;
/// `hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size`.
pub type FromFileSlice = unsafe extern "C" fn(i32, usize, usize, *mut Handle) -> Status;

/// Byte offset of `core_` in `HsaApiTable` (after its `ApiTableVersion`).
pub const ROOT_CORE: usize = 16;
/// Root table majors we know (1: ROCm 5; 2: early ROCm 6; 3: ROCm 6.1 to 7), all with `core_` at
/// [`ROOT_CORE`].
pub const ROOT_MAJORS: std::ops::RangeInclusive<u32> = 1..=3;
/// Core table majors we know (1: ROCm 5; 2: ROCm 6 and 7), same layout of the entries we touch.
pub const CORE_MAJORS: std::ops::RangeInclusive<u32> = 1..=2;

/// Byte offset of the `index`-th function pointer of `CoreApiTable` (0 = `hsa_init_fn`).
const fn core(index: usize) -> usize {
    16 + 8 * index
}

/// `CoreApiTable::hsa_system_get_extension_table_fn`.
pub const CORE_GET_EXTENSION_TABLE: usize = core(4);
/// `CoreApiTable::hsa_code_object_deserialize_fn`.
pub const CORE_DESERIALIZE: usize = core(77);
/// `CoreApiTable::hsa_code_object_destroy_fn`.
pub const CORE_CODE_OBJECT_DESTROY: usize = core(78);
/// `CoreApiTable::hsa_system_get_major_extension_table_fn`.
pub const CORE_GET_MAJOR_EXTENSION_TABLE: usize = core(98);
/// `CoreApiTable::hsa_code_object_reader_create_from_file_fn`.
pub const CORE_READER_FROM_FILE: usize = core(115);
/// `CoreApiTable::hsa_code_object_reader_create_from_memory_fn`.
pub const CORE_READER_FROM_MEMORY: usize = core(116);
/// `CoreApiTable::hsa_code_object_reader_destroy_fn`.
pub const CORE_READER_DESTROY: usize = core(117);
/// The smallest `CoreApiTable` size (`minor_id`) that holds every entry we touch.
pub const CORE_MIN_SIZE: usize = CORE_READER_DESTROY + 8;

/// Byte offset of
/// `hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size` in the loader
/// tables `hsa_ven_amd_loader_1_02_pfn_t` and later (after five earlier entries).
pub const LOADER_FROM_FILE_SLICE: usize = 40;
/// The first loader table minor version that has [`LOADER_FROM_FILE_SLICE`] (1.02).
pub const LOADER_SLICE_MINOR: u16 = 2;

/// Why a table cannot be used (the tool then declines and touches nothing).
pub fn check_tables(root: *const c_void) -> Result<*mut u8, String> {
    if root.is_null() {
        return Err("the runtime passed no API table".into());
    }
    // SAFETY: ROCr passes a valid HsaApiTable that starts with ApiTableVersion.
    let v = unsafe { std::ptr::read(root as *const ApiTableVersion) };
    if !ROOT_MAJORS.contains(&v.major_id) {
        return Err(format!(
            "unknown HsaApiTable major version {} (known: 1 to 3)",
            v.major_id
        ));
    }
    if (v.minor_id as usize) < ROOT_CORE + 8 {
        return Err(format!(
            "HsaApiTable of {} bytes has no core table",
            v.minor_id
        ));
    }
    // SAFETY: the root table is at least ROOT_CORE + 8 bytes (checked above).
    let core = unsafe { std::ptr::read((root as *const u8).add(ROOT_CORE) as *const *mut u8) };
    if core.is_null() {
        return Err("the core API table is missing".into());
    }
    // SAFETY: a non-null core_ points to a CoreApiTable, which starts with ApiTableVersion.
    let cv = unsafe { std::ptr::read(core as *const ApiTableVersion) };
    if !CORE_MAJORS.contains(&cv.major_id) {
        return Err(format!(
            "unknown CoreApiTable major version {} (known: 1 and 2)",
            cv.major_id
        ));
    }
    if (cv.minor_id as usize) < CORE_MIN_SIZE {
        return Err(format!(
            "CoreApiTable of {} bytes is too small (need {CORE_MIN_SIZE})",
            cv.minor_id
        ));
    }
    Ok(core)
}

/// Reads the entry at byte `offset` of a table checked by [`check_tables`].
///
/// # Safety
/// `table` must be a checked table and `offset + 8` within its size.
pub unsafe fn get(table: *mut u8, offset: usize) -> usize {
    std::ptr::read(table.add(offset) as *const usize)
}

/// Writes the entry at byte `offset` of a table checked by [`check_tables`].
///
/// # Safety
/// As [`get`]; the caller owns the table while tools load (ROCr's `OnLoad` contract).
pub unsafe fn set(table: *mut u8, offset: usize, value: usize) {
    std::ptr::write(table.add(offset) as *mut usize, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root table and a core table as ROCr lays them out, with the given versions and sizes.
    fn tables(
        root_major: u32,
        root_size: u32,
        core_major: u32,
        core_size: u32,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut core = vec![0u64; CORE_MIN_SIZE / 8 + 4];
        core[0] = u64::from(core_major) | u64::from(core_size) << 32;
        let mut root = vec![0u64; 8];
        root[0] = u64::from(root_major) | u64::from(root_size) << 32;
        root[ROOT_CORE / 8] = core.as_mut_ptr() as u64;
        (root, core)
    }

    #[test]
    fn only_known_versions_and_large_enough_tables_are_accepted() {
        let core_size = CORE_MIN_SIZE as u32;
        for (rm, rs, cm, cs, ok) in [
            (1, 56, 1, core_size, true),
            (3, 72, 2, core_size + 64, true),
            (0, 56, 1, core_size, false),
            (4, 56, 1, core_size, false),
            (1, 16, 1, core_size, false),
            (1, 56, 3, core_size, false),
            (1, 56, 1, core_size - 8, false),
        ] {
            let (mut root, core) = tables(rm, rs, cm, cs);
            let got = check_tables(root.as_mut_ptr() as *const c_void);
            assert_eq!(got.is_ok(), ok, "{rm} {rs} {cm} {cs}: {got:?}");
            if ok {
                assert_eq!(got.unwrap() as usize, core.as_ptr() as usize);
            }
        }
        let (mut root, _core) = tables(1, 56, 1, core_size);
        root[ROOT_CORE / 8] = 0;
        assert!(check_tables(root.as_ptr() as *const c_void).is_err());
        assert!(check_tables(std::ptr::null()).is_err());
    }
}
