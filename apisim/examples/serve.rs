//! Runs the simulator on its own until Ctrl-C:
//! `cargo run -p apisim --example serve -- --listen 127.0.0.1:PORT --kubeconfig-out FILE --pods N`
//!
//! Other flags: `--namespaces M` (default 10), `--seed S` (default 1), `--churn R` (ops/s, default
//! 0), `--deployments N`, `--expose-fraction F` (default 0.25), `--deployment-churn W` (relative
//! weight of Deployment operations in churn, default 0), `--bookmark-interval-ms MS`,
//! `--history-window N`, `--authentication` (bearer tokens; no token is `system:anonymous`),
//! `--rbac` (RBAC and impersonation enforced; implies `--authentication`),
//! `--token TOKEN,USER[,GROUP...]` (repeatable; the token file's column order), `--admin-token TOKEN` (the kubeconfig's),
//! `--tls` (serve HTTPS with the built-in certificate; kubectl sends credentials only over https),
//! `--sharded-list-and-watch` (the `ShardedListAndWatch` gate: `shardSelector`, KEP-5866).

use std::time::Duration;

use apisim::workload::{Workload, WorkloadConfig};
use apisim::{Sim, SimConfig};

struct Args {
    listen: String,
    kubeconfig_out: Option<String>,
    pods: usize,
    namespaces: usize,
    seed: u64,
    churn: f64,
    deployments: usize,
    expose_fraction: f64,
    deployment_churn: u32,
    config: SimConfig,
    tokens: Vec<(String, String, Vec<String>)>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        listen: "127.0.0.1:0".into(),
        kubeconfig_out: None,
        pods: 0,
        namespaces: 10,
        seed: 1,
        churn: 0.0,
        deployments: 0,
        expose_fraction: 0.25,
        deployment_churn: 0,
        config: SimConfig::default(),
        tokens: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("flag {flag} needs a value"))
        };
        let bad = |flag: &str, v: &str| anyhow::anyhow!("flag {flag}: invalid value {v:?}");
        match flag.as_str() {
            "--listen" => a.listen = val()?,
            "--kubeconfig-out" => a.kubeconfig_out = Some(val()?),
            "--pods" => {
                let v = val()?;
                a.pods = v.parse().map_err(|_| bad("--pods", &v))?
            }
            "--namespaces" => {
                let v = val()?;
                a.namespaces = v.parse().map_err(|_| bad("--namespaces", &v))?
            }
            "--seed" => {
                let v = val()?;
                a.seed = v.parse().map_err(|_| bad("--seed", &v))?
            }
            "--churn" => {
                let v = val()?;
                a.churn = v.parse().map_err(|_| bad("--churn", &v))?
            }
            "--deployments" => {
                let v = val()?;
                a.deployments = v.parse().map_err(|_| bad("--deployments", &v))?
            }
            "--expose-fraction" => {
                let v = val()?;
                a.expose_fraction = v.parse().map_err(|_| bad("--expose-fraction", &v))?
            }
            "--deployment-churn" => {
                let v = val()?;
                a.deployment_churn = v.parse().map_err(|_| bad("--deployment-churn", &v))?
            }
            "--bookmark-interval-ms" => {
                let v = val()?;
                let ms: u64 = v.parse().map_err(|_| bad("--bookmark-interval-ms", &v))?;
                a.config.bookmark_interval = Duration::from_millis(ms);
            }
            "--history-window" => {
                let v = val()?;
                a.config.history_window = v.parse().map_err(|_| bad("--history-window", &v))?
            }
            "--authentication" => a.config.authentication = true,
            "--rbac" => a.config.rbac = true,
            "--tls" => a.config.tls = true,
            "--sharded-list-and-watch" => a.config.sharded_list_and_watch = true,
            "--admin-token" => a.config.admin_token = val()?,
            "--token" => {
                let v = val()?;
                let mut parts = v.split(',');
                let (token, user) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                if token.is_empty() || user.is_empty() {
                    return Err(bad("--token (want TOKEN,USER[,GROUP...])", &v));
                }
                let groups = parts.filter(|g| !g.is_empty()).map(str::to_string);
                a.tokens
                    .push((token.to_string(), user.to_string(), groups.collect()));
            }
            other => anyhow::bail!("unknown flag {other}; see the header of examples/serve.rs"),
        }
    }
    Ok(a)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = parse_args()?;
    let addr = args
        .listen
        .parse()
        .map_err(|e| anyhow::anyhow!("--listen {:?}: {e}", args.listen))?;
    let sim = Sim::new(args.config.clone());
    for (token, user, groups) in &args.tokens {
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        sim.tokens().add(token, user, &groups);
    }
    let workload = if args.pods > 0 || args.deployments > 0 || args.churn > 0.0 {
        let t = std::time::Instant::now();
        let w = Workload::seed(
            sim.store().clone(),
            WorkloadConfig::new(args.pods, args.namespaces, args.seed)
                .with_deployments(args.deployments, args.expose_fraction)
                .with_deployment_churn(args.deployment_churn),
        )?;
        eprintln!(
            "seeded {} pods and {} deployments in {:?}",
            args.pods,
            args.deployments,
            t.elapsed()
        );
        Some(w)
    } else {
        None
    };
    let running = sim.start(addr).await?;
    if let Some(path) = &args.kubeconfig_out {
        running.write_kubeconfig(path)?;
    }
    println!("{}", running.url());
    let churn = match workload {
        Some(w) if args.churn > 0.0 => Some(w.churn(args.churn)),
        _ => None,
    };
    tokio::signal::ctrl_c().await?;
    if let Some(c) = churn {
        c.stop().await;
    }
    running.shutdown().await;
    Ok(())
}
