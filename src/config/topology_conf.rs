//! `[topology]` in sluice's TOML, and import of a Slurm topology.conf
//! (`topology_conf = "/etc/slurm/topology.conf"`), resolved into
//! [`crate::model::topology::Topology`]. Cf. Slurm's topology.conf(5) and, for blocks,
//! Slurm 23.11's topology/block.
//!
//! ```toml
//! [topology]
//! switches = [
//!   { name = "s0", nodes = "n[01-08]" },
//!   { name = "s1", nodes = "n[09-16]", link_speed = 2 },
//!   { name = "top", switches = "s[0-1]" },
//! ]
//! # or: blocks = [{ name = "b1", nodes = "n[01-04]" }, …] with block_sizes = [4, 8]
//! ```

use crate::model::hostlist;
use crate::model::topology::{Block, Switch, Topology};
use serde::Deserialize;

/// One `[[topology.switches]]` entry (topology.conf `SwitchName=` line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchConf {
    pub name: String,
    /// Hostlist of the nodes attached to this switch.
    #[serde(default)]
    pub nodes: Option<String>,
    /// Hostlist of the child switches.
    #[serde(default)]
    pub switches: Option<String>,
    #[serde(default)]
    pub link_speed: Option<u32>,
}

/// One `[[topology.blocks]]` entry (topology.conf `BlockName=` line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockConf {
    pub name: String,
    /// Hostlist of the block's nodes.
    pub nodes: String,
}

/// The `[topology]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyConf {
    #[serde(default)]
    pub switches: Vec<SwitchConf>,
    #[serde(default)]
    pub blocks: Vec<BlockConf>,
    /// Block sizes in nodes (topology.conf `BlockSizes=`).
    #[serde(default)]
    pub block_sizes: Vec<u32>,
}

impl TopologyConf {
    /// Expands the hostlists into a topology (not yet validated).
    ///
    /// Errors: a malformed hostlist, naming the switch or block.
    pub fn resolve(&self) -> Result<Topology, String> {
        let list = |what: &str, name: &str, v: &Option<String>| -> Result<Vec<String>, String> {
            match v {
                None => Ok(Vec::new()),
                Some(v) => {
                    hostlist::expand(v).map_err(|e| format!("topology: {what} '{name}': {e}"))
                }
            }
        };
        Ok(Topology {
            switches: self
                .switches
                .iter()
                .map(|s| {
                    Ok(Switch {
                        name: s.name.clone(),
                        nodes: list("switch", &s.name, &s.nodes)?,
                        switches: list("switch", &s.name, &s.switches)?,
                        link_speed: s.link_speed.unwrap_or(1),
                    })
                })
                .collect::<Result<_, String>>()?,
            blocks: self
                .blocks
                .iter()
                .map(|b| {
                    Ok(Block {
                        name: b.name.clone(),
                        nodes: list("block", &b.name, &Some(b.nodes.clone()))?,
                    })
                })
                .collect::<Result<_, String>>()?,
            block_sizes: self.block_sizes.clone(),
        })
    }
}

/// The topology from `[topology]` and, appended after it, an imported topology.conf's
/// text; checked against the declared node names.
///
/// Errors: a bad hostlist, a topology.conf syntax error, or what
/// [`Topology::validate`] refuses.
pub fn build(
    conf: &TopologyConf,
    imported: Option<&str>,
    nodes: &[String],
) -> Result<Topology, String> {
    let mut t = conf.resolve()?;
    if let Some(text) = imported {
        let more = crate::model::topology::parse_topology_conf(text)?;
        t.switches.extend(more.switches);
        t.blocks.extend(more.blocks);
        if !more.block_sizes.is_empty() {
            if !t.block_sizes.is_empty() {
                return Err(
                    "topology: block_sizes is set both in [topology] and in topology.conf".into(),
                );
            }
            t.block_sizes = more.block_sizes;
        }
    }
    t.validate(nodes)?;
    Ok(t)
}
