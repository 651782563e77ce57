//! Where in a program's source an address lies: the function its symbol table names, and the
//! file and line its DWARF line table gives, read from the object's file (`addr2line` over
//! `gimli`). Explore names an exit handler's registration this way (the `atexit` call, a
//! static object's definition, an `__attribute__((destructor))` function), and, where two
//! registrations lie in one function of a source file that can be read, shows their swap as a
//! unified diff.
//!
//! Debug info may be absent (a release build) or in a separate file (`.gnu_debuglink`): then
//! there is no line, and nothing is guessed.

use std::path::{Path, PathBuf};

/// A place in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// The source file, as the line table names it (absolute where the compiler said so).
    pub file: PathBuf,
    /// Its line, from 1.
    pub line: u32,
    /// The function holding the address, as the symbol table names it.
    pub function: Option<String>,
}

impl SourceLine {
    /// `workers.c:44`.
    pub fn short(&self) -> String {
        let name = self.file.file_name().map_or_else(
            || self.file.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        format!("{name}:{}", self.line)
    }
}

/// One object file's symbols and lines, read once.
pub struct Object {
    symbols: Vec<(u64, u64, String)>,
    lines: Option<addr2line::Context<Slice>>,
}

type Slice = gimli::EndianArcSlice<gimli::RunTimeEndian>;

impl Object {
    /// Reads `path`; `None` when it is no ELF file this can read.
    pub fn read(path: &Path) -> Option<Object> {
        use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
        let bytes = std::fs::read(path).ok()?;
        let file = object::File::parse(&*bytes).ok()?;
        let mut symbols: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
            .collect();
        symbols.sort();
        symbols.dedup_by_key(|s| s.0);
        let endian = match file.is_little_endian() {
            true => gimli::RunTimeEndian::Little,
            false => gimli::RunTimeEndian::Big,
        };
        let load = |id: gimli::SectionId| -> Result<Slice, gimli::Error> {
            let data = file
                .section_by_name(id.name())
                .and_then(|s| s.uncompressed_data().ok())
                .unwrap_or_default();
            Ok(Slice::new(std::sync::Arc::from(&*data), endian))
        };
        let has_lines = file.section_by_name(".debug_line").is_some();
        let lines = has_lines
            .then(|| gimli::Dwarf::load(load).ok())
            .flatten()
            .and_then(|dwarf| addr2line::Context::from_dwarf(dwarf).ok());
        Some(Object { symbols, lines })
    }

    /// The function holding `address` (an offset in the object, as the timeline gives it).
    pub fn function_at(&self, address: u64) -> Option<&str> {
        let at = self
            .symbols
            .partition_point(|s| s.0 <= address)
            .checked_sub(1)?;
        let (start, size, name) = &self.symbols[at];
        (address < start + (*size).max(1)).then_some(name.as_str())
    }

    /// The source line of `address`; `None` without a line table for it.
    pub fn line_at(&self, address: u64) -> Option<SourceLine> {
        let location = self.lines.as_ref()?.find_location(address).ok()??;
        Some(SourceLine {
            file: PathBuf::from(location.file?),
            line: location.line?,
            function: self.function_at(address).map(str::to_string),
        })
    }

    /// The line of a call whose return address is `returns_to`: the call instruction ends
    /// just before it.
    pub fn call_at(&self, returns_to: u64) -> Option<SourceLine> {
        self.line_at(returns_to.checked_sub(1)?)
    }
}

/// The change that swaps lines `a` and `b` of one function in `file`, as a unified diff; `None` when the two are not in one function or the file cannot be read
/// or does not hold those lines.
pub fn swap_diff(a: &SourceLine, b: &SourceLine) -> Option<String> {
    if a.file != b.file || a.function.is_none() || a.function != b.function || a.line == b.line {
        return None;
    }
    let text = std::fs::read_to_string(&a.file).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let (first, last) = (a.line.min(b.line) as usize, a.line.max(b.line) as usize);
    if last > lines.len() || first == 0 {
        return None;
    }
    let context = 2;
    let from = first.saturating_sub(context).max(1);
    let to = (last + context).min(lines.len());
    let name = a.file.display();
    // An absolute path as it is (`patch -p0`); a relative one as a/ and b/.
    let (old, new) = match a.file.is_absolute() {
        true => (name.to_string(), name.to_string()),
        false => (format!("a/{name}"), format!("b/{name}")),
    };
    let mut out = format!(
        "--- {old}\n+++ {new}\n@@ -{from},{n} +{from},{n} @@\n",
        n = to - from + 1
    );
    for at in from..=to {
        let line = lines[at - 1];
        match at {
            _ if at == first => {
                out.push_str(&format!("-{line}\n+{}\n", lines[last - 1]));
            }
            _ if at == last => {
                out.push_str(&format!("-{line}\n+{}\n", lines[first - 1]));
            }
            _ => out.push_str(&format!(" {line}\n")),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_lines_of_one_function_are_swapped_in_a_unified_diff() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.c");
        std::fs::write(
            &file,
            "void start(void) {\n    init();\n    atexit(join_workers);\n    atexit(vk_shutdown);\n    run();\n}\n",
        )
        .unwrap();
        let at = |line| SourceLine {
            file: file.clone(),
            line,
            function: Some("start".into()),
        };
        let diff = swap_diff(&at(3), &at(4)).unwrap();
        let name = file.display();
        assert_eq!(
            diff,
            format!(
                "--- {name}\n+++ {name}\n@@ -1,6 +1,6 @@\n void start(void) {{\n     init();\n-    atexit(join_workers);\n+    atexit(vk_shutdown);\n-    atexit(vk_shutdown);\n+    atexit(join_workers);\n     run();\n }}\n"
            )
        );
        assert_eq!(at(4).short(), "app.c:4");
        // Not one function, or no such line: no diff.
        let other = SourceLine {
            function: Some("other".into()),
            ..at(4)
        };
        assert_eq!(swap_diff(&at(3), &other), None);
        assert_eq!(swap_diff(&at(3), &at(40)), None);
        assert_eq!(swap_diff(&at(3), &at(3)), None);
    }

    #[test]
    fn a_programs_own_lines_and_functions_are_read_from_its_debug_info() {
        // This test's own executable: its symbol table names each function's address.
        let exe = std::env::current_exe().unwrap();
        let object = Object::read(&exe).expect("an ELF file");
        let base = object.symbols.first().map(|s| s.0).unwrap_or(0);
        assert!(base > 0);
        let (start, _, name) = object.symbols[object.symbols.len() / 2].clone();
        assert_eq!(object.function_at(start), Some(name.as_str()));
        assert_eq!(Object::read(Path::new("/nonexistent")).map(|_| ()), None);
    }
}
