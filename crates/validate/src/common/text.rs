//! Error texts (pure): takes a value, yields it quoted as Go's `%q` does ([`go_quote`]), so messages read as the
//! upstream validators'.

use std::fmt::Write as _;

/// Quotes `s` the way Go's `%q` verb (`strconv.Quote`) does, so an error text that names a value reads exactly as
/// the upstream validator's: quote, backslash and control characters escaped (`\n`, `\t`, `\x01`…), other
/// characters kept when printable, else written as `\u…`/`\U…`. Printable follows Go's `unicode.IsPrint` for
/// assigned characters (see [`is_go_printable`]).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_go_printable(c) => out.push(c),
            c if u32::from(c) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint` for assigned characters: no controls (Cc), format characters (Cf), private use, line
/// or paragraph separators, and no space but U+0020.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(u32::from(c),
            0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f | 0x202a..=0x202e
            | 0x2060..=0x206f | 0xfeff | 0xfff9..=0xfffb | 0xe000..=0xf8ff | 0xf0000..=0x10ffff))
}
