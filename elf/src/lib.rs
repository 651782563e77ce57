//! What an ELF file asks of the dynamic linker, read from its bytes: its machine, the symbol
//! versions it needs from each library (`.gnu.version_r`, with the symbols bound to each
//! version through `.gnu.version` and `.dynsym`), its interpreter, and its dynamic section
//! (`DT_NEEDED`, `DT_SONAME`, `DT_RUNPATH`, `DT_RPATH`: [`linking`]); and any section by name.
//!
//! One reader for vkexit and its fixtures: `vkexit bundle` holds every file it packs to a glibc
//! floor, so that a bundle built here is known to start on an older system before it is copied
//! there; a run of a sanitizer build preloads the sanitizer's runtime the program names; the
//! ggml fixture finds the `libggml` a backend module needs where the dynamic linker would.
//! (The preloaded library reads loaded objects' symbol tables in memory, inside the dynamic
//! loader's callbacks and without allocating: that is not this reader's work.)
//!
//! Only what those need is read: 64-bit little-endian files (x86_64, aarch64), section
//! headers, the three GNU symbol-versioning sections, the dynamic section and the program
//! headers. Anything else is an error saying what, never a guess.

use std::fmt;

/// The `e_machine` of x86_64, an architecture vkexit is built for.
pub const EM_X86_64: u16 = 62;
/// The `e_machine` of aarch64, an architecture vkexit is built for.
pub const EM_AARCH64: u16 = 183;

const SHT_DYNAMIC: u32 = 6;
const SHT_DYNSYM: u32 = 11;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_SONAME: u64 = 14;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;
const SHT_GNU_VERSYM: u32 = 0x6fff_ffff;

/// One version an ELF file needs, as `.gnu.version_r` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The library that must define it (`libc.so.6`).
    pub library: String,
    /// The version name (`GLIBC_2.34`).
    pub version: String,
    /// The undefined dynamic symbols bound to that version (`pthread_create`), sorted.
    pub symbols: Vec<String>,
}

/// What [`read`] learned of one file.
#[derive(Debug, Clone)]
pub struct Needs {
    /// Its `e_machine`.
    pub machine: u16,
    /// Each version it needs, with the library that must define it.
    pub needs: Vec<Need>,
}

/// How a program or a library is linked, as [`linking`] reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Linking {
    /// The dynamic linker it names (`/lib64/ld-linux-x86-64.so.2`); `None` for a static
    /// program or a library.
    pub interpreter: Option<String>,
    /// The libraries it names itself (`DT_NEEDED`), in its order: `libasan.so.8`.
    pub needed: Vec<String>,
    /// Its own name (`DT_SONAME`), when it has one.
    pub soname: Option<String>,
    /// Where the dynamic linker looks for its libraries (`DT_RUNPATH`), as written:
    /// directories separated by `:`, `$ORIGIN` unreplaced.
    pub runpath: Option<String>,
    /// The older form of it (`DT_RPATH`), which the dynamic linker reads only without a
    /// `DT_RUNPATH`.
    pub rpath: Option<String>,
}

/// A file [`read`] could not make sense of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A glibc version number, `2.31` → `(2, 31)`; ordered as glibc orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GlibcVersion(pub u32, pub u32);

impl GlibcVersion {
    /// `2.31`, or `GLIBC_2.31`, or `2.3.4` (the third part does not move a floor: `2.3.4` is
    /// older than `2.4`, and is read as `2.3`).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.strip_prefix("GLIBC_").unwrap_or(text);
        let mut parts = text.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        if parts.any(|p| p.parse::<u32>().is_err()) {
            return None;
        }
        Some(Self(major, minor))
    }
}

impl fmt::Display for GlibcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// The architecture's `e_machine` in words, for messages.
pub fn machine_name(machine: u16) -> String {
    match machine {
        EM_X86_64 => "x86_64".into(),
        EM_AARCH64 => "aarch64".into(),
        other => format!("ELF machine {other}"),
    }
}

/// The `e_machine` of an architecture name as Rust spells it (`std::env::consts::ARCH`).
pub fn machine_of(arch: &str) -> Option<u16> {
    match arch {
        "x86_64" => Some(EM_X86_64),
        "aarch64" => Some(EM_AARCH64),
        _ => None,
    }
}

/// Checks the identification of a 64-bit little-endian ELF file.
fn reader(bytes: &[u8]) -> Result<Reader<'_>, Malformed> {
    let r = Reader(bytes);
    if bytes.get(..4) != Some(b"\x7fELF") {
        return Err(Malformed("not an ELF file".into()));
    }
    if r.u8(4)? != 2 || r.u8(5)? != 1 {
        return Err(Malformed(
            "not a 64-bit little-endian ELF file (the only kind vkexit is built as)".into(),
        ));
    }
    Ok(r)
}

/// The section headers; none when the file has none.
fn sections(r: &Reader) -> Result<Vec<Section>, Malformed> {
    let shoff = r.u64(0x28)?;
    let shentsize = u64::from(r.u16(0x3a)?);
    let shnum = u64::from(r.u16(0x3c)?);
    if shoff == 0 || shnum == 0 {
        return Ok(Vec::new());
    }
    if shentsize < 64 {
        return Err(Malformed(format!(
            "section headers of {shentsize} bytes (expected 64)"
        )));
    }
    (0..shnum)
        .map(|i| Section::at(r, shoff + i * shentsize))
        .collect()
}

