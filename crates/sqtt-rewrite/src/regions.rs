//! User-named regions and points (issue 34: `--region`, `--point`, `--regions FILE`): the
//! specifications and their parser. Planning them is [`crate::inlined`]'s job (a region is a
//! scope like a loop: `crate::inlined::loop_scopes`).
//!
//! Syntax (one specification):
//! - `NAME=FILE:LINE-LINE` (region) or `NAME=FILE:LINE` (point, or a one-line region): the code
//!   of those lines of FILE by the DWARF line table;
//! - `NAME=SYMBOL+0xA..0xB` (region: the instructions starting at byte offsets `[A, B)` of the
//!   function SYMBOL) or `NAME=SYMBOL+0xA` (point: the instruction at offset A).
//!
//! NAME is 1 to 64 characters from `A-Z a-z 0-9 _ . -` (it becomes part of a funcmap row, whose
//! name must not hold `@`, `:` or blanks: `docs/background/funcmap-contract.md`). A plan file
//! holds one `region SPEC` or `point SPEC` per line; `#` starts a comment (at the start of a line
//! or after a blank), blank lines are ignored.

use std::collections::HashSet;

/// Whether a specification asks for a scope or a point marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecKind {
    /// `--region`: enter/exit markers (`U:` row).
    Region,
    /// `--point`: one point marker (`P:` row).
    Point,
}

impl SpecKind {
    /// `region` or `point` (the flag without dashes, the plan file's keyword).
    pub fn word(self) -> &'static str {
        match self {
            SpecKind::Region => "region",
            SpecKind::Point => "point",
        }
    }
}

/// Where the code of a specification is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    /// Lines `first..=last` (1-based) of the source file `file` (matched against the line
    /// table's file paths: equal, or ending with `/` + `file`).
    Lines {
        /// File as given.
        file: String,
        /// First line.
        first: u64,
        /// Last line (`== first` for a point).
        last: u64,
    },
    /// Byte offsets from the start of the function symbol `symbol`: `[start, end)` for a region,
    /// `start` alone (`end == None`) for a point.
    Offsets {
        /// Function symbol name.
        symbol: String,
        /// First offset (bytes).
        start: u64,
        /// End offset (bytes, exclusive); `None` for a point.
        end: Option<u64>,
    },
}

/// One `--region` or `--point` specification.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Spec {
    /// Region or point.
    pub kind: SpecKind,
    /// User's name.
    pub name: String,
    /// Where its code is.
    pub place: Place,
}

impl std::fmt::Display for Spec {
    /// The specification as the user writes it (`NAME=FILE:LINE-LINE`, ...).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=", self.name)?;
        match &self.place {
            Place::Lines { file, first, last } if first == last => write!(f, "{file}:{first}"),
            Place::Lines { file, first, last } => write!(f, "{file}:{first}-{last}"),
            Place::Offsets {
                symbol,
                start,
                end: None,
            } => write!(f, "{symbol}+{start:#x}"),
            Place::Offsets {
                symbol,
                start,
                end: Some(e),
            } => write!(f, "{symbol}+{start:#x}..{e:#x}"),
        }
    }
}

/// Longest NAME accepted (characters).
pub const MAX_NAME: usize = 64;

/// Parses one specification `text` (`NAME=...`, see the module documentation) of `kind`.
/// Errors: a message naming what is wrong (the caller names the flag or the file line).
pub fn parse_spec(kind: SpecKind, text: &str) -> Result<Spec, String> {
    let text = text.trim();
    let Some((name, rest)) = text.split_once('=') else {
        return Err("expected NAME=FILE:LINE[-LINE] or NAME=SYMBOL+0xOFFSET[..0xEND]".into());
    };
    let name = name.trim();
    let rest = rest.trim();
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("the name must have 1 to {MAX_NAME} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "the name {name:?} holds {c:?}: use letters, digits, '_', '.' and '-' only (it becomes part of a funcmap row)"
        ));
    }
    let place = match lines(rest) {
        Some(r) => r?,
        None => match offsets(rest) {
            Some(r) => r?,
            None => {
                return Err(format!(
                    "{rest:?} is neither FILE:LINE[-LINE] nor SYMBOL+0xOFFSET[..0xEND]"
                ))
            }
        },
    };
    match (&place, kind) {
        (Place::Lines { first, last, .. }, SpecKind::Point) if first != last => {
            return Err("a point names one line (FILE:LINE), not a range".into())
        }
        (Place::Offsets { end: Some(_), .. }, SpecKind::Point) => {
            return Err("a point names one offset (SYMBOL+0xOFFSET), not a range".into())
        }
        (Place::Offsets { end: None, .. }, SpecKind::Region) => {
            return Err("a region by offsets needs an end: SYMBOL+0xSTART..0xEND".into())
        }
        _ => {}
    }
    Ok(Spec {
        kind,
        name: name.to_string(),
        place,
    })
}

