//! String interning for marker, kernel and frame names, so per-record work handles `u32`s.

use std::collections::HashMap;

/// Index of an interned name.
pub type NameId = u32;

/// Interned names (append-only).
#[derive(Debug, Default, Clone)]
pub struct Names {
    list: Vec<String>,
    map: HashMap<String, NameId>,
}

impl Names {
    /// Returns the id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> NameId {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = self.list.len() as NameId;
        self.list.push(s.to_string());
        self.map.insert(s.to_string(), id);
        id
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when no name was interned.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The name of `id` (empty for an id this table never gave out).
    pub fn get(&self, id: NameId) -> &str {
        self.list.get(id as usize).map_or("", String::as_str)
    }

    /// The name of `id`, demangled (Itanium ABI) when `demangle` and the name is mangled.
    pub fn display(&self, id: NameId, demangle: bool) -> String {
        let n = self.get(id);
        if demangle {
            demangle_name(n)
        } else {
            n.to_string()
        }
    }
}

/// Demangles an Itanium C++ name; other names come back unchanged.
pub fn demangle_name(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}

/// The short form of a (demangled) C++ function name, for labels with little room: the last
/// component of the qualified name without namespaces or classes, template arguments,
/// parameters, qualifiers or return type (`void ns::big_private_sort<float>(float const*, int)`
/// -> `big_private_sort`). Operators keep their symbol (`operator()`), lambdas their braces
/// (`{lambda(int)#1}`). Plain C names come back unchanged; a name this reading cannot take apart
/// (unbalanced brackets) comes back whole.
pub fn short_name(name: &str) -> String {
    let b = name.as_bytes();
    let mut cur = String::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &name[i..];
        if rest.starts_with("(anonymous namespace)") {
            cur.push_str("(anonymous namespace)");
            i += "(anonymous namespace)".len();
            continue;
        }
        let word_start = i == 0 || !is_ident(b[i - 1]);
        if word_start && rest.starts_with("operator") && !rest[8..].starts_with(is_ident_char) {
            let op = operator_len(&rest[8..]);
            cur.push_str(&rest[..8 + op]);
            i += 8 + op;
            continue;
        }
        match b[i] {
            b'<' => match skip_group(b, i, b'<', b'>') {
                Some(end) => i = end,
                None => return name.to_string(),
            },
            b'{' => match skip_group(b, i, b'{', b'}') {
                Some(end) => {
                    cur.push_str(&name[i..end]);
                    i = end;
                }
                None => return name.to_string(),
            },
            // The parameter list: the name is complete, unless it is the function of a local
            // entity (`f(int)::{lambda(int)#1}`).
            b'(' => {
                let mut depth = 0usize;
                let end = b[i..].iter().position(|&c| {
                    depth = match c {
                        b'(' => depth + 1,
                        b')' => depth.saturating_sub(1),
                        _ => depth,
                    };
                    depth == 0
                });
                match end {
                    Some(e) if name[i + e + 1..].starts_with("::") => {
                        cur.clear();
                        i += e + 3;
                    }
                    _ => break,
                }
            }
            b':' if b.get(i + 1) == Some(&b':') => {
                cur.clear();
                i += 2;
            }
            // A space at this level ends a return type (`void f(...)`).
            b' ' => {
                cur.clear();
                i += 1;
            }
            _ => {
                let c = rest.chars().next().unwrap_or(' ');
                cur.push(c);
                i += c.len_utf8();
            }
        }
    }
    if cur.is_empty() {
        name.to_string()
    } else {
        cur
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'.'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii() && is_ident(c as u8)
}

/// Length of the operator token after `operator`: `()`, `[]`, a run of operator symbols, or
/// ` new`/` delete` (with `[]`) and conversion types up to the parameter list.
fn operator_len(s: &str) -> usize {
    if s.starts_with("()") || s.starts_with("[]") {
        return 2;
    }
    let sym = s
        .bytes()
        .take_while(|c| b"+-*/%^&|~!=<>,".contains(c))
        .count();
    // `operator<<int>(` is `operator<` with template arguments (demanglers print it so): the
    // longest symbol run after which the parameters or balanced template arguments start.
    for k in (1..=sym).rev() {
        let after = &s.as_bytes()[k..];
        let args_end = match after.first() {
            Some(b'<') => skip_group(after, 0, b'<', b'>').unwrap_or(after.len()),
            _ => 0,
        };
        if after.get(args_end) == Some(&b'(') {
            return k;
        }
    }
    if sym > 0 {
        return sym;
    }
    // `operator new[]`, `operator bool`, `operator unsigned int`: up to the parameter list.
    s.find('(').unwrap_or(s.len())
}

