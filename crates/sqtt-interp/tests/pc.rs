//! Program-counter instructions and the arithmetic of Tensile's long branches (issue 37):
//! `s_getpc_b64`, `s_setpc_b64`, `s_swappc_b64` (gfx1250: `s_get_pc_i64`, `s_set_pc_i64`,
//! `s_swap_pc_i64`), `s_add_i32`, `s_sub_i32`, `s_abs_i32`, `s_subb_u32` (gfx12 `_co` names),
//! and the barriers a one-wave model completes at once. Snippets are assembled by `llvm-mc-22`
//! (skipped with `SQTT_NO_LLVM=1` and no LLVM).
mod common;

use common::{llvm_asm, target, CONFIGS};
use sqtt_interp::{run, run_code_jumps, Code, Jump, Wave};

/// `text` in the family's spelling: gfx12 `_co` names, gfx1250 `*_pc_i64` names.
fn spell(mcpu: &str, text: &str) -> String {
    let mut t = text.to_string();
    if mcpu.starts_with("gfx12") {
        for (a, b) in [
            ("s_add_i32", "s_add_co_i32"),
            ("s_sub_i32", "s_sub_co_i32"),
            ("s_add_u32", "s_add_co_u32"),
            ("s_addc_u32", "s_add_co_ci_u32"),
            ("s_sub_u32", "s_sub_co_u32"),
            ("s_subb_u32", "s_sub_co_ci_u32"),
            ("s_barrier\n", "s_barrier_signal -1\ns_barrier_wait -1\n"),
        ] {
            t = t.replace(a, b);
        }
    }
    if mcpu == "gfx1250" {
        for (a, b) in [
            ("s_getpc_b64", "s_get_pc_i64"),
            ("s_setpc_b64", "s_set_pc_i64"),
            ("s_swappc_b64", "s_swap_pc_i64"),
        ] {
            t = t.replace(a, b);
        }
    }
    t
}

/// Tensile's forward long branch lands where `getpc + 4 + LIT + 4` says: code placed at 0x1000,
/// the marker after the landing is the only one sent, and the pair holds the target.
#[test]
fn forward_long_branch_lands_on_its_target() {
    // 0 getpc, 4 add_i32 (8 bytes), 12 add_u32, 16 addc_u32, 20 setpc, 24..88 16 s_nop,
    // 88 mov m0 1, 92 ttrace, 96 mov m0 2, 100 ttrace, 104 endpgm: target 96 = 0 + 4 + LIT + 4,
    // so LIT = 88 (above 64: a literal, not an inline constant).
    let text = format!(
        "s_getpc_b64 s[34:35]\ns_add_i32 s36, 0x58, 4\ns_add_u32 s34, s34, s36\n\
         s_addc_u32 s35, s35, 0\ns_setpc_b64 s[34:35]\n{}s_mov_b32 m0, 1\ns_ttracedata\n\
         s_mov_b32 m0, 2\ns_ttracedata\ns_endpgm\n",
        "s_nop 0\n".repeat(16)
    );
    for &(name, ws) in CONFIGS {
        let Some(code) = llvm_asm(name, ws, &spell(name, &text)) else {
            return;
        };
        assert_eq!(code.len(), 108, "{name}: layout of the snippet");
        let mut w = Wave::new(target(name), ws).expect("wave");
        let mut c = Code::new(&code, 0x1000);
        let mut jumps = Vec::new();
        let r = run_code_jumps(&mut w, &mut c, 100, &mut jumps).expect("run");
        assert_eq!(r.shaderdata, vec![2], "{name}");
        assert_eq!(r.exit_pc, 0x1000 + 104, "{name}: ends at the s_endpgm");
        assert_eq!(
            (w.sgpr[34], w.sgpr[35], w.sgpr[36]),
            (0x1060, 0, 92),
            "{name}"
        );
        let setpc = if name == "gfx1250" {
            "s_set_pc_i64"
        } else {
            "s_setpc_b64"
        };
        assert_eq!(
            jumps,
            vec![Jump {
                from: 0x1014,
                to: 0x1060,
                mnemonic: setpc
            }],
            "{name}"
        );
    }
}

