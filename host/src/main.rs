//! The `wasm-informer` binary: parses the command line and runs `run`, `sim` or
//! `check`.
//!
//! Invariant: every failure prints one clear line naming the file and the reason
//! on stderr and exits non-zero (2 for bad configuration or input, 1 for runtime
//! failures); `run` exits 0 after a clean stop (duration elapsed, SIGINT or
//! SIGTERM), having written the report when asked.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use wasm_informer::cli::{CheckArgs, Cli, Command, RbacArgs, RunArgs, SimArgs, StatusMode};
use wasm_informer::cluster::{resolve_identity, Cluster};
use wasm_informer::commands::termination;
use wasm_informer::config::{ConfigDir, HostSettings, PluginManifest};
use wasm_informer::host::{Host, HostOptions};
use wasm_informer::metrics::{MetricsServer, Observe};
use wasm_informer::sim::EmbeddedSim;
use wasm_informer_runtime::{check_file, EngineConfig, PluginEngine, PluginLimits};

/// The log goes to stderr, coloured only when stderr is a terminal that no
/// live view takes over (the view sends the log to a file, which must stay
/// plain text).
fn init_tracing(default: &str, ansi: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default},notify=warn")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
}

/// The `--status` of a command that may show the live view.
fn status_of(command: &Command) -> Option<StatusMode> {
    match command {
        Command::Run(a) => Some(a.status),
        Command::Dev(a) => Some(a.status),
        _ => None,
    }
}

/// mimalloc rather than glibc's malloc: a cache whose objects are replaced at
/// random keeps a flat RSS with it, where glibc's arenas fragment (see
/// docs/BENCHMARKS.md, B8).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A failure with its exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn config(message: impl std::fmt::Display) -> Self {
        Self {
            code: 2,
            message: message.to_string(),
        }
    }
    fn runtime(message: impl std::fmt::Display) -> Self {
        Self {
            code: 1,
            message: message.to_string(),
        }
    }
}

impl From<wasm_informer::commands::Failure> for Failure {
    fn from(f: wasm_informer::commands::Failure) -> Self {
        Self {
            code: f.code,
            message: f.message,
        }
    }
}

async fn kube_client(context: Option<&str>, identity: &str) -> Result<kube::Client, Failure> {
    let mut config = match context {
        Some(ctx) => {
            let opts = kube::config::KubeConfigOptions {
                context: Some(ctx.to_string()),
                ..Default::default()
            };
            kube::Config::from_kubeconfig(&opts)
                .await
                .map_err(|e| Failure::config(format!("kubeconfig context {ctx:?}: {e}")))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            Failure::config(format!(
                "no cluster configuration (kubeconfig or in-cluster): {e}"
            ))
        })?,
    };
    // The Reflector retries with its own backoff and honours Retry-After.
    config.default_retry = false;
    // The API server's audit log (and the simulator's request log) can tell
    // replicas apart by their user agent.
    let agent = format!("wasm-informer/{} ({identity})", env!("CARGO_PKG_VERSION"));
    if let Ok(v) = http::HeaderValue::from_str(&agent) {
        config.headers.push((http::header::USER_AGENT, v));
    }
    kube::Client::try_from(config)
        .map_err(|e| Failure::config(format!("cannot build a Kubernetes client: {e}")))
}

fn default_kubeconfig_path() -> PathBuf {
    std::env::temp_dir().join(format!(
        "wasm-informer-sim-{}.kubeconfig",
        std::process::id()
    ))
}

