//! Instrumentation options: the spec's `SQTT_*` environment variables ("Configuration
//! (Environment Variables)") plus post-link extras, parsed into one validated value.
//!
//! Precedence is decided by the caller (the CLI): flags win over the environment, the environment
//! wins over the defaults listed here, which are the pass's defaults.

use thiserror::Error;

/// How function size is measured against the `SQTT_INSTRUMENT_FUNCTIONS` threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionThreshold {
    /// Function instrumentation off (the spec's `0`).
    Off,
    /// Count machine instructions (spec: "plain instruction count mode", weight 1 each).
    Count(u64),
    /// Weighted cost (spec "Cost Model", mapped to machine instruction classes; see `cost`).
    Cost(u64),
}

/// `SQTT_INSTRUMENT_MEMORY=N:M`: a marker per chunk of `ops_per_marker` same-kind VMEM operations
/// whose gaps are at most `max_gap` instructions (spec "Memory operation markers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryChunking {
    /// N: operations per marker (>= 1).
    pub ops_per_marker: u32,
    /// M: largest instruction gap between two operations of one sequence.
    pub max_gap: u32,
}

/// `SQTT_MEM_BARRIER`: accepted for compatibility. Post-link, markers are placed after all
/// compiler scheduling, so nothing can drift and no fence is emitted for any value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemBarrier {
    /// `none`, `0`, `off`.
    None,
    /// `asm`, `1`, `compiler`, `clobber`.
    Asm,
    /// `fence`, `2`, `on`, `hw` (the pass's default).
    Fence,
}

/// `SQTT_TRACE_ADDRESSES`: which categories get per-lane address-trace blocks (spec
/// "Address Tracing", "Configuration"): `memory` = flat/global and buffer operations with their
/// atomics, `lds` = LDS operations, LDS atomics and `ds_permute` / `ds_bpermute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceAddresses {
    /// Flat/global (AS 0/1) and buffer operations.
    pub memory: bool,
    /// LDS (AS 3) operations and lane shuffles.
    pub lds: bool,
}

/// Every knob of one instrumentation run.
#[derive(Clone, PartialEq, Eq)]
pub struct Options {
    /// `SQTT_INSTRUMENT_FUNCTIONS`.
    pub functions: FunctionThreshold,
    /// `SQTT_INSTRUMENT_BARRIERS`.
    pub barriers: bool,
    /// Post-link extra, off by default like the pass: enter/exit markers around every kernel.
    pub kernel_scopes: bool,
    /// `SQTT_INSTRUMENT_MEMORY` (None = off).
    pub memory: Option<MemoryChunking>,
    /// `SQTT_MEM_BARRIER` (no effect post-link; recorded for the report).
    pub mem_barrier: MemBarrier,
    /// `SQTT_SHADER_CLOCK_BITS` (0 = no packing).
    pub shader_clock_bits: u32,
    /// `SQTT_SHADER_CLOCK_SHIFT` (default 4).
    pub shader_clock_shift: u32,
    /// Instrument an input that already carries a funcmap written by sqtt-patch.
    pub force_reinstrument: bool,
    /// `SQTT_TRACE_ADDRESSES` (None = off).
    pub trace_addresses: Option<TraceAddresses>,
    /// `SQTT_SCOPE_WAVE/SIMD/CU/WG` scope filtering (None = off). Post-link it is enabled when any
    /// of the variables (or a `--scope*` flag) is given; absent masks take the spec's defaults.
    pub scope: Option<crate::snippets::ScopeMasks>,
    /// Post-link extra (issue 34), off by default: natural loops nested at most this deep
    /// (1 = outermost loops only) get enter/exit scopes ([`crate::loops`]); `None` = off.
    pub loops: Option<u32>,
    /// `--loops N:iters`: also a point marker on every back edge of a loop with a scope (one
    /// per iteration: per-iteration timing, at a per-iteration cost).
    pub loop_iters: bool,
    /// Post-link extra (issue 34), empty by default: user-named regions (`--region`, scopes)
    /// and points (`--point`) ([`crate::regions`]).
    pub regions: Vec<crate::regions::Spec>,
    /// `--keep-text`: `.text` stays where it is, byte for byte, and the instrumented functions
    /// go to a new executable segment (docs/left-alone.md, "kept in place"). The rewriter does
    /// this by itself when a function cannot move (a word that does not decode).
    pub keep_text: bool,
    /// Kernels (original entry addresses, bytes) whose in-kernel subroutines get no `F:` scope
    /// under `functions` (issue 37 item 3): the verifier rejected those scopes there, and the
    /// kernel keeps its other markers. Empty unless a verified rewrite fills it.
    pub unscoped_subroutines: std::collections::BTreeSet<u64>,
}

