//! mock: provokes each verdict of the vkexit harness on demand, for the runner's own tests.
//! See `vkexit_scenarios::mock::options::USAGE` for the options and their order.

use vkexit_fixtures::args::{exit_help, exit_usage};
use vkexit_fixtures::{step, Parsed};
use vkexit_scenarios::mock::options::USAGE;
use vkexit_scenarios::mock::vulkan::{self, MockVulkan};
use vkexit_scenarios::mock::{actions, CrashingChild, MockOptions, VulkanPlan};

fn main() {
    let options = match MockOptions::parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => exit_help(USAGE),
        Err(err) => exit_usage("mock", &err, USAGE),
    };
    if options.quiet {
        actions::quiet();
    }
    if let Some(runtime) = &options.runtime {
        step!("mock does not load a runtime; ignoring --runtime {runtime}");
    }
    // Before Vulkan starts its threads, so the children fork a single-threaded process.
    if let Some(secs) = options.grandchild_holds_pipes {
        actions::grandchild_holds_pipes(secs);
    }
    if let Some(secs) = options.detached_helper {
        actions::detached_helper(secs);
    }
    if options.daemon_crash {
        actions::daemon_crash();
    }
    let vulkan = match options.vulkan {
        VulkanPlan::Skip => {
            step!("skip the Vulkan setup (--no-vulkan)");
            None
        }
        VulkanPlan::Create {
            keep,
            live_buffers,
            silent_messenger,
            disable_validation,
        } => Some((
            MockVulkan::create(
                options.device,
                live_buffers,
                silent_messenger,
                disable_validation,
                options.layer_settings,
            ),
            keep,
        )),
    };
    if vulkan.is_some() && options.overlapping_instance {
        vulkan::short_lived_instance("while the first is alive");
    }
    if vulkan.is_some() && options.leaking_child {
        actions::run_leaking_child(options.device);
    }
    if let Some(bytes) = options.flood {
        actions::flood(bytes);
    }
    match vulkan {
        Some((vulkan, true)) => vulkan.keep(),
        Some((vulkan, false)) => vulkan.destroy(),
        None => {}
    }
    if options.second_instance {
        vulkan::short_lived_instance("after the first one's teardown");
    }
    match options.crashing_child {
        Some(CrashingChild::Forked) => actions::fork_crashing_child(),
        Some(child) => actions::run_crashing_child(&child.child_args(options.device)),
        None => {}
    }
    // Registered after Vulkan loaded, so they run before any exit handler of the driver or layers.
    if options.crash_at_exit {
        actions::crash_at_exit();
    }
    if let Some(p) = options.crash_probability {
        actions::crash_at_exit_with_probability(p);
    }
    if options.invalid_device_at_exit {
        actions::invalid_device_at_exit();
    }
    if options.hang_at_exit {
        actions::hang_at_exit();
    }
    if options.spin_at_exit_ignoring_term {
        actions::spin_at_exit_ignoring_term();
    }
    if let Some(signal) = options.signal {
        step!("raise {signal}");
        signal.raise_with_default_action();
        step!("still alive after {signal}: its default action does not terminate");
    }
    if options.hang {
        actions::hang("in main");
    }
    if let Some(code) = options.exit_code {
        step!("exit with code {code}");
        std::process::exit(code.into());
    }
    if let Some(program) = &options.exec_after {
        actions::exec(program);
    }
    step!("main returns");
}
