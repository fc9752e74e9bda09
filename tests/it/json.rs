//! `--json` of sacct, sinfo, squeue and `scontrol show licenses` through the real
//! front-ends: the documents parse, carry the real job, step, TRES, node and license
//! values, and keep Slurm 22.05's key order (openapi/dbv0.0.38 for sacct).

use crate::harness::*;
use serde_json::Value;
use std::time::Duration;

/// The keys of the first object at `indent` spaces after the line that opens `list`
/// (`"jobs": [`), in text order; the whole text when `list` is empty.
fn first_object_keys_in(text: &str, list: &str, indent: usize) -> Vec<String> {
    let body = match text.find(&format!("\"{list}\": [")) {
        Some(i) if !list.is_empty() => &text[i..],
        _ => text,
    };
    let pre = " ".repeat(indent);
    let mut keys = Vec::new();
    for l in body.lines().skip(usize::from(!list.is_empty())) {
        if l.starts_with(&format!("{pre}\"")) {
            let k = l.trim().split('"').nth(1).unwrap_or("").to_string();
            if keys.contains(&k) {
                break;
            }
            keys.push(k);
        }
    }
    keys
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn sacct_sinfo_squeue_and_licenses_as_json() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[licenses]\nmatlab = 3\n",
        ..Setup::default()
    });
    let ok = c.submit(&["-J", "two", "-n", "2", "--wrap", "srun true"]);
    let bad = c.submit(&["-J", "three", "--wrap", "exit 3"]);
    c.wait_done(ok);
    c.wait_done(bad);
    let run = c.submit(&["-J", "lic", "-L", "matlab:2", "--wrap", "sleep 60"]);
    c.wait_state(run, &["RUNNING"], Duration::from_secs(30));
    let held = c.submit(&["-J", "held", "-H", "--wrap", "true"]);

    // sacct: the dbv0.0.38 job objects in Slurm's key order, with real values.
    let text = c.ok("sacct", &["--json", "-j", &format!("{ok},{bad},{held}")]);
    assert!(
        text.starts_with("{\n  \"meta\": {\n    \"plugin\": {\n"),
        "{text}"
    );
    assert!(text.contains("\"type\": \"openapi\\/dbv0.0.38\""));
    let v = parse(&text);
    let jobs = v["jobs"].as_array().unwrap();
    let ids: Vec<u64> = jobs.iter().map(|j| j["job_id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![u64::from(ok), u64::from(bad), u64::from(held)]);
    assert_eq!(
        first_object_keys_in(&text, "jobs", 6),
        [
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
    let (j_ok, j_bad, j_held) = (&jobs[0], &jobs[1], &jobs[2]);
    assert_eq!(j_ok["name"], "two");
    assert_eq!(j_ok["cluster"], "testc");
    assert_eq!(j_ok["state"]["current"], "COMPLETED");
    assert_eq!(j_ok["exit_code"]["status"], "SUCCESS");
    assert_eq!(j_ok["exit_code"]["return_code"], 0);
    assert_eq!(j_ok["nodes"], c.node());
    assert_eq!(j_ok["partition"], "debug");
    assert_eq!(j_ok["time"]["limit"], 60);
    assert!(
        j_ok["time"]["start"].as_i64().unwrap() >= j_ok["time"]["submission"].as_i64().unwrap()
    );
    let tres_count = |list: &Value, ty: &str| -> Option<u64> {
        list.as_array()?
            .iter()
            .find(|t| t["type"] == ty)
            .and_then(|t| t["count"].as_u64())
    };
    assert_eq!(tres_count(&j_ok["tres"]["allocated"], "cpu"), Some(2));
    assert_eq!(tres_count(&j_ok["tres"]["allocated"], "node"), Some(1));
    assert_eq!(tres_count(&j_ok["tres"]["requested"], "cpu"), Some(2));
    // Steps: the batch step and the srun step 0, each with its own exit and TRES.
    let steps = j_ok["steps"].as_array().unwrap();
    let step_ids: Vec<String> = steps
        .iter()
        .map(|s| s["step"]["id"].to_string().trim_matches('"').to_string())
        .collect();
    assert!(step_ids.contains(&"batch".to_string()), "{step_ids:?}");
    assert!(step_ids.contains(&"0".to_string()), "{step_ids:?}");
    for s in steps {
        assert_eq!(s["step"]["job_id"], u64::from(ok));
        assert_eq!(s["state"], "COMPLETED");
        assert_eq!(s["exit_code"]["status"], "SUCCESS");
        assert_eq!(s["nodes"]["range"], c.node());
        assert_eq!(s["nodes"]["list"][0], c.node());
        assert!(tres_count(&s["tres"]["allocated"], "cpu").unwrap() >= 1);
        assert!(s["tres"]["requested"]["max"].is_array());
    }
    let batch = steps.iter().find(|s| s["step"]["id"] == "batch").unwrap();
    assert_eq!(tres_count(&batch["tres"]["allocated"], "cpu"), Some(2));
    assert_eq!(
        first_object_keys_in(&serde_json::to_string_pretty(batch).unwrap(), "", 2).len(),
        batch.as_object().unwrap().len()
    );
    assert_eq!(j_bad["state"]["current"], "FAILED");
    assert_eq!(j_bad["exit_code"]["status"], "ERROR");
    assert_eq!(j_bad["exit_code"]["return_code"], 3);
    assert_eq!(j_held["state"]["current"], "PENDING");
    assert_eq!(j_held["state"]["reason"], "JobHeldUser");
    assert_eq!(j_held["nodes"], "None assigned");
    assert_eq!(j_held["steps"], Value::Array(vec![]));
    // -X: no steps.
    let v = parse(&c.ok("sacct", &["--json", "-X", "-j", &ok.to_string()]));
    assert_eq!(v["jobs"][0]["steps"], Value::Array(vec![]));
    // sacct filters still apply under --json.
    let v = parse(&c.ok(
        "sacct",
        &["--json", "-X", "-s", "F", "-S", "now-1hour", "-E", "now"],
    ));
    let ids: Vec<u64> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, vec![u64::from(bad)]);

    // sinfo: the node with its CPUs, memory, state and partitions.
    let text = c.ok("sinfo", &["--json"]);
    assert!(!text.ends_with('\n'));
    let v = parse(&text);
    let n = &v["nodes"][0];
    assert_eq!(n["name"], c.node());
    assert_eq!(n["cpus"], 4);
    assert_eq!(n["real_memory"], 4000);
    assert_eq!(n["state"], "mixed");
    assert_eq!(n["alloc_cpus"], 1);
    assert_eq!(n["idle_cpus"], 3);
    assert_eq!(n["partitions"], serde_json::json!(["debug"]));
    assert_eq!(n["tres"], "cpu=4,mem=4000M,billing=4");
    assert_eq!(
        first_object_keys_in(&text, "nodes", 6)[..5],
        [
            "architecture",
            "burstbuffer_network_address",
            "boards",
            "boot_time",
            "comment"
        ]
    );
    c.ok(
        "scontrol",
        &[
            "update",
            &format!("NodeName={}", c.node()),
            "State=DRAIN",
            "Reason=json",
        ],
    );
    let v = parse(&c.ok("sinfo", &["--json"]));
    assert_eq!(v["nodes"][0]["state"], "mixed");
    assert_eq!(v["nodes"][0]["state_flags"], serde_json::json!(["DRAIN"]));
    assert_eq!(v["nodes"][0]["reason"], "json");
    c.ok(
        "scontrol",
        &["update", &format!("NodeName={}", c.node()), "State=RESUME"],
    );

    // scontrol show licenses: totals from the config, use from the running job.
    assert_eq!(
        c.ok("scontrol", &["show", "lic"]),
        "LicenseName=matlab\n    Total=3 Used=2 Free=1 Reserved=0 Remote=no\n"
    );
    assert_eq!(
        c.ok("scontrol", &["-o", "show", "licenses", "matlab"]),
        "LicenseName=matlab Total=3 Used=2 Free=1 Reserved=0 Remote=no\n"
    );
    let v = parse(&c.ok("scontrol", &["show", "licenses", "--json"]));
    assert_eq!(v["licenses"][0]["LicenseName"], "matlab");
    assert_eq!(v["licenses"][0]["Total"], 3);
    assert_eq!(v["licenses"][0]["Used"], 2);
    assert_eq!(v["licenses"][0]["Free"], 1);

    // squeue: a pending job has no job_resources; a running one lists its cores.
    let v = parse(&c.ok("squeue", &["--json"]));
    let by_id = |id: u32| {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job_id"] == u64::from(id))
            .cloned()
            .unwrap()
    };
    assert!(by_id(held).get("job_resources").is_none());
    assert_eq!(by_id(run)["job_resources"]["allocated_cores"], 1);
    assert_eq!(v["meta"]["plugin"]["type"], "openapi/v0.0.38");
    c.ok("scancel", &[&run.to_string()]);
}