/// The bytes of the section named `name` (`.vkexit_helpers`), or `None` when the file has no
/// such section.
pub fn section_named<'a>(bytes: &'a [u8], name: &str) -> Result<Option<&'a [u8]>, Malformed> {
    let r = reader(bytes)?;
    let sections = sections(&r)?;
    if sections.is_empty() {
        return Ok(None);
    }
    let names = section(&sections, u32::from(r.u16(0x3e)?))?;
    for s in &sections {
        if r.string(names, s.name)? != name {
            continue;
        }
        let found = usize::try_from(s.offset)
            .ok()
            .zip(usize::try_from(s.size).ok())
            .and_then(|(at, size)| bytes.get(at..at.checked_add(size)?));
        return match found {
            Some(b) => Ok(Some(b)),
            None => Err(Malformed(format!("section {name} runs past the end"))),
        };
    }
    Ok(None)
}

/// Reads a program's interpreter and the libraries it names.
pub fn linking(bytes: &[u8]) -> Result<Linking, Malformed> {
    let r = reader(bytes)?;
    let phoff = r.u64(0x20)?;
    let phentsize = u64::from(r.u16(0x36)?);
    let phnum = u64::from(r.u16(0x38)?);
    let mut linking = Linking::default();
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        if r.u32(at)? == PT_INTERP {
            let offset = r.u64(at + 8)?;
            let size = r.u64(at + 32)?;
            let table = Section {
                name: 0,
                kind: 0,
                offset,
                size,
                link: 0,
                info: 0,
            };
            linking.interpreter = Some(r.string(&table, 0)?);
        }
    }
    let sections = sections(&r)?;
    for dynamic in sections.iter().filter(|s| s.kind == SHT_DYNAMIC) {
        let strings = section(&sections, dynamic.link)?;
        for i in 0..dynamic.size / 16 {
            let entry = dynamic.offset + i * 16;
            let tag = r.u64(entry)?;
            let slot = match tag {
                DT_NULL => break,
                DT_NEEDED => {
                    linking.needed.push(String::new());
                    linking.needed.last_mut()
                }
                DT_SONAME => Some(linking.soname.insert(String::new())),
                DT_RUNPATH => Some(linking.runpath.insert(String::new())),
                DT_RPATH => Some(linking.rpath.insert(String::new())),
                _ => None,
            };
            if let Some(slot) = slot {
                let offset = u32::try_from(r.u64(entry + 8)?).map_err(|_| {
                    Malformed(format!("dynamic entry {tag} at byte {entry} is too far"))
                })?;
                *slot = r.string(strings, offset)?;
            }
        }
    }
    Ok(linking)
}

/// Reads the machine and the version needs of an ELF file's bytes.
pub fn read(bytes: &[u8]) -> Result<Needs, Malformed> {
    let r = reader(bytes)?;
    let machine = r.u16(0x12)?;
    let sections = sections(&r)?;
    let Some(verneed) = sections.iter().find(|s| s.kind == SHT_GNU_VERNEED) else {
        return Ok(Needs {
            machine,
            needs: Vec::new(),
        });
    };
    let strings = section(&sections, verneed.link)?;
    let mut needs = Vec::new();
    // Version index (`vna_other`) → position in `needs`, to bind symbols below.
    let mut by_index = Vec::new();
    let mut entry = verneed.offset;
    for _ in 0..verneed.info {
        let count = r.u16(entry + 2)?;
        let library = r.string(strings, r.u32(entry + 4)?)?;
        let mut aux = entry + u64::from(r.u32(entry + 8)?);
        for _ in 0..count {
            let index = r.u16(aux + 6)? & 0x7fff;
            let version = r.string(strings, r.u32(aux + 8)?)?;
            by_index.push((index, needs.len()));
            needs.push(Need {
                library: library.clone(),
                version,
                symbols: Vec::new(),
            });
            aux += u64::from(r.u32(aux + 12)?);
        }
        let next = r.u32(entry + 12)?;
        if next == 0 {
            break;
        }
        entry += u64::from(next);
    }
    bind_symbols(&r, &sections, &by_index, &mut needs)?;
    for need in &mut needs {
        need.symbols.sort();
        need.symbols.dedup();
    }
    Ok(Needs { machine, needs })
}

/// Puts each undefined dynamic symbol under the version `.gnu.version` gives it.
fn bind_symbols(
    r: &Reader,
    sections: &[Section],
    by_index: &[(u16, usize)],
    needs: &mut [Need],
) -> Result<(), Malformed> {
    let (Some(dynsym), Some(versym)) = (
        sections.iter().find(|s| s.kind == SHT_DYNSYM),
        sections.iter().find(|s| s.kind == SHT_GNU_VERSYM),
    ) else {
        return Ok(());
    };
    let names = section(sections, dynsym.link)?;
    let count = dynsym.size / 24;
    for i in 0..count {
        let sym = dynsym.offset + i * 24;
        // An undefined symbol (st_shndx 0) is one the file needs from a library.
        if r.u16(sym + 6)? != 0 {
            continue;
        }
        let index = r.u16(versym.offset + i * 2)? & 0x7fff;
        if let Some(&(_, at)) = by_index.iter().find(|(v, _)| *v == index) {
            let name = r.string(names, r.u32(sym)?)?;
            if !name.is_empty() {
                needs[at].symbols.push(name);
            }
        }
    }
    Ok(())
}

