//! `sdiag`: controller and scheduler statistics in Slurm's layout (cf. src/sdiag/).
//!
//! The main-cycle and backfill sections are sluice's real counters; the thread, agent
//! and RPC sections describe sluice's shape (one actor, no agent threads) with the
//! labels exporters parse. `--json` prints the same figures as JSON.

use super::getopt::{self, Item, OptSpec, opt};
use super::help;
use crate::cli::client::{Client, answer};
use crate::proto::{Request, Response, SchedStats};
use std::ffi::OsString;
use std::process::ExitCode;

/// `Sun Nov 29 14:56:08 2026`: sdiag's date format, local time.
fn ctime(t: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_opt(t, 0).single() {
        Some(d) => d
            .format("%a %b %e %H:%M:%S %Y")
            .to_string()
            .replace("  ", " "),
        None => t.to_string(),
    }
}

fn mean(sum: u64, n: u64) -> u64 {
    sum.checked_div(n).unwrap_or(0)
}

/// The text report.
pub fn render(s: &SchedStats) -> String {
    let mut o = String::new();
    let mut line = |l: String| {
        o.push_str(&l);
        o.push('\n');
    };
    line("*******************************************************".into());
    line(format!("sdiag output at {} ({})", ctime(s.now), s.now));
    line(format!("Data since      {} ({})", ctime(s.since), s.since));
    line("*******************************************************".into());
    line("Server thread count:  1".into());
    line("Agent queue size:     0".into());
    line("Agent count:          0".into());
    line("Agent thread count:   0".into());
    line("DBD Agent queue size: 0".into());
    line(String::new());
    line(format!("Jobs submitted: {}", s.jobs_submitted));
    line(format!("Jobs started:   {}", s.jobs_started));
    line(format!("Jobs completed: {}", s.jobs_completed));
    line(format!("Jobs canceled:  {}", s.jobs_canceled));
    line(format!("Jobs failed:    {}", s.jobs_failed));
    line(String::new());
    line(format!("Job states ts:  {} ({})", ctime(s.now), s.now));
    line(format!("Jobs pending:   {}", s.jobs_pending));
    line(format!("Jobs running:   {}", s.jobs_running));
    line(String::new());
    line("Main schedule statistics (microseconds):".into());
    line(format!("\tLast cycle:   {}", s.main_last_us));
    line(format!("\tMax cycle:    {}", s.main_max_us));
    line(format!("\tTotal cycles: {}", s.main_cycles));
    line(format!(
        "\tMean cycle:   {}",
        mean(s.main_sum_us, s.main_cycles)
    ));
    line(format!(
        "\tMean depth cycle:  {}",
        mean(s.main_depth_sum, s.main_cycles)
    ));
    let minutes = ((s.now - s.main_first).max(60) / 60) as u64;
    line(format!(
        "\tCycles per minute: {}",
        if s.main_cycles == 0 {
            0
        } else {
            s.main_cycles / minutes.max(1)
        }
    ));
    line(format!("\tLast queue length: {}", s.main_last_queue));
    line(String::new());
    line("Backfilling stats".into());
    line(format!(
        "\tTotal backfilled jobs (since last slurm start): {}",
        s.bf_jobs
    ));
    line(format!(
        "\tTotal backfilled jobs (since last stats cycle start): {}",
        s.bf_jobs
    ));
    line("\tTotal backfilled heterogeneous job components: 0".into());
    line(format!("\tTotal cycles: {}", s.bf_cycles));
    match s.bf_last_when {
        Some(t) => line(format!("\tLast cycle when: {} ({t})", ctime(t))),
        None => line("\tLast cycle when: N/A".into()),
    }
    line(format!("\tLast cycle: {}", s.bf_last_us));
    line(format!("\tMax cycle:  {}", s.bf_max_us));
    line(format!("\tMean cycle: {}", mean(s.bf_sum_us, s.bf_cycles)));
    line(format!("\tLast depth cycle: {}", s.bf_last_depth));
    line(format!(
        "\tLast depth cycle (try sched): {}",
        s.bf_last_depth_try
    ));
    line(format!(
        "\tDepth Mean: {}",
        mean(s.bf_depth_sum, s.bf_cycles)
    ));
    line(format!(
        "\tDepth Mean (try depth): {}",
        mean(s.bf_depth_try_sum, s.bf_cycles)
    ));
    line(format!("\tLast queue length: {}", s.bf_last_queue));
    line(format!(
        "\tQueue length mean: {}",
        mean(s.bf_queue_sum, s.bf_cycles)
    ));
    line(format!("\tLast table size: {}", s.bf_last_table));
    line(format!(
        "\tMean table size: {}",
        mean(s.bf_table_sum, s.bf_cycles)
    ));
    line(String::new());
    line("Latency for 1000 calls to gettimeofday(): 0 microseconds".into());
    line(String::new());
    line("Remote Procedure Call statistics by message type".into());
    line(String::new());
    line("Remote Procedure Call statistics by user".into());
    line(String::new());
    line("Pending RPC statistics".into());
    line("\tNo pending RPCs".into());
    o
}

