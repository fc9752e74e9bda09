//! The `sluice` binary: argv[0] dispatch only (see `cli::main`).

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}