/// Waits until every running informer of a seeded resource holds as many objects
/// as the simulator (after churn stopped), or `timeout` passes.
async fn wait_converged(host: &Host, sim: &EmbeddedSim, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let want = sim.object_counts();
        let stats = host.registry().stats();
        let ok = stats
            .iter()
            .filter(|(id, _)| want.contains_key(*id))
            .all(|(id, s)| s.has_synced && s.objects == want[id]);
        if ok {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run(args: RunArgs) -> Result<(), Failure> {
    let mut config = ConfigDir::open(&args.config).map_err(Failure::config)?;
    if let Some(addr) = args.metrics_addr {
        config.host.metrics_addr = addr;
    }
    if let Err(e) = wasm_informer::memory::apply(config.host.huge_pages) {
        tracing::warn!(huge_pages = config.host.huge_pages, error = %e, "cannot set the process's transparent huge page policy; the kernel's default applies");
    }
    let identity = resolve_identity(args.identity.as_deref());
    let mut sim = None;
    let client = if args.sim {
        let path = args
            .kubeconfig_out
            .clone()
            .unwrap_or_else(default_kubeconfig_path);
        let s = EmbeddedSim::start(
            &config.host.sim,
            "127.0.0.1:0".parse().expect("valid address"),
            &path,
        )
        .await
        .map_err(|e| Failure::runtime(format!("cannot start the embedded simulator: {e:#}")))?;
        eprintln!(
            "wasm-informer: simulated cluster at {}; try: kubectl --kubeconfig {} get pods -A",
            s.url(),
            path.display()
        );
        let c = s
            .client()
            .await
            .map_err(|e| Failure::runtime(format!("simulator client: {e:#}")))?;
        sim = Some(s);
        c
    } else {
        kube_client(args.context.as_deref(), &identity).await?
    };

    let cluster = Cluster::new(&config.host.cluster, identity.clone(), client.clone());
    let options = HostOptions {
        cluster: cluster.clone(),
        dry_run: args.dry_run,
        identity: Some(identity),
        ..HostOptions::default()
    };
    if args.dry_run {
        eprintln!("wasm-informer: dry run: every plugin write is sent with dryRun=All");
    }
    let host = Host::new(config.clone(), client, options)
        .await
        .map_err(Failure::config)?;
    // Metrics first, so /readyz answers (not ready) while plugins compile.
    let observe: Arc<dyn Observe> = host.clone();
    let metrics = MetricsServer::start(config.host.metrics_addr, observe.clone())
        .await
        .map_err(Failure::config)?;
    tracing::info!(addr = %metrics.addr(), "metrics on /metrics, health on /healthz and /readyz");
    eprintln!(
        "wasm-informer: metrics at http://{}/metrics",
        metrics.addr()
    );
    // The cluster layer first: plugins loaded at start-up begin their `init`
    // once this replica knows whether it leads (or holds its shard), so a
    // leader's init writes are sent under its first tenure.
    if let Some(c) = &cluster {
        c.start(host.registry());
        let t = config.host.cluster.timing();
        if !c.first_outcome(t.retry_period * 2).await {
            tracing::warn!("no answer about the lease yet; plugins load as a standby would");
        }
        eprintln!(
            "wasm-informer: {} mode as {}; plugins receive events once this replica leads or holds its shard",
            c.mode().as_str(),
            c.identity()
        );
    }
    if !args.no_plugins {
        host.reconcile().await;
        host.start_reload()
            .map_err(|e| Failure::runtime(format!("cannot watch {}: {e}", config.dir.display())))?;
        eprintln!(
            "wasm-informer: running {} plugin(s): {}",
            host.plugin_names().len(),
            host.plugin_names().join(", ")
        );
    }
    let recorder = match &args.record {
        Some(path) => {
            let resources =
                wasm_informer::record::config_resources(&config).map_err(Failure::config)?;
            let r = wasm_informer::record::Recorder::start(host.registry(), &resources, path)
                .await
                .map_err(Failure::runtime)?;
            eprintln!(
                "wasm-informer: recording {} into {}",
                resources.join(", "),
                path.display()
            );
            Some(r)
        }
        None => None,
    };

    // On a terminal: the live view (the log goes to a file meanwhile). With
    // `--status always` and no terminal: the plain table on stdout.
    let terminal = std::io::stdout().is_terminal();
    let view = match (args.status, terminal) {
        (StatusMode::Never, _) | (_, false) => None,
        _ => Some(
            wasm_informer::commands::live::start(StatusMode::Always, observe.clone(), None, None)
                .map_err(|e| Failure::runtime(format!("cannot start the live view: {e}")))?,
        ),
    };
    let status = (args.status == StatusMode::Always && !terminal)
        .then(|| wasm_informer::status::spawn(observe.clone()));
    let quit = async {
        match &view {
            Some(v) => v.quit().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(quit);

    let why = match args.duration {
        Some(secs) if secs.is_finite() && secs >= 0.0 => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs_f64(secs)) => "duration elapsed",
                s = termination() => s,
                _ = &mut quit => "quit from the live view",
            }
        }
        Some(secs) => {
            return Err(Failure::config(format!(
                "--duration {secs}: must be a number of seconds >= 0"
            )))
        }
        None => tokio::select! {
            s = termination() => s,
            _ = &mut quit => "quit from the live view",
        },
    };
    if let Some(v) = &view {
        v.stop().await;
        if let Some(log) = v.log_file() {
            eprintln!("wasm-informer: the log is in {}", log.display());
        }
    }
    tracing::info!(reason = why, "shutting down");
    if let Some(t) = status {
        t.abort();
    }

    let mut sim_counts = Default::default();
    if let Some(s) = sim.as_mut() {
        s.stop_churn().await;
        if !wait_converged(&host, s, Duration::from_secs(30)).await {
            tracing::warn!(
                "informers did not converge to the simulator's object counts within 30 s"
            );
        }
        sim_counts = s.object_counts();
    }
    if let Some(r) = recorder {
        let s = r.finish().await.map_err(Failure::runtime)?;
        eprintln!(
            "wasm-informer: recorded {} objects and {} events into {} ({} bytes{})",
            s.initial,
            s.events,
            s.file.display(),
            s.bytes,
            if s.coalesced > 0 {
                format!(
                    "; {} events coalesced: the recorder fell behind",
                    s.coalesced
                )
            } else {
                String::new()
            }
        );
    }
    // Fence shut and delivery stopped first; the lease is given up only after
    // the plugins drained, so that no other replica acts while one still does.
    if let Some(c) = &cluster {
        c.stop_delivery().await;
    }
    let mut report = host.shutdown().await;
    if let Some(c) = &cluster {
        c.release().await;
    }
    report.simulator_objects = sim_counts;
    metrics.stop().await;
    if let Some(path) = &args.report {
        report.write(path).map_err(|e| {
            Failure::runtime(format!("{}: cannot write report: {e}", path.display()))
        })?;
        eprintln!("wasm-informer: report written to {}", path.display());
    }
    if let Some(s) = sim {
        s.shutdown().await;
    }
    Ok(())
}

async fn sim(args: SimArgs) -> Result<(), Failure> {
    let mut settings = match &args.config {
        Some(dir) => ConfigDir::open(dir).map_err(Failure::config)?.host.sim,
        None => HostSettings::default().sim,
    };
    settings.rbac |= args.rbac;
    for t in &args.token {
        let (token, user) = t
            .split_once('=')
            .filter(|(t, u)| !t.is_empty() && !u.is_empty())
            .ok_or_else(|| Failure::config(format!("--token {t:?}: expected TOKEN=USER")))?;
        settings.tokens.push((token.to_string(), user.to_string()));
    }
    let s = EmbeddedSim::start(&settings, args.listen, &args.kubeconfig_out)
        .await
        .map_err(|e| Failure::runtime(format!("cannot start the simulator: {e:#}")))?;
    eprintln!(
        "wasm-informer: simulator at {}; kubeconfig written to {}",
        s.url(),
        args.kubeconfig_out.display()
    );
    match args.duration {
        Some(secs) if secs.is_finite() && secs >= 0.0 => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs_f64(secs)) => {},
                _ = termination() => {},
            }
        }
        Some(secs) => {
            return Err(Failure::config(format!(
                "--duration {secs}: must be a number of seconds >= 0"
            )))
        }
        None => {
            termination().await;
        }
    }
    s.shutdown().await;
    Ok(())
}

