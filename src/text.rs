//! Making untrusted text safe to show on a terminal or to hand to a parser.
//!
//! A LEASE body, an `instance_id`, a key or a process command line is written
//! by someone else. One rule says which characters of such text are never
//! output as themselves ([`is_unsafe_char`]): every control character (C0,
//! DEL, C1 — which includes ESC and the 8-bit CSI), every format character
//! (Unicode category Cf: bidi controls, zero-width characters, the soft
//! hyphen, tag characters, the BOM), line and paragraph separators, every
//! space other than the plain space, private-use and unassigned code points,
//! the remaining default-ignorable code points (blank-looking fillers and
//! variation selectors) and symbols that draw as a blank (U+2800 BRAILLE
//! PATTERN BLANK). A combining mark (Unicode Mn, Me) is escaped unless it
//! sits on a letter or digit (directly, or stacked on marks that do): at the
//! start of the text, after an escape, a space or punctuation, marks alone
//! would draw over the text before them, or as nothing. Categories come from the `finl_unicode` tables.
//! [`has_visible`] says whether anything is left to see once all that is set
//! aside: a holder id without a visible character is malformed.
//!
//! - On a terminal ([`sanitize`]) they are shown as visible escapes such as
//!   `\x1b` or `\u{202e}`; a backslash is doubled, so an escape in the output
//!   always came from here.
//! - In JSON ([`to_json_pretty`]) they are written as `\uXXXX` escapes: the
//!   document is the same value (lossless), but no raw one reaches the output.

use finl_unicode::categories::{CharacterCategories, MinorCategory};

/// Whether `c` must never be output as itself (see the module docs for the
/// rule). The plain space, letters, marks, digits, punctuation and symbols
/// of every script are safe.
pub fn is_unsafe_char(c: char) -> bool {
    if c == ' ' {
        return false;
    }
    if (c as u32) < 0x7f {
        return c.is_ascii_control();
    }
    if default_ignorable_not_cf(c) || blank_symbol(c) {
        return true;
    }
    matches!(
        c.get_minor_category(),
        MinorCategory::Cc
            | MinorCategory::Cf
            | MinorCategory::Zl
            | MinorCategory::Zp
            | MinorCategory::Zs
            | MinorCategory::Co
            | MinorCategory::Cn
    )
}

/// Default-ignorable code points (Unicode `DerivedCoreProperties.txt`) that
/// are not in category Cf, so the category table alone does not catch them:
/// the combining grapheme joiner, the Hangul and Khmer fillers, the Mongolian
/// and standard variation selectors and the tag plane's reserved range. They
/// draw as nothing (or as a blank) and make two names look alike.
fn default_ignorable_not_cf(c: char) -> bool {
    matches!(c as u32,
        0x034f | 0x115f..=0x1160 | 0x17b4..=0x17b5 | 0x180b..=0x180f | 0x3164
        | 0xfe00..=0xfe0f | 0xffa0 | 0xe0000..=0xe0fff)
}

/// Symbols of an ordinary category that draw as a blank cell: U+2800
/// BRAILLE PATTERN BLANK (category So), used to make a name look empty.
fn blank_symbol(c: char) -> bool {
    c == '\u{2800}'
}

/// Whether `c` is a combining mark that draws on the character before it
/// (Unicode categories Mn and Me: accents, enclosing circles).
pub fn is_combining_mark(c: char) -> bool {
    matches!(
        c.get_minor_category(),
        MinorCategory::Mn | MinorCategory::Me
    )
}

/// Calls `f(c, escaped)` for each character of `s`, `escaped` being true
/// when [`sanitize`] shows it as an escape: an unsafe character or a
/// backslash, or a combining mark with no letter or digit to draw on (see
/// [`carries_marks`]).
fn classify(s: &str, mut f: impl FnMut(char, bool)) {
    let mut base = false;
    for c in s.chars() {
        let escaped = is_unsafe(c) || (!base && is_combining_mark(c));
        base = carries_marks(c, escaped);
        f(c, escaped);
    }
}

/// Whether a combining mark after `c` (escaped or not) draws on something
/// that shows: a letter or digit kept as itself, or a mark kept on one.
fn carries_marks(c: char, escaped: bool) -> bool {
    !escaped && (c.is_alphanumeric() || is_combining_mark(c))
}

