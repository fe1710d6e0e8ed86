//! [`Check::Header`]: the ELF header fields a rewrite keeps (`e_flags`, OS ABI, ABI version).

use hsaco::CodeObject;

use crate::{Check, Finding};

/// Checks that `e_flags`, the OS ABI and the ABI version are unchanged.
pub(crate) fn check_header(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    let (a, b) = (&o.elf.header, &n.elf.header);
    let pairs = [
        ("e_flags", u64::from(a.e_flags), u64::from(b.e_flags)),
        ("EI_OSABI", u64::from(a.os_abi), u64::from(b.os_abi)),
        (
            "EI_ABIVERSION",
            u64::from(a.abi_version),
            u64::from(b.abi_version),
        ),
        ("e_type", u64::from(a.e_type), u64::from(b.e_type)),
        ("e_machine", u64::from(a.e_machine), u64::from(b.e_machine)),
    ];
    for (name, x, y) in pairs {
        if x != y {
            findings.push(Finding::global(
                Check::Header,
                format!("{name} changed from {x:#x} to {y:#x}"),
            ));
        }
    }
}
