//! Escaping for the report formats. Case names come from file names and
//! evidence from programs under test: any of them may hold `<`, `&`, quotes,
//! `|` or control characters, and none may break the report around them.

/// A character XML 1.0 cannot hold even as a reference (C0 controls other
/// than tab, newline and return; U+FFFE, U+FFFF), or that HTML treats as a
/// parse error (DEL, C1 controls). It is written as visible text instead.
fn forbidden(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b' | '\x0c' | '\x0e'..='\x1f' | '\x7f'..='\u{9f}')
        || matches!(c, '\u{fffe}' | '\u{ffff}')
}

fn visible(c: char) -> String {
    match u32::from(c) {
        n if n <= 0xff => format!("\\x{n:02x}"),
        n => format!("\\u{{{n:x}}}"),
    }
}

/// Text content of an XML or HTML element.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if forbidden(c) => out.push_str(&visible(c)),
            c => out.push(c),
        }
    }
    out
}

/// A double-quoted XML or HTML attribute value. Tabs and line breaks are
/// written as references, so that attribute normalisation keeps them.
pub fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if forbidden(c) => out.push_str(&visible(c)),
            c => out.push(c),
        }
    }
    out
}

/// Text in a cell of a GitHub-flavoured Markdown table: one line, no
/// emphasis, links or HTML of its own, and no `|` that would end the cell.
pub fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' | '\t' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || forbidden(c) => out.push_str(&md(&visible(c))),
            c => out.push(c),
        }
    }
    out
}

/// A code span in a Markdown table cell: a fence longer than any run of
/// backticks inside, `|` escaped (GitHub reads it as the cell's end even in
/// code), on one line.
pub fn md_code(s: &str) -> String {
    let mut body = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => body.push_str("\\|"),
            '\n' | '\r' | '\t' => body.push(' '),
            c if c.is_control() || forbidden(c) => body.push_str(&visible(c)),
            c => body.push(c),
        }
    }
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// A relative or absolute path as a URL path: every byte other than the
/// unreserved characters and `/` percent-encoded.
pub fn url_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/+".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "a<b>&c\"d'e\u{1}f\u{1b}[31mg\nh\ti|j`k\u{7f}\u{fffe}";

    #[test]
    fn text_escapes_markup_and_makes_controls_visible() {
        assert_eq!(
            text(HOSTILE),
            "a&lt;b&gt;&amp;c\"d'e\\x01f\\x1b[31mg\nh\ti|j`k\\x7f\\u{fffe}"
        );
    }

    #[test]
    fn attributes_escape_quotes_and_keep_line_breaks() {
        assert_eq!(
            attr(HOSTILE),
            "a&lt;b&gt;&amp;c&quot;d&#39;e\\x01f\\x1b[31mg&#10;h&#9;i|j`k\\x7f\\u{fffe}"
        );
    }

    #[test]
    fn markdown_cells_stay_one_cell_of_plain_text() {
        let cell = md(HOSTILE);
        assert!(!cell.contains('\n') && !cell.contains('<'), "{cell}");
        assert_eq!(cell.matches('|').count(), cell.matches("\\|").count());
        assert_eq!(md("*a* _b_ [c](d)"), "\\*a\\* \\_b\\_ \\[c\\](d)");
        assert_eq!(md_code("run-0"), "`run-0`");
        assert_eq!(md_code("a`b|c"), "``a`b\\|c``");
        assert_eq!(md_code("`x"), "`` `x ``");
    }

    #[test]
    fn url_paths_are_percent_encoded() {
        assert_eq!(url_path("../a b/c#1?.d"), "../a%20b/c%231%3F.d");
        assert_eq!(url_path("é"), "%C3%A9");
    }
}
