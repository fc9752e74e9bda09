//! Generic resources (GRES) and licenses: typed devices on nodes (`gpu:h100:8` with
//! per-device core affinity, gres.conf's `Cores=`), what a job asks for (`--gres`,
//! `--gpus*`, `--licenses`), and the text Slurm prints for them (cf.
//! src/common/gres.c, src/interfaces/gres.c `gres_job_state_validate`, and
//! src/slurmctld/licenses.c).
//!
//! Pure data and parsing. A device is one unit of a countable resource: GPUs and most
//! GRES are one device per unit; a node declaring `mps:100` has one device of count 100
//! (see [`GresDevice::count`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// One generic-resource device on a node (one GPU, one MIG instance, one MPS share
/// pool, …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresDevice {
    /// GRES name (`gpu`, `mps`, `nic`).
    pub name: String,
    /// Type (`h100`, `a100`); `None` when untyped.
    #[serde(default)]
    pub kind: Option<String>,
    /// Index of the device among the node's devices of the same name (0-based; what
    /// `IDX:` and CUDA_VISIBLE_DEVICES number).
    pub index: u32,
    /// Units this device provides (1 for a GPU).
    #[serde(default = "one")]
    pub count: u32,
    /// CPU ids close to the device (`Cores=`); empty = any.
    #[serde(default)]
    pub cores: Vec<u32>,
    /// Device file (`/dev/nvidia0`), when known.
    #[serde(default)]
    pub file: Option<String>,
    /// NVLink counts from this device to each device of the same name, by index (`-1`
    /// for itself; gres.conf `Links=`); empty = unknown.
    #[serde(default)]
    pub links: Vec<i32>,
    /// PCI bus id (`00000000:17:00.0`), when discovery found it (for GPU–NIC affinity).
    #[serde(default)]
    pub pci_bus: Option<String>,
    /// Further device files the device needs besides `file` (gres.conf `MultipleFiles=`
    /// after the first; a MIG instance's `/dev/nvidia-caps/nvidia-cap<minor>` files for
    /// its GPU and compute instances). A job holding the device may open all of them.
    #[serde(default)]
    pub more_files: Vec<String>,
    /// gres.conf `UniqueId=`: what `CUDA_VISIBLE_DEVICES` names the device by instead of
    /// an ordinal (a MIG instance's `MIG-…` UUID; cf. Slurm's gres_device_t
    /// `unique_id`).
    #[serde(default)]
    pub unique_id: Option<String>,
}

fn one() -> u32 {
    1
}

impl GresDevice {
    /// Every device file of the device: `file`, then `more_files`.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.file
            .iter()
            .chain(self.more_files.iter())
            .map(String::as_str)
    }

    /// Whether this device can serve a request for `name[:kind]`.
    pub fn matches(&self, name: &str, kind: Option<&str>) -> bool {
        self.name == name && kind.is_none_or(|k| self.kind.as_deref() == Some(k))
    }
}

/// A request for a countable generic resource: `gpu:h100:2` → name `gpu`, kind
/// `h100`, count 2.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GresReq {
    pub name: String,
    #[serde(default)]
    pub kind: Option<String>,
    pub count: u64,
}

impl fmt::Display for GresReq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Some(k) => write!(f, "{}:{}:{}", self.name, k, self.count),
            None => write!(f, "{}:{}", self.name, self.count),
        }
    }
}

/// Slurm's text for ESLURM_INVALID_GRES, the error of a GRES request that can never
/// be met (unknown, too large, or inconsistent counts).
pub const INVALID_GRES: &str = "Invalid generic resource (gres) specification";

/// Why a GRES or license specification could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GresError {
    #[error("invalid generic resource specification '{0}'")]
    Bad(String),
}

fn valid_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Parses a count with an optional `k`/`m`/`g` multiplier (Slurm accepts `mps:1k`).
fn parse_count(s: &str) -> Option<u64> {
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1024),
        'm' | 'M' => (&s[..s.len() - 1], 1024 * 1024),
        'g' | 'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Parses one `name[:type][:count]` item (count defaults to 1; a last field that is a
