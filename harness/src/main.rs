//! The `vkexit` binary: the command line lives in the library ([`vkexit::cli`]).

fn main() -> std::process::ExitCode {
    vkexit::cli::main()
}
