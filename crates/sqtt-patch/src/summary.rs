//! Human reports that a person can read (issue 37 item B): skipped sites, functions left alone
//! and failed-closed reasons are grouped by KIND (the reason with its addresses and the names
//! in it removed), counted, and shown with at most [`EXAMPLES`] examples each; every function
//! is named once per kind, a long name shortened by [`short_name`]. The JSON reports keep every
//! detail (full names, every address, every reason).

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Examples listed per kind; the rest are counted ("... and 12 more").
pub const EXAMPLES: usize = 3;

/// Characters a name keeps at its start when shortened.
const NAME_HEAD: usize = 48;
/// Characters a name keeps at its end when shortened.
const NAME_TAIL: usize = 12;
/// Longest kind text shown (characters); a longer one is cut with `…`.
const KIND_MAX: usize = 140;
/// Longest free-text line shown (characters, after the indentation): a failed-closed reason
/// or a note, whose long names are shortened first.
const LINE_MAX: usize = 190;

/// `name` when it has at most 61 characters, else its first 48 characters, `…` and its last
/// 12 (a 300-character Tensile kernel name fits one line; the full name is in the JSON).
pub fn short_name(name: &str) -> String {
    let n = name.chars().count();
    if n <= NAME_HEAD + NAME_TAIL + 1 {
        return name.to_string();
    }
    let head: String = name.chars().take(NAME_HEAD).collect();
    let tail: String = name.chars().skip(n - NAME_TAIL).collect();
    format!("{head}…{tail}")
}

/// `s` cut to `max` characters, ending in `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Free text (a reason, a note) with every long word (a mangled name) shortened by
/// [`short_name`] (punctuation after it kept), then cut to one readable line.
pub fn readable(s: &str) -> String {
    let words: Vec<String> = s
        .split(' ')
        .map(|w| {
            let core = w.trim_end_matches([':', ',', ';', ')']);
            if core.chars().count() > NAME_HEAD + NAME_TAIL + 1 {
                format!("{}{}", short_name(core), &w[core.len()..])
            } else {
                w.to_string()
            }
        })
        .collect();
    clip(&words.join(" "), LINE_MAX)
}

/// The kind of a reason: `at 0x..: ` locations and a leading `name at 0x..: ` removed from
/// each `; `-separated part, other hexadecimal numbers written `0x_`, repeated parts once.
/// `function left alone (copied verbatim): at 0x10: no return; at 0x40: no return` is
/// `function left alone (copied verbatim): no return`.
pub fn kind_of(why: &str) -> String {
    // `context: at 0x..: problem; at 0x..: problem`: the context once, then the problems.
    let (head, problems) = match why.find(": at 0x") {
        Some(i) => (&why[..i + 2], &why[i + 2..]),
        None => ("", why),
    };
    let mut parts: Vec<String> = Vec::new();
    for part in problems.split("; ") {
        let p = strip_locations(part);
        let p = hex_placeholders(&drop_finding_name(&p));
        if !parts.contains(&p) {
            parts.push(p);
        }
    }
    format!("{}{}", hex_placeholders(head), parts.join("; "))
}

/// `part` without its `at 0xHEX: ` locations; a `NAME at 0xHEX: ` prefix (no `: ` before it)
/// goes whole.
fn strip_locations(part: &str) -> String {
    let mut out = String::new();
    let mut rest = part;
    while let Some(i) = rest.find("at 0x") {
        let tail = &rest[i + 5..];
        let n = tail
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(tail.len());
        if n == 0 || !tail[n..].starts_with(": ") {
            out.push_str(&rest[..i + 5]);
            rest = tail;
            continue;
        }
        let before = &rest[..i];
        let is_name = out.is_empty()
            && before.ends_with(' ')
            && !before.contains(": ")
            && !before.trim_end().contains(' ');
        if !is_name {
            // Inside a sentence (`from s_getpc at 0x10: s_mov_b32 ...`) the location goes
            // and its colon stays.
            match before.trim_end() {
                "" => out.push_str(before),
                b => {
                    out.push_str(b);
                    out.push_str(": ");
                }
            }
        }
        rest = &tail[n + 2..];
    }
    out.push_str(rest);
    out
}

/// A verifier finding's function name (`[hazard] NAME orig 0x10 new 0x14: ...`) removed.
fn drop_finding_name(part: &str) -> String {
    let Some(i) = part.find("] ") else {
        return part.to_string();
    };
    let after = &part[i + 2..];
    match after.find(' ') {
        Some(j) if after[j..].starts_with(" orig 0x") || after[j..].starts_with(" new 0x") => {
            format!("{}{}", &part[..i + 1], &after[j..])
        }
        Some(j) if after[..j].ends_with(':') => {
            format!("{}{}", &part[..i + 1], &after[j - 1..])
        }
        _ => part.to_string(),
    }
}

