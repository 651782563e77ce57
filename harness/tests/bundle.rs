//! `vkexit bundle`: the tarball unpacks anywhere and runs a matrix on lavapipe with nothing
//! from the source tree, its Debian packages put in front of the machine's own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vkexit_testkit::vkexit::{self as kit, Sandbox};
use vkexit_testkit::vulkan::validation_manifest;

const MATRIX: &str = r#"
cases = ["clean-exit", "buffer-kept-at-exit"]
runtimes = ["refrt:guarded", "refrt:release-children"]
drivers = ["lavapipe"]
runs = 2
"#;

/// The system's validation layer (manifest and library) repackaged as a .deb of its own,
/// so the test proves the bundle's copy is the one used without needing a package mirror.
fn validation_layer_deb(sb: &Sandbox) -> PathBuf {
    let manifest = validation_manifest();
    let library = Path::new("/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so");
    assert!(
        library.is_file(),
        "the validation layer is not installed ({} is missing): run ci/setup.sh",
        library.display()
    );
    let pkg = sb.path().join("pkg");
    let layer_dir = pkg.join("usr/share/vulkan/explicit_layer.d");
    let lib_dir = pkg.join("usr/lib/x86_64-linux-gnu");
    for dir in [&layer_dir, &lib_dir, &pkg.join("DEBIAN")] {
        fs::create_dir_all(dir).unwrap();
    }
    fs::copy(&manifest, layer_dir.join(manifest.file_name().unwrap())).unwrap();
    fs::copy(library, lib_dir.join(library.file_name().unwrap())).unwrap();
    fs::write(
        pkg.join("DEBIAN/control"),
        "Package: vkexit-test-validation\nVersion: 1.0\nArchitecture: amd64\n\
         Maintainer: vkexit tests <tests@vkexit.invalid>\nDescription: the validation layer, repackaged\n",
    )
    .unwrap();
    let deb = sb.path().join("validation.deb");
    let out = Command::new("dpkg-deb")
        .args(["-Znone", "--root-owner-group", "--build"])
        .arg(&pkg)
        .arg(&deb)
        .output()
        .unwrap();
    assert!(out.status.success(), "dpkg-deb: {}", text(&out));
    deb
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// This machine's glibc (`getconf GNU_LIBC_VERSION`: "glibc 2.36"): the floor for bundles of
/// what this machine built, which need its glibc.
fn host_glibc() -> String {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().strip_prefix("glibc ").unwrap().to_string()
}

/// The bundle's wrapper with a minimal environment: no cargo, no source tree, no VK_* variables.
fn bundled(dir: &Path, xdg: &Path, args: &[&str]) -> Output {
    Command::new(dir.join("vkexit"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("XDG_RUNTIME_DIR", xdg)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn a_bundle_unpacked_elsewhere_runs_a_matrix_with_its_own_validation_layer() {
    let sb = Sandbox::new();
    let ci = sb.path().join("ci-files/matrix");
    fs::create_dir_all(&ci).unwrap();
    fs::write(ci.join("small.toml"), MATRIX).unwrap();
    let deb = validation_layer_deb(&sb);
    let tarball = sb.path().join("b.tar.gz");

    let out = sb
        .vkexit()
        .args([
            "bundle",
            "--strip-debug",
            "--glibc-floor",
            &host_glibc(),
            "-o",
        ])
        .arg(&tarball)
        .arg("--deb")
        .arg(&deb)
        .arg("--include")
        .arg(&ci)
        .output()
        .unwrap();
    assert!(out.status.success(), "bundle: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("vkexit-test-validation 1.0"));

    // Unpack, then move it: nothing may depend on where it was unpacked first.
    let unpack = sb.path().join("unpack");
    fs::create_dir_all(&unpack).unwrap();
    let out = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&unpack)
        .output()
        .unwrap();
    assert!(out.status.success(), "tar: {}", text(&out));
    let top = fs::read_dir(&unpack)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let moved = sb.path().join("elsewhere");
    fs::rename(&top, &moved).unwrap();

    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(moved.join("bundle.json")).unwrap()).unwrap();
    assert_eq!(kit::strings(&manifest["binaries"]), ["vkexit"]);
    assert_eq!(
        fs::read_dir(moved.join("bin")).unwrap().count(),
        1,
        "the bundle's bin/ is the one file"
    );
    let helpers = kit::strings(&manifest["helpers"]);
    for name in [
        "clean-exit",
        "libvkexit_refrt.so",
        "libvkexit_preload.so",
        "libVkLayer_vkexit_trace.so",
        "libVkLayer_vkexit_tegra_exit.so",
    ] {
        assert!(
            helpers.iter().any(|b| b == name),
            "{name} not in {helpers:?}"
        );
    }
    assert_eq!(manifest["packages"][0]["name"], "vkexit-test-validation");
    assert_eq!(
        manifest["target"],
        format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
    );
    assert_eq!(manifest["glibc_floor"], host_glibc());
    assert_eq!(manifest["debug_info"], false);

    let xdg = sb.path().join("xdg");
    let doctor = bundled(&moved, &xdg, &["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.lines().any(|l| l.starts_with("bundle ")
            && l.contains(&format!(
                "-unknown-linux-gnu for glibc {} or newer",
                host_glibc()
            ))),
        "doctor does not say what the bundle was built for: {}",
        text(&doctor)
    );
    let carried = moved.join("sysroot/usr/share/vulkan/explicit_layer.d");
    assert!(
        String::from_utf8_lossy(&doctor.stdout).contains(carried.to_str().unwrap()),
        "doctor does not use the carried validation layer: {}",
        text(&doctor)
    );

    let run = bundled(
        &moved,
        &xdg,
        &[
            "run",
            "--config",
            "share/matrix/small.toml",
            "--json",
            "r.json",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let results: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(moved.join("r.json")).unwrap()).unwrap();
    let cells = results["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for cell in cells {
        assert_eq!(cell["runs"], 2);
        let artifacts = kit::strings(&cell["artifacts"]);
        assert!(artifacts
            .iter()
            .all(|a| a.starts_with(moved.to_str().unwrap())));
    }
    let kept = cells
        .iter()
        .find(|c| c["case"] == "buffer-kept-at-exit" && c["runtime"] == "refrt:guarded")
        .unwrap();
    assert_eq!(kept["verdict"], "expected-fail");
    assert_eq!(kept["counts"]["vuid"], 2, "validation ran from the bundle");
}

#[test]
fn a_file_that_is_not_a_debian_package_is_refused_by_name() {
    let sb = Sandbox::new();
    let bogus = sb.path().join("not-a-package.deb");
    fs::write(&bogus, "hello").unwrap();
    let out = sb
        .vkexit()
        .args(["bundle", "-o", "b.tar.gz", "--deb"])
        .arg(&bogus)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not-a-package.deb"), "{stderr}");
    assert!(stderr.contains("not a Debian package"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !sb.path().join("b.tar.gz").exists(),
        "no bundle from a failed build"
    );
}

#[test]
fn an_output_in_a_missing_directory_is_refused() {
    let sb = Sandbox::new();
    let out = sb
        .vkexit()
        .args(["bundle", "-o", "no/such/dir/b.tar.gz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/dir"));
}

#[test]
fn a_file_needing_a_glibc_newer_than_the_floor_fails_the_bundle_by_name() {
    // What this machine built needs more than glibc 2.17 (every glibc since 2.34 moved
    // __libc_start_main and the pthread functions to new versions).
    let sb = Sandbox::new();
    let out = sb
        .vkexit()
        .args(["bundle", "--glibc-floor", "2.17", "-o", "b.tar.gz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("would not start on glibc 2.17"), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("bin/vkexit needs GLIBC_2.") && l.contains("(libc.so.6) for ")),
        "bin/vkexit is not named with the library and the symbols: {stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("bin/vkexit (carried ") && l.contains(") needs GLIBC_2.")),
        "the helpers vkexit carries are not held to the floor: {stderr}"
    );
    assert!(stderr.contains("--glibc-floor"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !sb.path().join("b.tar.gz").exists(),
        "no bundle from a failed build"
    );
    // The same files under the floor they do meet are packed.
    let out = sb
        .vkexit()
        .args(["bundle", "--glibc-floor", &host_glibc(), "-o", "b.tar.gz"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn binaries_for_another_machine_fail_the_bundle_by_name() {
    let sb = Sandbox::new();
    let other = match std::env::consts::ARCH {
        "x86_64" => "aarch64-unknown-linux-gnu",
        _ => "x86_64-unknown-linux-gnu",
    };
    let out = sb
        .vkexit()
        .args([
            "bundle",
            "--glibc-floor",
            "9.99",
            "--target",
            other,
            "--from",
        ])
        .arg(kit::bin_dir())
        .args(["-o", "b.tar.gz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "is built for {}, not for the bundle's {}",
            std::env::consts::ARCH,
            other.split('-').next().unwrap()
        )),
        "{stderr}"
    );
    assert!(!sb.path().join("b.tar.gz").exists());
    // A triple with cargo zigbuild's glibc suffix is not a target vkexit packs.
    let out = sb
        .vkexit()
        .args(["bundle", "--target", "aarch64-unknown-linux-gnu.2.31"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("give vkexit bundle aarch64-unknown-linux-gnu"));
}