/// The derived form, except that `loops` and `keep_text` are left out when off and `regions`
/// and `unscoped_subroutines` when empty: the `.sqtt_patch` note
/// records this text, and outputs written without `--loops` keep the bytes they had before the
/// option existed.
impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Options");
        d.field("functions", &self.functions)
            .field("barriers", &self.barriers)
            .field("kernel_scopes", &self.kernel_scopes)
            .field("memory", &self.memory)
            .field("mem_barrier", &self.mem_barrier)
            .field("shader_clock_bits", &self.shader_clock_bits)
            .field("shader_clock_shift", &self.shader_clock_shift)
            .field("force_reinstrument", &self.force_reinstrument)
            .field("trace_addresses", &self.trace_addresses)
            .field("scope", &self.scope);
        if let Some(n) = self.loops {
            d.field("loops", &n);
        }
        if self.loop_iters {
            d.field("loop_iters", &true);
        }
        if !self.regions.is_empty() {
            let specs: Vec<String> = self
                .regions
                .iter()
                .map(|s| format!("{} {s}", s.kind.word()))
                .collect();
            d.field("regions", &specs);
        }
        if self.keep_text {
            d.field("keep_text", &true);
        }
        if !self.unscoped_subroutines.is_empty() {
            d.field("unscoped_subroutines", &self.unscoped_subroutines);
        }
        d.finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            functions: FunctionThreshold::Off,
            barriers: false,
            kernel_scopes: false,
            memory: None,
            mem_barrier: MemBarrier::Fence,
            shader_clock_bits: 0,
            shader_clock_shift: 4,
            force_reinstrument: false,
            trace_addresses: None,
            scope: None,
            loops: None,
            loop_iters: false,
            regions: Vec::new(),
            keep_text: false,
            unscoped_subroutines: std::collections::BTreeSet::new(),
        }
    }
}

/// A configuration value that cannot be used; the message names the variable and the value.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid {name}={value:?}: {why}")]
pub struct ConfigError {
    /// Variable or flag name, e.g. `SQTT_INSTRUMENT_FUNCTIONS`.
    pub name: &'static str,
    /// The rejected text.
    pub value: String,
    /// What is wrong with it.
    pub why: std::borrow::Cow<'static, str>,
}

/// The reason an integer field was rejected: too large for its type, or not decimal digits.
fn int_why(
    e: &std::num::ParseIntError,
    too_large: &'static str,
    not_decimal: &'static str,
) -> &'static str {
    match e.kind() {
        std::num::IntErrorKind::PosOverflow => too_large,
        _ => not_decimal,
    }
}

fn err(
    name: &'static str,
    value: &str,
    why: impl Into<std::borrow::Cow<'static, str>>,
) -> ConfigError {
    ConfigError {
        name,
        value: value.to_string(),
        why: why.into(),
    }
}

