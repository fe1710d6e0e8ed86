//! The tool's configuration, read once from the environment when the runtime loads it.
//!
//! Instrumentation: the spec's `SQTT_*` variables, exactly as the command line reads them
//! ([`sqtt_pipeline::env_options`]). Outputs: `SQTT_PATCH_REPORT`, `SQTT_PATCH_SAVE`,
//! `SQTT_PATCH_CACHE` (`docs/exec.md`).

use sqtt_rewrite::config::Options;
use std::path::PathBuf;

/// One JSON report line per code object is appended to this file.
pub const REPORT_VAR: &str = "SQTT_PATCH_REPORT";
/// Original and instrumented objects are written into this directory.
pub const SAVE_VAR: &str = "SQTT_PATCH_SAVE";
/// Cache directory; empty, `0` or `off` turns the cache off. Default
/// `$XDG_CACHE_HOME/sqtt-patch`, else `$HOME/.cache/sqtt-patch`.
pub const CACHE_VAR: &str = "SQTT_PATCH_CACHE";

/// For the tests only: `1` makes the processing of every object panic, to check that the panic
/// is caught at the FFI boundary and the loader gets the original bytes.
pub const TEST_PANIC_VAR: &str = "SQTT_PATCH_TEST_PANIC";

/// What the tool does with each code object.
#[derive(Debug)]
pub struct Config {
    /// The instrumentation options.
    pub opts: Options,
    /// `SQTT_PATCH_REPORT`.
    pub report: Option<PathBuf>,
    /// `SQTT_PATCH_SAVE`.
    pub save: Option<PathBuf>,
    /// The cache directory, `None` when the cache is off.
    pub cache: Option<PathBuf>,
    /// [`TEST_PANIC_VAR`] is `1`.
    pub test_panic: bool,
}

/// Reads the configuration through `lookup` (normally `std::env::var`). Errors: a malformed
/// `SQTT_*` value, a forbidden combination, or nothing requested (the message says which).
pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
    let opts = sqtt_pipeline::env_options(&lookup).map_err(|e| e.to_string())?;
    if !opts.any_enabled() {
        return Err("nothing requested: set SQTT_INSTRUMENT_FUNCTIONS, SQTT_INSTRUMENT_BARRIERS, SQTT_INSTRUMENT_MEMORY, SQTT_TRACE_ADDRESSES or SQTT_PATCH_KERNEL_SCOPES (sqtt-patch exec sets them from its flags)".into());
    }
    let path = |k: &str| lookup(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = match lookup(CACHE_VAR) {
        Some(v) if v.is_empty() || v == "0" || v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => path("XDG_CACHE_HOME")
            .map(|d| d.join("sqtt-patch"))
            .or_else(|| path("HOME").map(|h| h.join(".cache/sqtt-patch"))),
    };
    Ok(Config {
        opts,
        report: path(REPORT_VAR),
        save: path(SAVE_VAR),
        cache,
        test_panic: lookup(TEST_PANIC_VAR).as_deref() == Some("1"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn cache_directory_defaults_and_off() {
        let c = from_env(env(&[
            ("SQTT_INSTRUMENT_BARRIERS", "1"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ]))
        .unwrap();
        assert_eq!(c.cache, Some(PathBuf::from("/x/sqtt-patch")));
        let c = from_env(env(&[("SQTT_INSTRUMENT_BARRIERS", "1"), ("HOME", "/h")])).unwrap();
        assert_eq!(c.cache, Some(PathBuf::from("/h/.cache/sqtt-patch")));
        let c = from_env(env(&[
            ("SQTT_INSTRUMENT_BARRIERS", "1"),
            ("HOME", "/h"),
            (CACHE_VAR, "off"),
        ]))
        .unwrap();
        assert_eq!(c.cache, None);
    }

    #[test]
    fn bad_or_missing_requests_are_refused_naming_the_variable() {
        let e = from_env(env(&[("SQTT_INSTRUMENT_BARRIERS", "2")])).unwrap_err();
        assert!(e.contains("SQTT_INSTRUMENT_BARRIERS"), "{e}");
        let e = from_env(env(&[])).unwrap_err();
        assert!(e.starts_with("nothing requested"), "{e}");
        let c = from_env(env(&[("SQTT_PATCH_KERNEL_SCOPES", "1")])).unwrap();
        assert!(c.opts.kernel_scopes);
    }
}
