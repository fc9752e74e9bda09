//! `sacct --json`: job records as Slurm 22.05's openapi/dbv0.0.38 dumper writes them
//! (src/plugins/openapi/dbv0.0.38/parse.c: the `parse_job` and `parse_job_step` tables
//! give each value's key path, and keys land in first-insertion order; `_foreach_step`
//! adds a step's node list and its per-node/per-task TRES maxima and minima before the
//! table). See `../shared/golden/sacct.txt` for the head of a real document.
//!
//! Values sluice has no notion of get the empty value Slurm stores for them (null
//! comments, reservation id 0, energy 0, CPU frequencies 0). TRES ids are Slurm's
//! fixed ones (cpu 1, mem 2, energy 3, node 4, billing 5, fs/disk 6, vmem 7, pages 8)
//! and 1001 for `gres/gpu`, the first GRES a Slurm database registers.
//!
//! One deliberate difference: Slurm 22.05's exit-code dumper reports every normal exit
//! as `SUCCESS` with return code 0, even `exit 3` (its `WIFEXITED` branch comes before
//! the error branch). sluice gives a non-zero exit the dumper's own `ERROR` form with
//! the real code, so a tool reading the JSON sees a failure as one.

use crate::cli::jobfmt;
use crate::cli::slurmjson::{self, J};
use crate::model::job::MemReq;
use crate::model::step::StepUsage;
use crate::model::{ExitStatus, Job, JobState, StepRecord, TimeLimit, hostlist};

/// One TRES of Slurm's database: (id, type, name).
type Tres = (u32, &'static str, &'static str);
const CPU: Tres = (1, "cpu", "");
const MEM: Tres = (2, "mem", "");
const ENERGY: Tres = (3, "energy", "");
const NODE: Tres = (4, "node", "");
const BILLING: Tres = (5, "billing", "");
const DISK: Tres = (6, "fs", "disk");
const VMEM: Tres = (7, "vmem", "");
const PAGES: Tres = (8, "pages", "");
const GPU: Tres = (1001, "gres", "gpu");

/// A `{type, name, id, count}` entry (parse_tres order).
fn tres(t: Tres, count: u64) -> J {
    J::obj()
        .with("type", t.1)
        .with("name", t.2)
        .with("id", t.0)
        .with("count", count)
}

/// A `{type, name, id, count, task, node}` entry (parse_tres_nct order).
fn tres_nct(t: Tres, count: u64, task: u32, node: &str) -> J {
    tres(t, count).with("task", task).with(
        "node",
        if node.is_empty() {
            J::Null
        } else {
            node.into()
        },
    )
}

/// glibc's `strsignal` text, which Slurm puts in `signal/name`.
pub fn signal_name(sig: i32) -> String {
    crate::cli::stepio::strsignal(sig)
}

/// An exit status as `{status, return_code[, signal{signal_id, name}]}`.
pub fn exit_code(e: ExitStatus) -> J {
    let d = J::obj()
        .with("status", J::Null)
        .with("return_code", J::Null);
    if e.signal != 0 {
        d.with("status", "SIGNALED")
            .with("signal/signal_id", e.signal)
            .with("signal/name", signal_name(e.signal))
    } else if e.code != 0 {
        d.with("status", "ERROR").with("return_code", e.code)
    } else {
        d.with("status", "SUCCESS").with("return_code", 0u32)
    }
}

/// `seconds` and `microseconds` of a CPU time in seconds.
fn cpu_time(j: &mut J, path: &str, secs: f64) {
    let s = secs.max(0.0);
    let whole = s.trunc() as u64;
    let us = ((s - s.trunc()) * 1e6).round() as u64;
    j.set(&format!("{path}/seconds"), whole);
    j.set(&format!("{path}/microseconds"), us.min(999_999));
}

/// A job's requested (and, once started, allocated) TRES, in TRES id order.
fn job_tres(job: &Job) -> Vec<J> {
    let cpus = u64::from(jobfmt::cpu_count(job));
    let mut v = vec![
        tres(CPU, cpus),
        tres(MEM, jobfmt::total_mem_mb(job)),
        tres(NODE, u64::from(jobfmt::node_count(job))),
        tres(BILLING, jobfmt::billing(job)),
    ];
    let gpus = jobfmt::gpu_count(job);
    if gpus > 0 {
        v.push(tres(GPU, gpus));
    }
    v
}

