//! gres.conf in sluice's TOML (`[[gres]]` entries) and import of a Slurm gres.conf file
//! (`gres_conf = "/etc/slurm/gres.conf"`): which generic-resource devices each node has,
//! their device files, types, CPU affinity and NVLink links. Cf. Slurm's gres.conf(5)
//! and src/interfaces/gres.c `_parse_gres_config`.
//!
//! A line with `File=` declares one device per file (`/dev/nvidia[0-3]` expands like a
//! hostlist); without it, `Count=` devices without files. `Cores=` applies to every
//! device of the line; `Links=` is one device's NVLink counts to each GPU (`-1` = itself).
//! `AutoDetect=nvml` (or `off`) says whether the node's agent may add the GPUs it finds
//! through NVML when nothing is declared for the node.
//!
//! Files need not be real GPUs: tests point `File=` at character devices they create,
//! which is enough for binding and the devices cgroup.

use crate::model::gres::GresDevice;
use crate::model::hostlist;
use serde::Deserialize;

/// One gres.conf line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GresLine {
    /// `NodeName=`: the nodes the line is for (hostlist); `None` = every node.
    #[serde(default, alias = "node_name")]
    pub nodes: Option<String>,
    /// `Name=` (`gpu`, `mps`, `nic`, …); required unless the line only sets `AutoDetect`.
    #[serde(default)]
    pub name: Option<String>,
    /// `Type=` (`h100`, `a100`).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// `File=`: device file(s), hostlist-style ranges allowed.
    #[serde(default)]
    pub file: Option<String>,
    /// `Cores=`: CPU ids near the devices (`0-15,32-47`).
    #[serde(default)]
    pub cores: Option<String>,
    /// `Links=`: NVLink counts from this device to each GPU (`-1,2,2,0`).
    #[serde(default)]
    pub links: Option<String>,
    /// `Count=`: units (devices without `File=`, or one shared device for `mps`/`shard`).
    #[serde(default)]
    pub count: Option<u64>,
    /// `AutoDetect=`: `nvml`, `nvidia` or `off`.
    #[serde(default)]
    pub auto_detect: Option<String>,
    /// `MultipleFiles=`: the comma-separated files of one device (a MIG instance:
    /// its GPU's `/dev/nvidiaN` and its `/dev/nvidia-caps/nvidia-cap*` files).
    #[serde(default)]
    pub multiple_files: Option<String>,
    /// `UniqueId=`: the name `CUDA_VISIBLE_DEVICES` gives the device (a MIG UUID);
    /// only for a line that declares one device.
    #[serde(default)]
    pub unique_id: Option<String>,
    /// The device's PCI bus id (`0000:17:00.0`), for the GPU–NIC affinity behind
    /// `NCCL_IB_HCA` and `sluice doctor --gpus` when NVML does not report it (a
    /// sluice key, TOML only: Slurm's gres.conf has none); only for a line that
    /// declares one device.
    #[serde(default)]
    pub pci_bus: Option<String>,
}

/// Parses the text of a Slurm gres.conf: `Key=Value` words, `#` comments, `\` line
/// continuations; a global `AutoDetect=` line applies to the lines without their own.
///
/// Errors: an unknown key, a bad count, or a line without `Name=` (the message names the
/// line number).
pub fn parse_slurm(text: &str) -> Result<Vec<GresLine>, String> {
    let mut out = Vec::new();
    let joined = text.replace("\\\n", " ");
    for (no, raw) in joined.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut g = GresLine::default();
        for word in line.split_whitespace() {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| format!("gres.conf line {}: '{word}' is not Key=Value", no + 1))?;
            let v = v.to_string();
            match k.to_ascii_lowercase().as_str() {
                "nodename" => g.nodes = Some(v),
                "name" => g.name = Some(v),
                "type" => g.kind = Some(v),
                "file" => g.file = Some(v),
                "cores" | "cpus" => g.cores = Some(v),
                "links" => g.links = Some(v),
                "autodetect" => g.auto_detect = Some(v),
                "count" => {
                    let n = crate::model::gres::parse_gres_item(&format!("x:{v}"))
                        .ok()
                        .filter(|r| r.kind.is_none())
                        .ok_or_else(|| format!("gres.conf line {}: bad Count={v}", no + 1))?;
                    g.count = Some(n.count);
                }
                "multiplefiles" => g.multiple_files = Some(v),
                "uniqueid" => g.unique_id = Some(v),
                // Accepted, not used: sluice has no MPS daemon or per-device flags.
                "flags" => {}
                _ => return Err(format!("gres.conf line {}: unknown key '{k}'", no + 1)),
            }
        }
        if g.name.is_none() && g.auto_detect.is_none() {
            return Err(format!("gres.conf line {}: no Name=", no + 1));
        }
        out.push(g);
    }
    Ok(out)
}

