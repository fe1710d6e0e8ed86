//! Reference chains written with gimli's writer: across units (`DW_FORM_ref_addr`), within a
//! unit (`DW_FORM_ref4`), through `DW_AT_specification`, and around a cycle.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use gimli::write::{
    AttributeValue, DebugInfoRef, Dwarf, EndianVec, LineProgram, Sections, Unit, UnitEntryId,
};
use gimli::{Encoding, Format, LittleEndian};

fn named(unit: &mut Unit, parent: UnitEntryId, tag: gimli::DwTag, name: &str) -> UnitEntryId {
    let id = unit.add(parent, tag);
    unit.get_mut(id)
        .set(gimli::DW_AT_name, AttributeValue::String(name.into()));
    id
}

/// Section contents of `dwarf`, by name.
fn sections(dwarf: &mut Dwarf) -> HashMap<&'static str, Cow<'static, [u8]>> {
    let mut s = Sections::new(EndianVec::new(LittleEndian));
    dwarf.write(&mut s).expect("write DWARF");
    let mut out = HashMap::new();
    s.for_each(|id, data| -> Result<(), ()> {
        out.insert(id.name(), Cow::Owned(data.slice().to_vec()));
        Ok(())
    })
    .expect("sections");
    out
}

#[test]
fn chains_are_followed_across_units_in_both_forms_and_cycles_end() {
    let encoding = Encoding {
        format: Format::Dwarf32,
        version: 5,
        address_size: 8,
    };
    let mut dwarf = Dwarf::new();
    let a = dwarf.units.add(Unit::new(encoding, LineProgram::none()));
    let b = dwarf.units.add(Unit::new(encoding, LineProgram::none()));

    // Unit B: a declaration, its abstract definition (specification -> declaration), a leaf
    // origin, and two DIEs whose references form a cycle.
    let (origin, leaf, c1) = {
        let u = dwarf.units.get_mut(b);
        let root = u.root();
        let decl = named(u, root, gimli::DW_TAG_subprogram, "declared_only");
        let origin = u.add(root, gimli::DW_TAG_subprogram);
        u.get_mut(origin)
            .set(gimli::DW_AT_specification, AttributeValue::UnitRef(decl));
        let leaf = named(u, root, gimli::DW_TAG_subprogram, "leaf");
        u.get_mut(leaf).set(
            gimli::DW_AT_linkage_name,
            AttributeValue::String(b"_Z4leafv".to_vec()),
        );
        let c1 = named(u, root, gimli::DW_TAG_subprogram, "cycle_one");
        let c2 = named(u, root, gimli::DW_TAG_subprogram, "cycle_two");
        u.get_mut(c1)
            .set(gimli::DW_AT_abstract_origin, AttributeValue::UnitRef(c2));
        u.get_mut(c2)
            .set(gimli::DW_AT_specification, AttributeValue::UnitRef(c1));
        (origin, leaf, c1)
    };
    // Unit A: a kernel with three inlined instances: two cross-unit (DW_FORM_ref_addr), one
    // into the cycle; plus a same-unit origin.
    {
        let u = dwarf.units.get_mut(a);
        let root = u.root();
        let local = named(u, root, gimli::DW_TAG_subprogram, "local_helper");
        let kernel = named(u, root, gimli::DW_TAG_subprogram, "kernel");
        for target in [
            AttributeValue::DebugInfoRef(DebugInfoRef::Entry(b, origin)),
            AttributeValue::DebugInfoRef(DebugInfoRef::Entry(b, leaf)),
            AttributeValue::DebugInfoRef(DebugInfoRef::Entry(b, c1)),
            AttributeValue::UnitRef(local),
        ] {
            let i = u.add(kernel, gimli::DW_TAG_inlined_subroutine);
            u.get_mut(i).set(gimli::DW_AT_abstract_origin, target);
        }
    }
    let got = super::names(&sections(&mut dwarf));
    let want: BTreeSet<String> = [
        "declared_only",
        "leaf",
        "_Z4leafv",
        "cycle_one",
        "cycle_two",
        "local_helper",
    ]
    .map(String::from)
    .into();
    assert_eq!(got, want);
}
