//! Finding UI directories and loaded code objects under a path (att-format note §1.1, §1.9).
//!
//! A capture is untrusted input (issue 32): a path it names (a `filenames.json` entry) or a
//! symbolic link in it may lead anywhere. Every file read must lie inside the capture: a
//! listed name is taken relative to its UI directory and refused when it is absolute or has a
//! `..` component ([`listed`]), and a file (listed or found) whose resolved path leaves the
//! directory it belongs to is refused ([`resolves_inside`]). The callers skip what is refused
//! with a warning naming it (docs/trace.md, "What is read").

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Why a name listed by a capture file is not read: it is absolute or has a `..` component.
pub const LISTED_OUTSIDE: &str =
    "filenames.json entry naming a path outside its UI directory (absolute or with ..; skipped)";
/// Why a file of a capture is not read: a symbolic link (or a link on its way) leads outside
/// the directory it belongs to.
pub const LINK_OUTSIDE: &str = "file leading outside the capture (symbolic link; skipped)";

/// The path of `name`, listed by a file of the UI directory `dir`: `dir/name` when `name` is
/// relative without `..`; `None` (refused) otherwise. Whether it resolves inside `dir` through
/// symbolic links is [`resolves_inside`]'s question.
pub fn listed(dir: &Path, name: &str) -> Option<PathBuf> {
    let rel = Path::new(name);
    let plain = rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    (plain && !name.is_empty()).then(|| dir.join(rel))
}

/// False when `path` exists and its resolved path (symbolic links followed) is not under the
/// resolved `base`. A path that does not resolve (missing, a dangling link) is left to the
/// caller, which reports it as missing.
pub fn resolves_inside(base: &Path, path: &Path) -> bool {
    match (std::fs::canonicalize(base), std::fs::canonicalize(path)) {
        (Ok(b), Ok(p)) => p.starts_with(b),
        _ => true,
    }
}

/// True for a directory that holds decoded trace output: named `ui_output_*`, or holding
/// `occupancy.json`, `filenames.json` or a `shaderdata_*.json`.
fn is_ui_dir(dir: &Path) -> bool {
    // `perfetto`'s output directory (`<capture>.perfetto/`, named after a UI directory when the
    // capture given was one) is never a UI directory.
    if dir.extension().is_some_and(|e| e == "perfetto") {
        return false;
    }
    if dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("ui_output_"))
    {
        return true;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let n = e.file_name();
        let n = n.to_string_lossy();
        n == "occupancy.json"
            || n == "filenames.json"
            || (n.starts_with("shaderdata_") && n.ends_with(".json"))
    })
}

/// The code-object load id in a file name: the digits after `code_object_id_` (rocprofv3's
/// `<gpu>_code_object_id_<n>.out`, `att_tool.py`'s `(?:^|_)code_object_id_(\d+)`). Only `.out`,
/// `.co` and `.hsaco` files count.
pub fn code_object_id(name: &str) -> Option<u32> {
    let ext_ok = [".out", ".co", ".hsaco"].iter().any(|e| name.ends_with(e));
    let at = name.find("code_object_id_")?;
    if !ext_ok || (at > 0 && !name[..at].ends_with('_')) {
        return None;
    }
    let digits: String = name[at + "code_object_id_".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// What a walk found: UI directories (sorted) and code objects by id.
#[derive(Debug, Default, Clone)]
pub struct Found {
    /// Every UI directory, sorted by path.
    pub ui_dirs: Vec<PathBuf>,
    /// Code-object id -> files claiming it, sorted by path.
    pub code_objects: BTreeMap<u32, Vec<PathBuf>>,
    /// Code-object files left out because they resolve outside the directory walked
    /// ([`LINK_OUTSIDE`]), sorted.
    pub outside: Vec<PathBuf>,
}

/// Walks `root` (a file or a directory; symbolic links to directories are not followed; a
/// code-object file that resolves outside `root`, or outside the parent when `root` is a UI
/// directory, is listed in [`Found::outside`], not used).
pub fn walk(root: &Path) -> Found {
    let mut found = Found::default();
    let mut stack = vec![root.to_path_buf()];
    if root.is_dir() && is_ui_dir(root) {
        found.ui_dirs.push(root.to_path_buf());
    }
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let p = e.path();
            if ft.is_dir() {
                if is_ui_dir(&p) {
                    found.ui_dirs.push(p.clone());
                }
                stack.push(p);
            } else if let Some(id) = code_object_id(&e.file_name().to_string_lossy()) {
                if resolves_inside(root, &p) {
                    found.code_objects.entry(id).or_default().push(p);
                } else {
                    found.outside.push(p);
                }
            }
        }
    }
    // A UI directory's parent holds the `.out` files of the same run; add it when the walk
    // started inside the UI directory.
    if found.ui_dirs.first().map(PathBuf::as_path) == Some(root) {
        if let Some(parent) = root.parent() {
            if let Ok(rd) = std::fs::read_dir(parent) {
                for e in rd.flatten() {
                    if let Some(id) = code_object_id(&e.file_name().to_string_lossy()) {
                        if resolves_inside(parent, &e.path()) {
                            found.code_objects.entry(id).or_default().push(e.path());
                        } else {
                            found.outside.push(e.path());
                        }
                    }
                }
            }
        }
    }
    found.ui_dirs.sort();
    found.outside.sort();
    found.outside.dedup();
    for v in found.code_objects.values_mut() {
        v.sort();
        v.dedup();
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_object_names() {
        assert_eq!(code_object_id("gfx942_code_object_id_7.out"), Some(7));
        assert_eq!(
            code_object_id("1_agent_gfx1201_code_object_id_12.out"),
            Some(12)
        );
        assert_eq!(code_object_id("code_object_id_3_x.hsaco"), Some(3));
        assert_eq!(code_object_id("gfx942_code_object_id_7.att"), None);
        assert_eq!(code_object_id("xcode_object_id_7.out"), None);
        assert_eq!(code_object_id("gfx942_code_object_id_.out"), None);
    }

    #[test]
    fn listed_names_stay_inside() {
        let d = Path::new("cap/ui");
        assert_eq!(listed(d, "se_0.json"), Some(d.join("se_0.json")));
        assert_eq!(
            listed(d, "./sub/se_0.json"),
            Some(d.join("./sub/se_0.json"))
        );
        for bad in ["../../etc/hostname", "/etc/hostname", "sub/../../x", ""] {
            assert_eq!(listed(d, bad), None, "{bad}");
        }
    }
}