/// The JSON report (`sdiag --json`): the openapi/v0.0.38 diag document (src/plugins/
/// openapi/v0.0.38/diag.c, whose field order it keeps; `sdiag --json` itself came with
/// Slurm 23.02). Figures sluice does not keep (agent threads, RPC tables) are 0 or
/// empty.
pub fn render_json(s: &SchedStats) -> String {
    use crate::cli::slurmjson::{self, J};
    let per_minute = if s.now - s.since > 60 {
        s.main_cycles / ((s.now - s.since) as u64 / 60).max(1)
    } else {
        0
    };
    let st = J::obj()
        .with("rpcs_by_message_type", J::Arr(Vec::new()))
        .with("rpcs_by_user", J::Arr(Vec::new()))
        .with("parts_packed", 1u32)
        .with("req_time", s.now)
        .with("req_time_start", s.since)
        .with("server_thread_count", 1u32)
        .with("agent_queue_size", 0u32)
        .with("agent_count", 0u32)
        .with("agent_thread_count", 0u32)
        .with("dbd_agent_queue_size", 0u32)
        .with("gettimeofday_latency", 0u32)
        .with("schedule_cycle_max", s.main_max_us)
        .with("schedule_cycle_last", s.main_last_us)
        .with("schedule_cycle_total", s.main_cycles)
        .with("schedule_cycle_mean", mean(s.main_sum_us, s.main_cycles))
        .with(
            "schedule_cycle_mean_depth",
            mean(s.main_depth_sum, s.main_cycles),
        )
        .with("schedule_cycle_per_minute", per_minute)
        .with("schedule_queue_length", s.main_last_queue)
        .with("jobs_submitted", s.jobs_submitted)
        .with("jobs_started", s.jobs_started)
        .with("jobs_completed", s.jobs_completed)
        .with("jobs_canceled", s.jobs_canceled)
        .with("jobs_failed", s.jobs_failed)
        .with("jobs_pending", s.jobs_pending)
        .with("jobs_running", s.jobs_running)
        .with("job_states_ts", s.now)
        .with("bf_backfilled_jobs", s.bf_jobs)
        .with("bf_last_backfilled_jobs", 0u32)
        .with("bf_backfilled_het_jobs", 0u32)
        .with("bf_cycle_counter", s.bf_cycles)
        .with("bf_cycle_mean", mean(s.bf_sum_us, s.bf_cycles))
        .with("bf_depth_mean", mean(s.bf_depth_sum, s.bf_cycles))
        .with("bf_depth_mean_try", mean(s.bf_depth_try_sum, s.bf_cycles))
        .with("bf_cycle_last", s.bf_last_us)
        .with("bf_cycle_max", s.bf_max_us)
        .with("bf_queue_len", s.bf_last_queue)
        .with("bf_queue_len_mean", mean(s.bf_queue_sum, s.bf_cycles))
        .with("bf_table_size", s.bf_last_table)
        .with("bf_table_size_mean", mean(s.bf_table_sum, s.bf_cycles))
        .with("bf_when_last_cycle", s.bf_last_when.unwrap_or(0))
        .with("bf_active", false);
    let doc = J::Obj(vec![
        (
            "meta".into(),
            slurmjson::meta_v38(&crate::config::advertised_slurm_version()),
        ),
        ("errors".into(), J::Arr(Vec::new())),
        ("statistics".into(), st),
    ]);
    slurmjson::to_text(&doc)
}