/// The memory a step holds, MiB: its own figure when tracked, else its share of the
/// job's request.
fn step_mem_mb(job: &Job, st: &StepRecord) -> u64 {
    if let Some(d) = &st.detail
        && d.mem_per_node > 0
    {
        let n = hostlist::expand(&st.nodes).map(|v| v.len()).unwrap_or(1) as u64;
        return d.mem_per_node * n.max(1);
    }
    match job.req_mem {
        MemReq::PerCpu(m) => m * u64::from(st.ncpus),
        MemReq::PerNode(m) => {
            let n = hostlist::expand(&st.nodes).map(|v| v.len()).unwrap_or(1) as u64;
            m * n.max(1)
        }
    }
}

/// The four per-node/per-task lists of a step's usage: requested (read) max and min,
/// consumed (written) max and min. Minima beyond CPU are known only for a one-task
/// step, where they equal the maxima (as in `usagefmt::tres_usage`).
fn usage_nct(u: &StepUsage) -> [Vec<J>; 4] {
    let one = u.ntasks <= 1;
    let kib = |k: u64| k.saturating_mul(1024);
    let ms = |s: f64| (s.max(0.0) * 1000.0).round() as u64;
    let in_max = vec![
        tres_nct(CPU, ms(u.max_cpu_secs), u.max_cpu_task, &u.max_cpu_node),
        tres_nct(MEM, kib(u.max_rss_kib), u.max_rss_task, &u.max_rss_node),
        tres_nct(ENERGY, 0, 0, &u.max_rss_node),
        tres_nct(
            DISK,
            u.max_disk_read,
            u.max_disk_read_task,
            &u.max_disk_read_node,
        ),
        tres_nct(
            VMEM,
            kib(u.max_vsize_kib),
            u.max_vsize_task,
            &u.max_vsize_node,
        ),
        tres_nct(PAGES, u.max_pages, u.max_pages_task, &u.max_pages_node),
    ];
    let mut in_min = vec![
        tres_nct(CPU, ms(u.min_cpu_secs), u.min_cpu_task, &u.min_cpu_node),
        tres_nct(ENERGY, 0, 0, &u.max_rss_node),
    ];
    if one {
        in_min = in_max.clone();
        in_min[0] = tres_nct(CPU, ms(u.min_cpu_secs), u.min_cpu_task, &u.min_cpu_node);
    }
    let out_max = vec![
        tres_nct(ENERGY, 0, 0, &u.max_disk_write_node),
        tres_nct(
            DISK,
            u.max_disk_write,
            u.max_disk_write_task,
            &u.max_disk_write_node,
        ),
    ];
    let out_min = if one {
        out_max.clone()
    } else {
        vec![tres_nct(ENERGY, 0, 0, &u.max_disk_write_node)]
    };
    // Slurm drops entries with no count, node or task (_dump_tres_nct).
    let keep = |v: Vec<J>| {
        v.into_iter()
            .filter(|e| {
                e.get("count") != Some(&J::Int(0))
                    || e.get("node") != Some(&J::Null)
                    || e.get("task") != Some(&J::Int(0))
            })
            .collect()
    };
    [keep(in_max), keep(in_min), keep(out_max), keep(out_min)]
}

