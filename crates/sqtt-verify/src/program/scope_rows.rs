//! Names of the funcmap rows a post-link rewrite gives scopes and points inside functions
//! (issue 34: loops, user-named regions and points): the function symbol each one names, so
//! that the checks can tell whether its markers run in that function.

/// The function symbol a loop or region scope's `U:` row names: the rewrite names a loop's
/// scope `loop <symbol>+0x<header offset>` (hexadecimal; issue 34) and a user-named region's
/// `region <NAME> <symbol>+0x<entry offset>` (NAME: letters, digits, `_`, `.`, `-`), either
/// optionally followed by ` (<file>:<line>)`; `None` for any other name.
pub(crate) fn loop_scope_symbol(name: &str) -> Option<&str> {
    let rest = match name.strip_prefix("region ") {
        Some(r) => user_named(r)?,
        None => name.strip_prefix("loop ")?,
    };
    symbol_offset(rest)
}

/// The function symbol and header offset (bytes from the symbol's start) a loop scope's `U:`
/// row names (`loop <symbol>+0x<header offset>[ (<file>:<line>)]`); `None` for any other name
/// (a region's included) or an offset over 64 bits.
pub(crate) fn loop_scope(name: &str) -> Option<(&str, u64)> {
    let rest = name.strip_prefix("loop ")?;
    let symbol = symbol_offset(rest)?;
    let rest = rest.split_once(" (").map_or(rest, |x| x.0);
    let hex = rest.rsplit_once("+0x")?.1;
    Some((symbol, u64::from_str_radix(hex, 16).ok()?))
}

/// The function symbol a user-named point's `P:` row names (`point <NAME> <symbol>+0x<offset>`,
/// optionally followed by ` (<file>:<line>)`; issue 34), `None` for any other name.
pub(crate) fn point_symbol(name: &str) -> Option<&str> {
    symbol_offset(user_named(name.strip_prefix("point ")?)?)
}

/// The function symbol and offset (bytes from the symbol's start) a user-named point's `P:`
/// row names ([`point_symbol`]); `None` for any other name or an offset over 64 bits.
pub(crate) fn point_scope(name: &str) -> Option<(&str, u64)> {
    let rest = user_named(name.strip_prefix("point ")?)?;
    let symbol = symbol_offset(rest)?;
    let rest = rest.split_once(" (").map_or(rest, |x| x.0);
    let hex = rest.rsplit_once("+0x")?.1;
    Some((symbol, u64::from_str_radix(hex, 16).ok()?))
}

/// `rest` after a user's NAME and one blank (`None` when NAME is empty or holds other
/// characters than letters, digits, `_`, `.` and `-`).
fn user_named(rest: &str) -> Option<&str> {
    let (user, rest) = rest.split_once(' ')?;
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    (!user.is_empty() && user.chars().all(ok)).then_some(rest)
}

/// The symbol of `<symbol>+0x<hex>[ (<location>)]`.
fn symbol_offset(rest: &str) -> Option<&str> {
    let rest = rest.split_once(" (").map_or(rest, |x| x.0);
    let (symbol, offset) = rest.rsplit_once('+')?;
    let hex = offset.strip_prefix("0x")?;
    (!symbol.is_empty() && !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(symbol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_names_give_their_symbol() {
        assert_eq!(loop_scope_symbol("loop k+0x40 (/a/b.S:25)"), Some("k"));
        assert_eq!(loop_scope_symbol("loop _Z1fv+0x4"), Some("_Z1fv"));
        assert_eq!(loop_scope("loop k+0x40 (/a/b.S:25)"), Some(("k", 0x40)));
        assert_eq!(loop_scope("region main.1 k+0x18"), None);
        assert_eq!(
            point_scope("point p-2 f_loop+0x4 (/a/b.S:57)"),
            Some(("f_loop", 4))
        );
        assert_eq!(
            loop_scope_symbol("region main.1 k+0x18 (/a/b.S:31)"),
            Some("k")
        );
        assert_eq!(
            point_symbol("point p-2 f_loop+0x4 (/a/b.S:57)"),
            Some("f_loop")
        );
        for bad in [
            "region k+0x18",
            "region a@b k+0x18",
            "region  k+0x18",
            "loop k+40",
            "loop k+0x",
            "loop +0x4",
            "point p k",
            "k_loops",
        ] {
            assert_eq!(loop_scope_symbol(bad), None, "{bad}");
            assert_eq!(point_symbol(bad), None, "{bad}");
        }
    }
}