/// sdiag's options (cf. src/sdiag/opts.c), with their `--help` lines.
pub const SPECS: &[OptSpec] = &[
    opt("all", Some('a'), false).doc("", "all statistics (the default)"),
    opt("help", Some('h'), false).doc("", "show this help message"),
    opt("sort-by-id", Some('i'), false).doc("", "sort RPCs by id (accepted)"),
    opt("json", None, false).doc("", "print the statistics as JSON"),
    opt("clusters", Some('M'), true).doc("cluster", "cluster to query (this one only)"),
    opt("cluster", None, true),
    opt("reset", Some('r'), false).doc("", "reset the statistics (not supported by sluice)"),
    opt("sort-by-time", Some('t'), false).doc("", "sort RPCs by total time (accepted)"),
    opt("sort-by-time2", Some('T'), false).doc("", "sort RPCs by average time (accepted)"),
    opt("usage", None, false).doc("", "display a brief usage message"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
];

/// `sdiag [--json] [-a|--all] [-r|--reset]`.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let items = match getopt::parse("sdiag", SPECS, &args) {
        Ok(items) => items,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut json = false;
    for item in items {
        match item {
            Item::Opt("json", _) => json = true,
            Item::Opt("reset", _) => {
                eprintln!("sdiag: error: --reset is not supported by sluice");
                return ExitCode::from(1);
            }
            Item::Opt("version", _) => {
                println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
                return ExitCode::SUCCESS;
            }
            Item::Opt("help", _) => {
                let entries = help::from_getopt(SPECS);
                print!("{}", help::help("sdiag [OPTIONS]", &entries, ""));
                return ExitCode::SUCCESS;
            }
            Item::Opt("usage", _) => {
                print!("{}", help::usage("sdiag", &help::from_getopt(SPECS), ""));
                return ExitCode::SUCCESS;
            }
            Item::Operand(a) => {
                eprintln!("sdiag: error: Unknown argument '{a}'");
                return ExitCode::from(1);
            }
            // -a, -i, -t, -T: one report; -M: this cluster.
            Item::Opt(..) => {}
        }
    }
    let mut client = match Client::connect() {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("sdiag: error: {e}");
            return ExitCode::from(1);
        }
    };
    match client.call(&Request::Stats, answer!(Response::Stats(s) => s)) {
        Ok(s) => {
            print!("{}", if json { render_json(&s) } else { render(&s) });
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sdiag: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_figures() {
        let s = SchedStats {
            since: 1_795_963_835,
            now: 1_795_964_168,
            jobs_submitted: 198,
            jobs_started: 121,
            main_cycles: 78,
            main_last_us: 209,
            main_max_us: 9152,
            main_sum_us: 78 * 547,
            main_first: 1_795_963_835,
            bf_cycles: 5,
            bf_jobs: 10,
            bf_last_when: Some(1_795_964_164),
            bf_last_us: 1144,
            bf_sum_us: 5 * 714,
            bf_last_depth: 7,
            ..Default::default()
        };
        let out = render(&s);
        for want in [
            "Jobs submitted: 198\n",
            "Jobs started:   121\n",
            "Main schedule statistics (microseconds):\n\tLast cycle:   209\n\tMax cycle:    9152\n\tTotal cycles: 78\n\tMean cycle:   547\n",
            "\tCycles per minute: 15\n",
            "\tTotal backfilled jobs (since last slurm start): 10\n",
            "\tTotal cycles: 5\n",
            "\tLast cycle: 1144\n",
            "\tMean cycle: 714\n",
            "\tLast depth cycle: 7\n",
            "Pending RPC statistics\n\tNo pending RPCs\n",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        assert!(out.contains(&format!("({})\n", s.since)));
        let j: serde_json::Value = serde_json::from_str(&render_json(&s)).unwrap();
        assert_eq!(j["statistics"]["bf_backfilled_jobs"], 10);
        assert_eq!(j["statistics"]["schedule_cycle_mean"], 547);
        assert_eq!(j["meta"]["plugin"]["type"], "openapi/v0.0.38");
        let text = render_json(&s);
        let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
        assert!(at("rpcs_by_user") < at("parts_packed"));
        assert!(at("schedule_cycle_max") < at("schedule_cycle_last"));
        assert!(at("job_states_ts") < at("bf_backfilled_jobs"));
        assert!(at("bf_when_last_cycle") < at("bf_active"));
    }
}
