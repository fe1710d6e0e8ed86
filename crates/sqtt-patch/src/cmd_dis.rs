//! `sqtt-patch dis`: disassemble the executable sections of an AMDGPU code object with the
//! pure-Rust decoder (`amdgpu-isa`), in LLVM syntax.
//!
//! `--format=compare` prints `<hex address>\t<length in bytes>\t<text>` per instruction (text as
//! `llvm-objdump-22 -d` prints it, without raw words or trailing comments), for diffing against
//! LLVM.
use crate::exit;
use amdgpu_isa::{decode, decode_all, Instruction, Target};
use anyhow::{bail, Context};
use object::{Object, ObjectSection, ObjectSymbol, SectionFlags};

/// Output style of `dis`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DisFormat {
    /// Symbol headers and `text // address: words`, like llvm-objdump.
    Text,
    /// `<hex address>\t<length>\t<text>` per instruction.
    Compare,
}

/// Arguments of `sqtt-patch dis`.
#[derive(clap::Args)]
pub struct DisArgs {
    /// Input code object (ELF, EM_AMDGPU).
    pub file: std::path::PathBuf,
    /// Only disassemble this function/kernel symbol (`.symtab`/`.dynsym` name).
    #[arg(long)]
    pub symbol: Option<String>,
    /// Output style.
    #[arg(long, value_enum, default_value_t = DisFormat::Text)]
    pub format: DisFormat,
    /// Processor override (default: from ELF e_flags EF_AMDGPU_MACH).
    #[arg(long)]
    pub mcpu: Option<String>,
    /// Decode gfx11/gfx12 16-bit operands in real-true16 mode (as `--mattr=+real-true16`).
    /// Default: LLVM 22's mode for the processor (real-true16 on gfx11, fake16 on gfx12 and
    /// gfx1250), switched to the other mode for code with opcodes only that mode has or
    /// that only decodes there.
    #[arg(long)]
    pub true16: bool,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: DisArgs) -> anyhow::Result<i32> {
    let data = crate::sniff::read_input(&args.file)
        .with_context(|| format!("{}: cannot read", args.file.display()))?;
    if let Some(e) = crate::sniff::not_a_code_object(&args.file.display().to_string(), &data, "dis")
    {
        return Err(e);
    }
    // An object the other commands refuse (a damaged `sh_name`, note or descriptor symbol) is
    // refused here too, with the loader's message, instead of printed in part (session-21
    // fresh tester).
    hsaco::CodeObject::parse(&data)
        .with_context(|| format!("{}: cannot parse", args.file.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{}: cannot parse the ELF file", args.file.display()))?;
    let target = match &args.mcpu {
        Some(m) => Target::from_name(m).with_context(|| format!("unknown processor {m}"))?,
        None => {
            let flags = match file.flags() {
                object::FileFlags::Elf { e_flags, .. } => e_flags.0,
                _ => bail!("{}: not an ELF code object", args.file.display()),
            };
            Target::from_elf_mach(flags & 0xff).with_context(|| {
                format!(
                    "{}: unsupported EF_AMDGPU_MACH {:#x}",
                    args.file.display(),
                    flags & 0xff
                )
            })?
        }
    };
    let target = if args.true16 {
        target.with_true16(true)
    } else {
        target
    };
    let mut syms: Vec<(u64, u64, String)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
        .collect();
    syms.sort();
    syms.dedup();
    let range = match &args.symbol {
        Some(name) => {
            let s = syms
                .iter()
                .find(|s| &s.2 == name)
                .with_context(|| format!("{}: no function symbol {name}", args.file.display()))?;
            Some((s.0, s.0 + s.1))
        }
        None => None,
    };
    let mut out = String::new();
    let (mut undecodable, mut first_bad) = (0usize, None);
    for sec in file.sections() {
        let SectionFlags::Elf { sh_flags, .. } = sec.flags() else {
            continue;
        };
        if sh_flags.0 & object::elf::SHF_EXECINSTR.0 == 0 {
            continue;
        }
        let base = sec.address();
        let bytes = sec
            .data()
            .with_context(|| format!("{}: reading section data", args.file.display()))?;
        let (start, end) = match range {
            Some((a, b)) if a >= base && b <= base + bytes.len() as u64 => (a, b),
            Some(_) => continue,
            None => (base, base + bytes.len() as u64),
        };
        let slice = bytes
            .get((start - base) as usize..(end - base) as usize)
            .context("symbol outside its section")?;
        let insts = decode_all(slice, target)
            .and_then(|insts| {
                // Code with opcodes of the other 16-bit mode only (gfx12/gfx1250 true16 code:
                // `v_mov_b16`; llvm-objdump-22 prints `.long` for them in its default mode)
                // was compiled for that mode: print all of it in that mode.
                let other = !args.true16 && insts.iter().any(|i| i.decoded_in_other_mode());
                match other {
                    true => decode_all(slice, target.with_true16(!target.true16())),
                    false => Ok(insts),
                }
            })
            .or_else(|e| match args.true16 {
                true => Err(e),
                // Code that only decodes in the other 16-bit mode (gfx12 Triton true16 code).
                false => decode_all(slice, target.with_true16(!target.true16())).map_err(|_| e),
            });
        let items = match insts {
            Ok(insts) => insts.into_iter().map(Ok).collect(),
            Err(_) => decode_lossy(slice, target),
        };
        let mut pc = start;
        for item in items {
            let i = match item {
                Ok(i) => i,
                Err((word, kind)) => {
                    // Like llvm-objdump's `<unknown>`: the word is printed and decoding goes on
                    // at the next dword.
                    undecodable += 1;
                    first_bad.get_or_insert((pc, kind.to_string()));
                    out.push_str(&match args.format {
                        DisFormat::Compare => format!("{pc:x}\t4\t.long 0x{word:08x}\n"),
                        DisFormat::Text => format!(
                            "\t{:<58} // {pc:012X}: {word:08X} ({kind})\n",
                            format!(".long 0x{word:08x}")
                        ),
                    });
                    pc += 4;
                    continue;
                }
            };
            match args.format {
                DisFormat::Compare => out.push_str(&format!("{pc:x}\t{}\t{i}\n", i.len())),
                DisFormat::Text => {
                    for s in syms.iter().filter(|s| s.0 == pc) {
                        out.push_str(&format!("\n{:016x} <{}>:\n", s.0, s.2));
                    }
                    let words: Vec<String> = (0..i.len() / 4)
                        .map(|k| format!("{:08X}", i.word(k)))
                        .collect();
                    out.push_str(&format!(
                        "\t{:<58} // {pc:012X}: {}\n",
                        i.to_string(),
                        words.join(" ")
                    ));
                }
            }
            pc += i.len() as u64;
        }
    }
    let code = crate::cmd_patch::write_stdout(&out)?;
    match first_bad {
        None => Ok(code),
        Some((pc, why)) => {
            eprintln!(
                "sqtt-patch: error: {}: {undecodable} dword(s) could not be decoded, printed as .long (first at {pc:#x}: {why})",
                args.file.display()
            );
            Ok(exit::INPUT)
        }
    }
}

/// Decodes `bytes` instruction by instruction, going on after a failure at the next dword:
/// each item is an instruction or the undecodable dword (little-endian) with the reason.
fn decode_lossy(
    bytes: &[u8],
    target: Target,
) -> Vec<Result<Instruction, (u32, amdgpu_isa::DecodeErrorKind)>> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < bytes.len() {
        match decode(&bytes[off..], target) {
            Ok(i) => {
                off += i.len();
                out.push(Ok(i));
            }
            Err(e) => {
                let mut w = [0u8; 4];
                let tail = &bytes[off..bytes.len().min(off + 4)];
                w[..tail.len()].copy_from_slice(tail);
                out.push(Err((u32::from_le_bytes(w), e.kind)));
                off += 4;
            }
        }
    }
    out
}
