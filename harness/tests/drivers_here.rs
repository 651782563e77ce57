//! Which drivers show a device here: `vkexit list` says it per driver, and a
//! run says which drivers it did not run only when the user asked for them.

use vkexit_testkit::vkexit::*;

/// `vkexit list`'s driver lines: (name, what it says of the device).
fn drivers_listed(sb: &Sandbox) -> Vec<(String, String)> {
    let out = sb.vkexit().arg("list").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let drivers = text.split("drivers:\n").nth(1).expect("a drivers list");
    drivers
        .lines()
        .filter(|l| l.starts_with("  ") && !l.trim_start().starts_with('('))
        .map(|l| {
            let name = l.split_whitespace().next().unwrap().to_string();
            let here = l.split(".json").nth(1).unwrap_or("").trim().to_string();
            (name, here)
        })
        .collect()
}

#[test]
fn list_says_which_drivers_show_a_device_and_a_run_names_absent_ones_only_when_asked() {
    let sb = Sandbox::new();
    let listed = drivers_listed(&sb);
    let lavapipe = listed
        .iter()
        .find(|(n, _)| n == "lavapipe")
        .unwrap_or_else(|| panic!("{listed:?}"));
    assert!(lavapipe.1.starts_with("device: llvmpipe"), "{listed:?}");
    for (name, here) in &listed {
        assert!(
            here.starts_with("device: ")
                || here.starts_with("no device here (not run)")
                || here.starts_with("could not be probed (not run)"),
            "{name}: {here:?}"
        );
    }

    // Not asked for: no word of the drivers without a device.
    let out = sb
        .vkexit()
        .args(["run", "--runs", "1", "--json", "r.json", "--"])
        .arg(mock())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not run"), "{stderr}");

    // Asked for: said once.
    let Some((absent, _)) = listed.iter().find(|(_, h)| h.starts_with("no device here")) else {
        vkexit_testkit::skip!("every driver installed here shows a device: {listed:?}");
    };
    let out = sb
        .vkexit()
        .args([
            "run", "--runs", "1", "--json", "r.json", "--driver", "lavapipe", "--driver",
        ])
        .arg(absent)
        .arg("--")
        .arg(mock())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = format!("vkexit: drivers without a device here, not run: {absent}\n");
    assert_eq!(stderr.matches(&line).count(), 1, "{stderr}");
    let r = sb.read_results();
    let skipped = r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["driver"] == absent.as_str())
        .expect("a cell for the driver asked for");
    assert_eq!(skipped["verdict"], "skipped");
}
