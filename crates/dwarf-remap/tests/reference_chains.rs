//! `dwarf_remap::inlined_scopes` names inlined instances through `DW_AT_abstract_origin` /
//! `DW_AT_specification` chains that cross compile units (`DW_FORM_ref_addr`, written by gimli's
//! writer for a reference into another unit) and ends on reference cycles (issue 39 item 3).
//! The LTO case as clang-22 and ld.lld-22 emit it is `fixtures/rdc` (test
//! `sqtt-rewrite --test cross_unit_inlined`, against llvm-dwarfdump-22).

use std::collections::HashMap;

use gimli::write::{
    Address, AttributeValue, DebugInfoRef, Dwarf, EndianVec, LineProgram, LineString, Sections,
    Unit, UnitEntryId,
};
use gimli::{Encoding, Format, LineEncoding, LittleEndian};

fn unit(dwarf: &mut Dwarf, encoding: Encoding, file: &str) -> gimli::write::UnitId {
    let dir = LineString::new(&b"/src"[..], encoding, &mut dwarf.line_strings);
    let name = LineString::new(file.as_bytes(), encoding, &mut dwarf.line_strings);
    let program = LineProgram::new(encoding, LineEncoding::default(), dir, None, name, None);
    dwarf.units.add(Unit::new(encoding, program))
}

fn sub(u: &mut Unit, parent: UnitEntryId, tag: gimli::DwTag, name: Option<&str>) -> UnitEntryId {
    let id = u.add(parent, tag);
    if let Some(n) = name {
        u.get_mut(id)
            .set(gimli::DW_AT_linkage_name, AttributeValue::String(n.into()));
    }
    id
}

fn code(u: &mut Unit, id: UnitEntryId, low: u64, len: u64) {
    let e = u.get_mut(id);
    e.set(
        gimli::DW_AT_low_pc,
        AttributeValue::Address(Address::Constant(low)),
    );
    e.set(gimli::DW_AT_high_pc, AttributeValue::Udata(len));
}

#[test]
fn names_follow_references_across_units_and_cycles_end() {
    let encoding = Encoding {
        format: Format::Dwarf32,
        version: 5,
        address_size: 8,
    };
    let mut dwarf = Dwarf::new();
    let a = unit(&mut dwarf, encoding, "main.hip");
    let b = unit(&mut dwarf, encoding, "lib.hip");
    // Unit B: `origin` (no name) -> specification `decl` (named); `c1` <-> `c2`, neither named.
    let (origin, c1) = {
        let u = dwarf.units.get_mut(b);
        let root = u.root();
        let decl = sub(u, root, gimli::DW_TAG_subprogram, Some("_ZN1S4stepEj"));
        let origin = sub(u, root, gimli::DW_TAG_subprogram, None);
        u.get_mut(origin)
            .set(gimli::DW_AT_specification, AttributeValue::UnitRef(decl));
        let c1 = sub(u, root, gimli::DW_TAG_subprogram, None);
        let c2 = sub(u, root, gimli::DW_TAG_subprogram, None);
        u.get_mut(c1)
            .set(gimli::DW_AT_abstract_origin, AttributeValue::UnitRef(c2));
        u.get_mut(c2)
            .set(gimli::DW_AT_specification, AttributeValue::UnitRef(c1));
        (origin, c1)
    };
    {
        let file_name = LineString::new(&b"main.hip"[..], encoding, &mut dwarf.line_strings);
        let u = dwarf.units.get_mut(a);
        let dir = u.line_program.default_directory();
        let file = u.line_program.add_file(file_name, dir, None);
        let root = u.root();
        let kernel = sub(u, root, gimli::DW_TAG_subprogram, Some("k"));
        code(u, kernel, 0x1000, 0x100);
        for (i, target) in [origin, c1].into_iter().enumerate() {
            let inl = u.add(kernel, gimli::DW_TAG_inlined_subroutine);
            u.get_mut(inl).set(
                gimli::DW_AT_abstract_origin,
                AttributeValue::DebugInfoRef(DebugInfoRef::Entry(b, target)),
            );
            code(u, inl, 0x1000 + 0x40 * i as u64, 0x20);
            let e = u.get_mut(inl);
            e.set(
                gimli::DW_AT_call_file,
                AttributeValue::FileIndex(Some(file)),
            );
            e.set(gimli::DW_AT_call_line, AttributeValue::Udata(7 + i as u64));
        }
    }
    let mut s = Sections::new(EndianVec::new(LittleEndian));
    dwarf.write(&mut s).expect("write DWARF");
    let mut sections: HashMap<String, Vec<u8>> = HashMap::new();
    s.for_each(|id, data| -> Result<(), ()> {
        sections.insert(id.name().to_string(), data.slice().to_vec());
        Ok(())
    })
    .expect("sections");

    let scopes = dwarf_remap::inlined_scopes(&sections).expect("inlined scopes");
    let names: Vec<(&str, Vec<(u64, u64)>)> = scopes
        .iter()
        .map(|s| (s.name.as_str(), s.ranges.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("_ZN1S4stepEj", vec![(0x1000, 0x1020)]),
            ("", vec![(0x1040, 0x1060)]),
        ]
    );
    assert!(scopes.iter().all(|s| s.function == Some(0x1000)));
    let calls: Vec<String> = scopes.iter().map(|s| s.call.to_string()).collect();
    assert_eq!(calls, ["/src/main.hip:7", "/src/main.hip:8"]);
}
