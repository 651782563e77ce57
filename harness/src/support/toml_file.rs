//! The TOML files vkexit reads (matrices, baselines), kept with their text so
//! that every error names the file, the line and the column of what is
//! wrong, and what was expected there: `ci/m.toml:7:9: unknown field …`.

use crate::support::errors::{Error, Result};
use serde::de::DeserializeOwned;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A TOML file's name and whole text, read once, so that errors can point into it.
pub struct TomlFile {
    /// The path as the user gave it (`--config`, `--baseline`): errors name it so.
    pub path: PathBuf,
    /// The whole file, as UTF-8; byte offsets into it locate errors.
    pub text: String,
}

impl TomlFile {
    /// Reads the file; `context` says what it is for in the error ("cannot read the
    /// matrix file").
    pub(crate) fn read(path: &Path, context: &'static str) -> Result<TomlFile> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(context, path, e))?;
        Ok(TomlFile {
            path: path.to_path_buf(),
            text,
        })
    }

    /// Deserialises the whole file; unknown keys are refused by the types
    /// (`deny_unknown_fields`), so a typo never passes unnoticed.
    pub(crate) fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        toml::from_str(&self.text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            self.error_at(at, e.message().trim_end())
        })
    }

    /// "FILE:LINE:COLUMN: message", both counted from 1, the column in characters.
    pub(crate) fn error_at(&self, offset: usize, message: impl std::fmt::Display) -> Error {
        let (line, column) = self.position(offset);
        Error::BadFileAt {
            path: self.path.clone(),
            line,
            column,
            why: message.to_string(),
        }
    }

    /// "FILE:LINE:COLUMN: message" at the start of a parsed value's span.
    pub(crate) fn error(&self, span: &Range<usize>, message: impl std::fmt::Display) -> Error {
        self.error_at(span.start, message)
    }

    /// "FILE:LINE" of an offset: where an entry that judged a cell is.
    pub(crate) fn location(&self, offset: usize) -> String {
        format!("{}:{}", self.path.display(), self.position(offset).0)
    }

    fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = self.text.get(..offset).unwrap_or(&self.text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> TomlFile {
        TomlFile {
            path: "m.toml".into(),
            text: text.into(),
        }
    }

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        let f = file("a = 1\nbé = \"x\"\n");
        assert_eq!(f.position(0), (1, 1));
        assert_eq!(f.position(6), (2, 1));
        // "bé = " is 6 bytes but 5 characters.
        assert_eq!(f.position(12), (2, 6));
        assert_eq!(f.location(7), "m.toml:2");
    }

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            a: u32,
        }
        let e = file("\n\na = \"three\"\n").parse::<T>().unwrap_err();
        let e = e.to_string();
        assert!(e.starts_with("m.toml:3:5: invalid type: string"), "{e}");
        let e = file("a = [1,\n").parse::<T>().unwrap_err().to_string();
        assert!(e.starts_with("m.toml:"), "{e}");
    }
}
