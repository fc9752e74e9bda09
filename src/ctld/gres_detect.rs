//! Whether a node's GPUs as its agent found them (NVML or `/dev/nvidia*`) are used
//! (cf. gres.conf `AutoDetect=`): only when the configuration declares no GRES for the
//! node and does not say `AutoDetect=off`. Declared devices always win, as gres.conf
//! lines override what Slurm's AutoDetect finds. The controller adopts detected devices
//! only on a node that has none yet, so jobs holding device slots never see them move.

use crate::config::NodeConf;
use crate::model::gres::GresDevice;

/// The detected devices to use for `declared`'s node, if any.
pub fn adopt(declared: &NodeConf, detected: Vec<GresDevice>) -> Option<Vec<GresDevice>> {
    if detected.is_empty() || declared.gres_autodetect == Some(false) {
        return None;
    }
    let has_declared = declared.gres.is_some() || declared.gres_declared.is_some();
    (!has_declared).then_some(detected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(i: u32) -> GresDevice {
        GresDevice {
            name: "gpu".into(),
            kind: Some("h100".into()),
            index: i,
            count: 1,
            cores: Vec::new(),
            file: Some(format!("/dev/nvidia{i}")),
            links: Vec::new(),
            pci_bus: None,
            more_files: Vec::new(),
            unique_id: None,
        }
    }

    #[test]
    fn detected_gpus_fill_only_undeclared_nodes() {
        let bare = NodeConf::named("n1");
        assert_eq!(adopt(&bare, vec![gpu(0)]), Some(vec![gpu(0)]));
        assert_eq!(adopt(&bare, Vec::new()), None);
        let declared = NodeConf {
            gres: Some("gpu:2".into()),
            ..NodeConf::named("n1")
        };
        assert_eq!(adopt(&declared, vec![gpu(0)]), None);
        let off = NodeConf {
            gres_autodetect: Some(false),
            ..NodeConf::named("n1")
        };
        assert_eq!(adopt(&off, vec![gpu(0)]), None);
    }
}
