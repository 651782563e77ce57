//! Whether a loaded object defines a symbol, read from its own GNU hash table in memory: a
//! few hundred instructions, no lock, no allocation. Asking the loader instead (`dlopen` with
//! `RTLD_NOLOAD`, `dlsym`, `dladdr`) cost about 10,000 instructions an object, most of them
//! building the error message of a `dlsym` that finds nothing, for every object of every run.
//!
//! Not the ELF reader vkexit and its fixtures share (`vkexit-elf`), which reads a file's bytes
//! into owned values: this runs inside the dynamic loader's callbacks (`dl_iterate_phdr`, the
//! `dlopen` hooks) of the program under test, reads the mapped object in place, and must not
//! allocate there.

use std::ffi::CStr;

const PT_DYNAMIC: u32 = 2;
const DT_NULL: i64 = 0;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_GNU_HASH: i64 = 0x6fff_fef5;
const SHN_UNDEF: u16 = 0;

#[repr(C)]
struct Dyn {
    tag: i64,
    value: u64,
}

/// Whether the object of `info` defines one of `names` itself (not one of its dependencies);
/// `None` where its table cannot be read (no GNU hash table, a 32-bit target), for the caller
/// to ask the loader.
///
/// # Safety
/// `info` is the loader's entry for an object it keeps loaded during the call (as in a
/// `dl_iterate_phdr` callback).
#[cfg(target_pointer_width = "64")]
pub(crate) unsafe fn exports_any(info: &libc::dl_phdr_info, names: &[&CStr]) -> Option<bool> {
    let base = info.dlpi_addr as usize;
    // SAFETY: the loader's program headers of the object, `dlpi_phnum` of them.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
    let dynamic = headers.iter().find(|h| h.p_type == PT_DYNAMIC)?;
    // glibc relocates the dynamic section's addresses in place (x86_64, aarch64); a table
    // left as link-time addresses lies below the load address of a shared object.
    let at = |address: u64| -> usize {
        let address = address as usize;
        match address < base {
            true => base + address,
            false => address,
        }
    };
    let (mut strtab, mut symtab, mut gnu_hash) = (0, 0, 0);
    let mut entry = (base + dynamic.p_vaddr as usize) as *const Dyn;
    // SAFETY: the dynamic section ends with DT_NULL; each entry is read in place.
    unsafe {
        while (*entry).tag != DT_NULL {
            match (*entry).tag {
                DT_STRTAB => strtab = at((*entry).value),
                DT_SYMTAB => symtab = at((*entry).value),
                DT_GNU_HASH => gnu_hash = at((*entry).value),
                _ => {}
            }
            entry = entry.add(1);
        }
    }
    if strtab == 0 || symtab == 0 || gnu_hash == 0 {
        return None;
    }
    let table = Table {
        strtab: strtab as *const u8,
        symtab: symtab as *const libc::Elf64_Sym,
        hash: gnu_hash as *const u32,
    };
    // SAFETY: the three tables of a loaded object, as its dynamic section names them.
    Some(names.iter().any(|name| unsafe { table.defines(name) }))
}

#[cfg(not(target_pointer_width = "64"))]
pub(crate) unsafe fn exports_any(_: &libc::dl_phdr_info, _: &[&CStr]) -> Option<bool> {
    None
}

struct Table {
    strtab: *const u8,
    symtab: *const libc::Elf64_Sym,
    hash: *const u32,
}

