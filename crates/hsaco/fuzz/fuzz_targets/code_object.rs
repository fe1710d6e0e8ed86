//! Fuzz target: `CodeObject::parse` on arbitrary bytes, then the read-only accessors and an
//! edit-free `CodeObjectEditor::write` on whatever parses. The written object must parse again
//! with the same kernels. (Byte identity only holds for consistent inputs: the editor re-derives
//! program headers from the sections, so a mutated input whose segments disagree with its
//! sections is normalised; the identity property is tested on real objects in tests/rewrite.rs.)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(co) = hsaco::CodeObject::parse(data) else {
        return;
    };
    let _ = co.has_dwarf();
    let _ = co.funcmap();
    let _ = co.target.target_id();
    for k in &co.kernels {
        let _ = k.descriptor.registers(&co.target);
        let _ = k.descriptor.directives(&co.target, co.version);
        let _ = k.descriptor.encode();
    }
    for m in &co.metadata {
        let _ = m.encode();
    }
    if let Ok(out) = hsaco::CodeObjectEditor::new(&co).write() {
        let again = hsaco::CodeObject::parse(&out).expect("edit-free write must parse again");
        let names = |c: &hsaco::CodeObject| -> Vec<String> {
            c.kernels.iter().map(|k| k.name.clone()).collect()
        };
        assert_eq!(
            names(&again),
            names(&co),
            "edit-free write changed the kernels"
        );
    }
});