/// The index just past the group opened at `b[start] == open`, counting nested groups of the
/// same kind and skipping parenthesised parts (`foo<(1>2)>`); `None` when it never closes.
fn skip_group(b: &[u8], start: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 0usize;
    let mut paren = 0usize;
    for (k, &c) in b.iter().enumerate().skip(start) {
        if c == b'(' {
            paren += 1;
        } else if c == b')' {
            paren = paren.checked_sub(1)?;
        } else if paren == 0 && c == open {
            depth += 1;
        } else if paren == 0 && c == close {
            depth -= 1;
            if depth == 0 {
                return Some(k + 1);
            }
        }
    }
    None
}

/// The colour of a frame or scope name in every picture (`#rrggbb`): a hue and shade chosen by
/// the 64-bit FNV-1a hash of the demangled name, so one name has one colour in the flame graph
/// and the timeline, whatever the kernel, the capture or `--demangle`. Light shades (HSL
/// lightness 0.62 to 0.77, saturation 0.55 to 0.74), so that black label text stays readable.
pub fn colour(name: &str) -> String {
    let text = demangle_name(name);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in text.bytes() {
        h ^= u64::from(c);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let hue = (h % 360) as f64;
    let sat = 0.55 + ((h >> 16) % 20) as f64 / 100.0;
    let light = 0.62 + ((h >> 32) % 16) as f64 / 100.0;
    let (r, g, b) = hsl_to_rgb(hue, sat, light);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// HSL (hue in degrees, saturation and lightness in 0..=1) to 8-bit RGB.
fn hsl_to_rgb(h: f64, s: f64, l: f64) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let m = l - c / 2.0;
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let q = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (q(r), q(g), q(b))
}

/// The label of a name in `room` characters: the whole name when it fits, else its
/// [`short_name`] when that fits, else the short name cut on the right and ended with `..`
/// (empty when not even one character and the dots fit). Labels always show the start of a
/// name; the whole name is left to the tooltip.
pub fn fit_label(full: &str, short: &str, room: usize) -> String {
    if full.chars().count() <= room {
        return full.to_string();
    }
    if short.chars().count() <= room {
        return short.to_string();
    }
    if room < 3 {
        return String::new();
    }
    let mut s: String = short.chars().take(room - 2).collect();
    s.push_str("..");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names() {
        let cases = [
            ("big_private_sort(float const*, int, unsigned int)", "big_private_sort"),
            ("_Z16big_private_sortPKfij", "_Z16big_private_sortPKfij"),
            ("k_call_chain", "k_call_chain"),
            (
                "void rocprim::detail::block_reduce_kernel<true, rocprim::plus<float> >(float*, rocprim::detail::lookback_scan_state<float, true, true>)",
                "block_reduce_kernel",
            ),
            ("ns::Foo<int>::operator()(int) const", "operator()"),
            ("bool ns::operator<<int>(ns::A<int> const&, ns::A<int> const&)", "operator<"),
            ("bool operator<<<int>(A<int> const&, A<int> const&)", "operator<<"),
            ("bool operator<<(A const&, A const&)", "operator<<"),
            ("X::operator->() const", "operator->"),
            ("ns::Foo::operator bool() const", "operator bool"),
            ("(anonymous namespace)::helper(int)", "helper"),
            ("f(int)::{lambda(int)#1}::operator()(int) const", "operator()"),
            ("outer::{lambda(int)#1}", "{lambda(int)#1}"),
            ("std::vector<int, std::allocator<int> >::push_back(int const&)", "push_back"),
            ("broken<int(", "broken<int("),
            ("", ""),
        ];
        for (full, short) in cases {
            assert_eq!(short_name(full), short, "{full}");
        }
    }

    #[test]
    fn colours_are_stable_and_per_name() {
        // Known answer: a change of the function would change every picture's colours.
        assert_eq!(colour("_Z6hornerPKfif"), "#5c7fe0");
        assert_eq!(colour("chain_top"), colour("chain_top"));
        assert_ne!(colour("chain_top"), colour("chain_mid"));
        // Mangled and demangled spellings of one function share a colour.
        assert_eq!(
            colour("_Z9chain_topPKffij"),
            colour("chain_top(float const*, float, int, unsigned int)")
        );
        let c = colour("k_call_chain");
        assert!(c.len() == 7 && c.starts_with('#'), "{c}");
    }

    #[test]
    fn labels_keep_the_start() {
        let full = "ns::big_private_sort(float const*, int, unsigned int)";
        assert_eq!(fit_label(full, "big_private_sort", 80), full);
        assert_eq!(fit_label(full, "big_private_sort", 20), "big_private_sort");
        assert_eq!(fit_label(full, "big_private_sort", 8), "big_pr..");
        assert_eq!(fit_label(full, "big_private_sort", 2), "");
    }
}
