//! How wide the terminal is, so that no line vkexit prints there wraps.

use std::os::fd::AsRawFd;

/// The width when neither `$COLUMNS` nor a terminal says one: a log, a pipe, a file.
pub(crate) const DEFAULT_WIDTH: usize = 100;

/// The narrowest width honoured: below it, names are cut to nothing.
const MIN_WIDTH: usize = 40;

/// The width lines written to `stream` should keep within: `$COLUMNS` when set to a number,
/// else the terminal's own when `stream` is one, else [`DEFAULT_WIDTH`].
pub(crate) fn width(stream: &impl AsRawFd) -> usize {
    columns()
        .or_else(|| tty_width(stream.as_raw_fd()))
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// Whether long text written to `stream` is broken into lines of [`width`]: on a terminal, or
/// where `$COLUMNS` asks for a width. In a log or a file it is not, so that a search finds a
/// reason or a layer's message whole.
pub(crate) fn wraps(stream: &impl AsRawFd) -> bool {
    columns().is_some() || tty_width(stream.as_raw_fd()).is_some()
}

fn columns() -> Option<usize> {
    let columns = std::env::var("COLUMNS").ok();
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&w| w > 0)
}

fn tty_width(fd: i32) -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct it is given, which lives for the
    // call; on a descriptor that is not a terminal it fails and writes nothing.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// `text` cut to `width` characters, its last one `…` when cut.
pub(crate) fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `text` in lines of at most `width` characters, each after `indent`, broken at spaces; a word
/// longer than a line (a path) has a line of its own, whole.
pub(crate) fn wrap(text: &str, indent: &str, width: usize) -> Vec<String> {
    let room = width.saturating_sub(indent.chars().count()).max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > room {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.into_iter().map(|l| format!("{indent}{l}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_with_an_ellipsis_and_wrapped_at_spaces() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(
            wrap("one two three four", "  ", 11),
            ["  one two", "  three", "  four"]
        );
        assert_eq!(wrap("a /long/path b", "", 5), ["a", "/long/path", "b"]);
    }
}