/// `FILE:LINE` or `FILE:LINE-LINE`; `None` when `s` does not end in `:DIGITS[-DIGITS]`.
fn lines(s: &str) -> Option<Result<Place, String>> {
    let (file, nums) = s.rsplit_once(':')?;
    let (a, b) = nums.split_once('-').unwrap_or((nums, nums));
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    Some((|| {
        if file.is_empty() {
            return Err("no file before ':LINE'".to_string());
        }
        let num = |x: &str| {
            x.parse::<u64>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("line {x} is not a line number (1 or more)"))
        };
        let (first, last) = (num(a)?, num(b)?);
        if first > last {
            return Err(format!("the line range {first}-{last} is empty"));
        }
        Ok(Place::Lines {
            file: file.to_string(),
            first,
            last,
        })
    })())
}

/// `SYMBOL+0xA` or `SYMBOL+0xA..0xB`; `None` when `s` has no `+0x`.
fn offsets(s: &str) -> Option<Result<Place, String>> {
    let (symbol, offs) = s.rsplit_once("+0x").or_else(|| s.rsplit_once("+0X"))?;
    Some((|| {
        if symbol.is_empty() {
            return Err("no symbol before '+0x'".to_string());
        }
        let hex = |x: &str| {
            u64::from_str_radix(x, 16)
                .ok()
                .filter(|_| !x.starts_with('+'))
                .ok_or_else(|| format!("{x:?} is not a hexadecimal offset"))
        };
        let (start, end) = match offs.split_once("..") {
            Some((a, b)) => {
                let b = b
                    .strip_prefix("0x")
                    .or_else(|| b.strip_prefix("0X"))
                    .ok_or_else(|| format!("the end {b:?} must be hexadecimal with 0x"))?;
                (hex(a)?, Some(hex(b)?))
            }
            None => (hex(offs)?, None),
        };
        if let Some(e) = end.filter(|&e| e <= start) {
            return Err(format!("the offset range {start:#x}..{e:#x} is empty"));
        }
        Ok(Place::Offsets {
            symbol: symbol.to_string(),
            start,
            end,
        })
    })())
}

/// Parses a plan file's text (`--regions FILE`): one `region SPEC` or `point SPEC` per line,
/// `#` comments, blank lines. `source` names the file in errors (`source:LINE: ...`).
pub fn parse_plan(source: &str, text: &str) -> Result<Vec<Spec>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        let at = |why: String| format!("{source}:{}: {line:?}: {why}", n + 1);
        let (word, spec) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let kind = match word {
            "region" => SpecKind::Region,
            "point" => SpecKind::Point,
            _ => {
                return Err(at(
                    "expected 'region NAME=...' or 'point NAME=...'".to_string()
                ))
            }
        };
        out.push(parse_spec(kind, spec).map_err(at)?);
    }
    Ok(out)
}