/// Hexadecimal numbers (`0x1a0`) written `0x_`.
fn hex_placeholders(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        out.push_str("0x_");
        let tail = &rest[i + 2..];
        let n = tail
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(tail.len());
        rest = &tail[n..];
    }
    out.push_str(rest);
    out
}

/// A failed-closed reason without the function name and address prefix (`f at 0x10: why`) and
/// with hexadecimal numbers replaced by `0x_`, so equal causes are counted together.
pub fn reason_class(r: &str) -> String {
    let core = if let Some(v) = r.strip_prefix("verifier: [") {
        // `verifier: [check] function orig 0x.. new 0x..: message: details`
        let check = v.split(']').next().unwrap_or_default();
        let msg = v.find(": ").map_or("", |i| &v[i + 2..]);
        format!(
            "verifier: [{check}] {}",
            msg.split(": ").next().unwrap_or_default()
        )
    } else {
        match r.find(" at 0x") {
            Some(i) => r[i..].find(": ").map_or(r, |j| &r[i + j + 2..]).to_string(),
            None => r.to_string(),
        }
    };
    hex_placeholders(&core)
}

/// One kind: how many (in all and per site kind), and per function (named once) how many and
/// where the first one is.
#[derive(Default)]
struct Kind {
    count: u64,
    /// Counts per site kind (`barrier=9 kernel_exit=5`), when the reasons are about sites.
    sub: BTreeMap<String, u64>,
    /// (name, count, detail of its first occurrence), in the order first seen.
    names: Vec<(String, u64, String)>,
    /// The first reason of this kind as written: shown instead of the kind when it is the only
    /// one (a lone `jump to 0x_` keeps its address).
    first: String,
}

/// Reasons grouped by kind, for [`Groups::render`].
#[derive(Default)]
pub struct Groups {
    kinds: BTreeMap<String, Kind>,
}

impl Groups {
    /// Counts `n` occurrences of reason `why`, grouped by its [`kind_of`] (of site kind `sub`, empty: none) in function `name`
    /// (empty: none); `detail` (` at 0x40e8`) describes its first one.
    pub fn add(&mut self, why: &str, sub: &str, name: &str, detail: String, n: u64) {
        let k = self.kinds.entry(kind_of(why)).or_default();
        if k.first.is_empty() {
            k.first = why.to_string();
        }
        k.count += n;
        if !sub.is_empty() {
            *k.sub.entry(sub.to_string()).or_default() += n;
        }
        if name.is_empty() {
            return;
        }
        match k.names.iter_mut().find(|(m, _, _)| m == name) {
            Some(e) => e.1 += n,
            None => k.names.push((name.to_string(), n, detail)),
        }
    }

