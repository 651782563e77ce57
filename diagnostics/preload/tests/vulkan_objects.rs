//! `vulkan-object` records: the loader a program loaded, and each driver with the object that
//! opened it. vkexit tells a program that went around the loader from them.

use vkexit_testkit::built;
use vkexit_testkit::preload::{run, Plan};
use vkexit_testkit::vulkan::lavapipe_library;

fn file_name(value: &serde_json::Value) -> String {
    let path = value.as_str().unwrap_or_default();
    path.rsplit('/').next().unwrap_or_default().to_string()
}

#[test]
fn the_loader_and_the_driver_it_opened_are_recorded() {
    let run = run(Plan::new(built("mock"), &[])
        .lavapipe()
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation"));
    assert!(run.status.success(), "{}", run.describe());
    let objects = run.all("vulkan-object");
    let loaders: Vec<_> = objects.iter().filter(|r| r["role"] == "loader").collect();
    let drivers: Vec<_> = objects.iter().filter(|r| r["role"] == "driver").collect();
    assert_eq!(loaders.len(), 1, "{objects:#?}");
    assert!(
        file_name(&loaders[0]["path"]).starts_with("libvulkan.so"),
        "{objects:#?}"
    );
    // Opened by the loader: the driver lavapipe's manifest names, and nothing else.
    let library = lavapipe_library();
    assert!(!drivers.is_empty(), "{objects:#?}");
    for driver in &drivers {
        assert_eq!(driver["path"], library.as_str(), "{objects:#?}");
        assert!(
            file_name(&driver["caller"]).starts_with("libvulkan.so"),
            "{objects:#?}"
        );
    }
    // The validation layer is recorded as itself, with the file the dynamic loader found; no
    // other layer library is recorded at all.
    let layers: Vec<_> = objects
        .iter()
        .filter(|r| file_name(&r["path"]).starts_with("libVkLayer"))
        .collect();
    assert_eq!(layers.len(), 1, "{objects:#?}");
    assert_eq!(layers[0]["role"], "validation-layer", "{objects:#?}");
    assert_eq!(
        file_name(&layers[0]["path"]),
        "libVkLayer_khronos_validation.so"
    );
    assert!(
        std::path::Path::new(layers[0]["path"].as_str().unwrap()).is_absolute(),
        "{objects:#?}"
    );
}

#[test]
fn a_program_without_vulkan_has_no_vulkan_objects() {
    let run = run(Plan::new(built("mock"), &["--no-vulkan"]));
    assert!(run.status.success(), "{}", run.describe());
    assert!(!run.has("vulkan-object"), "{}", run.describe());
}
