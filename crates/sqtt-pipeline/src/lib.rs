//! The verified rewrite of one code object, shared by the `sqtt-patch` command (its main job,
//! `--fatbin` and `batch`) and the load-time tools library (`sqtt-patch-tool`), so that both
//! write exactly the same bytes for the same input and options.
//!
//! - [`verified`]: rewrite with `sqtt-rewrite`, check with the independent translation validator
//!   `sqtt-verify`, leave alone the functions it rejects and rewrite again.
//! - [`env_options`]: the options from the spec's `SQTT_*` environment variables.

pub mod verified;

use sqtt_rewrite::config::{ConfigError, Options};
use sqtt_rewrite::timings::Timings;

pub use verified::Patched;

/// Our own variable for kernel scopes (the spec has none: its pass never marks kernels); `1`
/// turns them on, `0` or absent leaves them off. Set by `sqtt-patch exec --kernel-scopes`.
pub const KERNEL_SCOPES_VAR: &str = "SQTT_PATCH_KERNEL_SCOPES";

/// Our own variable for instrumenting an object sqtt-patch already instrumented (`1`); set by
/// `sqtt-patch exec --force`.
pub const FORCE_VAR: &str = "SQTT_PATCH_FORCE";

/// Our own variable for keeping `.text` in place (`1`, as `--keep-text`; docs/left-alone.md);
/// set by `sqtt-patch exec --keep-text`.
pub const KEEP_TEXT_VAR: &str = "SQTT_PATCH_KEEP_TEXT";

/// Our own variable for loop scopes (`N` or `N:iters`, as `--loops`); set by `sqtt-patch exec --loops`.
pub const LOOPS_VAR: &str = "SQTT_PATCH_LOOPS";

/// Our own variable for user-named regions and points: a profile plan's text (one
/// `region NAME=...` or `point NAME=...` per line, as `--regions FILE`,
/// [`sqtt_rewrite::regions::parse_plan`]); set by `sqtt-patch exec --region/--point/--regions`.
pub const REGIONS_VAR: &str = "SQTT_PATCH_REGIONS";

/// Options from the spec's `SQTT_*` variables (`SQTT_INSTRUMENT_FUNCTIONS`,
/// `SQTT_INSTRUMENT_BARRIERS`, `SQTT_INSTRUMENT_MEMORY`, `SQTT_TRACE_ADDRESSES`,
/// `SQTT_MEM_BARRIER`, `SQTT_SCOPE_*`, `SQTT_SHADER_CLOCK_*`: `docs/markers/SPEC.md` of
/// rocprof-trace-decoder, "Configuration") plus [`KERNEL_SCOPES_VAR`], [`LOOPS_VAR`], [`REGIONS_VAR`], [`KEEP_TEXT_VAR`] and
/// [`FORCE_VAR`], read through `lookup`
/// (normally `std::env::var`), then checked for the combinations the spec forbids.
/// Errors: a malformed value or a forbidden combination, naming the variable.
pub fn env_options(lookup: impl Fn(&str) -> Option<String>) -> Result<Options, ConfigError> {
    let mut o = Options::from_env(&lookup)?;
    if let Some(v) = lookup(KERNEL_SCOPES_VAR) {
        o.kernel_scopes = sqtt_rewrite::config::parse_toggle(KERNEL_SCOPES_VAR, &v)?;
    }
    if let Some(v) = lookup(LOOPS_VAR) {
        (o.loops, o.loop_iters) = sqtt_rewrite::config::parse_loops(LOOPS_VAR, &v, false)?;
    }
    if let Some(v) = lookup(REGIONS_VAR) {
        let bad = |e: String| ConfigError {
            name: REGIONS_VAR,
            value: e,
            why: "expected one `region NAME=...` or `point NAME=...` per line".into(),
        };
        o.regions = sqtt_rewrite::regions::parse_plan(REGIONS_VAR, &v).map_err(bad)?;
        sqtt_rewrite::regions::check_unique(&o.regions).map_err(bad)?;
    }
    if let Some(v) = lookup(KEEP_TEXT_VAR) {
        o.keep_text = sqtt_rewrite::config::parse_toggle(KEEP_TEXT_VAR, &v)?;
    }
    if let Some(v) = lookup(FORCE_VAR) {
        o.force_reinstrument = sqtt_rewrite::config::parse_toggle(FORCE_VAR, &v)?;
    }
    o.validate()?;
    Ok(o)
}

/// Rewrites `input` and verifies it with the real translation validator
/// ([`verified::rewrite_verified`] with `sqtt_verify::verify`). Never returns bytes the
/// verifier rejects. Errors: bad input, named by `name`.
pub fn rewrite_and_verify(
    name: &str,
    input: &[u8],
    opts: &Options,
    t: &mut Timings,
) -> anyhow::Result<Patched> {
    verified::rewrite_verified(name, input, opts, t, &|o, n| sqtt_verify::verify(o, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `exec --region/--point/--regions` reaches the tools library as a plan's text.
    #[test]
    fn regions_travel_as_a_plan() {
        let plan = "region a=k.hip:3-9\npoint b=k+0x10\n";
        let o = env_options(|k| (k == REGIONS_VAR).then(|| plan.to_string())).unwrap();
        let specs: Vec<String> = o.regions.iter().map(ToString::to_string).collect();
        assert_eq!(specs, ["a=k.hip:3-9", "b=k+0x10"]);
        assert!(o.any_enabled());
        for bad in ["region a=k.hip:9-3", "region a=k.c:1\nregion a=k.c:2"] {
            let e = env_options(|k| (k == REGIONS_VAR).then(|| bad.to_string())).unwrap_err();
            assert_eq!(e.name, REGIONS_VAR, "{bad}");
        }
    }
}