/// Parses `SQTT_INSTRUMENT_FUNCTIONS`: `N` (instruction count) or `cost:N`; `0` disables.
pub fn parse_functions(text: &str) -> Result<FunctionThreshold, ConfigError> {
    const NAME: &str = "SQTT_INSTRUMENT_FUNCTIONS";
    let t = text.trim();
    let (cost, digits) = match t.strip_prefix("cost:") {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let n: u64 = digits.parse().map_err(|e| {
        let why = int_why(
            &e,
            "N is out of range (at most 18446744073709551615)",
            "expected N or cost:N with a decimal N",
        );
        err(NAME, text, why)
    })?;
    Ok(match (n, cost) {
        (0, _) => FunctionThreshold::Off,
        (n, false) => FunctionThreshold::Count(n),
        (n, true) => FunctionThreshold::Cost(n),
    })
}

/// Parses `--loops N` or `--loops N:iters` (issue 34): `N` >= 1 bounds the nesting depth of
/// the loops given scopes (1 = outermost loops only), `0` is off; `:iters` adds a point marker
/// on every back edge. `N` is decimal digits only (no sign). An environment variable (`strict`
/// false) may also be empty (off) and carry surrounding blanks, as every `SQTT_*` variable; the
/// command-line flag (`strict`) may not (session-17 fresh tester). Returns (depth, iters).
/// Errors: anything else, naming `name`.
pub fn parse_loops(
    name: &'static str,
    text: &str,
    strict: bool,
) -> Result<(Option<u32>, bool), ConfigError> {
    let t = if strict { text } else { text.trim() };
    if strict && t.is_empty() {
        return Err(err(
            name,
            text,
            "expected N or N:iters (a loop nesting depth; 0 = off), not an empty value",
        ));
    }
    let (n, iters) = match t.split_once(':') {
        Some((n, "iters")) => (n, true),
        Some(_) => {
            return Err(err(
                name,
                text,
                "expected N or N:iters (after the colon only the literal word `iters`, which adds a point marker on every back edge)",
            ))
        }
        None => (t, false),
    };
    let depth = match n {
        "" | "0" if !iters => None,
        "0" => {
            return Err(err(
                name,
                text,
                "0:iters asks for back-edge markers with no loop scopes: give a depth N of 1 or more with :iters, or 0 alone for off",
            ))
        }
        _ if !n.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(err(name, text, "expected a loop nesting depth N of decimal digits (no sign or blanks; 1 = outermost loops only, 0 = off), optionally followed by :iters"))
        }
        _ => match n.parse::<u32>() {
            Ok(d) if d > 0 => Some(d),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                return Err(err(name, text, "the loop nesting depth N is out of range: at most 4294967295 (1 = outermost loops only, 0 = off)"))
            }
            _ => return Err(err(name, text, "expected a loop nesting depth N (a decimal number from 1 to 4294967295; 1 = outermost loops only, 0 = off), optionally followed by :iters")),
        },
    };
    Ok((depth, iters))
}

/// Parses a boolean toggle such as `SQTT_INSTRUMENT_BARRIERS`: the spec's values `0` and `1`
/// only (spec, "Environment variables"; surrounding blanks ignored, an empty value is `0`).
/// Errors: anything else (`yes`, `true`), naming `name`.
pub fn parse_toggle(name: &'static str, text: &str) -> Result<bool, ConfigError> {
    match text.trim() {
        "" | "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(err(name, text, "expected 0 or 1")),
    }
}

/// Parses `SQTT_INSTRUMENT_MEMORY=N:M` (`off`/`0`/empty = disabled).
pub fn parse_memory(text: &str) -> Result<Option<MemoryChunking>, ConfigError> {
    const NAME: &str = "SQTT_INSTRUMENT_MEMORY";
    let t = text.trim();
    if t.is_empty() || t == "off" || t == "0" {
        return Ok(None);
    }
    let (n, m) = t
        .split_once(':')
        .ok_or_else(|| err(NAME, text, "expected N:M"))?;
    let ops_per_marker: u32 = n.parse().map_err(|e| {
        let why = int_why(
            &e,
            "N is out of range (at most 4294967295)",
            "N must be a decimal number",
        );
        err(NAME, text, why)
    })?;
    let max_gap: u32 = m.parse().map_err(|e| {
        let why = int_why(
            &e,
            "M is out of range (at most 4294967295)",
            "M must be a decimal number",
        );
        err(NAME, text, why)
    })?;
    if ops_per_marker == 0 {
        return Err(err(NAME, text, "N must be at least 1"));
    }
    Ok(Some(MemoryChunking {
        ops_per_marker,
        max_gap,
    }))
}

/// Parses `SQTT_TRACE_ADDRESSES`: `memory`, `lds` or `memory,lds` (either order, spaces
/// allowed); `off`, `0` or empty disable it.
pub fn parse_trace_addresses(text: &str) -> Result<Option<TraceAddresses>, ConfigError> {
    const NAME: &str = "SQTT_TRACE_ADDRESSES";
    let t = text.trim();
    if t.is_empty() || t == "off" || t == "0" {
        return Ok(None);
    }
    let mut out = TraceAddresses::default();
    for part in t.split(',') {
        let seen = match part.trim() {
            "memory" => std::mem::replace(&mut out.memory, true),
            "lds" => std::mem::replace(&mut out.lds, true),
            _ => return Err(err(NAME, text, "expected memory, lds or memory,lds")),
        };
        if seen {
            return Err(err(NAME, text, "each of memory and lds may be named once"));
        }
    }
    Ok(Some(out))
}

