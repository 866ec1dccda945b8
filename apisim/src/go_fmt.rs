//! Go's `%q` verb (`strconv.Quote`), which the apiserver uses for names, users and resources in
//! its messages (`pods "web" is forbidden: User "x" ...`).
//!
//! Invariant: the result is a double-quoted string in which `"` and `\` are escaped and every
//! control character is escaped as Go escapes it, so a hostile name cannot break a message's
//! shape (no raw newline, no unbalanced quote).

/// `strconv.Quote(s)`. Printable characters are kept; `\a \b \f \n \r \t \v`, other control
/// characters (`\x00`-style below U+0080, `\u00XX` and `\uXXXX` above) and U+FFFD-free
/// invalid input cannot occur in a Rust `str`. Unicode's non-printing format characters that
/// Go also escapes (such as U+200B) are approximated by Rust's `char::is_control` plus the
/// format and separator characters listed below.
pub fn quote(s: &str) -> String {
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
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || not_printable(c) => {
                let n = c as u32;
                if n > 0xffff {
                    out.push_str(&format!("\\U{n:08x}"));
                } else {
                    out.push_str(&format!("\\u{n:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Characters Go's `IsPrint` rejects beyond the control characters: spaces other than U+0020,
/// line and paragraph separators, and the common invisible format characters.
fn not_printable(c: char) -> bool {
    matches!(c,
        '\u{a0}' | '\u{ad}' | '\u{1680}' | '\u{2000}'..='\u{200f}' | '\u{2028}'..='\u{202f}'
        | '\u{205f}'..='\u{206f}' | '\u{3000}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_like_strconv_quote() {
        assert_eq!(quote("web"), r#""web""#);
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("x\ny\u{0}"), r#""x\ny\x00""#);
        assert_eq!(quote("é日本"), "\"é日本\"");
        assert_eq!(quote("a\u{200b}b"), r#""a\u200bb""#);
    }
}
