//! priority/multifactor against the golden cluster's figures (one node of 32 CPUs,
//! weights age 1000, fair-share 10000, job size 1000, partition 1000).

use super::*;
use crate::sched::fairshare::{Algorithm, FairShareTree, UsageLedger};
use crate::sched::priority::{PriorityConfig, PriorityContext, decay, factors};

fn ctx() -> PriorityContext {
    PriorityContext {
        total_cpus: 32,
        total_nodes: 1,
        total_mem: 16000,
        total_gpus: 4,
        max_part_factor: 1,
        fairshare: Default::default(),
        qos_norm: Default::default(),
        billing: Default::default(),
        partition_tres: Default::default(),
    }
}

#[test]
fn golden_sprio_values() {
    let cfg = PriorityConfig::default();
    let mut j = job(1, 32, 400);
    j.eligible_time = Some(0);
    let f = factors(&j, 1, &ctx(), &cfg, 0);
    assert_eq!(
        (f.fairshare, f.jobsize, f.partition),
        (10000.0, 1000.0, 1000.0)
    );
    assert_eq!(f.priority(), 12000);
    j.req_cpus = 16;
    assert_eq!(factors(&j, 1, &ctx(), &cfg, 0).priority(), 11750);
    j.req_cpus = 1;
    let f = factors(&j, 1, &ctx(), &cfg, 0);
    assert_eq!(f.jobsize.round(), 516.0);
    assert_eq!(f.priority(), 11515);
}

#[test]
fn age_grows_to_its_maximum_and_nice_lowers() {
    let cfg = PriorityConfig::default();
    let mut j = job(1, 1, 400);
    j.eligible_time = Some(0);
    let week = 7 * 86400;
    assert_eq!(factors(&j, 1, &ctx(), &cfg, week / 2).age, 500.0);
    assert_eq!(factors(&j, 1, &ctx(), &cfg, 10 * week).age, 1000.0);
    let base = factors(&j, 1, &ctx(), &cfg, 0).priority();
    j.spec.nice = 100;
    assert_eq!(factors(&j, 1, &ctx(), &cfg, 0).priority(), base - 100);
    j.spec.nice = -100;
    assert_eq!(factors(&j, 1, &ctx(), &cfg, 0).priority(), base + 100);
}

#[test]
fn fairshare_falls_with_usage() {
    let cfg = PriorityConfig::default();
    let mut ledger = UsageLedger::default();
    ledger.charge(("".into(), "heavy".into()), 3000.0);
    ledger.charge(("".into(), "light".into()), 1000.0);
    let build = |alg| {
        let mut c = ctx();
        c.fairshare = std::sync::Arc::new(FairShareTree::build(&[], &[], &ledger, &[], alg));
        c
    };
    let mut heavy = job(1, 1, 400);
    heavy.user = "heavy".into();
    let mut light = job(2, 1, 400);
    light.user = "light".into();
    // Classic: usage 3/4 with shares 1/2 under root: 2^(-1.5).
    let c = build(Algorithm::Classic);
    let fh = factors(&heavy, 1, &c, &cfg, 0).fairshare;
    let fl = factors(&light, 1, &c, &cfg, 0).fairshare;
    assert!(fh < fl, "{fh} < {fl}");
    assert!((fh - 10000.0 * (-1.5f64).exp2()).abs() < 1e-6);
    // Fair Tree: light ranks first of two users, heavy second.
    let c = build(Algorithm::FairTree);
    assert_eq!(factors(&light, 1, &c, &cfg, 0).fairshare, 10000.0);
    assert_eq!(factors(&heavy, 1, &c, &cfg, 0).fairshare, 5000.0);
    // A user the tree does not know has no usage: factor 1.
    heavy.user = "new".into();
    assert_eq!(factors(&heavy, 1, &c, &cfg, 0).fairshare, 10000.0);
    assert!((decay(100.0, 0, 7 * 86400, 7 * 86400) - 50.0).abs() < 1e-9);
}