/// Parses `SQTT_MEM_BARRIER` with the spec's synonyms.
pub fn parse_mem_barrier(text: &str) -> Result<MemBarrier, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "none" | "0" | "off" => Ok(MemBarrier::None),
        "asm" | "1" | "compiler" | "clobber" => Ok(MemBarrier::Asm),
        "" | "fence" | "2" | "on" | "hw" => Ok(MemBarrier::Fence),
        _ => Err(err("SQTT_MEM_BARRIER", text, "expected none, asm or fence")),
    }
}

type MaskSetter = fn(&mut crate::snippets::ScopeMasks, Option<u32>);

/// The scope-mask variables (spec, "Scope filtering (bitmasks)") and the field each sets.
pub const SCOPE_VARS: [(&str, MaskSetter); 4] = [
    ("SQTT_SCOPE_WAVE", |m, v| m.wave = v),
    ("SQTT_SCOPE_SIMD", |m, v| m.simd = v),
    ("SQTT_SCOPE_CU", |m, v| m.cu = v),
    ("SQTT_SCOPE_WG", |m, v| m.wg = v),
];

/// Parses a scope mask: decimal, `0x` hexadecimal, or `-1`; `-1`/`0xFFFFFFFF` mean unfiltered
/// (`None`).
pub fn parse_mask(name: &'static str, text: &str) -> Result<Option<u32>, ConfigError> {
    let t = text.trim();
    let v = if t == "-1" {
        u32::MAX
    } else if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
            .map_err(|_| err(name, text, "expected a mask (decimal, 0x hex or -1)"))?
    } else {
        t.parse()
            .map_err(|_| err(name, text, "expected a mask (decimal, 0x hex or -1)"))?
    };
    Ok((v != u32::MAX).then_some(v))
}

/// Parses a decimal `u32` knob such as `SQTT_SHADER_CLOCK_BITS`. Errors: not decimal digits, or
/// above 4294967295 (said as such).
pub fn parse_u32(name: &'static str, text: &str) -> Result<u32, ConfigError> {
    text.trim().parse().map_err(|e| {
        let why = int_why(
            &e,
            "out of range (at most 4294967295)",
            "expected a decimal number (0 to 4294967295)",
        );
        err(name, text, why)
    })
}

impl Options {
    /// Reads every `SQTT_*` variable present in `lookup` (normally `std::env::var`), starting from
    /// the defaults; absent variables keep their default.
    /// A variable that is set but blank (empty or only whitespace) counts as absent, for every
    /// variable alike (session-28 tester: some took a blank value as their default, others
    /// rejected it).
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Options, ConfigError> {
        let lookup = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let mut o = Options::default();
        if let Some(v) = lookup("SQTT_INSTRUMENT_FUNCTIONS") {
            o.functions = parse_functions(&v)?;
        }
        if let Some(v) = lookup("SQTT_INSTRUMENT_BARRIERS") {
            o.barriers = parse_toggle("SQTT_INSTRUMENT_BARRIERS", &v)?;
        }
        if let Some(v) = lookup("SQTT_INSTRUMENT_MEMORY") {
            o.memory = parse_memory(&v)?;
        }
        if let Some(v) = lookup("SQTT_MEM_BARRIER") {
            o.mem_barrier = parse_mem_barrier(&v)?;
        }
        if let Some(v) = lookup("SQTT_SHADER_CLOCK_BITS") {
            o.shader_clock_bits = parse_u32("SQTT_SHADER_CLOCK_BITS", &v)?;
        }
        if let Some(v) = lookup("SQTT_SHADER_CLOCK_SHIFT") {
            o.shader_clock_shift = parse_u32("SQTT_SHADER_CLOCK_SHIFT", &v)?;
        }
        if let Some(v) = lookup("SQTT_TRACE_ADDRESSES") {
            o.trace_addresses = parse_trace_addresses(&v)?;
        }
        for (name, set) in SCOPE_VARS {
            if let Some(v) = lookup(name) {
                let mut m = o.scope.unwrap_or_default();
                set(&mut m, parse_mask(name, &v)?);
                o.scope = Some(m);
            }
        }
        Ok(o)
    }