/// The backward form (`s_abs_i32`, `s_sub_u32`, `s_subb_u32`) as a loop's back edge: three
/// iterations, each sending one marker, the barrier in the body completing at once; placed
/// across 4 GiB, the 64-bit subtraction borrows from the high half.
#[test]
fn backward_long_branch_is_a_loop() {
    // 0 mov m0 7, 4 ttrace, 8 barrier(s), sub_u32 s8, cmp, cbranch_scc1 +7 dwords (over the
    // 28-byte long branch), getpc, add_i32 LIT (8), abs, sub_u32, subb_u32, setpc, endpgm.
    let text = "s_mov_b32 m0, 7\ns_ttracedata\ns_barrier\ns_sub_u32 s8, s8, 1\n\
                s_cmp_eq_u32 s8, 0\ns_cbranch_scc1 7\ns_getpc_b64 s[34:35]\n\
                s_add_i32 s36, LIT, 4\ns_abs_i32 s36, s36\ns_sub_u32 s34, s34, s36\n\
                s_subb_u32 s35, s35, 0\ns_setpc_b64 s[34:35]\ns_endpgm\n";
    for &(name, ws) in CONFIGS {
        let t = spell(name, text);
        // The getpc is at 24 (gfx12: 28, the split barrier is two words): LIT + 4 = -(getpc + 4).
        let getpc = if name.starts_with("gfx12") { 28 } else { 24 };
        let lit = format!("{:#x}", (-(getpc + 4) - 4i32) as u32);
        let Some(code) = llvm_asm(name, ws, &t.replace("LIT", &lit)) else {
            return;
        };
        for base in [0x2000u64, 0xffff_fff0] {
            let mut w = Wave::new(target(name), ws).expect("wave");
            w.sgpr[8] = 3;
            let mut c = Code::new(&code, base);
            let mut jumps = Vec::new();
            let r = run_code_jumps(&mut w, &mut c, 1000, &mut jumps).expect("run");
            assert_eq!(r.shaderdata, vec![7, 7, 7], "{name} at {base:#x}");
            assert_eq!(r.exit_pc, base + code.len() as u64 - 4, "{name}");
            let back: Vec<u64> = jumps
                .iter()
                .filter(|j| j.mnemonic.contains("pc"))
                .map(|j| j.to)
                .collect();
            assert_eq!(
                back,
                vec![base, base],
                "{name} at {base:#x}: two back edges"
            );
            assert_eq!(jumps.len(), 3, "{name}: and the exit branch");
        }
    }
}

/// `s_swappc_b64` saves the return address before it jumps; a jump out of the code ends the run
/// there; `s_getpc_b64` gives the next instruction's address.
#[test]
fn swappc_saves_the_return_address() {
    let text = "s_getpc_b64 s[10:11]\ns_swappc_b64 s[30:31], s[40:41]\ns_endpgm\n";
    for &(name, ws) in CONFIGS {
        let Some(code) = llvm_asm(name, ws, &spell(name, text)) else {
            return;
        };
        let mut w = Wave::new(target(name), ws).expect("wave");
        w.sgpr[40] = 0x5000;
        w.sgpr[41] = 1;
        let r = run(&mut w, &code, 0x300, 10).expect("run");
        assert_eq!(r.exit_pc, 0x1_0000_5000, "{name}: left for the callee");
        assert_eq!((w.sgpr[10], w.sgpr[11]), (0x304, 0), "{name}: getpc");
        assert_eq!(
            (w.sgpr[30], w.sgpr[31]),
            (0x308, 0),
            "{name}: return address"
        );
    }
}

/// 32-bit signed add/sub (SCC = signed overflow), `s_abs_i32` (SCC = result != 0, |i32::MIN|
/// stays 0x80000000) and `s_subb_u32` (SCC = borrow), results and SCC sent through M0.
#[test]
fn signed_arithmetic_and_borrow() {
    // (op, a, b, scc_in, result, scc_out); s_abs_i32 ignores b.
    let cases: &[(&str, u32, u32, bool, u32, bool)] = &[
        ("s_add_i32", 0x7fff_ffff, 1, false, 0x8000_0000, true),
        ("s_add_i32", 0xffff_fffc, 4, true, 0, false),
        ("s_sub_i32", 0x8000_0000, 1, false, 0x7fff_ffff, true),
        ("s_sub_i32", 5, 7, true, 0xffff_fffe, false),
        ("s_abs_i32", 0xffff_ff5c, 0, false, 0xa4, true),
        ("s_abs_i32", 0, 0, true, 0, false),
        ("s_abs_i32", 0x8000_0000, 0, false, 0x8000_0000, true),
        ("s_subb_u32", 5, 6, false, 0xffff_ffff, true),
        ("s_subb_u32", 6, 5, true, 0, false),
        ("s_subb_u32", 6, 6, true, 0xffff_ffff, true),
    ];
    for &(name, ws) in CONFIGS {
        let mut text = String::new();
        let mut want = Vec::new();
        for (k, &(op, _, _, scc, r, r_scc)) in cases.iter().enumerate() {
            let (x, y) = (20 + 2 * k, 21 + 2 * k);
            let set_scc = if scc {
                "s_cmp_eq_u32 0, 0"
            } else {
                "s_cmp_eq_u32 0, 1"
            };
            let inst = if op == "s_abs_i32" {
                format!("{op} s7, s{x}")
            } else {
                format!("{op} s7, s{x}, s{y}")
            };
            text += &format!(
                "{set_scc}\n{inst}\ns_mov_b32 m0, s7\ns_ttracedata\ns_cselect_b32 m0, 1, 0\ns_ttracedata\n"
            );
            want.extend([r, u32::from(r_scc)]);
        }
        let Some(code) = llvm_asm(name, ws, &spell(name, &text)) else {
            return;
        };
        let mut w = Wave::new(target(name), ws).expect("wave");
        for (k, &(_, a, b, ..)) in cases.iter().enumerate() {
            w.sgpr[20 + 2 * k] = a;
            w.sgpr[21 + 2 * k] = b;
        }
        let got = run(&mut w, &code, 0, 1000).expect("run").shaderdata;
        for (k, c) in cases.iter().enumerate() {
            assert_eq!(
                got[2 * k..2 * k + 2],
                want[2 * k..2 * k + 2],
                "{name}: {c:?}"
            );
        }
    }
}