    /// Total count over all kinds.
    pub fn total(&self) -> u64 {
        self.kinds.values().map(|k| k.count).sum()
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// One line per kind (most frequent first): `{indent}{count}x {kind}` and the counts per
    /// site kind (` [barrier=9 kernel_exit=5]`), then, when `examples`, `, in N functions:` and
    /// at most [`EXAMPLES`] of them on their own lines (`name (8x, first at 0x40e8)`), the rest
    /// counted.
    pub fn render(&self, indent: &str, examples: bool) -> String {
        let mut kinds: Vec<(&String, &Kind)> = self.kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
        let mut s = String::new();
        for (kind, k) in kinds {
            let shown = if k.count == 1 && !k.first.is_empty() && !k.first.contains("; ") {
                readable(without_leading_location(&k.first))
            } else {
                kind.clone()
            };
            let mut kind = clip(&shown, KIND_MAX);
            if !k.sub.is_empty() {
                let sub: Vec<String> = k.sub.iter().map(|(s, n)| format!("{s}={n}")).collect();
                kind = format!("{kind} [{}]", sub.join(" "));
            }
            if !examples || k.names.is_empty() {
                let _ = writeln!(s, "{indent}{}x {kind}", k.count);
                continue;
            }
            let fns = match k.names.len() {
                1 => "1 function".to_string(),
                n => format!("{n} functions"),
            };
            let _ = writeln!(s, "{indent}{}x {kind}, in {fns}:", k.count);
            for (name, n, detail) in k.names.iter().take(EXAMPLES) {
                let name = short_name(name);
                if *n == 1 {
                    let _ = writeln!(s, "{indent}  {name}{detail}");
                } else if detail.is_empty() {
                    let _ = writeln!(s, "{indent}  {name} ({n}x)");
                } else {
                    let _ = writeln!(s, "{indent}  {name} ({n}x, first{detail})");
                }
            }
            if k.names.len() > EXAMPLES {
                let _ = writeln!(
                    s,
                    "{indent}  ... and {} more (all of them in the JSON report)",
                    k.names.len() - EXAMPLES
                );
            }
        }
        s
    }
}

/// `why` without a leading `at 0x1404: ` (the address is shown beside the function's name).
fn without_leading_location(why: &str) -> &str {
    why.strip_prefix("at 0x")
        .and_then(|r| r.split_once(": "))
        .filter(|(hex, _)| hex.chars().all(|c| c.is_ascii_hexdigit()))
        .map_or(why, |(_, rest)| rest)
}

/// Free-text reasons (failed closed, input errors) grouped by `class`: a kind seen once is one
/// line `{indent}{label}: {reason}`; a kind seen more often is `{indent}{label} {n}x: {kind}`
/// with at most [`EXAMPLES`] of its reasons below it.
pub fn reasons(indent: &str, label: &str, all: &[String], class: fn(&str) -> String) -> String {
    let mut by: Vec<(String, Vec<&String>)> = Vec::new();
    for r in all {
        let c = class(r);
        match by.iter_mut().find(|(k, _)| *k == c) {
            Some((_, v)) => v.push(r),
            None => by.push((c, vec![r])),
        }
    }
    let mut s = String::new();
    for (kind, list) in by {
        if let [one] = list.as_slice() {
            let _ = writeln!(s, "{indent}{label}: {}", readable(one));
            continue;
        }
        let _ = writeln!(
            s,
            "{indent}{label} {}x: {}",
            list.len(),
            clip(&kind, KIND_MAX)
        );
        for r in list.iter().take(EXAMPLES) {
            let _ = writeln!(s, "{indent}  {}", readable(r));
        }
        if list.len() > EXAMPLES {
            let _ = writeln!(
                s,
                "{indent}  ... and {} more (all of them in the JSON report)",
                list.len() - EXAMPLES
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_drop_names_and_addresses() {
        assert_eq!(
            kind_of(
                "function left alone (copied verbatim): at 0x10: no return; at 0x40: no return"
            ),
            "function left alone (copied verbatim): no return"
        );
        assert_eq!(
            kind_of("_Z3fooi at 0x1a0: s_setpc_b64 to 0x200 not a return"),
            "s_setpc_b64 to 0x_ not a return"
        );
        assert_eq!(
            kind_of("at 0x1404: indirect jump through a register in a kernel"),
            "indirect jump through a register in a kernel"
        );
        assert_eq!(
            kind_of("function left alone (copied verbatim): the verifier rejected its instrumented code: [hazard] _Z1fv orig 0x10 new 0x14: test"),
            "function left alone (copied verbatim): the verifier rejected its instrumented code: [hazard] orig 0x_ new 0x_: test"
        );
        assert_eq!(
            kind_of("[metadata] Softmax_DT_S_MT_8_32: .group_segment_fixed_size 1024"),
            "[metadata]: .group_segment_fixed_size 1024"
        );
        assert_eq!(
            kind_of("no SGPR is provably free here (2 SGPRs)"),
            "no SGPR is provably free here (2 SGPRs)"
        );
    }

    #[test]
    fn long_names_are_shortened() {
        let long = format!("Cijk_{}_end", "x".repeat(300));
        let s = short_name(&long);
        assert_eq!(s.chars().count(), 61);
        assert!(s.starts_with("Cijk_") && s.ends_with("xxxxxxxx_end") && s.contains('…'));
        assert_eq!(short_name("k"), "k");
        let r = readable(&format!("{long}: bad"));
        assert!(r.ends_with("_end: bad"), "{r}");
    }

    #[test]
    fn groups_name_each_function_once_with_three_examples() {
        let mut g = Groups::default();
        for (i, f) in ["a", "a", "b", "c", "d"].iter().enumerate() {
            g.add("why", "k", f, format!(" at {:#x}", 16 * i), 1);
        }
        let s = g.render("  ", true);
        assert_eq!(
            s,
            "  5x why [k=5], in 4 functions:\n    a (2x, first at 0x0)\n    b at 0x20\n    c at 0x30\n    ... and 1 more (all of them in the JSON report)\n"
        );
        assert_eq!(g.total(), 5);
    }
}