/// One step object, keys in the order `_foreach_step` then `parse_job_step` create
/// them. `user_name` maps a uid to a name (`kill_request_user`).
fn step_object(job: &Job, st: &StepRecord, now: i64, user_name: &dyn Fn(u32) -> String) -> J {
    let mut s = J::obj();
    let nodes = hostlist::expand(&st.nodes).unwrap_or_default();
    if !nodes.is_empty() {
        s.set(
            "nodes/list",
            nodes
                .iter()
                .map(|n| J::from(n.as_str()))
                .collect::<Vec<_>>(),
        );
    }
    let usage = st.usage();
    let [in_max, in_min, out_max, out_min] = usage.map(usage_nct).unwrap_or_default();
    s.set("tres/requested/max", in_max);
    s.set("tres/requested/min", in_min);
    s.set("tres/consumed/max", out_max);
    s.set("tres/consumed/min", out_min);
    let end = st.end_time;
    s.set("time/elapsed", (end.unwrap_or(now) - st.start_time).max(0));
    s.set("time/end", end.unwrap_or(0));
    s.set("exit_code", exit_code(st.exit));
    s.set("nodes/count", nodes.len());
    s.set("nodes/range", st.nodes.as_str());
    s.set("tasks/count", st.ntasks);
    s.set("pid", J::Null);
    s.set("CPU/requested_frequency/min", 0u32);
    s.set("CPU/requested_frequency/max", 0u32);
    s.set("CPU/governor", J::Arr(Vec::new()));
    s.set(
        "kill_request_user",
        st.detail
            .as_ref()
            .and_then(|d| d.cancelled_by)
            .map(user_name),
    );
    s.set("time/start", st.start_time);
    s.set("state", st.state.long());
    s.set("statistics/CPU/actual_frequency", 0u32);
    s.set("statistics/energy/consumed", 0u32);
    s.set("step/job_id", job.id);
    s.set("step/het/component", J::Null);
    s.set(
        "step/id",
        match st.id.parse::<u32>() {
            Ok(n) => J::from(n),
            Err(_) => J::from(st.id.as_str()),
        },
    );
    s.set("step/name", st.name.as_str());
    s.set("time/suspended", 0u32);
    let (user, sys, total) = match usage {
        Some(u) => (u.user_cpu_secs, u.sys_cpu_secs, u.sum_cpu_secs),
        None => (0.0, 0.0, st.cpu_secs),
    };
    cpu_time(&mut s, "time/system", sys);
    s.set(
        "task/distribution",
        match st.detail.as_ref().map(|d| d.distribution) {
            Some(crate::model::step::Distribution::Block) => "Block".to_string(),
            Some(crate::model::step::Distribution::Cyclic) => "Cyclic".to_string(),
            Some(crate::model::step::Distribution::Plane(_)) => "Plane".to_string(),
            None => "Unknown".to_string(),
        },
    );
    cpu_time(&mut s, "time/total", total);
    cpu_time(&mut s, "time/user", user);
    let (in_ave, in_tot, out_ave, out_tot) = match usage {
        Some(u) => {
            let n = u64::from(u.ntasks.max(1));
            let ms = |x: f64| (x.max(0.0) * 1000.0).round() as u64;
            (
                vec![
                    tres(CPU, ms(u.ave_cpu_secs())),
                    tres(MEM, u.ave_rss_kib() * 1024),
                    tres(ENERGY, 0),
                    tres(DISK, u.sum_disk_read / n),
                    tres(VMEM, u.ave_vsize_kib() * 1024),
                    tres(PAGES, u.sum_pages / n),
                ],
                vec![
                    tres(CPU, ms(u.sum_cpu_secs)),
                    tres(MEM, u.tot_rss_kib() * 1024),
                    tres(ENERGY, 0),
                    tres(DISK, u.sum_disk_read),
                    tres(VMEM, u.sum_vsize_kib * 1024),
                    tres(PAGES, u.sum_pages),
                ],
                vec![tres(ENERGY, 0), tres(DISK, u.sum_disk_write / n)],
                vec![tres(ENERGY, 0), tres(DISK, u.sum_disk_write)],
            )
        }
        None => Default::default(),
    };
    s.set("tres/requested/average", in_ave);
    s.set("tres/requested/total", in_tot);
    s.set("tres/consumed/average", out_ave);
    s.set("tres/consumed/total", out_tot);
    let mut alloc = vec![
        tres(CPU, u64::from(st.ncpus)),
        tres(MEM, step_mem_mb(job, st)),
        tres(NODE, nodes.len().max(1) as u64),
    ];
    let gpus = jobfmt::gpu_count(job);
    if gpus > 0 && st.id == "batch" {
        alloc.push(tres(GPU, gpus));
    }
    s.set("tres/allocated", alloc);
    s
}

