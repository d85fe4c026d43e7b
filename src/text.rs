//! Making untrusted text safe to show on a terminal.
//!
//! A LEASE body, an `instance_id` or a process command line is written by
//! someone else. Before any of it reaches a terminal, every control character
//! (C0, DEL, C1 — which includes ESC and the 8-bit CSI) is replaced by a visible
//! escape such as `\x1b`, so no escape sequence is ever emitted. A backslash
//! is doubled, so an escape in the output always came from here.

/// Returns `s` with every control character replaced by a visible escape
/// (`\n`, `\t`, `\r`, `\x1b`, `\u{9b}`…). Printable text, including non-ASCII
/// letters, is kept as is. Never fails.
pub fn sanitize(s: &str) -> String {
    if !s.chars().any(is_unsafe) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
                c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Like [`sanitize`], but keeps at most `max` characters of `s`, saying how
/// many were left out: for values from outside (an environment variable) that
/// may be arbitrarily long.
pub fn sanitize_cut(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return sanitize(s);
    }
    let head: String = s.chars().take(max).collect();
    format!("{}… ({n} characters)", sanitize(&head))
}

/// Bytes that may not be UTF-8, shown safely: invalid sequences become `\xNN`,
/// the rest goes through [`sanitize`].
pub fn sanitize_bytes(b: &[u8]) -> String {
    let mut out = String::new();
    for chunk in b.utf8_chunks() {
        out.push_str(&sanitize(chunk.valid()));
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

fn is_unsafe(c: char) -> bool {
    c == '\\'
        || c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_sequences() {
        assert_eq!(sanitize("a\x1b]0;pwned\x07b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(sanitize("\x1b[2J"), "\\x1b[2J");
        assert_eq!(sanitize("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(sanitize("héllo wörld"), "héllo wörld");
        assert_eq!(sanitize("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(sanitize("a\\nb"), "a\\\\nb");
    }

    #[test]
    fn long_values_are_cut() {
        assert_eq!(sanitize_cut("abc", 5), "abc");
        assert_eq!(sanitize_cut("abcdefgh", 3), "abc… (8 characters)");
        assert_eq!(sanitize_cut("\x1b[2Jxyz", 2), "\\x1b[… (7 characters)");
    }

    #[test]
    fn invalid_utf8_is_shown_as_bytes() {
        assert_eq!(sanitize_bytes(b"ok\xff\xfe\x1b"), "ok\\xff\\xfe\\x1b");
    }
}
