//! Whole-process figure (not a criterion bench): fills a running controller's queue
//! with N pending jobs over one connection, as sbatch would submit them (the caller's
//! real environment exported, a short script), so that `scripts/rss.sh` can read the
//! controller's resident memory. Run through `scripts/rss.sh`, which starts a private
//! controller; by hand: `SLUICE_CONF=… cargo bench --bench queue_rss -- N`.

use sluice::cli::client::Client;
use sluice::config::Config;
use sluice::model::JobSpec;
use sluice::proto::{Request, Response};

fn main() {
    let n: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let cfg = Config::load().expect("SLUICE_CONF loads");
    let mut client = Client::connect_with(&cfg).expect("controller answers");
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let cwd = std::env::current_dir().unwrap().display().to_string();
    let t0 = std::time::Instant::now();
    for i in 0..n {
        let spec = JobSpec {
            name: format!("fill{i}"),
            script: "#!/bin/sh\n# This script was created by sbatch --wrap.\n\ntrue\n".into(),
            work_dir: cwd.clone(),
            submit_dir: cwd.clone(),
            submit_host: "bench".into(),
            stdout: Some("/dev/null".into()),
            environment: env.clone().into(),
            ..JobSpec::default()
        };
        match client.request(&Request::Submit {
            spec: Box::new(spec),
            test_only: false,
            het: Vec::new(),
        }) {
            Ok(Response::Submitted { .. }) => {}
            other => panic!("submit {i}: {other:?}"),
        }
    }
    eprintln!(
        "submitted {n} jobs in {:.1} s ({} environment variables each)",
        t0.elapsed().as_secs_f64(),
        env.len()
    );
}
