//! `sluice keygen`: creates the controller's SSH key pair (ed25519), which it uses to
//! reach remote nodes (no Slurm twin: Slurm authenticates with munge keys instead).
//!
//! The key goes to `<state_dir>/ssh/id_ed25519` (`Config::key_file`), or to `-f FILE`.
//! An existing key is never replaced unless `--force` is given; running it again prints
//! the existing public key, so it is safe in set-up scripts. The public key line is the
//! only thing printed on stdout.

use crate::config::Config;
use crate::transport::ssh;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: sluice keygen [-f FILE] [--force]\n\n\
Creates the controller's SSH key pair (ed25519) used to reach remote nodes, by default\n\
<state_dir>/ssh/id_ed25519, and prints its public key for the nodes' authorized_keys.";

/// Entry point. Exit status 0 on success (also when the key already exists), 1 on
/// errors, 2 on bad usage.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut file: Option<PathBuf> = None;
    let mut force = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--force" => force = true,
            "-f" | "--file" => match it.next() {
                Some(f) => file = Some(PathBuf::from(f)),
                None => {
                    eprintln!("sluice keygen: option '{a}' needs a file name\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            other => {
                eprintln!("sluice keygen: unknown option '{other}'\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let path = match file {
        Some(f) => f,
        None => match Config::load() {
            Ok(c) => c.key_file(),
            Err(e) => {
                eprintln!("sluice keygen: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let pub_path = ssh::pub_path(&path);
    if path.exists() {
        if !force {
            return match std::fs::read_to_string(&pub_path) {
                Ok(p) => {
                    eprintln!(
                        "sluice keygen: {} already exists; its public key is below \
                         (--force replaces it)",
                        path.display()
                    );
                    println!("{}", p.trim());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!(
                        "sluice keygen: {} exists but {} cannot be read ({e}); \
                         use --force to create a new pair",
                        path.display(),
                        pub_path.display()
                    );
                    ExitCode::from(1)
                }
            };
        }
        for p in [&path, &pub_path] {
            if let Err(e) = std::fs::remove_file(p)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                eprintln!("sluice keygen: cannot replace {}: {e}", p.display());
                return ExitCode::from(1);
            }
        }
    }
    let comment = format!("sluice@{}", crate::config::short_hostname());
    match ssh::generate_key(&path, &comment) {
        Ok(public) => {
            eprintln!(
                "sluice keygen: created {} (ed25519). Add this line to \
                 ~/.ssh/authorized_keys of the SSH user on every node:",
                path.display()
            );
            println!("{public}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice keygen: {e:#}");
            ExitCode::from(1)
        }
    }
}