/// One job object, keys in `parse_job` order. `with_steps` is false under `-X`.
pub fn job_object(
    job: &Job,
    cluster: &str,
    now: i64,
    with_steps: bool,
    user_name: &dyn Fn(u32) -> String,
) -> J {
    let started = job.start_time.is_some();
    let spec = &job.spec;
    let mut j = J::obj();
    j.set("account", job.account.as_str());
    j.set("comment/administrator", J::Null);
    j.set(
        "allocation_nodes",
        if started { jobfmt::node_count(job) } else { 0 },
    );
    j.set("array/job_id", job.array_job_id);
    j.set(
        "array/limits/max/running/tasks",
        job.array.as_ref().map_or(0, |a| a.throttle),
    );
    j.set(
        "array/task",
        match (&job.array, job.array_task_id) {
            (Some(a), None) if !a.tasks.is_empty() => J::from(a.pending_text(false)),
            _ => J::Null,
        },
    );
    j.set("array/task_id", job.array_task_id);
    j.set(
        "association",
        J::obj()
            .with("account", job.account.as_str())
            .with("cluster", cluster)
            .with("partition", J::Null)
            .with("user", job.user.as_str()),
    );
    j.set("cluster", cluster);
    j.set("constraints", spec.constraint.clone().unwrap_or_default());
    j.set("container", J::Null);
    j.set("derived_exit_code", exit_code(job.derived_exit));
    j.set("comment/job", spec.comment.clone());
    j.set("time/elapsed", job.run_secs(now));
    j.set("time/eligible", job.eligible_time.unwrap_or(0));
    j.set("time/end", job.end_time.unwrap_or(0));
    // slurmdbd keeps 0:0 as a cancelled or timed-out job's own exit (as sacct's
    // ExitCode column shows); the batch step keeps the signal.
    let exit = if matches!(job.state, JobState::Cancelled | JobState::Timeout) {
        ExitStatus::default()
    } else {
        job.exit
    };
    j.set("exit_code", exit_code(exit));
    j.set(
        "flags",
        vec![
            J::from("CLEAR_SCHEDULING"),
            J::from(if started {
                "STARTED_ON_SCHEDULE"
            } else {
                "NOT_SET"
            }),
        ],
    );
    j.set("group", job.group.as_str());
    j.set("het/job_id", job.het.map_or(0, |h| h.job_id));
    j.set("het/job_offset", job.het.map(|h| h.offset));
    j.set("job_id", job.id);
    j.set("name", spec.name.as_str());
    j.set("mcs/label", "");
    j.set(
        "nodes",
        if job.alloc.is_some() {
            job.nodelist()
        } else {
            "None assigned".into()
        },
    );
    j.set("partition", job.partition.as_str());
    j.set("priority", job.priority);
    j.set("qos", job.qos.as_str());
    j.set("required/CPUs", job.req_cpus);
    j.set(
        "required/memory",
        match job.req_mem {
            MemReq::PerCpu(m) | MemReq::PerNode(m) => m,
        },
    );
    j.set("kill_request_user", job.cancelled_by.map(user_name));
    j.set("reservation/id", 0u32);
    // Slurm 22.05 dumps this field through its integer parser (0 without a
    // reservation); the name is given when there is one.
    j.set(
        "reservation/name",
        match &spec.reservation {
            Some(r) => J::from(r.as_str()),
            None => J::from(0u32),
        },
    );
    j.set("time/start", job.start_time.unwrap_or(0));
    j.set("state/current", job.state.long());
    j.set("state/reason", job.reason.to_string());
    j.set("time/submission", job.submit_time);
    let steps: Vec<J> = if with_steps {
        job.steps
            .iter()
            .map(|st| step_object(job, st, now, user_name))
            .collect()
    } else {
        Vec::new()
    };
    j.set("steps", steps);
    j.set("time/suspended", job.suspended_secs);
    j.set("comment/system", J::Null);
    let usages = || job.steps.iter().filter_map(|s| s.usage());
    cpu_time(
        &mut j,
        "time/system",
        usages().map(|u| u.sys_cpu_secs).sum(),
    );
    j.set(
        "time/limit",
        match job.time_limit {
            TimeLimit::Minutes(m) => J::from(m),
            TimeLimit::Seconds(s) => J::from(s.div_ceil(60)),
            TimeLimit::Unlimited => J::Null,
        },
    );
    cpu_time(
        &mut j,
        "time/total",
        job.steps.iter().map(|s| s.cpu_secs).sum(),
    );
    j.set(
        "tres/allocated",
        if started { job_tres(job) } else { Vec::new() },
    );
    j.set("tres/requested", job_tres(job));
    j.set("user", job.user.as_str());
    cpu_time(&mut j, "time/user", usages().map(|u| u.user_cpu_secs).sum());
    j.set(
        "wckey",
        J::obj().with("wckey", "").with("flags", J::Arr(Vec::new())),
    );
    j.set("working_directory", spec.work_dir.as_str());
    j
}

