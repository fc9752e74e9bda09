//! Jobs as `squeue --json` and `scontrol show job --json` print them: Slurm 22.05's
//! OpenAPI v0.0.38 job objects (`../shared/golden/queue_squeue_json.txt`), with the
//! fields in Slurm's order. Fields sluice has no notion of (federation, burst buffers,
//! MCS labels, …) carry the empty value Slurm prints for them.

use crate::cli::jobfmt;
use crate::cli::slurmjson::{self, J};
use crate::model::job::MemReq;
use crate::model::{Job, TimeLimit};

/// A wait(2)-style status (`code << 8 | signal`), as Slurm's JSON gives exit codes.
fn raw_status(e: crate::model::ExitStatus) -> i64 {
    (i64::from(e.code) << 8) | i64::from(e.signal)
}

fn or_null<T: Into<J>>(v: Option<T>) -> J {
    v.map_or(J::Null, Into::into)
}

/// One job object, its fields in Slurm's order. `cluster` is the cluster's name.
fn job_object(job: &Job, cluster: &str, cores_per_socket: &dyn Fn(&str) -> Option<u32>) -> J {
    let spec = &job.spec;
    let alloc = job.alloc.as_ref().filter(|a| !a.nodes.is_empty());
    let cpus = jobfmt::cpu_count(job);
    let nodes_text = alloc
        .map(|a| crate::model::hostlist::compress(&a.nodes))
        .unwrap_or_default();
    // Pending jobs have no `job_resources` at all (golden queue_squeue_json).
    let job_resources = alloc.map(|a| {
        let nodes: Vec<J> = a
            .nodes
            .iter()
            .enumerate()
            .map(|(k, n)| {
                let mut sockets = J::obj();
                for c in a.cpu_ids.get(k).into_iter().flatten() {
                    let (sock, core) = match cores_per_socket(n) {
                        Some(per) if per > 0 => (c / per, c % per),
                        _ => (0, *c),
                    };
                    sockets.set(&format!("{sock}/cores/{core}"), "allocated");
                }
                J::obj()
                    .with("sockets", sockets)
                    .with("nodename", n.as_str())
                    .with("cpus_used", 0u32)
                    .with("memory_used", 0u32)
                    .with("memory_allocated", a.mem_per_node)
            })
            .collect();
        J::obj()
            .with("nodes", nodes_text.as_str())
            .with("allocated_cores", a.cpus.iter().sum::<u32>())
            .with("allocated_hosts", a.nodes.len())
            .with("allocated_nodes", nodes)
    });
    let gres_detail: Vec<J> = alloc
        .map(|a| {
            a.gres
                .iter()
                .filter(|g| !g.is_empty())
                .map(|g| J::from(jobfmt::gres_alloc_text(g, true)))
                .collect()
        })
        .unwrap_or_default();
    let array_task_string = match (&job.array, job.array_task_id) {
        (Some(a), None) if !a.tasks.is_empty() => a.pending_text(a.throttle > 0),
        _ => String::new(),
    };
    let tres_req = jobfmt::tres_scontrol(job);
    let (mem_per_node, mem_per_cpu) = match job.req_mem {
        MemReq::PerNode(m) => (Some(m), None),
        MemReq::PerCpu(m) => (None, Some(m)),
    };
    let time_limit = match job.time_limit {
        TimeLimit::Minutes(m) => J::from(m),
        // Slurm's INFINITE (NO_VAL - 1 in a 32-bit field).
        _ => J::from(u32::MAX - 1),
    };
    let node_count = jobfmt::node_count(job);
    let path = |p: &Option<String>| p.clone().unwrap_or_default();
    let het = job.het;
    let mut fields: Vec<(&'static str, J)> = vec![
        ("account", job.account.clone().into()),
        ("accrue_time", job.eligible_time.unwrap_or(0).into()),
        ("admin_comment", "".into()),
        ("array_job_id", job.array_job_id.into()),
        ("array_task_id", or_null(job.array_task_id)),
        (
            "array_max_tasks",
            job.array.as_ref().map_or(0, |a| a.throttle).into(),
        ),
        ("array_task_string", array_task_string.into()),
        ("association_id", 0.into()),
        ("batch_features", "".into()),
        ("batch_flag", (!spec.alloc_only).into()),
        (
            "batch_host",
            alloc.map(|a| a.nodes[0].clone()).unwrap_or_default().into(),
        ),
        ("flags", J::Arr(vec![])),
        ("burst_buffer", "".into()),
        ("burst_buffer_state", "".into()),
        ("cluster", cluster.into()),
        ("cluster_features", "".into()),
        ("command", spec.command.clone().into()),
        ("comment", spec.comment.clone().unwrap_or_default().into()),
        ("container", "".into()),
        ("contiguous", spec.contiguous.into()),
        ("core_spec", J::Null),
        ("thread_spec", J::Null),
        ("cores_per_socket", J::Null),
        (
            "billable_tres",
            job.billing.unwrap_or(f64::from(cpus)).into(),
        ),
        ("cpus_per_task", or_null(spec.cpus_per_task)),
        ("cpu_frequency_minimum", J::Null),
        ("cpu_frequency_maximum", J::Null),
        ("cpu_frequency_governor", J::Null),
        (
            "cpus_per_tres",
            spec.cpus_per_gpu
                .map(|c| format!("gres:gpu:{c}"))
                .unwrap_or_default()
                .into(),
        ),
        ("deadline", spec.deadline.unwrap_or(0).into()),
        ("delay_boot", 0.into()),
        (
            "dependency",
            job.depend
                .as_ref()
                .map(|d| d.to_string())
                .unwrap_or_default()
                .into(),
        ),
        ("derived_exit_code", raw_status(job.derived_exit).into()),
        ("eligible_time", job.eligible_time.unwrap_or(0).into()),
        ("end_time", job.end_time.unwrap_or(0).into()),
        ("excluded_nodes", path(&spec.exclude).into()),
        ("exit_code", raw_status(job.exit).into()),
        ("features", path(&spec.constraint).into()),
        ("federation_origin", "".into()),
        ("federation_siblings_active", "".into()),
        ("federation_siblings_viable", "".into()),
        ("gres_detail", gres_detail.into()),
        ("group_id", job.gid.into()),
        ("group_name", job.group.clone().into()),
        ("job_id", job.id.into()),
        ("job_state", job.state_long().into()),
        (
            "last_sched_evaluation",
            job.last_sched_eval.unwrap_or(0).into(),
        ),
        (
            "licenses",
            crate::model::gres::fmt_licenses(&spec.licenses)
                .replace("(null)", "")
                .into(),
        ),
        ("max_cpus", 0.into()),
        ("max_nodes", spec.nodes_max.unwrap_or(0).into()),
        ("mcs_label", "".into()),
        (
            "memory_per_tres",
            spec.mem_per_gpu
                .map(|m| format!("gres:gpu:{m}"))
                .unwrap_or_default()
                .into(),
        ),
        ("name", spec.name.clone().into()),
        ("nodes", nodes_text.clone().into()),
        (
            "nice",
            if spec.nice == 0 {
                J::Null
            } else {
                spec.nice.into()
            },
        ),
        ("tasks_per_core", J::Null),
        ("tasks_per_node", spec.ntasks_per_node.unwrap_or(0).into()),
        ("tasks_per_socket", J::Null),
        ("tasks_per_board", 0.into()),
        ("cpus", cpus.into()),
        ("node_count", node_count.into()),
        ("tasks", job.req_tasks.into()),
        ("het_job_id", het.map_or(0, |h| h.job_id).into()),
        (
            "het_job_id_set",
            het.map(|h| {
                if h.size > 1 {
                    format!("{}-{}", h.job_id, h.job_id + h.size - 1)
                } else {
                    h.job_id.to_string()
                }
            })
            .unwrap_or_default()
            .into(),
        ),
        ("het_job_offset", het.map_or(0, |h| h.offset).into()),
        ("partition", job.partition.clone().into()),
        ("prefer", "".into()),
        ("memory_per_node", or_null(mem_per_node)),
        ("memory_per_cpu", or_null(mem_per_cpu)),
        (
            "minimum_cpus_per_node",
            crate::cli::jobfmt::min_cpus_per_node(job).into(),
        ),
        (
            "minimum_tmp_disk_per_node",
            job.spec.tmp_disk.unwrap_or(0).into(),
        ),
        ("preempt_time", 0.into()),
        ("pre_sus_time", 0.into()),
        ("priority", job.priority.into()),
        ("profile", J::Null),
        ("qos", job.qos.clone().into()),
        ("reboot", false.into()),
        ("required_nodes", path(&spec.nodelist).into()),
        ("requeue", spec.requeue.unwrap_or(true).into()),
        ("resize_time", 0.into()),
        ("restart_cnt", job.restarts.into()),
        (
            "resv_name",
            spec.reservation.clone().unwrap_or_default().into(),
        ),
        ("shared", J::Null),
        (
            "show_flags",
            J::Arr(vec![
                "SHOW_ALL".into(),
                "SHOW_DETAIL".into(),
                "SHOW_LOCAL".into(),
            ]),
        ),
        ("sockets_per_board", 0.into()),
        ("sockets_per_node", or_null(spec.sockets_per_node)),
        ("start_time", job.start_time.unwrap_or(0).into()),
        ("state_description", "".into()),
        ("state_reason", job.reason.to_string().into()),
        ("standard_error", path(&spec.stderr).into()),
        (
            "standard_input",
            spec.stdin
                .clone()
                .unwrap_or_else(|| "/dev/null".into())
                .into(),
        ),
        ("standard_output", path(&spec.stdout).into()),
        ("submit_time", job.submit_time.into()),
        ("suspend_time", 0.into()),
        ("system_comment", "".into()),
        ("time_limit", time_limit),
        ("time_minimum", spec.time_min.unwrap_or(0).into()),
        ("threads_per_core", or_null(spec.threads_per_core)),
        ("tres_bind", "".into()),
        ("tres_freq", "".into()),
        (
            "tres_per_job",
            spec.gpus
                .as_ref()
                .map(|g| format!("gres:{g}"))
                .unwrap_or_default()
                .into(),
        ),
        (
            "tres_per_node",
            Some(spec.tres_per_node())
                .filter(|t| t != "N/A")
                .unwrap_or_default()
                .into(),
        ),
        (
            "tres_per_socket",
            spec.gpus_per_socket
                .as_ref()
                .map(|g| format!("gres:{g}"))
                .unwrap_or_default()
                .into(),
        ),
        (
            "tres_per_task",
            spec.gpus_per_task
                .as_ref()
                .map(|g| format!("gres:{g}"))
                .unwrap_or_default()
                .into(),
        ),
        ("tres_req_str", tres_req.clone().into()),
        (
            "tres_alloc_str",
            if alloc.is_some() {
                tres_req
            } else {
                String::new()
            }
            .into(),
        ),
        ("user_id", job.uid.into()),
        ("user_name", job.user.clone().into()),
        ("wckey", "".into()),
        ("current_working_directory", spec.work_dir.clone().into()),
    ];
    if let Some(r) = job_resources {
        let at = fields
            .iter()
            .position(|(k, _)| *k == "job_state")
            .unwrap_or(fields.len());
        fields.insert(at, ("job_resources", r));
    }
    J::Obj(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// The whole document: `meta`, `errors` and `jobs`, in Slurm's text style (no final
/// newline, as Slurm prints it). `cores_per_socket` maps a node name to its cores per
/// socket, so allocated CPUs are listed under their socket as Slurm does (`None`: all
/// under socket 0).
pub fn render(
    jobs: &[&Job],
    cluster: &str,
    slurm_version: &str,
    cores_per_socket: &dyn Fn(&str) -> Option<u32>,
) -> String {
    let doc = slurmjson::document(
        slurmjson::meta_v38(slurm_version),
        "jobs",
        jobs.iter()
            .map(|j| job_object(j, cluster, cores_per_socket))
            .collect(),
    );
    slurmjson::to_text(&doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::jobfmt::testjobs::{T0, job, running};
    use serde_json::{Value, json};

    #[test]
    fn a_running_job_has_slurms_fields_in_slurms_order() {
        let mut j = running(job(7, "train"), 2, T0 + 5);
        if let Some(a) = j.alloc.as_mut() {
            a.cpu_ids = vec![vec![0, 1]];
        }
        let text = serde_json::to_string(&job_object(&j, "anchor", &|_| None)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 111);
        assert!(
            text.starts_with(r#"{"account":"research","accrue_time":"#),
            "{text}"
        );
        assert!(
            text.contains(r#""wckey":"","current_working_directory":"#),
            "{text}"
        );
        assert_eq!(v["job_id"], 7);
        assert_eq!(v["job_state"], "RUNNING");
        assert_eq!(v["nodes"], "node01");
        assert_eq!(v["batch_host"], "node01");
        assert_eq!(v["cpus"], 2);
        assert_eq!(v["memory_per_cpu"], 400);
        assert_eq!(v["memory_per_node"], Value::Null);
        assert_eq!(v["tres_req_str"], "cpu=2,mem=800M,node=1,billing=2");
        assert_eq!(v["tres_alloc_str"], v["tres_req_str"]);
        assert_eq!(v["job_resources"]["allocated_cores"], 2);
        assert_eq!(
            v["job_resources"]["allocated_nodes"][0]["sockets"]["0"]["cores"]["1"],
            "allocated"
        );
        assert_eq!(v["time_limit"], 60);
        assert_eq!(v["start_time"], T0 + 5);
    }

    #[test]
    fn a_pending_job_and_the_document() {
        let mut j = job(8, "waiting");
        j.reason = crate::model::Reason::Priority;
        let doc = render(&[&j], "anchor", "22.05.8", &|_| None);
        assert!(
            doc.starts_with("{\n  \"meta\": {\n    \"plugin\": {"),
            "{doc}"
        );
        assert!(doc.ends_with("\n}"));
        let v: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["meta"]["Slurm"]["release"], "22.05.8");
        assert_eq!(v["meta"]["Slurm"]["version"]["minor"], 5);
        assert_eq!(v["errors"], json!([]));
        let jv = &v["jobs"][0];
        assert_eq!(jv["job_state"], "PENDING");
        assert_eq!(jv["state_reason"], "Priority");
        assert_eq!(jv["nodes"], "");
        assert_eq!(jv["tres_alloc_str"], "");
        assert_eq!(jv["end_time"], 0);
        assert_eq!(jv["exit_code"], 0);
        assert!(jv.get("job_resources").is_none());
        assert_eq!(jv.as_object().unwrap().len(), 110);
    }

    #[test]
    fn per_socket_gpu_requests() {
        let mut j = job(9, "sock");
        j.spec.gpus_per_socket = Some(crate::model::gres::parse_gpus("a100:1").unwrap());
        j.spec.sockets_per_node = Some(2);
        let v = serde_json::to_value(job_object(&j, "anchor", &|_| None)).unwrap();
        assert_eq!(v["sockets_per_node"], 2);
        assert_eq!(v["tres_per_socket"], "gres:gpu:a100:1");
        let v = serde_json::to_value(job_object(&job(10, "plain"), "anchor", &|_| None)).unwrap();
        assert_eq!(
            (&v["sockets_per_node"], &v["tres_per_socket"]),
            (&Value::Null, &Value::from(""))
        );
    }

    #[test]
    fn allocated_cores_are_listed_per_socket() {
        let mut j = running(job(7, "train"), 4, T0 + 5);
        if let Some(a) = j.alloc.as_mut() {
            a.cpu_ids = vec![vec![0, 1, 16, 17]];
        }
        let v = serde_json::to_value(job_object(&j, "anchor", &|_| Some(16))).unwrap();
        let r = &v["job_resources"];
        assert_eq!(r["allocated_cores"], 4);
        let s = &r["allocated_nodes"][0]["sockets"];
        assert_eq!(s["0"]["cores"]["1"], "allocated");
        assert_eq!(s["1"]["cores"]["0"], "allocated");
        assert_eq!(s["1"]["cores"]["1"], "allocated");
        assert!(s["0"]["cores"].get("16").is_none());
        let text = serde_json::to_string(&job_object(&j, "anchor", &|_| Some(16))).unwrap();
        assert!(
            text.contains(r#""job_resources":{"nodes":"node01","allocated_cores":4,"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#""nodename":"node01","cpus_used":0,"memory_used":0,"memory_allocated":"#
            ),
            "{text}"
        );
    }

    #[test]
    fn exit_codes_are_wait_statuses() {
        let j = crate::cli::jobfmt::testjobs::ended(
            running(job(9, "bad"), 1, T0),
            crate::model::JobState::Failed,
            crate::model::ExitStatus { code: 1, signal: 0 },
            T0 + 9,
        );
        let v: Value = serde_json::to_value(job_object(&j, "c", &|_| None)).unwrap();
        assert_eq!(v["exit_code"], 256);
    }
}