/// The component a manifest names, after validating the whole manifest, and
/// the compilation cache of the config directory it lives in
/// (`DIR/plugins/NAME.toml` → `DIR/host.toml`'s `cache_dir`), if any.
fn wasm_of_manifest(
    manifest: &Path,
) -> Result<(PathBuf, Option<PathBuf>, PluginManifest), Failure> {
    let m = PluginManifest::load(manifest, &Default::default()).map_err(Failure::config)?;
    let host_toml = manifest
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "plugins"))
        .and_then(Path::parent)
        .map(|dir| dir.join("host.toml"))
        .filter(|f| f.is_file());
    let cache_dir = match host_toml {
        Some(f) => HostSettings::load(&f).map_err(Failure::config)?.cache_dir,
        None => None,
    };
    Ok((m.wasm.clone(), cache_dir, m))
}

/// Validates a component and compiles it. The compiled code goes into the
/// cache given with `--cache-dir`, else, for a manifest inside a config
/// directory, into that directory's `cache_dir`: checking a new version before
/// dropping it in makes the host's reload a cache hit instead of a compile.
fn check(args: CheckArgs) -> Result<String, Failure> {
    let (wasm, config_cache, manifest) = if args.file.extension().is_some_and(|e| e == "toml") {
        let (wasm, cache, m) = wasm_of_manifest(&args.file)?;
        (wasm, cache, Some(m))
    } else {
        (args.file.clone(), None, None)
    };
    let engine = PluginEngine::new(EngineConfig {
        // The same default as `run`, `test` and `dev`: one cache for all.
        cache_dir: wasm_informer::commands::cache_dir(args.cache_dir, config_cache),
        ..EngineConfig::default()
    })
    .map_err(Failure::runtime)?;
    let report = check_file(&engine, &wasm).map_err(Failure::config)?;
    if let Some(m) = &manifest {
        // What `run` checks of a manifest against its component: the world
        // it names (`for` or `resources`), and a memory cap it can start in.
        if let Some(world) = wasm_informer_runtime::World::detect(&report.exports) {
            m.check_world(world).map_err(Failure::config)?;
        }
        let limits = PluginLimits {
            fuel_per_event: m.limits.fuel_per_event,
            timeout_ms: m.limits.timeout_ms,
            memory_mb: m.limits.memory_mb,
            ..PluginLimits::default()
        };
        report.check_limits(&limits).map_err(Failure::config)?;
    }
    Ok(report.to_string())
}

