//! The harness's errors are typed: a function that can fail says what went wrong in an enum
//! (or struct) whose variants carry the data, and `String` is only ever what such an error is
//! shown as. This reads harness/src and fails on any `Result<_, String>` in the code that
//! ships, naming the file and line.

mod rust_sources;

use rust_sources::sources;
use std::path::Path;

/// The code that ships, as lines: up to the file's test module (`#[cfg(test)]` then
/// `mod tests`, at its end), with comments and the insides of string and character literals
/// blanked, so that only code is left, on the lines it was on.
fn shipping_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with("mod tests"))
        })
        .unwrap_or(lines.len());
    blank_comments_and_literals(&lines[..end].join("\n"))
}

/// `text` with every comment and the contents of every string and character literal turned
/// into spaces; line breaks are kept.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        let skip = match rest {
            ['/', '/', ..] => rest.iter().position(|&c| c == '\n').unwrap_or(rest.len()),
            ['/', '*', ..] => block_comment(rest),
            ['"', ..] => string(rest),
            ['r' | 'b', ..] if !after_identifier(&chars, i) => prefixed_string(rest).unwrap_or(0),
            ['\'', '\\', ..] => string(rest),
            ['\'', _, '\'', ..] => 3,
            _ => 0,
        };
        match skip {
            0 => {
                out.push(rest[0]);
                i += 1;
            }
            n => {
                rest[..n].iter().for_each(|&c| blank(&mut out, c));
                i += n;
            }
        }
    }
    out
}

fn after_identifier(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The length of the `/* … */` comment at the start of `rest`, nested ones in it.
fn block_comment(rest: &[char]) -> usize {
    let mut depth = 0;
    let mut i = 0;
    while i < rest.len() {
        match &rest[i..] {
            ['/', '*', ..] => (depth, i) = (depth + 1, i + 2),
            ['*', '/', ..] if depth == 1 => return i + 2,
            ['*', '/', ..] => (depth, i) = (depth - 1, i + 2),
            _ => i += 1,
        }
    }
    rest.len()
}

/// The length of the quoted literal at the start of `rest` (`"…"`, `'\…'`): up to the same
/// quote, not escaped.
fn string(rest: &[char]) -> usize {
    let quote = rest[0];
    let mut i = 1;
    while i < rest.len() {
        match rest[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    rest.len()
}

/// The length of the byte or raw string (`b"…"`, `r"…"`, `r#"…"#`, `br#"…"#`) at the start of
/// `rest`, if one starts there.
fn prefixed_string(rest: &[char]) -> Option<usize> {
    let start = match rest {
        ['b', '"', ..] => return Some(1 + string(&rest[1..])),
        ['r', ..] => 1,
        ['b', 'r', ..] => 2,
        _ => return None,
    };
    let hashes = rest[start..].iter().take_while(|&&c| c == '#').count();
    let open = start + hashes;
    if rest.get(open) != Some(&'"') {
        return None;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    let body = open + 1;
    let end = (body..rest.len()).find(|&i| rest[i..].starts_with(&close));
    Some(end.map_or(rest.len(), |i| i + close.len()))
}

/// The generic arguments of the `<…>` that opens at `code[open]`, each on one line, trimmed;
/// `None` when it does not close.
fn generic_arguments(code: &[char], open: usize) -> Option<Vec<String>> {
    let mut depth = 0usize;
    let mut arguments = vec![String::new()];
    for i in open + 1..code.len() {
        let c = code[i];
        match c {
            // `->` of a `Fn() -> T` is no bracket.
            '>' if code[i - 1] == '-' => {}
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' if depth == 0 => {
                let tidy = |a: &String| a.split_whitespace().collect::<Vec<_>>().join(" ");
                return Some(
                    arguments
                        .iter()
                        .map(tidy)
                        .filter(|a| !a.is_empty())
                        .collect(),
                );
            }
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                arguments.push(String::new());
                continue;
            }
            _ => {}
        }
        arguments.last_mut().expect("one at least").push(c);
    }
    None
}

/// The lines (from 1) of the code that ships in `text` that name a `Result` whose error is a
/// `String`: `Result<T, String>`, `std::result::Result<T, String>`, any `T`.
fn string_errors(text: &str) -> Vec<usize> {
    let code: Vec<char> = shipping_code(text).chars().collect();
    let mut lines = Vec::new();
    let mut line = 1;
    for i in 0..code.len() {
        if code[i] == '\n' {
            line += 1;
        }
        let is_result = code[i..].starts_with(&['R', 'e', 's', 'u', 'l', 't', '<'])
            && !after_identifier(&code, i);
        if !is_result {
            continue;
        }
        let arguments = generic_arguments(&code, i + "Result".len()).unwrap_or_default();
        let error = arguments.get(1).map(String::as_str);
        let string = matches!(
            error,
            Some("String" | "std::string::String" | "alloc::string::String")
        );
        if string && lines.last() != Some(&line) {
            lines.push(line);
        }
    }
    lines
}

/// No function of the harness, nor any type of it, has a `String` for its error: each names
/// the file and line where one does.
#[test]
fn no_result_in_the_shipping_code_has_a_string_for_its_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    assert!(
        files.len() > 40,
        "only {} source files found under {}",
        files.len(),
        root.display()
    );
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        for line in string_errors(&text) {
            problems.push(format!(
                "harness/src/{shown}:{line}: a Result whose error is a String: give it a typed error (an enum whose variants carry what went wrong)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check finds exactly the planted `Result<_, String>` lines, whatever their ok type and
/// however they are spelled, and not a `String` that is the ok type, one in a comment or a
/// string, nor one in the test module.
#[test]
fn the_check_finds_each_planted_string_error_and_nothing_else() {
    let text = r##"//! fn doc() -> Result<(), String> (a comment)
use std::path::Path;
fn plain() -> Result<(), String> {
    Ok(())
}
fn long() -> std::result::Result<Vec<(u8, String)>, String> {
    Ok(Vec::new())
}
fn fine() -> Result<String, Error> {
    Ok(String::new())
}
fn io() -> std::io::Result<String> {
    Ok(String::new())
}
/* a block comment: Result<u8, String>
   over two lines */
fn callback(check: impl Fn(&str) -> Result<(), String>) {}
fn message() -> &'static str {
    "Result<u8, String> is only text here"
}
fn raw() -> &'static str {
    r#"Result<u8, String> "in" a raw string"#
}
fn nested() -> Result<Result<u8, String>, Error> {
    todo!()
}
fn arrow() -> Result<Box<dyn Fn(u8) -> Vec<u8>>, String> {
    todo!()
}
fn wrapped() -> Result<
    HashMap<String, Vec<String>>,
    String,
> {
    todo!()
}
fn lifetime<'a>(x: &'a str) -> Result<&'a str, MyError> {
    let quote = '"';
    Ok(x)
}
fn not_result() -> MyResult<u8, String> {}
static CACHE: OnceLock<Result<Store, String>> = OnceLock::new();
fn bytes() -> (&'static [u8], char) { (b"Result<u8, String> \"", '\'') }
fn tail() {} // -> Result<(), String>
#[cfg(test)]
mod tests {
    fn helper() -> Result<(), String> {
        Ok(())
    }
}
"##;
    assert_eq!(string_errors(text), [3, 6, 17, 24, 27, 30, 41]);
    assert!(string_errors("fn f() -> Result<(), Error> {}\n").is_empty());
}