struct Section {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

impl Section {
    fn at(r: &Reader, at: u64) -> Result<Self, Malformed> {
        Ok(Self {
            name: r.u32(at)?,
            kind: r.u32(at + 4)?,
            offset: r.u64(at + 24)?,
            size: r.u64(at + 32)?,
            link: r.u32(at + 40)?,
            info: r.u32(at + 44)?,
        })
    }
}

fn section(sections: &[Section], index: u32) -> Result<&Section, Malformed> {
    sections
        .get(index as usize)
        .ok_or_else(|| Malformed(format!("section {index} named by a link does not exist")))
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes<const N: usize>(&self, at: u64) -> Result<[u8; N], Malformed> {
        usize::try_from(at)
            .ok()
            .and_then(|at| self.0.get(at..at.checked_add(N)?))
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| Malformed(format!("truncated: nothing at byte {at}")))
    }
    fn u8(&self, at: u64) -> Result<u8, Malformed> {
        self.bytes::<1>(at).map(|b| b[0])
    }
    fn u16(&self, at: u64) -> Result<u16, Malformed> {
        self.bytes(at).map(u16::from_le_bytes)
    }
    fn u32(&self, at: u64) -> Result<u32, Malformed> {
        self.bytes(at).map(u32::from_le_bytes)
    }
    fn u64(&self, at: u64) -> Result<u64, Malformed> {
        self.bytes(at).map(u64::from_le_bytes)
    }
    /// A NUL-terminated string at `offset` in a string table.
    fn string(&self, table: &Section, offset: u32) -> Result<String, Malformed> {
        let start = table.offset + u64::from(offset);
        let bytes = usize::try_from(start)
            .ok()
            .and_then(|s| self.0.get(s..))
            .ok_or_else(|| Malformed(format!("string at byte {start} is past the end")))?;
        let end = bytes
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| Malformed(format!("string at byte {start} has no end")))?;
        Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_versions_order_as_glibc_does() {
        let v = |s| GlibcVersion::parse(s).unwrap();
        assert!(v("2.31") < v("GLIBC_2.34"));
        assert!(v("2.3.4") < v("2.4"));
        assert!(v("2.17") < v("2.31"));
        assert_eq!(v("GLIBC_2.2.5"), GlibcVersion(2, 2));
        assert_eq!(GlibcVersion::parse("GLIBC_PRIVATE"), None);
        assert_eq!(GlibcVersion::parse("2"), None);
        assert_eq!(v("2.31").to_string(), "2.31");
    }

    #[test]
    fn a_host_program_needs_versions_of_libc_with_their_symbols() {
        // This very test program: built by the host's toolchain, it needs glibc versions.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let needs = read(&me).unwrap();
        assert_eq!(Some(needs.machine), machine_of(std::env::consts::ARCH));
        let libc: Vec<&Need> = needs
            .needs
            .iter()
            .filter(|n| n.library == "libc.so.6" && n.version.starts_with("GLIBC_2."))
            .collect();
        assert!(!libc.is_empty(), "{needs:?}");
        assert!(
            libc.iter().any(|n| n
                .symbols
                .iter()
                .any(|s| s == "malloc" || s == "write" || s == "pthread_create" || s == "open64")),
            "no familiar libc symbol bound to a libc version: {libc:?}"
        );
    }

    #[test]
    fn a_host_program_names_its_interpreter_and_libc() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let linking = linking(&me).unwrap();
        let interpreter = linking.interpreter.expect("a dynamic test program");
        assert!(interpreter.contains("/ld-linux"), "{interpreter}");
        assert!(
            linking.needed.iter().any(|n| n == "libc.so.6"),
            "{:?}",
            linking.needed
        );
    }

    #[test]
    fn a_library_names_itself_and_what_it_needs() {
        // Every glibc system has it; its soname is fixed by the ABI.
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
            "/usr/lib64/libc.so.6",
        ]
        .into_iter()
        .find_map(|p| std::fs::read(p).ok())
        .expect("a libc.so.6");
        let linking = linking(&libc).unwrap();
        assert_eq!(linking.soname.as_deref(), Some("libc.so.6"));
        assert!(
            linking.needed.iter().any(|n| n.starts_with("ld-linux")),
            "{linking:?}"
        );
    }

    #[test]
    fn anything_else_is_malformed_not_a_guess() {
        assert!(linking(b"#!/bin/sh\n").is_err());
        assert!(read(b"#!/bin/sh\n").is_err());
        assert!(read(b"\x7fELF\x01\x01\x01").is_err());
        let mut truncated = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        truncated.truncate(100);
        assert!(read(&truncated).is_err());
    }
}