impl Table {
    /// The lookup the loader makes (the GNU hash section's layout: counts, Bloom filter,
    /// buckets, chains), less symbol versions: any definition of the name counts.
    ///
    /// # Safety
    /// The tables are those of a loaded object.
    #[cfg(target_pointer_width = "64")]
    unsafe fn defines(&self, name: &CStr) -> bool {
        let name = name.to_bytes();
        let h = name
            .iter()
            .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c.into()));
        // SAFETY: the header is four words, followed by the Bloom words, the buckets and the
        // chains, as the counts in the header say.
        unsafe {
            let (buckets, offset, bloom_size, shift) = (
                *self.hash,
                *self.hash.add(1),
                *self.hash.add(2),
                *self.hash.add(3),
            );
            if buckets == 0 || bloom_size == 0 {
                return false;
            }
            let bloom = self.hash.add(4).cast::<u64>();
            let word = bloom.add(((h / 64) % bloom_size) as usize).read_unaligned();
            let mask = (1u64 << (h % 64)) | (1u64 << ((h >> shift) % 64));
            if word & mask != mask {
                return false;
            }
            let bucket = bloom.add(bloom_size as usize).cast::<u32>();
            let chain = bucket.add(buckets as usize);
            let mut index = *bucket.add((h % buckets) as usize);
            if index < offset {
                return false;
            }
            loop {
                let h2 = *chain.add((index - offset) as usize);
                if h | 1 == h2 | 1 {
                    let symbol = &*self.symtab.add(index as usize);
                    let found = CStr::from_ptr(self.strtab.add(symbol.st_name as usize).cast());
                    if found.to_bytes() == name && symbol.st_shndx != SHN_UNDEF {
                        return true;
                    }
                }
                if h2 & 1 == 1 {
                    return false;
                }
                index += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

    /// Each loaded object's answer for `names`, by file name.
    fn answers(names: &[&CStr]) -> Vec<(String, Option<bool>)> {
        struct Out<'a> {
            names: &'a [&'a CStr],
            found: Vec<(String, Option<bool>)>,
        }
        unsafe extern "C" fn each(
            info: *mut libc::dl_phdr_info,
            _: usize,
            data: *mut c_void,
        ) -> libc::c_int {
            // SAFETY: our Out and the loader's entry.
            let (out, info) = unsafe { (&mut *data.cast::<Out>(), &*info) };
            let name = match info.dlpi_name.is_null() {
                true => String::new(),
                // SAFETY: the loader's NUL-terminated name of the object.
                false => unsafe { CStr::from_ptr(info.dlpi_name) }
                    .to_string_lossy()
                    .into_owned(),
            };
            // SAFETY: inside the callback the object stays loaded.
            let answer = unsafe { exports_any(info, out.names) };
            out.found.push((name, answer));
            0
        }
        let mut out = Out {
            names,
            found: Vec::new(),
        };
        // SAFETY: `each` reads the entries only; `out` outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(each), std::ptr::from_mut(&mut out).cast()) };
        out.found
    }

    #[test]
    fn the_c_library_defines_its_own_functions_not_those_it_imports() {
        let found = answers(&[c"getpid"]);
        let libc = found
            .iter()
            .find(|(name, _)| name.contains("libc.so"))
            .expect("libc is loaded");
        assert_eq!(libc.1, Some(true), "{found:?}");
        // A name libc only imports (from the dynamic loader) is not defined there.
        let found = answers(&[c"_dl_argv"]);
        let libc = found.iter().find(|(n, _)| n.contains("libc.so")).unwrap();
        assert_eq!(libc.1, Some(false), "{found:?}");
        let loader = found.iter().find(|(n, _)| n.contains("ld-linux")).unwrap();
        assert_eq!(loader.1, Some(true), "{found:?}");
    }

    /// Mesa's lavapipe, as vkexit's tests use it everywhere.
    const LAVAPIPE: &CStr = c"libvulkan_lvp.so";

    #[test]
    fn a_driver_exports_its_entry_point_and_its_dependencies_do_not() {
        // SAFETY: a NUL-terminated name; the library stays loaded for the test.
        let handle = unsafe { libc::dlopen(LAVAPIPE.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        assert!(
            !handle.is_null(),
            "lavapipe (mesa-vulkan-drivers) is not installed"
        );
        let found = answers(&[c"vk_icdGetInstanceProcAddr"]);
        let driver = found
            .iter()
            .find(|(n, _)| n.ends_with("libvulkan_lvp.so"))
            .expect("lavapipe is loaded");
        assert_eq!(driver.1, Some(true), "{found:?}");
        let others = found
            .iter()
            .filter(|(n, answer)| !n.ends_with("libvulkan_lvp.so") && *answer == Some(true));
        assert_eq!(others.count(), 0, "{found:?}");
    }
}
