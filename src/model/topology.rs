//! Network topology for placement: a tree of switches (Slurm's topology/tree, from
//! topology.conf's `SwitchName=… Nodes=… Switches=…`) or blocks of nodes (Slurm
//! 23.11's topology/block, `BlockName=… Nodes=…` with `BlockSizes=`), and the text
//! `scontrol show topology` prints for it (cf. src/plugins/topology/tree/
//! switch_record.c, src/plugins/topology/block/block_record.c and
//! src/scontrol/info_topo.c).
//!
//! Pure data. Placement ([`crate::sched::select`]) sees the topology as *groups*: each
//! node belongs to one group per level (a switch of that level above it, or an aligned
//! set of blocks), level 0 being its leaf switch or its block. A job that fits in one
//! group of a low level never uses a higher one.

use super::hostlist;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One switch of a tree topology.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// `SwitchName=`.
    pub name: String,
    /// `Nodes=`, expanded: the nodes attached directly (a leaf switch has them).
    #[serde(default)]
    pub nodes: Vec<String>,
    /// `Switches=`, expanded: child switches.
    #[serde(default)]
    pub switches: Vec<String>,
    /// `LinkSpeed=` (an arbitrary relative number; Slurm's default is 1).
    #[serde(default = "one")]
    pub link_speed: u32,
}

fn one() -> u32 {
    1
}

/// One base block of a block topology.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// `BlockName=`.
    pub name: String,
    /// `Nodes=`, expanded.
    pub nodes: Vec<String>,
}

/// The cluster's topology; empty (no switches, no blocks) means flat.
///
/// Invariant (after [`Topology::validate`]): switches and blocks are not both set;
/// names are unique; each node is in at most one leaf switch or block; the switch graph
/// is a forest; every block size is the base block's node count times a power of two.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    #[serde(default)]
    pub switches: Vec<Switch>,
    #[serde(default)]
    pub blocks: Vec<Block>,
    /// `BlockSizes=`, in nodes, ascending; empty = the base block size doubled up to
    /// all blocks (Slurm's default).
    #[serde(default)]
    pub block_sizes: Vec<u32>,
}

/// A node's place in the topology: `(level, group id)` pairs, level 0 first. Group ids
/// are unique within a topology (not only within a level).
pub type NodeGroups = Vec<(u16, u32)>;