#[test]
fn small_relative_to_time_and_partition_and_tres() {
    let mut cfg = PriorityConfig {
        small_relative_to_time: true,
        ..PriorityConfig::default()
    };
    let mut j = job(1, 32, 400);
    j.time_limit = TimeLimit::Minutes(1);
    assert_eq!(factors(&j, 1, &ctx(), &cfg, 0).jobsize, 1000.0);
    j.time_limit = TimeLimit::Minutes(4);
    assert_eq!(factors(&j, 1, &ctx(), &cfg, 0).jobsize, 250.0);
    cfg.small_relative_to_time = false;
    let mut c = ctx();
    c.max_part_factor = 4;
    assert_eq!(factors(&j, 1, &c, &cfg, 0).partition, 250.0);
    cfg.weight_tres = vec![("cpu".into(), 100.0)];
    j.req_cpus = 8;
    assert_eq!(
        factors(&j, 1, &c, &cfg, 0).tres,
        vec![("cpu".to_string(), 25.0)]
    );
    // A billing weight compares the job's billing with the cluster's, both as the
    // partition bills them: 8 CPUs + 2 GPUs × 4 = 16 of 32 + 4 × 4 = 48.
    j.spec.gres = vec![crate::model::gres::parse_gres_item("gpu:2").unwrap()];
    c.billing = crate::model::billing::BillingTable {
        partitions: [(
            j.partition.clone(),
            crate::model::billing::BillingWeights::parse("CPU=1,GRES/gpu=4").unwrap(),
        )]
        .into(),
        max_tres: false,
    };
    cfg.weight_tres = vec![("CPU".into(), 100.0), ("billing".into(), 300.0)];
    assert_eq!(
        factors(&j, 1, &c, &cfg, 0).tres,
        vec![("CPU".to_string(), 25.0), ("billing".to_string(), 100.0)]
    );
}

#[test]
fn tres_weights_cover_every_tres_over_the_partitions_whole() {
    // Partition p: 2 nodes of 16 CPUs, 4 a100 GPUs each, and 10 matlab licenses.
    let nodes: Vec<crate::model::Node> = (0..2)
        .map(|i| {
            let mut n = super::node(&format!("n{i}"), 16, 64000);
            n.gres = (0..4)
                .map(|k| crate::model::gres::GresDevice {
                    name: "gpu".into(),
                    kind: Some("a100".into()),
                    index: k,
                    count: 1,
                    ..Default::default()
                })
                .collect();
            n
        })
        .collect();
    let whole = crate::model::billing::nodes_tres(&nodes, &[("matlab".into(), 10)]);
    assert_eq!(
        (whole["cpu"], whole["node"], whole["gres/gpu:a100"]),
        (32, 2, 8)
    );
    assert_eq!(whole["license/matlab"], 10);
    let mut c = ctx();
    c.partition_tres.insert("p".into(), whole);
    let cfg = PriorityConfig {
        weight_tres: vec![
            ("GRES/gpu:a100".into(), 800.0),
            ("license/matlab".into(), 1000.0),
            ("cpu".into(), 320.0),
            ("gres/nic".into(), 50.0),
        ],
        ..PriorityConfig::default()
    };
    let mut j = job(1, 4, 400);
    j.spec.gres = vec![crate::model::gres::parse_gres_item("gpu:a100:2").unwrap()];
    j.spec.licenses = crate::model::gres::parse_licenses("matlab:5").unwrap();
    // 2 of 8 typed GPUs, 5 of 10 licenses, 4 of the partition's 32 CPUs (not the
    // context's cluster-wide 32 + 0), and nothing for a TRES the job does not ask for.
    assert_eq!(
        factors(&j, 1, &c, &cfg, 0).tres,
        vec![
            ("GRES/gpu:a100".to_string(), 200.0),
            ("license/matlab".to_string(), 500.0),
            ("cpu".to_string(), 40.0),
            ("gres/nic".to_string(), 0.0),
        ]
    );
    // Another partition without recorded totals falls back to the cluster's.
    j.partition = "q".into();
    assert_eq!(
        factors(&j, 1, &c, &cfg, 0).tres[2],
        ("cpu".to_string(), 40.0)
    );
}

#[test]
fn qos_factor_is_priority_over_the_highest_qos_priority() {
    let cfg = PriorityConfig {
        weight_qos: 1000,
        ..PriorityConfig::default()
    };
    let mut c = ctx();
    c.qos_norm.insert("high".into(), 1.0);
    c.qos_norm.insert("low".into(), 0.25);
    let mut j = job(1, 1, 400);
    j.qos = "high".into();
    assert_eq!(factors(&j, 1, &c, &cfg, 0).qos, 1000.0);
    j.qos = "low".into();
    assert_eq!(factors(&j, 1, &c, &cfg, 0).qos, 250.0);
    j.qos = "normal".into();
    assert_eq!(factors(&j, 1, &c, &cfg, 0).qos, 0.0);
}