/// `line` without its comment: from a `#` at its start or after a blank.
fn strip_comment(line: &str) -> &str {
    let b = line.as_bytes();
    match (0..b.len()).find(|&i| b[i] == b'#' && (i == 0 || b[i - 1].is_ascii_whitespace())) {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Checks a whole set of specifications: two of one kind may not share a name (their rows
/// would be told apart by function only). Errors name the repeated specification.
pub fn check_unique(specs: &[Spec]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for s in specs {
        if !seen.insert((s.kind, s.name.as_str())) {
            return Err(format!(
                "{} {s}: the name {:?} is used by another {} (names must be unique)",
                s.kind.word(),
                s.name,
                s.kind.word()
            ));
        }
    }
    Ok(())
}

/// True when the line-table path `path` is the file the user named: equal, or ending with
/// `/` + `file` (a relative path names the trailing components of the compiler's path).
pub fn file_matches(path: &str, file: &str) -> bool {
    path == file
        || (path.len() > file.len()
            && path.ends_with(file)
            && path.as_bytes()[path.len() - file.len() - 1] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let r = parse_spec(SpecKind::Region, "main_loop=src/a.hip:10-20").unwrap();
        assert_eq!(
            r.place,
            Place::Lines {
                file: "src/a.hip".into(),
                first: 10,
                last: 20
            }
        );
        assert_eq!(r.to_string(), "main_loop=src/a.hip:10-20");
        let r = parse_spec(SpecKind::Region, "x=_Z3fooPi+0x10..0x2C").unwrap();
        assert_eq!(
            r.place,
            Place::Offsets {
                symbol: "_Z3fooPi".into(),
                start: 0x10,
                end: Some(0x2c)
            }
        );
        let p = parse_spec(SpecKind::Point, "p.1=k+0x8").unwrap();
        assert_eq!(p.to_string(), "p.1=k+0x8");
        let p = parse_spec(SpecKind::Point, "p=C:/x/a.c:7").unwrap();
        assert_eq!(p.to_string(), "p=C:/x/a.c:7");
        // A one-line region.
        assert!(parse_spec(SpecKind::Region, "r=a.c:7").is_ok());
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        for (kind, text, want) in [
            (SpecKind::Region, "a.c:1-2", "expected NAME="),
            (SpecKind::Region, "=a.c:1-2", "1 to 64"),
            (SpecKind::Region, "a b=a.c:1-2", "holds ' '"),
            (SpecKind::Region, "a@b=a.c:1-2", "holds '@'"),
            (SpecKind::Region, "r=a.c:0-2", "not a line number"),
            (SpecKind::Region, "r=a.c:5-2", "empty"),
            (SpecKind::Region, "r=:5", "no file"),
            (SpecKind::Region, "r=f+0x10", "needs an end"),
            (SpecKind::Region, "r=f+0x10..0x10", "empty"),
            (SpecKind::Region, "r=f+0x10..16", "hexadecimal with 0x"),
            (SpecKind::Region, "r=f+0xzz..0x20", "not a hexadecimal"),
            (SpecKind::Region, "r=+0x1..0x2", "no symbol"),
            (SpecKind::Region, "r=a.c", "neither"),
            (SpecKind::Point, "p=a.c:1-3", "one line"),
            (SpecKind::Point, "p=f+0x1..0x4", "one offset"),
        ] {
            let e = parse_spec(kind, text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn plan_files_parse_and_name_the_bad_line() {
        let plan = "# profile plan\n\nregion main=k.hip:10-20   # the main loop\npoint p=k+0x40\n  region tail=k+0x80..0x90\n";
        let v = parse_plan("plan.txt", plan).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].kind, SpecKind::Region);
        assert_eq!(v[1].kind, SpecKind::Point);
        assert_eq!(v[2].to_string(), "tail=k+0x80..0x90");
        // A '#' inside a path is not a comment.
        let v = parse_plan("p", "point x=dir#1/a.c:3").unwrap();
        assert_eq!(v[0].to_string(), "x=dir#1/a.c:3");
        let e = parse_plan("plan.txt", "region a=k.c:1-2\nloop b=k.c:3\n").unwrap_err();
        assert!(
            e.starts_with("plan.txt:2: \"loop b=k.c:3\": expected"),
            "{e}"
        );
        let e = parse_plan("plan.txt", "\n\npoint b=k.c:3-4\n").unwrap_err();
        assert!(
            e.starts_with("plan.txt:3: ") && e.contains("one line"),
            "{e}"
        );
        let e = parse_plan("plan.txt", "region\n").unwrap_err();
        assert!(e.starts_with("plan.txt:1: "), "{e}");
    }

    #[test]
    fn names_are_unique_per_kind() {
        let a = parse_spec(SpecKind::Region, "x=a.c:1-2").unwrap();
        let b = parse_spec(SpecKind::Point, "x=a.c:1").unwrap();
        assert!(check_unique(&[a.clone(), b]).is_ok());
        let e = check_unique(&[a.clone(), a]).unwrap_err();
        assert!(e.contains("region x=a.c:1-2"), "{e}");
    }

    #[test]
    fn files_match_by_trailing_components() {
        assert!(file_matches("/src/fixtures/loops.S", "loops.S"));
        assert!(file_matches("/src/fixtures/loops.S", "fixtures/loops.S"));
        assert!(file_matches("loops.S", "loops.S"));
        assert!(!file_matches("/src/fixtures/myloops.S", "loops.S"));
        assert!(!file_matches("/src/loops.S.in", "loops.S"));
    }
}