    /// Checks combinations the spec forbids: address tracing with memory-op markers ("Address
    /// Tracing", "Configuration"), and payload-bearing markers with shader-clock packing
    /// ("GFX12 Shader Clock Packing").
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let (Some(_), Some(m)) = (self.trace_addresses, self.memory) {
            return Err(err(
                "SQTT_INSTRUMENT_MEMORY (--memory)",
                &format!("{}:{}", m.ops_per_marker, m.max_gap),
                "cannot be combined with SQTT_TRACE_ADDRESSES (--trace-addresses): address tracing already emits a header marker for every memory operation",
            ));
        }
        if self.trace_addresses.is_some() && self.shader_clock_bits > 0 {
            return Err(err(
                "SQTT_SHADER_CLOCK_BITS (--shader-clock-bits)",
                &self.shader_clock_bits.to_string(),
                "cannot be combined with SQTT_TRACE_ADDRESSES (--trace-addresses): address traces carry payload records (R: rows), which need shader_clock_bits=0",
            ));
        }
        // The clock field shares a 32-bit marker with the two flag bits and at least one ID bit
        // (spec "GFX12 Shader Clock Packing": 30 - shader_clock_bits ID bits), and its source
        // window [shift, shift + bits) lies in the 32-bit HW_REG_SHADER_CYCLES_LO word.
        if self.shader_clock_bits > 29 {
            return Err(err(
                "SQTT_SHADER_CLOCK_BITS (--shader-clock-bits)",
                &self.shader_clock_bits.to_string(),
                "at most 29 clock bits fit in a marker beside its two flag bits and one marker ID bit",
            ));
        }
        if self.shader_clock_bits + self.shader_clock_shift > 32 {
            return Err(err(
                "SQTT_SHADER_CLOCK_SHIFT (--shader-clock-shift)",
                &self.shader_clock_shift.to_string(),
                format!(
                    "with {} clock bits the shift is at most {} (bits + shift <= 32: the clock window [shift, shift + bits) lies in the 32-bit HW_REG_SHADER_CYCLES_LO)",
                    self.shader_clock_bits,
                    32 - self.shader_clock_bits
                ),
            ));
        }
        Ok(())
    }

    /// True when at least one kind of marker is requested.
    pub fn any_enabled(&self) -> bool {
        self.functions != FunctionThreshold::Off
            || self.barriers
            || self.kernel_scopes
            || self.memory.is_some()
            || self.trace_addresses.is_some()
            || self.loops.is_some()
            || !self.regions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    /// Session-17 fresh tester: `--loops` took an empty value, `+2` and blanks.
    #[test]
    fn loops_flag_is_strict_and_the_variable_takes_blanks() {
        for bad in ["", " ", "+2", " 2", "2 ", "2: iters", "-1", "2:iter"] {
            let e = parse_loops("--loops", bad, true).expect_err(bad);
            assert_eq!(e.name, "--loops");
        }
        assert_eq!(parse_loops("--loops", "2", true), Ok((Some(2), false)));
        assert_eq!(parse_loops("--loops", "0", true), Ok((None, false)));
        assert_eq!(parse_loops("--loops", "1:iters", true), Ok((Some(1), true)));
        assert_eq!(parse_loops("V", " 2 ", false), Ok((Some(2), false)));
        assert_eq!(parse_loops("V", "", false), Ok((None, false)));
        assert!(parse_loops("V", "+2", false).is_err());
    }

    /// Session-20 fresh tester: `--loops 4294967296` said "a decimal number" without the
    /// accepted range; a value past `u32` now names the maximum, as `--memory` does.
    #[test]
    fn a_loop_depth_past_u32_names_the_accepted_range() {
        for big in ["4294967296", "99999999999999999999", "4294967296:iters"] {
            let e = parse_loops("--loops", big, true).expect_err(big);
            assert!(
                e.why.contains("out of range") && e.why.contains("at most 4294967295"),
                "{big}: {}",
                e.why
            );
        }
        assert_eq!(
            parse_loops("--loops", "4294967295", true),
            Ok((Some(u32::MAX), false))
        );
        let e = parse_loops("--loops", "0:iters", true).expect_err("0:iters");
        assert!(e.why.contains("a depth N of 1 or more"), "{}", e.why);
        let e = parse_u32("SQTT_SHADER_CLOCK_BITS", "4294967296").expect_err("past u32");
        assert!(e.why.contains("at most 4294967295"), "{}", e.why);
    }

    use super::*;

    #[test]
    fn functions_forms() {
        assert_eq!(parse_functions("10"), Ok(FunctionThreshold::Count(10)));
        assert_eq!(parse_functions("cost:7"), Ok(FunctionThreshold::Cost(7)));
        assert_eq!(parse_functions("0"), Ok(FunctionThreshold::Off));
        assert!(parse_functions("cost:").is_err());
        assert!(parse_functions("-3").is_err());
        // Too large is said as such (fresh tester: it said "with a decimal N").
        let big = parse_functions("99999999999999999999999").unwrap_err();
        assert!(big.why.contains("out of range"), "{}", big.why);
        let big = parse_memory("4294967296:1").unwrap_err();
        assert!(big.why.contains("N is out of range"), "{}", big.why);
        assert!(parse_memory("x:1").unwrap_err().why.contains("decimal"));
    }

    #[test]
    fn memory_and_barrier_forms() {
        assert_eq!(
            parse_memory("2:5"),
            Ok(Some(MemoryChunking {
                ops_per_marker: 2,
                max_gap: 5
            }))
        );
        assert_eq!(parse_memory("off"), Ok(None));
        assert!(parse_memory("0:5").is_err());
        assert_eq!(parse_mem_barrier("clobber"), Ok(MemBarrier::Asm));
        assert_eq!(parse_mem_barrier("hw"), Ok(MemBarrier::Fence));
        assert!(parse_mem_barrier("strong").is_err());
    }

    #[test]
    fn env_reading_and_validation() {
        let env = |k: &str| match k {
            "SQTT_INSTRUMENT_FUNCTIONS" => Some("cost:3".to_string()),
            "SQTT_INSTRUMENT_BARRIERS" => Some("1".to_string()),
            _ => None,
        };
        let o = Options::from_env(env).unwrap();
        assert_eq!(o.functions, FunctionThreshold::Cost(3));
        assert!(o.barriers);
        assert!(o.validate().is_ok());
        // Blank variables are absent, whichever variable it is.
        let blank = |_: &str| Some(" ".to_string());
        assert!(Options::from_env(blank).is_ok_and(|o| o == Options::default()));
        let bad = Options {
            shader_clock_bits: 30,
            ..Options::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn trace_addresses_forms_and_exclusions() {
        let both = Some(TraceAddresses {
            memory: true,
            lds: true,
        });
        assert_eq!(parse_trace_addresses("memory,lds"), Ok(both));
        assert_eq!(parse_trace_addresses(" lds , memory "), Ok(both));
        assert_eq!(
            parse_trace_addresses("lds"),
            Ok(Some(TraceAddresses {
                memory: false,
                lds: true
            }))
        );
        assert_eq!(parse_trace_addresses("off"), Ok(None));
        assert!(parse_trace_addresses("global").is_err());
        assert!(parse_trace_addresses("memory,memory").is_err());
        assert!(parse_trace_addresses("lds,memory,lds").is_err());
        let env = |k: &str| match k {
            "SQTT_TRACE_ADDRESSES" => Some("memory".to_string()),
            "SQTT_INSTRUMENT_MEMORY" => Some("2:5".to_string()),
            _ => None,
        };
        let o = Options::from_env(env).unwrap();
        assert!(o.validate().is_err(), "memory markers + address tracing");
        let packed = Options {
            trace_addresses: both,
            shader_clock_bits: 8,
            ..Options::default()
        };
        assert!(
            packed.validate().is_err(),
            "clock packing + payload markers"
        );
        assert!(Options {
            trace_addresses: both,
            ..Options::default()
        }
        .validate()
        .is_ok());
    }
}