impl Topology {
    /// Whether no topology is configured.
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty() && self.blocks.is_empty()
    }

    /// Checks the invariant above against the declared node names.
    ///
    /// Errors: a message naming the switch, block or node at fault.
    pub fn validate(&self, known: &[String]) -> Result<(), String> {
        if !self.switches.is_empty() && !self.blocks.is_empty() {
            return Err("topology: switches and blocks cannot both be configured".into());
        }
        let mut names = std::collections::HashSet::new();
        let mut placed: HashMap<&str, &str> = HashMap::new();
        let known: std::collections::HashSet<&str> = known.iter().map(String::as_str).collect();
        let check_nodes = |owner: &'static str, name: &str, nodes: &[String]| {
            for n in nodes {
                if !known.contains(n.as_str()) {
                    return Err(format!(
                        "topology: {owner} '{name}' names node '{n}', which is not declared"
                    ));
                }
            }
            Ok(())
        };
        for s in &self.switches {
            if s.name.is_empty() {
                return Err("topology: a switch has no name".into());
            }
            if !names.insert(s.name.as_str()) {
                return Err(format!("topology: switch '{}' is declared twice", s.name));
            }
            check_nodes("switch", &s.name, &s.nodes)?;
            for c in &s.switches {
                if !self.switches.iter().any(|x| &x.name == c) {
                    return Err(format!(
                        "topology: switch '{}' names child switch '{c}', which is not declared",
                        s.name
                    ));
                }
            }
        }
        for s in &self.switches {
            for n in &s.nodes {
                if let Some(prev) = placed.insert(n, &s.name) {
                    return Err(format!(
                        "topology: node '{n}' is in both switch '{prev}' and switch '{}'",
                        s.name
                    ));
                }
            }
        }
        // Each switch has at most one parent, and there are no cycles.
        let mut parent: HashMap<&str, &str> = HashMap::new();
        for s in &self.switches {
            for c in &s.switches {
                if let Some(p) = parent.insert(c, &s.name) {
                    return Err(format!(
                        "topology: switch '{c}' is a child of both '{p}' and '{}'",
                        s.name
                    ));
                }
            }
        }
        for s in &self.switches {
            let mut at = s.name.as_str();
            for _ in 0..=self.switches.len() {
                match parent.get(at) {
                    Some(p) => at = p,
                    None => break,
                }
            }
            if parent.contains_key(at) {
                return Err(format!("topology: switch '{}' is in a cycle", s.name));
            }
        }
        for b in &self.blocks {
            if b.name.is_empty() {
                return Err("topology: a block has no name".into());
            }
            if !names.insert(b.name.as_str()) {
                return Err(format!("topology: block '{}' is declared twice", b.name));
            }
            if b.nodes.is_empty() {
                return Err(format!("topology: block '{}' has no nodes", b.name));
            }
            check_nodes("block", &b.name, &b.nodes)?;
            for n in &b.nodes {
                if let Some(prev) = placed.insert(n, &b.name) {
                    return Err(format!(
                        "topology: node '{n}' is in both block '{prev}' and block '{}'",
                        b.name
                    ));
                }
            }
        }
        if !self.block_sizes.is_empty() {
            if self.blocks.is_empty() {
                return Err("topology: block_sizes is set but no block is".into());
            }
            let base = self.base_block_size();
            let mut last = 0;
            for &s in &self.block_sizes {
                if s <= last {
                    return Err("topology: block_sizes must be ascending".into());
                }
                if s % base != 0 || !(s / base).is_power_of_two() {
                    return Err(format!(
                        "topology: block size {s} is not {base} (the base block's node count) times a power of two"
                    ));
                }
                last = s;
            }
        }
        Ok(())
    }

    /// Nodes in a base block (the first block's node count; Slurm's bblock size).
    pub fn base_block_size(&self) -> u32 {
        self.blocks
            .first()
            .map_or(1, |b| b.nodes.len().max(1) as u32)
    }

    /// The block sizes in effect, in nodes: `block_sizes`, or the base size doubled
    /// while the result still covers no more than all blocks.
    pub fn effective_block_sizes(&self) -> Vec<u32> {
        if !self.block_sizes.is_empty() {
            return self.block_sizes.clone();
        }
        let base = self.base_block_size();
        let mut v = Vec::new();
        let mut k = 1u32;
        while (k as usize) <= self.blocks.len().max(1) {
            v.push(base.saturating_mul(k));
            k = k.saturating_mul(2);
        }
        v
    }

    /// Switch levels by switch index: 0 for a switch without child switches, else one
    /// more than its highest child (as topology/tree computes them).
    pub fn switch_levels(&self) -> Vec<u16> {
        let idx: HashMap<&str, usize> = self
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect();
        let mut lv: Vec<Option<u16>> = vec![None; self.switches.len()];
        fn level(
            i: usize,
            t: &Topology,
            idx: &HashMap<&str, usize>,
            lv: &mut Vec<Option<u16>>,
            depth: usize,
        ) -> u16 {
            if let Some(l) = lv[i] {
                return l;
            }
            if depth > t.switches.len() {
                return 0; // a cycle; validate() refuses it
            }
            let l = t.switches[i]
                .switches
                .iter()
                .filter_map(|c| idx.get(c.as_str()))
                .map(|&c| level(c, t, idx, lv, depth + 1) + 1)
                .max()
                .unwrap_or(0);
            lv[i] = Some(l);
            l
        }
        (0..self.switches.len())
            .map(|i| level(i, self, &idx, &mut lv, 0))
            .collect()
    }

    /// Every node under switch `i`, its own and its descendants', in declaration
    /// order.
    pub fn switch_all_nodes(&self, i: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![i];
        let mut seen = vec![false; self.switches.len()];
        while let Some(s) = stack.pop() {
            if std::mem::replace(&mut seen[s], true) {
                continue;
            }
            out.extend(self.switches[s].nodes.iter().cloned());
            for c in self.switches[s].switches.iter().rev() {
                if let Some(ci) = self.switches.iter().position(|x| &x.name == c) {
                    stack.push(ci);
                }
            }
        }
        out
    }

    /// Each node's groups, level 0 first (see [`NodeGroups`]). Nodes outside the
    /// topology are absent.
    ///
    /// Tree: the switches above the node (its leaf, then each ancestor), with the
    /// switch's level and index. Block: level `k` is the aligned run of
    /// `sizes[k] / base` consecutive blocks that holds the node's block (level 0 is
    /// the block itself); a run that would pass the last block is not a group.
    pub fn node_groups(&self) -> HashMap<String, NodeGroups> {
        let mut out: HashMap<String, NodeGroups> = HashMap::new();
        if !self.switches.is_empty() {
            let levels = self.switch_levels();
            let mut parent: HashMap<&str, usize> = HashMap::new();
            for (i, s) in self.switches.iter().enumerate() {
                for c in &s.switches {
                    parent.insert(c.as_str(), i);
                }
            }
            for (i, s) in self.switches.iter().enumerate() {
                let mut chain = vec![(levels[i], i as u32)];
                let mut at = s.name.as_str();
                while let Some(&p) = parent.get(at) {
                    if chain.len() > self.switches.len() {
                        break;
                    }
                    chain.push((levels[p], p as u32));
                    at = self.switches[p].name.as_str();
                }
                for n in &s.nodes {
                    out.insert(n.clone(), chain.clone());
                }
            }
        } else if !self.blocks.is_empty() {
            let base = self.base_block_size();
            let sizes = self.effective_block_sizes();
            let nb = self.blocks.len() as u32;
            for (b, blk) in self.blocks.iter().enumerate() {
                let b = b as u32;
                let mut groups = Vec::new();
                let mut id_base = 0u32;
                for (k, &s) in sizes.iter().enumerate() {
                    let span = (s / base).max(1);
                    let first = b / span * span;
                    if first + span <= nb || span == 1 {
                        groups.push((k as u16, id_base + b / span));
                    }
                    id_base += nb;
                }
                for n in &blk.nodes {
                    out.insert(n.clone(), groups.clone());
                }
            }
        }
        out
    }

    /// `scontrol show topology [NAME]` text: one line per switch (or block), or the
    /// message Slurm prints when there is none.
    ///
    /// Tree lines are `SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-4]`, a parent adding
    /// `Switches=s[0-1]` and listing all nodes below it; block lines are
    /// `BlockName=b1 BlockIndex=0 Nodes=n[1-4] BlockSize=4`.
    pub fn render_scontrol(&self, name: Option<&str>) -> String {
        let mut out = String::new();
        if !self.switches.is_empty() {
            let levels = self.switch_levels();
            for (i, s) in self.switches.iter().enumerate() {
                if name.is_some_and(|n| n != s.name && !s.nodes.iter().any(|x| x == n)) {
                    continue;
                }
                out.push_str(&format!(
                    "SwitchName={} Level={} LinkSpeed={}",
                    s.name, levels[i], s.link_speed
                ));
                let nodes = self.switch_all_nodes(i);
                if !nodes.is_empty() {
                    out.push_str(&format!(" Nodes={}", hostlist::compress(&nodes)));
                }
                if !s.switches.is_empty() {
                    out.push_str(&format!(" Switches={}", hostlist::compress(&s.switches)));
                }
                out.push('\n');
            }
        } else {
            let base = self.base_block_size();
            for (i, b) in self.blocks.iter().enumerate() {
                if name.is_some_and(|n| n != b.name && !b.nodes.iter().any(|x| x == n)) {
                    continue;
                }
                out.push_str(&format!(
                    "BlockName={} BlockIndex={i} Nodes={} BlockSize={base}\n",
                    b.name,
                    hostlist::compress(&b.nodes)
                ));
            }
        }
        if out.is_empty() {
            return match name {
                Some(n) => format!("Switch/block {n} not found\n"),
                None => "No topology information available\n".into(),
            };
        }
        out
    }
}

