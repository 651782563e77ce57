//! Links the layer so that `dlclose` never unloads it (see `on_load` in src/lib.rs).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
