//! pyxis's container options of srun, sbatch and salloc (see `model::container`).
//!
//! sbatch and salloc hand them to the job's steps as pyxis does, through the SPANK
//! option variables (`SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image`, …) in the
//! job's environment; srun takes its own options first, then those variables.

use crate::model::container::{ContainerError, ContainerSpec, parse_mounts};
use clap::Args;
use std::collections::BTreeMap;

/// pyxis's options (cf. pyxis's `args.c`).
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Container options (pyxis)")]
pub struct ContainerOpts {
    /// Image to run the tasks in: a registry reference or a local squashfs/sif/tar file
    #[arg(
        long = "container-image",
        value_name = "[USER@][REGISTRY#]IMAGE[:TAG]|PATH"
    )]
    pub image: Option<String>,
    /// Bind mounts into the container
    #[arg(long = "container-mounts", value_name = "SRC:DST[:FLAGS][,SRC:DST...]")]
    pub mounts: Option<String>,
    /// Working directory inside the container
    #[arg(long = "container-workdir", value_name = "PATH")]
    pub workdir: Option<String>,
    /// Name the container, to reuse it in the job's later steps
    #[arg(long = "container-name", value_name = "NAME")]
    pub name: Option<String>,
    /// Make the container filesystem writable
    #[arg(long = "container-writable", overrides_with = "readonly")]
    pub writable: bool,
    /// Make the container filesystem read-only
    #[arg(long = "container-readonly", overrides_with = "writable")]
    pub readonly: bool,
    /// Variables whose host value overrides the image's
    #[arg(long = "container-env", value_name = "NAME[,NAME...]")]
    pub env: Option<String>,
    /// Do not bind-mount the user's home directory
    #[arg(long = "no-container-mount-home")]
    pub no_mount_home: bool,
    /// Bind-mount the user's home directory (the default)
    #[arg(long = "container-mount-home", overrides_with = "no_mount_home")]
    pub mount_home: bool,
    /// Become root inside the container
    #[arg(long = "container-remap-root")]
    pub remap_root: bool,
    /// Keep the user's identity inside the container (the default)
    #[arg(long = "no-container-remap-root", overrides_with = "remap_root")]
    pub no_remap_root: bool,
}

/// The SPANK variable pyxis sets for option `opt` (without its leading dashes).
fn spank_var(opt: &str) -> String {
    format!(
        "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_{}",
        opt.replace('-', "_")
    )
}

impl ContainerOpts {
    /// Whether any container option was given.
    pub fn any(&self) -> bool {
        *self != ContainerOpts::default()
    }