/// Parses the text of a Slurm topology.conf: `SwitchName=` lines (with `Nodes=`,
/// `Switches=`, `LinkSpeed=`), `BlockName=` lines (with `Nodes=`) and a
/// `BlockSizes=` line; `#` comments and `\` continuations; keys are case-insensitive.
///
/// Errors: an unknown key, a bad number or hostlist, a `Nodes=`/`Switches=` outside a
/// switch or block line (the message names the line number). The result is not yet
/// validated against the nodes ([`Topology::validate`]).
pub fn parse_topology_conf(text: &str) -> Result<Topology, String> {
    let mut t = Topology::default();
    let joined = text.replace("\\\n", " ");
    for (no, raw) in joined.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |m: String| format!("topology.conf line {}: {m}", no + 1);
        let mut sw: Option<Switch> = None;
        let mut blk: Option<Block> = None;
        for word in line.split_whitespace() {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| at(format!("'{word}' is not Key=Value")))?;
            let list = |v: &str| hostlist::expand(v).map_err(|e| at(format!("{k}={v}: {e}")));
            match k.to_ascii_lowercase().as_str() {
                "switchname" => {
                    sw = Some(Switch {
                        name: v.to_string(),
                        link_speed: 1,
                        ..Switch::default()
                    })
                }
                "blockname" => {
                    blk = Some(Block {
                        name: v.to_string(),
                        nodes: Vec::new(),
                    })
                }
                "blocksizes" => {
                    t.block_sizes = v
                        .split(',')
                        .map(|x| {
                            x.trim()
                                .parse::<u32>()
                                .ok()
                                .filter(|n| *n > 0)
                                .ok_or_else(|| at(format!("bad BlockSizes value '{x}'")))
                        })
                        .collect::<Result<_, _>>()?;
                }
                "nodes" => match (&mut sw, &mut blk) {
                    (Some(s), _) => s.nodes = list(v)?,
                    (_, Some(b)) => b.nodes = list(v)?,
                    _ => return Err(at("Nodes= before SwitchName= or BlockName=".into())),
                },
                "switches" => match &mut sw {
                    Some(s) => s.switches = list(v)?,
                    None => return Err(at("Switches= before SwitchName=".into())),
                },
                "linkspeed" => match &mut sw {
                    Some(s) => {
                        s.link_speed = v.parse().map_err(|_| at(format!("bad LinkSpeed '{v}'")))?
                    }
                    None => return Err(at("LinkSpeed= before SwitchName=".into())),
                },
                _ => return Err(at(format!("unknown key '{k}'"))),
            }
        }
        if let Some(s) = sw {
            t.switches.push(s);
        }
        if let Some(b) = blk {
            t.blocks.push(b);
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &str) -> Vec<String> {
        hostlist::expand(s).unwrap()
    }

    const TREE: &str = "# three leaves under one core\n\
        SwitchName=s0 Nodes=n[01-08]\n\
        SwitchName=s1 Nodes=n[09-16] LinkSpeed=2\n\
        SwitchName=s2 Nodes=n[17-24]\n\
        SwitchName=top Switches=s[0-2]\n";

    #[test]
    fn parses_and_renders_a_tree() {
        let t = parse_topology_conf(TREE).unwrap();
        t.validate(&names("n[01-24]")).unwrap();
        assert_eq!(t.switch_levels(), vec![0, 0, 0, 1]);
        assert_eq!(
            t.render_scontrol(None),
            "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[01-08]\n\
             SwitchName=s1 Level=0 LinkSpeed=2 Nodes=n[09-16]\n\
             SwitchName=s2 Level=0 LinkSpeed=1 Nodes=n[17-24]\n\
             SwitchName=top Level=1 LinkSpeed=1 Nodes=n[01-24] Switches=s[0-2]\n"
        );
        assert_eq!(
            t.render_scontrol(Some("s1")),
            "SwitchName=s1 Level=0 LinkSpeed=2 Nodes=n[09-16]\n"
        );
        assert_eq!(
            t.render_scontrol(Some("nope")),
            "Switch/block nope not found\n"
        );
        let g = t.node_groups();
        assert_eq!(g["n10"], vec![(0, 1), (1, 3)]);
        assert_eq!(g["n24"], vec![(0, 2), (1, 3)]);
    }

    #[test]
    fn refuses_bad_trees_and_lines() {
        let known = names("n[01-24]");
        let e = parse_topology_conf("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1\n")
            .unwrap()
            .validate(&names("n1"))
            .unwrap_err();
        assert!(
            e.contains("'n1' is in both switch 'a' and switch 'b'"),
            "{e}"
        );
        let e = parse_topology_conf("SwitchName=a Switches=b\nSwitchName=b Switches=a\n")
            .unwrap()
            .validate(&known)
            .unwrap_err();
        assert!(e.contains("cycle"), "{e}");
        let e = parse_topology_conf("SwitchName=a Switches=zz\n")
            .unwrap()
            .validate(&known)
            .unwrap_err();
        assert!(e.contains("'zz', which is not declared"), "{e}");
        let e = parse_topology_conf("SwitchName=a Nodes=x9\n")
            .unwrap()
            .validate(&known)
            .unwrap_err();
        assert!(e.contains("'x9', which is not declared"), "{e}");
        let e = parse_topology_conf("\nSwitchName=a Bogus=1\n").unwrap_err();
        assert_eq!(e, "topology.conf line 2: unknown key 'Bogus'");
        let e = parse_topology_conf("Nodes=n1\n").unwrap_err();
        assert!(e.contains("before SwitchName="), "{e}");
        let e = parse_topology_conf("SwitchName=a LinkSpeed=fast\n").unwrap_err();
        assert!(e.contains("bad LinkSpeed"), "{e}");
    }

    #[test]
    fn blocks_group_in_aligned_runs() {
        let t = parse_topology_conf(
            "BlockName=b1 Nodes=n[01-04]\nBlockName=b2 Nodes=n[05-08]\n\
             BlockName=b3 Nodes=n[09-12]\nBlockSizes=4,8\n",
        )
        .unwrap();
        t.validate(&names("n[01-12]")).unwrap();
        let g = t.node_groups();
        // b1 and b2 form the first aligned pair; b3 has no partner, so no level 1.
        assert_eq!(g["n01"], vec![(0, 0), (1, 3)]);
        assert_eq!(g["n06"], vec![(0, 1), (1, 3)]);
        assert_eq!(g["n10"], vec![(0, 2)]);
        assert_eq!(
            t.render_scontrol(Some("b2")),
            "BlockName=b2 BlockIndex=1 Nodes=n[05-08] BlockSize=4\n"
        );
        let mut bad = t.clone();
        bad.block_sizes = vec![4, 12];
        assert!(
            bad.validate(&names("n[01-12]"))
                .unwrap_err()
                .contains("power of two")
        );
        assert_eq!(
            Topology::default().render_scontrol(None),
            "No topology information available\n"
        );
    }
}