/// What the lines say about one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeGres {
    /// Declared devices, in line order, indexed per name from 0.
    pub devices: Vec<GresDevice>,
    /// `AutoDetect=` for this node (`None` when no line says).
    pub auto_detect: Option<bool>,
}

fn applies(line: &GresLine, node: &str) -> Result<bool, String> {
    match &line.nodes {
        None => Ok(true),
        Some(n) => Ok(hostlist::expand(n)
            .map_err(|e| format!("gres NodeName={n}: {e}"))?
            .iter()
            .any(|x| x == node)),
    }
}

/// The devices `lines` declare for `node`.
///
/// Errors: a malformed `File=`, `Cores=` or `Links=`, a `Count=` that disagrees with the
/// number of files, a bad `AutoDetect=`.
pub fn for_node(lines: &[GresLine], node: &str) -> Result<NodeGres, String> {
    let mut out = NodeGres::default();
    for l in lines {
        if !applies(l, node)? {
            continue;
        }
        if let Some(a) = &l.auto_detect {
            out.auto_detect = Some(match a.to_ascii_lowercase().as_str() {
                "nvml" | "nvidia" => true,
                "off" => false,
                _ => return Err(format!("AutoDetect={a}: expected nvml, nvidia or off")),
            });
        }
        let Some(name) = &l.name else { continue };
        let cores = match &l.cores {
            Some(c) => super::parse_cpu_list(c).ok_or_else(|| format!("bad Cores={c}"))?,
            None => Vec::new(),
        };
        let links = match &l.links {
            Some(s) => s
                .split(',')
                .map(|x| x.trim().parse::<i32>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| format!("bad Links={s}"))?,
            None => Vec::new(),
        };
        if l.file.is_some() && l.multiple_files.is_some() {
            return Err(format!("Name={name}: File= and MultipleFiles= together"));
        }
        // MultipleFiles= is one device with several files; File= one device per file.
        let (files, more): (Vec<Option<String>>, Vec<String>) = match (&l.file, &l.multiple_files) {
            (Some(f), _) => (
                hostlist::expand(f)
                    .map_err(|e| format!("bad File={f}: {e}"))?
                    .into_iter()
                    .map(Some)
                    .collect(),
                Vec::new(),
            ),
            (None, Some(m)) => {
                let all: Vec<String> = m
                    .split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(String::from)
                    .collect();
                if all.is_empty() {
                    return Err(format!("Name={name}: empty MultipleFiles="));
                }
                (vec![Some(all[0].clone())], all[1..].to_vec())
            }
            (None, None) => (Vec::new(), Vec::new()),
        };
        let ndev = if files.is_empty() {
            l.count.unwrap_or(1)
        } else {
            files.len() as u64
        };
        if l.unique_id.is_some() && ndev != 1 {
            return Err(format!(
                "Name={name}: UniqueId= names one device, but the line declares {ndev}"
            ));
        }
        if let Some(b) = &l.pci_bus {
            if ndev != 1 {
                return Err(format!(
                    "Name={name}: pci_bus names one device, but the line declares {ndev}"
                ));
            }
            if !valid_bus_id(b) {
                return Err(format!(
                    "Name={name}: pci_bus = \"{b}\" is not a PCI bus id (domain:bus:device.function)"
                ));
            }
        }
        let shared = matches!(name.as_str(), "mps" | "shard");
        let next = |out: &NodeGres| out.devices.iter().filter(|d| &d.name == name).count() as u32;
        let dev = |index, count, file| GresDevice {
            name: name.clone(),
            kind: l.kind.clone(),
            index,
            count,
            cores: cores.clone(),
            file,
            links: links.clone(),
            pci_bus: l.pci_bus.clone(),
            more_files: more.clone(),
            unique_id: l.unique_id.clone(),
        };
        if shared {
            let c = u32::try_from(l.count.unwrap_or(1)).map_err(|_| "Count too large")?;
            let i = next(&out);
            out.devices
                .push(dev(i, c, files.into_iter().next().flatten()));
            continue;
        }
        if !files.is_empty() {
            if l.count.is_some_and(|c| c != files.len() as u64) {
                return Err(format!(
                    "Name={name}: Count={} but File= names {} devices",
                    l.count.unwrap_or(0),
                    files.len()
                ));
            }
            for f in files {
                let i = next(&out);
                out.devices.push(dev(i, 1, f));
            }
        } else {
            let c = l.count.unwrap_or(1);
            if c > 4096 {
                return Err(format!("Name={name}: Count={c} is too large"));
            }
            for _ in 0..c {
                let i = next(&out);
                out.devices.push(dev(i, 1, None));
            }
        }
    }
    Ok(out)
}

