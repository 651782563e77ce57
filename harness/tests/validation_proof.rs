//! No false green: when validation is asked for and is not there, or not
//! really active, vkexit says so and never passes.

use predicates::str::contains;
use vkexit_testkit::vkexit::*;

#[test]
fn a_missing_validation_layer_stops_vkexit_with_what_to_install() {
    let sb = Sandbox::new();
    let empty = sb.path().join("no-layers");
    std::fs::create_dir_all(&empty).unwrap();
    sb.vkexit()
        .env("VK_LAYER_PATH", &empty)
        .args(["run", "--runs", "1", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains("apt-get install vulkan-validationlayers"));
}

#[test]
fn a_validation_manifest_whose_library_is_missing_is_named() {
    let sb = Sandbox::new();
    let layers = sb.path().join("layers");
    std::fs::create_dir_all(&layers).unwrap();
    std::fs::write(
        layers.join("VkLayer_khronos_validation.json"),
        r#"{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_KHRONOS_validation","type":"GLOBAL","library_path":"./libVkLayer_gone.so","api_version":"1.3.239","implementation_version":"1","description":"x"}}"#,
    )
    .unwrap();
    sb.vkexit()
        .env("VK_LAYER_PATH", &layers)
        .args(["run", "--runs", "1", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains("libVkLayer_gone.so"));
}

/// A manifest that calls itself the validation layer but loads another
/// layer's library: the loader loads it, the program runs and exits 0, yet
/// no validation happened. The per-run proof (the layer's own log, created
/// with our settings) is missing, so every run is an error.
#[test]
fn an_impostor_validation_layer_is_caught_per_run() {
    let Some(other) = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .map(|d| std::path::Path::new(d).join("libVkLayer_MESA_overlay.so"))
    .find(|p| p.exists()) else {
        panic!("libVkLayer_MESA_overlay.so (mesa-vulkan-drivers) is not installed");
    };
    let sb = Sandbox::new();
    let layers = sb.path().join("layers");
    std::fs::create_dir_all(&layers).unwrap();
    std::fs::write(
        layers.join("VkLayer_khronos_validation.json"),
        format!(
            r#"{{"file_format_version":"1.0.0","layer":{{"name":"VK_LAYER_KHRONOS_validation","type":"GLOBAL","library_path":"{}","api_version":"1.3.239","implementation_version":"1","description":"impostor"}}}}"#,
            other.display()
        ),
    )
    .unwrap();
    let mut cmd = sb.vkexit();
    cmd.env("VK_LAYER_PATH", &layers)
        .args(["run", "--driver", "lavapipe", "--runs", "2", "--json"])
        .arg(sb.results())
        .arg("--")
        .arg(mock());
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = sb.read_results();
    let cell = only_cell(&r);
    assert_eq!(count(cell, "error"), 2, "{cell:#}");
    assert_eq!(count(cell, "pass"), 0);
}