/// number is the count).
///
/// Errors: [`GresError::Bad`] for an empty name, more than three fields, or a zero or
/// non-numeric count.
pub fn parse_gres_item(s: &str) -> Result<GresReq, GresError> {
    let bad = || GresError::Bad(s.to_string());
    // `gres:gpu:2` (squeue's TRES_PER_NODE form) is accepted too.
    let s2 = s
        .strip_prefix("gres:")
        .or(s.strip_prefix("gres/"))
        .unwrap_or(s);
    let parts: Vec<&str> = s2.split(':').collect();
    let (name, kind, count) = match parts.as_slice() {
        [n] => (*n, None, 1),
        [n, x] => match parse_count(x) {
            Some(c) => (*n, None, c),
            None => (*n, Some(*x), 1),
        },
        [n, k, c] => (*n, Some(*k), parse_count(c).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    // A negative number where the count goes (`gpu:-1`) is a bad count, not a GPU
    // type called `-1`.
    let signed = |k: &str| k.starts_with('-') && k[1..].parse::<u64>().is_ok();
    if !valid_word(name) || kind.is_some_and(|k| !valid_word(k) || signed(k)) || count == 0 {
        return Err(bad());
    }
    Ok(GresReq {
        name: name.to_string(),
        kind: kind.map(str::to_string),
        count,
    })
}

/// Parses a comma-separated `--gres` list (`gpu:2,mps:50`). `none` or empty gives an
/// empty list.
///
/// Errors: the first bad item.
pub fn parse_gres_list(s: &str) -> Result<Vec<GresReq>, GresError> {
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    s.split(',').map(parse_gres_item).collect()
}

/// Parses a `--gpus*` value: `N` or `type:N`, into a `gpu` request.
///
/// Errors: [`GresError::Bad`], also for a lone type with no count (`--gpus=abc`):
/// Slurm's grammar is `[type:]number`.
pub fn parse_gpus(s: &str) -> Result<GresReq, GresError> {
    let r = parse_gres_item(&format!("gpu:{s}"))?;
    if s.contains(':') != r.kind.is_some() {
        return Err(GresError::Bad(s.to_string()));
    }
    Ok(r)
}

/// Formats requests the way `TresPerNode=`/squeue `%b` print them: `gres:gpu:4`.
pub fn fmt_tres_per_node(reqs: &[GresReq]) -> String {
    reqs.iter()
        .map(|r| format!("gres:{r}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses a node's configured GRES as written in the config (`gpu:h100:8`; the
/// `(S:0-1)` socket suffix Slurm prints is not input: per-device cores come from
/// `cores`): `name[:type]:count`
/// items, each expanded to `count` devices of count 1 (GPU-like) — except `mps`/`shard`,
/// which become one device carrying the whole count.
///
/// Errors: [`GresError::Bad`].
pub fn parse_node_gres(s: &str) -> Result<Vec<GresDevice>, GresError> {
    let mut out: Vec<GresDevice> = Vec::new();
    for r in parse_gres_list(s)? {
        let start = out.iter().filter(|d| d.name == r.name).count() as u32;
        if matches!(r.name.as_str(), "mps" | "shard") {
            out.push(GresDevice {
                name: r.name,
                kind: r.kind,
                index: start,
                count: u32::try_from(r.count).map_err(|_| GresError::Bad(s.into()))?,
                cores: Vec::new(),
                file: None,
                links: Vec::new(),
                pci_bus: None,
                more_files: Vec::new(),
                unique_id: None,
            });
            continue;
        }
        if r.count > 4096 {
            return Err(GresError::Bad(s.to_string()));
        }
        for i in 0..r.count as u32 {
            out.push(GresDevice {
                name: r.name.clone(),
                kind: r.kind.clone(),
                index: start + i,
                count: 1,
                cores: Vec::new(),
                file: None,
                links: Vec::new(),
                pci_bus: None,
                more_files: Vec::new(),
                unique_id: None,
            });
        }
    }
    Ok(out)
}

/// A node's GRES as configured, one `name[:type]:count` per (name, type): `gpu:h100:8`,
/// `(null)` when none (the form config declarations are compared in; what scontrol
/// and sinfo print is [`fmt_node_gres_sockets`]).
pub fn fmt_node_gres(devs: &[GresDevice]) -> String {
    node_gres_text(devs, None)
}

/// How a job's CPUs relate to the affinity of its GPUs (`--gres-flags`; cf. Slurm's
/// `GRES_ENFORCE_BIND`/`GRES_DISABLE_BIND` job flags and cons_tres
/// gres_select_filter.c).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GresBinding {
    /// No flag: CPUs near the job's GPUs (gres.conf `Cores=`) are preferred, others
    /// taken when those are busy.
    #[default]
    Default,
    /// `enforce-binding`: the job only gets CPUs listed in its GPUs' `Cores=`, and each
    /// of its GPUs has at least one of the job's CPUs near it; it pends until such
    /// CPUs are free.
    Enforce,
    /// `disable-binding`: GPU affinity plays no part in choosing the job's CPUs.
    Disable,
}

impl GresBinding {
    /// The `--gres-flags` word (`None` for the default).
    pub fn flag(self) -> Option<&'static str> {
        match self {
            GresBinding::Default => None,
            GresBinding::Enforce => Some("enforce-binding"),
            GresBinding::Disable => Some("disable-binding"),
        }
    }
}

/// Parses `--gres-flags`: `enforce-binding` or `disable-binding` (any case; Slurm
/// 22.05 takes one word, the last `--gres-flags` given wins).
///
/// Errors: [`GresError::Bad`] for any other value.
pub fn parse_gres_flags(s: &str) -> Result<GresBinding, GresError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "enforce-binding" => Ok(GresBinding::Enforce),
        "disable-binding" => Ok(GresBinding::Disable),
        _ => Err(GresError::Bad(s.to_string())),
    }
}

/// GPUs a request asks for over the whole job, counting per-node requests on
/// `nodes` nodes and per-socket ones on `nodes` × `sockets` sockets: the largest of
/// `--gpus`, `--gpus-per-node`/`--gres=gpu`, `--gpus-per-socket` (Slurm's
/// `total_gres`, gres_job_state_validate). `None` when nothing asks for GPUs.
pub fn total_gpus(
    gpus: Option<&GresReq>,
    per_node: &[&GresReq],
    per_socket: Option<&GresReq>,
    nodes: u32,
    sockets: u32,
) -> Option<u64> {
    let nodes = u64::from(nodes.max(1));
    let node_side: Option<u64> = per_node
        .iter()
        .filter(|g| g.name == "gpu")
        .map(|g| g.count.saturating_mul(nodes))
        .reduce(|a, b| a.saturating_add(b));
    let socket_side = per_socket.map(|g| g.count.saturating_mul(nodes * u64::from(sockets.max(1))));
    [gpus.map(|g| g.count), node_side, socket_side]
        .into_iter()
        .flatten()
        .max()
}

/// The socket holding CPU `id` on a node of `cpus` CPUs in `sockets` sockets. CPU ids
/// are Slurm's abstract ids, numbered socket by socket: socket `s` holds ids
/// `s*C/S .. (s+1)*C/S` (rounded up), the numbering gres.conf `Cores=` uses.
pub fn socket_of(id: u32, cpus: u32, sockets: u32) -> u32 {
    let sockets = sockets.max(1);
    let per = cpus.div_ceil(sockets).max(1);
    (id / per).min(sockets - 1)
}

/// The CPU ids of socket `s` (see [`socket_of`]).
pub fn socket_cpus(s: u32, cpus: u32, sockets: u32) -> Vec<u32> {
    (0..cpus)
        .filter(|&c| socket_of(c, cpus, sockets) == s)
        .collect()
}

/// The sockets a device with close CPUs `cores` is attached to; every socket when
/// `cores` is empty (no affinity known: the device may serve any socket).
pub fn device_sockets(cores: &[u32], cpus: u32, sockets: u32) -> Vec<u32> {
    if cores.is_empty() {
        return (0..sockets.max(1)).collect();
    }
    let mut v: Vec<u32> = cores
        .iter()
        .filter(|&&c| c < cpus)
        .map(|&c| socket_of(c, cpus, sockets))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A node's GRES as `scontrol show node`/sinfo `%G` print them when devices have CPU
/// affinity: [`fmt_node_gres`] with, after each group of devices with `Cores=`, the
/// sockets those cores are on (`gpu:4(S:0-1)`; cf. gres.c `_build_node_gres_str`).
/// `cpus` and `sockets` are the node's.
pub fn fmt_node_gres_sockets(devs: &[GresDevice], cpus: u32, sockets: u32) -> String {
    node_gres_text(devs, Some((cpus, sockets)))
}

/// [`fmt_node_gres`], with the `(S:…)` sockets of the devices' cores when the node's
/// `(cpus, sockets)` are given.
fn node_gres_text(devs: &[GresDevice], topo: Option<(u32, u32)>) -> String {
    let mut groups: Vec<(&str, Option<&str>, u64, Vec<u32>)> = Vec::new();
    for d in devs {
        let socks = match topo {
            Some((cpus, sockets)) if !d.cores.is_empty() => device_sockets(&d.cores, cpus, sockets),
            _ => Vec::new(),
        };
        match groups
            .iter_mut()
            .find(|(n, k, _, _)| *n == d.name && *k == d.kind.as_deref())
        {
            Some(g) => {
                g.2 += u64::from(d.count);
                g.3.extend(socks);
            }
            None => groups.push((&d.name, d.kind.as_deref(), u64::from(d.count), socks)),
        }
    }
    if groups.is_empty() {
        return "(null)".into();
    }
    groups
        .iter()
        .map(|(n, k, c, s)| {
            let head = match k {
                Some(k) => format!("{n}:{k}:{c}"),
                None => format!("{n}:{c}"),
            };
            if s.is_empty() {
                head
            } else {
                format!("{head}(S:{})", super::hostlist::id_ranges(s))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A license request: `--licenses=matlab:2,fluent` (count defaults to 1; `*` may stand
/// for `:` as in Slurm).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LicenseReq {
    pub name: String,
    pub count: u32,
}

/// Parses a `--licenses` list.
///
/// Errors: [`GresError::Bad`] for an empty name or a zero/non-numeric count.
pub fn parse_licenses(s: &str) -> Result<Vec<LicenseReq>, GresError> {
    let mut out: Vec<LicenseReq> = Vec::new();
    for item in s.split(',').filter(|x| !x.is_empty()) {
        let bad = || GresError::Bad(item.to_string());
        let (name, count) = match item.split_once([':', '*']) {
            Some((n, c)) => (n, c.parse::<u32>().ok().filter(|c| *c > 0).ok_or_else(bad)?),
            None => (item, 1),
        };
        if !valid_word(name) {
            return Err(bad());
        }
        match out.iter_mut().find(|l| l.name == name) {
            Some(l) => l.count += count,
            None => out.push(LicenseReq {
                name: name.to_string(),
                count,
            }),
        }
    }
    Ok(out)
}

/// Licenses as scontrol's `Licenses=` prints them (`matlab:2,fluent:1`), `(null)` when none.
pub fn fmt_licenses(l: &[LicenseReq]) -> String {
    if l.is_empty() {
        return "(null)".into();
    }
    l.iter()
        .map(|l| format!("{}:{}", l.name, l.count))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_items() {
        let r = parse_gres_item("gpu").unwrap();
        assert_eq!(
            (r.name.as_str(), r.kind.as_deref(), r.count),
            ("gpu", None, 1)
        );
        let r = parse_gres_item("gpu:2").unwrap();
        assert_eq!((r.kind.as_deref(), r.count), (None, 2));
        let r = parse_gres_item("gpu:h100:8").unwrap();
        assert_eq!((r.kind.as_deref(), r.count), (Some("h100"), 8));
        let r = parse_gres_item("gpu:a100").unwrap();
        assert_eq!((r.kind.as_deref(), r.count), (Some("a100"), 1));
        assert_eq!(parse_gres_item("mps:1k").unwrap().count, 1024);
        assert_eq!(parse_gres_item("gres:gpu:4").unwrap().count, 4);
        for bad in ["", "gpu:0", "gpu:a:b", "gpu:h100:2:3", "g pu:1", ":2"] {
            assert!(parse_gres_item(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_gres_list("gpu:2,mps:50").unwrap().len(), 2);
        assert!(parse_gres_list("none").unwrap().is_empty());
        assert_eq!(parse_gres_list("gpu:1").unwrap()[0].to_string(), "gpu:1");
    }

    #[test]
    fn gpus_values() {
        assert_eq!(parse_gpus("2").unwrap().count, 2);
        let r = parse_gpus("h100:3").unwrap();
        assert_eq!((r.kind.as_deref(), r.count), (Some("h100"), 3));
        assert!(parse_gpus("0").is_err());
        assert!(parse_gpus("h100:x").is_err());
        assert!(parse_gpus("abc").is_err(), "a type needs a count");
    }

    #[test]
    fn node_gres_expands_to_devices() {
        let d = parse_node_gres("gpu:h100:2,gpu:a100:1,mps:200").unwrap();
        assert_eq!(d.len(), 4);
        assert_eq!((d[0].index, d[1].index, d[2].index), (0, 1, 2));
        assert_eq!(d[2].kind.as_deref(), Some("a100"));
        assert_eq!(d[3].count, 200);
        assert_eq!(fmt_node_gres(&d), "gpu:h100:2,gpu:a100:1,mps:200");
        assert_eq!(fmt_node_gres(&[]), "(null)");
        assert!(d[0].matches("gpu", None) && d[0].matches("gpu", Some("h100")));
        assert!(!d[0].matches("gpu", Some("a100")));
    }

    #[test]
    fn node_gres_text_names_the_sockets_of_the_devices_cores() {
        let mut d = parse_node_gres("gpu:a100:4,mps:100").unwrap();
        for (k, x) in d.iter_mut().take(4).enumerate() {
            x.cores = if k < 2 { vec![0, 1] } else { vec![4, 5, 6, 7] };
        }
        assert_eq!(fmt_node_gres_sockets(&d, 8, 2), "gpu:a100:4(S:0-1),mps:100");
        d[2].cores = vec![1];
        d[3].cores = vec![0];
        assert_eq!(fmt_node_gres_sockets(&d[..4], 8, 2), "gpu:a100:4(S:0)");
        assert_eq!(fmt_node_gres_sockets(&[], 8, 2), "(null)");
        assert_eq!(socket_of(5, 8, 2), 1);
        assert_eq!(socket_cpus(1, 5, 2), vec![3, 4]);
    }

    #[test]
    fn licenses() {
        let l = parse_licenses("matlab:2,fluent,matlab*1").unwrap();
        assert_eq!(
            l,
            vec![
                LicenseReq {
                    name: "matlab".into(),
                    count: 3
                },
                LicenseReq {
                    name: "fluent".into(),
                    count: 1
                }
            ]
        );
        assert_eq!(fmt_licenses(&l), "matlab:3,fluent:1");
        assert!(parse_licenses("x:0").is_err());
        assert!(parse_licenses(":2").is_err());
        assert_eq!(fmt_licenses(&[]), "(null)");
    }
}