/// Prints the RBAC a config directory's plugins need.
fn rbac(args: RbacArgs) -> Result<String, Failure> {
    let config = ConfigDir::open(&args.config).map_err(Failure::config)?;
    let names = wasm_informer::rbac::RbacNames {
        name: args.name,
        service_account: args.service_account,
        namespace: args
            .namespace
            .unwrap_or_else(|| config.host.identity.namespace.clone()),
    };
    wasm_informer::rbac::for_config_dir(&config, &names).map_err(Failure::config)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands whose output is the point print only warnings and errors.
    let quiet = matches!(cli.command, Command::New(_) | Command::Test(_));
    let ansi = wasm_informer::commands::live::log_colours(
        status_of(&cli.command),
        std::io::stdout().is_terminal(),
        std::io::stderr().is_terminal(),
    );
    init_tracing(if quiet { "warn" } else { "info" }, ansi);
    let result = match cli.command {
        Command::Check(a) => check(a).map(|report| print!("{report}")),
        Command::Rbac(a) => rbac(a).map(|yaml| print!("{yaml}")),
        Command::New(a) => wasm_informer::commands::new::run(a)
            .map(|text| print!("{text}"))
            .map_err(Failure::from),
        Command::Push(a) => wasm_informer::oci::push::run(a)
            .map(|text| print!("{text}"))
            .map_err(Failure::from),
        Command::Top(a) => wasm_informer::commands::top::run(a).map_err(Failure::from),
        Command::Shadow(a) => wasm_informer::commands::shadow::run(a).map_err(Failure::from),
        Command::Dev(a) => wasm_informer::commands::dev::run(a).map_err(Failure::from),
        Command::Test(a) => match wasm_informer::commands::test::run(a) {
            Ok(0) => Ok(()),
            Ok(code) => return ExitCode::from(code),
            Err(f) => Err(Failure::from(f)),
        },
        Command::Run(a) => runtime().and_then(|rt| rt.block_on(run(a))),
        Command::Record(a) => runtime().and_then(|rt| rt.block_on(run(a.into()))),
        Command::Sim(a) => runtime().and_then(|rt| rt.block_on(sim(a))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(format!("cannot start the async runtime: {e}")))
}