/// Whether `s` shows anything once what [`sanitize`] escapes is set aside:
/// a character other than the plain space that is output as itself (a
/// backslash counts: it is shown, doubled). False for the empty string, for
/// spaces, and for text made only of control, format or invisible
/// characters and combining marks on none of these (`"\u{301}\u{301}"`).
pub fn has_visible(s: &str) -> bool {
    let mut seen = false;
    classify(s, |c, escaped| seen |= c == '\\' || (!escaped && c != ' '));
    seen
}

/// Returns `s` with every unsafe character ([`is_unsafe_char`]) replaced by a
/// visible escape (`\n`, `\t`, `\r`, `\x1b`, `\u{9b}`, `\u{202e}`…) and
/// every backslash doubled; a combining mark that is not on a letter or
/// digit (at the start, after an escape, a space or punctuation) is escaped
/// too (`\u{301}`). Printable text, including non-ASCII letters and accents
/// on a letter, is kept as is.
/// Never fails.
pub fn sanitize(s: &str) -> String {
    escape(s, true)
}

/// For a message assembled from pieces that were already escaped by
/// [`sanitize`] when they were put in (an error naming a key, a path, a
/// holder): escapes what would still reach a terminal raw, exactly as
/// [`sanitize`] does, but leaves backslashes as they are, so that a piece is
/// never escaped twice (`\x1b` in the message stays `\x1b`, not `\\x1b`).
/// Idempotent: `sanitize_message(&sanitize_message(s)) == sanitize_message(s)`.
/// The edges that print such messages (stderr, `check`'s lines, the
/// console's error lines) use it; a value from outside put into a message
/// goes through [`sanitize`] first. Never fails.
pub fn sanitize_message(s: &str) -> String {
    escape(s, false)
}

/// `shown` — text already escaped by [`sanitize`] (or [`sanitize_cut`]) —
/// between double quotes, for a message that quotes a value from outside:
/// `"` inside is written `\"`, nothing else is touched. Unlike `{:?}`
/// (Rust's `Debug`), it never escapes the escapes again: a value holding ESC
/// reads `"\x1b[31m"`, as the console shows it, not `"\\x1b[31m"`.
pub fn quote_shown(shown: &str) -> String {
    format!("\"{}\"", shown.replace('"', "\\\""))
}