    /// The options as `(option name, value)` pairs, value empty for flags.
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        let mut opt = |n: &'static str, x: &Option<String>| {
            if let Some(x) = x {
                v.push((n, x.clone()));
            }
        };
        opt("container-image", &self.image);
        opt("container-mounts", &self.mounts);
        opt("container-workdir", &self.workdir);
        opt("container-name", &self.name);
        opt("container-env", &self.env);
        for (n, on) in [
            ("container-writable", self.writable),
            ("container-readonly", self.readonly),
            ("no-container-mount-home", self.no_mount_home),
            ("container-remap-root", self.remap_root),
        ] {
            if on {
                v.push((n, String::new()));
            }
        }
        v
    }

    /// The job-environment variables sbatch/salloc set so that the job's steps inherit
    /// these options (pyxis's SPANK variables).
    pub fn to_env(&self) -> Vec<(String, String)> {
        self.pairs()
            .into_iter()
            .map(|(n, v)| (spank_var(n), v))
            .collect()
    }

    /// These options, with the job's (`env`, from sbatch/salloc) filling the ones not
    /// given here.
    pub fn with_inherited(&self, env: &BTreeMap<String, String>) -> ContainerOpts {
        let get = |n: &str| env.get(&spank_var(n)).cloned();
        let flag = |n: &str| env.contains_key(&spank_var(n));
        let mut o = self.clone();
        o.image = o.image.or_else(|| get("container-image"));
        o.mounts = o.mounts.or_else(|| get("container-mounts"));
        o.workdir = o.workdir.or_else(|| get("container-workdir"));
        o.name = o.name.or_else(|| get("container-name"));
        o.env = o.env.or_else(|| get("container-env"));
        if !o.writable && !o.readonly {
            o.writable = flag("container-writable");
            o.readonly = flag("container-readonly");
        }
        if !o.no_mount_home && !o.mount_home {
            o.no_mount_home = flag("no-container-mount-home");
        }
        if !o.remap_root && !o.no_remap_root {
            o.remap_root = flag("container-remap-root");
        }
        o
    }

    /// The request, or `None` when no container was asked for. Errors: a bad
    /// `--container-mounts`, a relative `--container-workdir`, or neither an image nor
    /// a name.
    pub fn to_spec(&self) -> Result<Option<ContainerSpec>, ContainerError> {
        if self.image.is_none() && self.name.is_none() {
            return if self.any() && self.mounts.is_some() {
                Err(ContainerError::Invalid(
                    "--container-mounts needs --container-image or --container-name".into(),
                ))
            } else {
                Ok(None)
            };
        }
        let mounts = match &self.mounts {
            Some(m) => parse_mounts(m)?,
            None => Vec::new(),
        };
        if let Some(w) = &self.workdir
            && !w.starts_with('/')
        {
            return Err(ContainerError::Invalid(format!(
                "--container-workdir: '{w}' is not an absolute path"
            )));
        }
        let writable = if self.writable {
            Some(true)
        } else if self.readonly {
            Some(false)
        } else {
            None
        };
        Ok(Some(ContainerSpec {
            image: self.image.clone().filter(|i| !i.is_empty()),
            mounts,
            workdir: self.workdir.clone(),
            name: self.name.clone().filter(|n| !n.is_empty()),
            writable,
            env: self
                .env
                .iter()
                .flat_map(|e| e.split(','))
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect(),
            mount_home: !self.no_mount_home,
            remap_root: self.remap_root,
            ..ContainerSpec::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        c: ContainerOpts,
    }

    fn parse(args: &[&str]) -> ContainerOpts {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .c
    }

    #[test]
    fn options_make_the_request() {
        let o = parse(&[
            "--container-image=/img/a.sqsh",
            "--container-mounts=/data:/data:ro,/tmp",
            "--container-workdir=/data",
            "--container-readonly",
            "--container-env=A,B",
            "--no-container-mount-home",
            "--container-remap-root",
        ]);
        let s = o.to_spec().unwrap().unwrap();
        assert_eq!(s.image.as_deref(), Some("/img/a.sqsh"));
        assert_eq!(s.mounts.len(), 2);
        assert_eq!(s.workdir.as_deref(), Some("/data"));
        assert_eq!(s.writable, Some(false));
        assert_eq!(s.env, ["A", "B"]);
        assert!(!s.mount_home && s.remap_root);
        assert_eq!(parse(&[]).to_spec(), Ok(None));
        assert!(
            parse(&["--container-image=x", "--container-workdir=rel"])
                .to_spec()
                .is_err()
        );
        assert!(parse(&["--container-mounts=/a"]).to_spec().is_err());
        // The last of writable/readonly wins.
        let o = parse(&[
            "--container-readonly",
            "--container-writable",
            "--container-image=i",
        ]);
        assert_eq!(o.to_spec().unwrap().unwrap().writable, Some(true));
    }

    #[test]
    fn steps_inherit_the_jobs_options() {
        let job = parse(&[
            "--container-image=/img/a.tar",
            "--container-mounts=/d",
            "--no-container-mount-home",
        ]);
        let env: BTreeMap<String, String> = job.to_env().into_iter().collect();
        assert_eq!(
            env.get("SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image")
                .map(String::as_str),
            Some("/img/a.tar")
        );
        // The step's own options win; the rest comes from the job.
        let step = parse(&["--container-workdir=/d"]).with_inherited(&env);
        let s = step.to_spec().unwrap().unwrap();
        assert_eq!(s.image.as_deref(), Some("/img/a.tar"));
        assert_eq!(s.workdir.as_deref(), Some("/d"));
        assert!(!s.mount_home);
        let step = parse(&["--container-mount-home"]).with_inherited(&env);
        assert!(step.to_spec().unwrap().unwrap().mount_home);
        assert_eq!(
            parse(&[]).with_inherited(&BTreeMap::new()).to_spec(),
            Ok(None)
        );
    }
}