/// The whole `sacct --json` document for `jobs` (already selected and ordered).
pub fn render(
    jobs: &[&Job],
    cluster: &str,
    slurm_version: &str,
    now: i64,
    with_steps: bool,
    user_name: &dyn Fn(u32) -> String,
) -> String {
    let doc = slurmjson::document(
        slurmjson::meta_db38(slurm_version),
        "jobs",
        jobs.iter()
            .map(|j| job_object(j, cluster, now, with_steps, user_name))
            .collect(),
    );
    slurmjson::to_text(&doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::jobfmt::testjobs::{T0, ended, job, running};
    use serde_json::Value;

    fn name(uid: u32) -> String {
        if uid == 2001 {
            "alice".into()
        } else {
            uid.to_string()
        }
    }

    fn batch_step(exit: ExitStatus, state: JobState) -> StepRecord {
        StepRecord {
            id: "batch".into(),
            name: "batch".into(),
            state,
            exit,
            start_time: T0 + 3,
            end_time: Some(T0 + 5),
            nodes: "node01".into(),
            ncpus: 1,
            ntasks: 1,
            max_rss_kib: 3372,
            cpu_secs: 0.25,
            detail: None,
            usage: Some(Box::new(StepUsage {
                ntasks: 1,
                max_rss_kib: 3372,
                max_rss_node: "node01".into(),
                sum_rss_kib: 3372,
                peak_sum_rss_kib: 3372,
                max_vsize_kib: 78900,
                max_vsize_node: "node01".into(),
                sum_vsize_kib: 78900,
                max_pages_node: "node01".into(),
                min_cpu_secs: 0.25,
                min_cpu_node: "node01".into(),
                max_cpu_secs: 0.25,
                max_cpu_node: "node01".into(),
                sum_cpu_secs: 0.25,
                user_cpu_secs: 0.2,
                sys_cpu_secs: 0.05,
                max_disk_read_node: "node01".into(),
                max_disk_write: 1,
                max_disk_write_node: "node01".into(),
                sum_disk_write: 1,
                ..StepUsage::default()
            })),
        }
    }

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    #[test]
    fn job_keys_follow_the_dbv0038_table() {
        let mut j = ended(
            running(job(125, "env.sh"), 1, T0 + 3),
            JobState::Completed,
            ExitStatus::default(),
            T0 + 5,
        );
        j.steps
            .push(batch_step(ExitStatus::default(), JobState::Completed));
        let text = slurmjson::to_text(&job_object(&j, "anchor", T0 + 9, true, &name));
        // serde_json sorts keys, so read the order from the text itself.
        let order: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("  \"") && !l.starts_with("   "))
            .map(|l| l.trim().split('"').nth(1).unwrap())
            .collect();
        assert_eq!(
            order,
            vec![
                "account",
                "comment",
                "allocation_nodes",
                "array",
                "association",
                "cluster",
                "constraints",
                "container",
                "derived_exit_code",
                "time",
                "exit_code",
                "flags",
                "group",
                "het",
                "job_id",
                "name",
                "mcs",
                "nodes",
                "partition",
                "priority",
                "qos",
                "required",
                "kill_request_user",
                "reservation",
                "state",
                "steps",
                "tres",
                "user",
                "wckey",
                "working_directory",
            ]
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            keys(&v["time"]),
            vec![
                "elapsed",
                "eligible",
                "end",
                "limit",
                "start",
                "submission",
                "suspended",
                "system",
                "total",
                "user"
            ]
        );
        assert!(text.contains("\"time\": {\n    \"elapsed\": 2,\n    \"eligible\""));
        assert_eq!(v["job_id"], 125);
        assert_eq!(v["state"]["current"], "COMPLETED");
        assert_eq!(v["exit_code"]["status"], "SUCCESS");
        assert_eq!(v["time"]["limit"], 60);
        assert_eq!(v["flags"][1], "STARTED_ON_SCHEDULE");
        let alloc = &v["tres"]["allocated"];
        assert_eq!(alloc[0]["type"], "cpu");
        assert_eq!(alloc[1]["type"], "mem");
        assert_eq!(alloc[1]["count"], 400);
        let st = &v["steps"][0];
        assert_eq!(st["step"]["id"], "batch");
        assert_eq!(st["nodes"]["list"][0], "node01");
        assert_eq!(st["tres"]["requested"]["max"][1]["count"], 3372 * 1024);
        assert_eq!(st["tres"]["requested"]["max"][1]["node"], "node01");
        assert_eq!(st["time"]["user"]["microseconds"], 200_000);
        assert_eq!(st["task"]["distribution"], "Unknown");
    }

    #[test]
    fn step_keys_follow_foreach_step_then_the_table() {
        let j = running(job(5, "x"), 1, T0);
        let st = batch_step(ExitStatus::default(), JobState::Completed);
        let text = serde_json::to_string(&step_object(&j, &st, T0 + 9, &name)).unwrap();
        let order: Vec<&str> = [
            "\"nodes\":{\"list\"",
            "\"tres\":{\"requested\":{\"max\"",
            "\"time\":{\"elapsed\"",
            "\"exit_code\"",
            "\"tasks\"",
            "\"pid\"",
            "\"CPU\"",
            "\"kill_request_user\"",
            "\"state\"",
            "\"statistics\"",
            "\"step\":{\"job_id\"",
            "\"task\":{\"distribution\"",
        ]
        .to_vec();
        let mut last = 0;
        for k in order {
            let at = text
                .find(k)
                .unwrap_or_else(|| panic!("{k} missing: {text}"));
            assert!(at >= last, "{k} out of order: {text}");
            last = at;
        }
        assert!(text.contains(r#""nodes":{"list":["node01"],"count":1,"range":"node01"}"#));
        assert!(text.contains(r#""consumed":{"max":[{"type":"energy","name":"","id":3,"count":0,"task":0,"node":"node01"},{"type":"fs","name":"disk","id":6,"count":1,"task":0,"node":"node01"}]"#), "{text}");
    }

    #[test]
    fn exit_codes_failed_signalled_and_cancelled() {
        assert_eq!(
            serde_json::to_string(&exit_code(ExitStatus { code: 3, signal: 0 })).unwrap(),
            r#"{"status":"ERROR","return_code":3}"#
        );
        assert_eq!(
            serde_json::to_string(&exit_code(ExitStatus { code: 0, signal: 9 })).unwrap(),
            r#"{"status":"SIGNALED","return_code":null,"signal":{"signal_id":9,"name":"Killed"}}"#
        );
        let mut j = ended(
            running(job(7, "c"), 1, T0),
            JobState::Cancelled,
            ExitStatus {
                code: 0,
                signal: 15,
            },
            T0 + 4,
        );
        j.cancelled_by = Some(2001);
        let v = serde_json::to_value(job_object(&j, "anchor", T0 + 9, true, &name)).unwrap();
        assert_eq!(v["state"]["current"], "CANCELLED");
        assert_eq!(v["exit_code"]["status"], "SUCCESS");
        assert_eq!(v["kill_request_user"], "alice");
    }

    #[test]
    fn a_pending_job_has_no_allocation() {
        let j = job(9, "wait");
        let doc = render(&[&j], "anchor", "22.05.8", T0 + 1, true, &name);
        let v: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["meta"]["plugin"]["type"], "openapi/dbv0.0.38");
        assert!(doc.contains("\"type\": \"openapi\\/dbv0.0.38\""));
        let jv = &v["jobs"][0];
        assert_eq!(jv["state"]["current"], "PENDING");
        assert_eq!(jv["nodes"], "None assigned");
        assert_eq!(jv["tres"]["allocated"], Value::Array(vec![]));
        assert_eq!(jv["tres"]["requested"][0]["count"], 1);
        assert_eq!(jv["time"]["start"], 0);
        assert_eq!(jv["flags"][1], "NOT_SET");
        assert_eq!(jv["steps"], Value::Array(vec![]));
    }
}