/// Whether `s` has the shape of a PCI bus id: `[domain:]bus:device.function`, in hex.
fn valid_bus_id(s: &str) -> bool {
    let hex = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit());
    let (head, func) = match s.rsplit_once('.') {
        Some(x) => x,
        None => return false,
    };
    let parts: Vec<&str> = head.split(':').collect();
    (2..=3).contains(&parts.len()) && parts.iter().all(|p| hex(p)) && hex(func)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = "\
# A two-node cluster
AutoDetect=off
NodeName=gpu[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-7
NodeName=gpu[1-2] Name=gpu Type=a100 File=/dev/nvidia[2-3] \\
   Cores=8-15 Links=0,0,-1,2
NodeName=gpu2 Name=mps Count=200
Name=nic Count=1
";

    #[test]
    fn imports_a_slurm_gres_conf() {
        let lines = parse_slurm(CONF).unwrap();
        assert_eq!(lines.len(), 5);
        let g1 = for_node(&lines, "gpu1").unwrap();
        assert_eq!(g1.auto_detect, Some(false));
        let gpus: Vec<&GresDevice> = g1.devices.iter().filter(|d| d.name == "gpu").collect();
        assert_eq!(gpus.len(), 4);
        assert_eq!(gpus[3].index, 3);
        assert_eq!(gpus[3].file.as_deref(), Some("/dev/nvidia3"));
        assert_eq!(gpus[3].cores, (8..16).collect::<Vec<u32>>());
        assert_eq!(gpus[2].links, vec![0, 0, -1, 2]);
        assert_eq!(gpus[0].kind.as_deref(), Some("a100"));
        assert_eq!(
            crate::model::gres::fmt_node_gres(&g1.devices),
            "gpu:a100:4,nic:1"
        );
        let g2 = for_node(&lines, "gpu2").unwrap();
        assert_eq!(
            crate::model::gres::fmt_node_gres(&g2.devices),
            "gpu:a100:4,mps:200,nic:1"
        );
        // A node no line names gets only the lines without NodeName.
        let other = for_node(&lines, "cpu1").unwrap();
        assert_eq!(crate::model::gres::fmt_node_gres(&other.devices), "nic:1");
    }

    #[test]
    fn mig_instances_declared_with_multiple_files_and_unique_ids() {
        let text = "\
NodeName=g1 Name=gpu Type=a100_3g.20gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22 UniqueId=MIG-aaaa
NodeName=g1 Name=gpu Type=a100_1g.5gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap66,/dev/nvidia-caps/nvidia-cap67 UniqueId=MIG-bbbb
NodeName=g1 Name=gpu Type=a100 File=/dev/nvidia1
";
        let g = for_node(&parse_slurm(text).unwrap(), "g1").unwrap();
        assert_eq!(
            crate::model::gres::fmt_node_gres(&g.devices),
            "gpu:a100_3g.20gb:1,gpu:a100_1g.5gb:1,gpu:a100:1"
        );
        let m = &g.devices[1];
        assert_eq!((m.index, m.unique_id.as_deref()), (1, Some("MIG-bbbb")));
        assert_eq!(
            m.files().collect::<Vec<_>>(),
            [
                "/dev/nvidia0",
                "/dev/nvidia-caps/nvidia-cap66",
                "/dev/nvidia-caps/nvidia-cap67"
            ]
        );
        assert_eq!(g.devices[2].unique_id, None);
        assert!(g.devices[2].more_files.is_empty());
        for (bad, want) in [
            (
                "Name=gpu File=/dev/nvidia[0-1] UniqueId=MIG-x",
                "UniqueId= names one device, but the line declares 2",
            ),
            (
                "Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/nvidia0",
                "File= and MultipleFiles= together",
            ),
            ("Name=gpu MultipleFiles=,", "empty MultipleFiles="),
        ] {
            let e = for_node(&parse_slurm(bad).unwrap(), "g1").unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, want) in [
            ("Name=gpu Bogus=1", "unknown key 'Bogus'"),
            ("Type=a100", "line 1: no Name="),
            ("Name=gpu Count=x", "bad Count=x"),
            (
                "NodeName=n1 Name=gpu\nName",
                "line 2: 'Name' is not Key=Value",
            ),
        ] {
            let e = parse_slurm(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let bad = |l: GresLine| for_node(&[l], "n1").unwrap_err();
        let gpu = || GresLine {
            name: Some("gpu".into()),
            ..GresLine::default()
        };
        assert!(
            bad(GresLine {
                file: Some("/dev/nvidia[0-1]".into()),
                count: Some(3),
                ..gpu()
            })
            .contains("Count=3 but File= names 2")
        );
        assert!(
            bad(GresLine {
                cores: Some("x".into()),
                ..gpu()
            })
            .contains("Cores=x")
        );
        assert!(
            bad(GresLine {
                auto_detect: Some("rsmi".into()),
                ..GresLine::default()
            })
            .contains("AutoDetect=rsmi")
        );
        assert!(
            bad(GresLine {
                count: Some(2),
                pci_bus: Some("0000:17:00.0".into()),
                ..gpu()
            })
            .contains("pci_bus names one device")
        );
        assert!(
            bad(GresLine {
                pci_bus: Some("17:00".into()),
                ..gpu()
            })
            .contains("not a PCI bus id")
        );
        let ok = for_node(
            &[GresLine {
                pci_bus: Some("00000000:CA:00.0".into()),
                ..gpu()
            }],
            "n1",
        )
        .unwrap();
        assert_eq!(ok.devices[0].pci_bus.as_deref(), Some("00000000:CA:00.0"));
    }

    #[test]
    fn toml_entries_and_imported_file_reach_the_nodes() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("gres.conf"),
            "NodeName=n2 Name=gpu Type=h100 File=/dev/nvidia[0-1] Cores=0-3\n",
        )
        .unwrap();
        let toml = r#"
gres_conf = "gres.conf"
[[nodes]]
name = "n1"
gres = "gpu:2"
[[nodes]]
name = "n2"
[[gres]]
nodes = "n1"
name = "gpu"
file = "/dev/fake[0-1]"
cores = "4-7"
"#;
        let c = crate::config::Config::from_toml(toml, &t.path().join("sluice.toml")).unwrap();
        let d1 = c.nodes[0].gres_devices().unwrap();
        assert_eq!(d1[1].file.as_deref(), Some("/dev/fake1"));
        assert_eq!(d1[1].cores, vec![4, 5, 6, 7]);
        let d2 = c.nodes[1].gres_devices().unwrap();
        assert_eq!(crate::model::gres::fmt_node_gres(&d2), "gpu:h100:2");
        // Disagreeing declarations are refused, naming the node.
        let bad = toml.replace("gpu:2", "gpu:3");
        let e = crate::config::Config::from_toml(&bad, &t.path().join("sluice.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("node 'n1'") && e.contains("disagrees"), "{e}");
    }
}