/// [`sanitize`] (`double_backslash`) or [`sanitize_message`].
fn escape(s: &str, double_backslash: bool) -> String {
    let mut any = false;
    classify(s, |c, escaped| {
        any |= escaped && (double_backslash || c != '\\')
    });
    if !any {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    classify(s, |c, escaped| {
        if escaped {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\\' if double_backslash => out.push_str("\\\\"),
                '\\' => out.push('\\'),
                c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
                c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
        } else {
            out.push(c);
        }
    });
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
    c == '\\' || is_unsafe_char(c)
}

/// Writes JSON strings with every unsafe character ([`is_unsafe_char`]) as a
/// `\uXXXX` escape (two for a character outside the BMP); everything else as
/// `serde_json`'s pretty printer does.
struct SafeFormatter<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for SafeFormatter<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        // A fragment starts the string or follows an escape: a combining
        // mark there has no base (see [`classify`]).
        let mut base = false;
        for (i, c) in fragment.char_indices() {
            let escape = is_unsafe_char(c) || (!base && is_combining_mark(c));
            base = carries_marks(c, escape);
            if escape {
                w.write_all(&fragment.as_bytes()[start..i])?;
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(w, "\\u{u:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    // Pretty-printing: delegate the layout calls.
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `value` as pretty-printed JSON in which no unsafe character
/// ([`is_unsafe_char`]) appears raw: each is a `\uXXXX` escape, so the
/// document parses to the same value. For `--json` and `audit --json`.
///
/// Errors: `serde_json`'s, for a value that cannot be serialised.
pub fn to_json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    write_json_pretty(&mut out, value)?;
    // The serializer writes only UTF-8 (the escapes are ASCII).
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// [`to_json_pretty`] written to `w` as it is serialised, never held whole
/// (`--json`: a 10,000-row document is 7 MB).
///
/// Errors: `serde_json`'s, for a value that cannot be serialised or a
/// write that failed (its I/O error is kept: [`serde_json::Error::io_error_kind`]).
pub fn write_json_pretty<W: std::io::Write, T: serde::Serialize + ?Sized>(
    w: W,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        w,
        SafeFormatter(serde_json::ser::PrettyFormatter::new()),
    );
    value.serialize(&mut ser)
}

/// `value` as one line of JSON (no newline inside), with the escapes of
/// [`to_json_pretty`]. For NDJSON streams (`-o ndjson`, `--watch`).
///
/// Errors: `serde_json`'s, for a value that cannot be serialised.
pub fn to_json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(
        &mut out,
        SafeFormatter(serde_json::ser::CompactFormatter),
    );
    value.serialize(&mut ser)?;
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// Formats a number of seconds for people: `850ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`.
/// Negative values get a leading `-`.
pub fn format_secs(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let neg = s < 0.0;
    let a = s.abs();
    let body = if a < 1.0 {
        format!("{}ms", (a * 1000.0).round() as u64)
    } else if a < 60.0 {
        format!("{a:.1}s")
    } else if a < 3600.0 {
        let t = a as u64;
        format!("{}m{:02}s", t / 60, t % 60)
    } else if a < 86400.0 {
        let t = a as u64;
        format!("{}h{:02}m", t / 3600, (t % 3600) / 60)
    } else {
        let t = a as u64;
        format!("{}d{:02}h", t / 86400, (t % 86400) / 3600)
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_message_of_escaped_pieces_is_escaped_once() {
        let piece = super::sanitize("a\x1bb\\c");
        assert_eq!(piece, "a\\x1bb\\\\c");
        let msg = format!("{piece} is not a directory\n");
        assert_eq!(
            super::sanitize_message(&msg),
            "a\\x1bb\\\\c is not a directory\\n"
        );
        let once = super::sanitize_message(&msg);
        assert_eq!(super::sanitize_message(&once), once);
        assert_eq!(super::sanitize_message("plain"), "plain");
    }

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
    fn one_rule_for_invisible_and_format_characters() {
        for c in [
            '\u{7f}',
            '\u{85}',
            '\u{9f}',
            '\u{ad}',
            '\u{61c}',
            '\u{180e}',
            '\u{200b}',
            '\u{200d}',
            '\u{2028}',
            '\u{2029}',
            '\u{202e}',
            '\u{2066}',
            '\u{a0}',
            '\u{3000}',
            '\u{3164}',
            '\u{115f}',
            '\u{ffa0}',
            '\u{fe0f}',
            '\u{feff}',
            '\u{e0041}',
            '\u{e0001}',
            '\u{f8ff}',
            '\u{10ffff}',
        ] {
            assert!(is_unsafe_char(c), "{:x}", c as u32);
            assert!(!sanitize(&c.to_string()).contains(c), "{:x}", c as u32);
        }
        for c in [
            'a', ' ', 'é', 'ß', 'Ж', '中', '🙂', '\u{301}', '€', '_', '/',
        ] {
            assert!(!is_unsafe_char(c), "{:x}", c as u32);
        }
    }

    #[test]
    fn json_escapes_unsafe_characters_losslessly() {
        let s = "a\u{202e}b\u{7f}c\u{85}d\u{200b}e\u{e0041}f\"\\\n héllo 🙂";
        let v = serde_json::json!({ "k\u{2028}": s, "n": [1, 2] });
        let out = to_json_pretty(&v).unwrap();
        assert!(
            !out.chars().any(|c| is_unsafe_char(c) && c != '\n'),
            "{out}"
        );
        assert!(
            out.contains("\\u202e") && out.contains("\\udb40\\udc41"),
            "{out}"
        );
        assert!(out.contains("héllo 🙂"), "{out}");
        let back: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back, v);
        // The same layout as serde_json's own pretty printer.
        let plain = serde_json::json!({"a": [1, {"b": null}], "c": "d"});
        assert_eq!(
            to_json_pretty(&plain).unwrap(),
            serde_json::to_string_pretty(&plain).unwrap()
        );
    }

    #[test]
    fn what_draws_as_nothing_is_escaped() {
        // A braille blank is a symbol that draws as an empty cell.
        assert!(is_unsafe_char('\u{2800}'));
        assert_eq!(sanitize("a\u{2800}b"), "a\\u{2800}b");
        // Combining marks with nothing to draw on are escaped; on a letter
        // (or stacked on a kept mark) they stay.
        assert_eq!(sanitize("\u{301}\u{301}"), "\\u{301}\\u{301}");
        assert_eq!(sanitize("\x1b\u{301}x"), "\\x1b\\u{301}x");
        assert_eq!(sanitize("e\u{301}\u{302}"), "e\u{301}\u{302}");
        assert_eq!(sanitize("\u{20dd}"), "\\u{20dd}");
        assert_eq!(sanitize("\"\u{301}\""), "\"\\u{301}\"");
        assert_eq!(
            sanitize(" \u{301}/\u{301}9\u{301}"),
            " \\u{301}/\\u{301}9\u{301}"
        );
        // The same in JSON, losslessly.
        let out = to_json_line(&"\u{301}e\u{301}").unwrap();
        assert_eq!(out, "\"\\u0301e\u{301}\"");
        assert_eq!(
            serde_json::from_str::<String>(&out).unwrap(),
            "\u{301}e\u{301}"
        );
    }

    #[test]
    fn visible_means_something_is_shown_as_itself() {
        for s in [
            "",
            " ",
            "  ",
            "\u{301}\u{301}",
            "\u{2800}",
            "\u{200b}\u{3164}",
            "\x1b\u{301}",
            " \u{301}",
        ] {
            assert!(!has_visible(s), "{s:?}");
        }
        for s in ["a", "a\u{2800}b", "\\", "\u{200b}x", "é", "🙂", "-"] {
            assert!(has_visible(s), "{s:?}");
        }
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

/// Latin letters beyond ASCII (accented letters: `é`, `ø`, `ł`…).
fn is_latin(c: char) -> bool {
    matches!(c as u32, 0x00C0..=0x024F | 0x1E00..=0x1EFF | 0x2C60..=0x2C7F | 0xA720..=0xA7FF)
}

/// Why `name` could be mistaken for another name by eye, or `None`: it is not
/// in Unicode normal form C (two spellings of one look), or it mixes ASCII
/// letters with letters of another script (a look-alike such as Cyrillic `а`
/// for `a`; accented Latin letters are not flagged).
/// The sentence is safe to print.
pub fn lookalike_note(name: &str) -> Option<String> {
    use unicode_normalization::UnicodeNormalization;
    if !unicode_normalization::is_nfc(name) {
        let nfc: String = name.nfc().collect();
        return Some(format!(
            "the name is not in Unicode normal form C: it looks like {} but is spelt differently",
            sanitize(&nfc)
        ));
    }
    let ascii = name.chars().any(|c| c.is_ascii_alphabetic());
    let other: Vec<String> = name
        .chars()
        .filter(|c| !c.is_ascii() && c.is_alphabetic() && !is_latin(*c))
        .map(|c| format!("U+{:04X}", c as u32))
        .collect();
    if ascii && !other.is_empty() {
        return Some(format!(
            "the name mixes Latin letters with letters of another script ({}): it may imitate another name",
            other.join(", ")
        ));
    }
    None
}

/// Word-wraps `text` to `width` columns (counted in chars); continuation lines
/// are indented by two spaces; a word longer than a line is cut.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(4);
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut cur_len = 0usize;
    // Whether `cur` holds no word yet (only the continuation indent).
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        while !word.is_empty() {
            let sep = usize::from(!empty);
            if cur_len + sep + word.len() <= width {
                if !empty {
                    cur.push(' ');
                }
                cur_len += sep + word.len();
                cur.extend(word.drain(..));
                empty = false;
                continue;
            }
            if empty {
                let room = width - cur_len;
                cur.extend(word.drain(..room));
            }
            lines.push(std::mem::replace(&mut cur, "  ".to_owned()));
            cur_len = 2;
            empty = true;
        }
    }
    if !empty {
        lines.push(cur);
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

#[cfg(test)]
mod lookalike_tests {
    use super::lookalike_note;

    #[test]
    fn lookalikes_are_named() {
        assert!(lookalike_note("db1/").is_none());
        assert!(
            lookalike_note("données/").is_none(),
            "NFC and only Latin letters"
        );
        // e + combining acute: the same look as é, another spelling.
        let decomposed = "donne\u{301}es/";
        assert!(lookalike_note(decomposed)
            .unwrap()
            .contains("normal form C"));
        // Cyrillic а in an otherwise ASCII name.
        assert!(lookalike_note("b\u{430}ckups/").unwrap().contains("U+0430"));
    }
}
