//! The `wasm-informer` command line, as the design's CLI contract fixes it.
//!
//! Job: declare the subcommands and flags (clap derive) so that `main` only
//! dispatches. `run --config DIR [--sim] [--context C] [--duration SECS]
//! [--report FILE] [--dry-run] [--identity NAME]`, `sim --listen ADDR
//! --kubeconfig-out FILE`, `check FILE.wasm|MANIFEST.toml`, and
//! `rbac --config DIR`.
//!
//! Invariant: flag names and meanings are a public contract; they change only
//! with a note in the changelog.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Shared Kubernetes informers feeding sandboxed WebAssembly event handlers.
#[derive(Debug, Parser)]
#[command(name = "wasm-informer", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the host: informers for the plugins' resources, one sandboxed
    /// instance per plugin, hot reload of the config directory.
    Run(RunArgs),
    /// Runs only the embedded Kubernetes API simulator, seeded with a workload,
    /// so that kubectl or another host can use it.
    Sim(SimArgs),
    /// Validates a plugin component (FILE.wasm) or a manifest and the component
    /// it names (MANIFEST.toml); exits non-zero with the reason.
    Check(CheckArgs),
    /// Prints the RBAC (ClusterRole, Roles and bindings) that the host's
    /// ServiceAccount needs for the plugins of a config directory, derived
    /// from their manifests.
    Rbac(RbacArgs),
    /// Creates a plugin project (source, build file, manifest, README, test
    /// fixture) that builds with one command, anywhere on disk.
    New(crate::commands::new::NewArgs),
    /// Runs a plugin against objects and changes from YAML or JSON files,
    /// with every write a dry run against the embedded simulator; prints its
    /// logs, writes, Events and traps as JSON.
    Test(crate::commands::test::TestArgs),
    /// The edit loop: rebuilds the plugin on every save and hot-loads it into
    /// a host running against the embedded simulator.
    Dev(crate::commands::dev::DevArgs),
    /// Publishes a component to an OCI registry as a Wasm artifact
    /// (`oci://HOST/REPOSITORY:TAG`); prints the digest that pins it.
    Push(crate::oci::push::PushArgs),
    /// A live view of a running host, read from its metrics endpoint: one
    /// row per plugin and per informer (`q` quits).
    Top(crate::commands::top::TopArgs),
    /// Shadow versions: `diff NAME` prints how a shadow's intended writes
    /// differ from its live plugin's, read from a running host;
    /// `promote NAME --config DIR` makes the shadow the live version.
    Shadow(crate::commands::shadow::ShadowArgs),
    /// Records what the informers of a config directory's resources see (the
    /// initial state and every event, compressed) into a file, for `test
    /// --replay`; runs no plugin.
    Record(RecordArgs),
}

/// Flags of `rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// The config directory: DIR/host.toml and DIR/plugins/*.toml.
    #[arg(long, value_name = "DIR")]
    pub config: PathBuf,
    /// The ServiceAccount the host runs as.
    #[arg(long, value_name = "NAME", default_value = "wasm-informer")]
    pub service_account: String,
    /// The namespace of the host's ServiceAccount and of the plugins' own
    /// (default: host.toml's `[identity] namespace`, itself `wasm-informer`).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Name of the ClusterRole, the Roles and their bindings.
    #[arg(long, value_name = "NAME", default_value = "wasm-informer")]
    pub name: String,
}

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The config directory: DIR/host.toml and DIR/plugins/*.toml.
    #[arg(long, value_name = "DIR")]
    pub config: PathBuf,
    /// Run against the embedded API simulator (seeded and churned by the workload
    /// generator) instead of the cluster from the kubeconfig.
    #[arg(long)]
    pub sim: bool,
    /// Kubeconfig context to use (ignored with --sim).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Stop cleanly after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Write the JSON report here at exit.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Override host.toml's metrics_addr (use 127.0.0.1:0 for a free port).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// With --sim, where to write the simulator's kubeconfig (default: a file in
    /// the temporary directory).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,
    /// Send every write of every plugin with `dryRun=All`: the API server
    /// validates and answers, and nothing persists.
    #[arg(long)]
    pub dry_run: bool,
    /// On a terminal (`auto`, `always`): the live view, with the log in a
    /// file meanwhile. `always` without a terminal: the plain status table
    /// on stdout. `never`: only the log, on stderr.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub status: StatusMode,
    /// This replica's identity in leader election and sharding (default: the
    /// POD_NAME environment variable, else the host name and process id).
    #[arg(long, value_name = "NAME")]
    pub identity: Option<String>,
    /// Record what the informers saw (the initial state and every event of
    /// the resources the plugins watch or read) into FILE, for `test
    /// --replay`.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Load no plugin (`record`): only the informers and the recording run.
    #[arg(skip)]
    pub no_plugins: bool,
}

/// Flags of `record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The config directory: its plugins' resources are recorded, and no
    /// plugin runs.
    #[arg(long, value_name = "DIR")]
    pub config: PathBuf,
    /// The recording (zstd-compressed JSON lines).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Record from the embedded API simulator (seeded and churned) instead of
    /// the cluster from the kubeconfig.
    #[arg(long)]
    pub sim: bool,
    /// Kubeconfig context to use (ignored with --sim).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Stop after this many seconds (default: at SIGINT or SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Override host.toml's metrics_addr.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

impl From<RecordArgs> for RunArgs {
    fn from(a: RecordArgs) -> Self {
        RunArgs {
            config: a.config,
            sim: a.sim,
            context: a.context,
            duration: a.duration,
            report: None,
            metrics_addr: a.metrics_addr,
            kubeconfig_out: None,
            dry_run: false,
            status: StatusMode::Never,
            identity: None,
            record: Some(a.out),
            no_plugins: true,
        }
    }
}

/// When to draw the terminal status table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusMode {
    /// When stdout is a terminal.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Flags of `sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Write a kubeconfig for the simulator here.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: PathBuf,
    /// A config directory whose host.toml `[sim]` table sets the workload.
    #[arg(long, value_name = "DIR")]
    pub config: Option<PathBuf>,
    /// Stop after this many seconds (default: until SIGINT or SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Authenticate bearer tokens and enforce RBAC and impersonation, over
    /// HTTPS; the kubeconfig is the admin's (group system:masters). Also
    /// `[sim] rbac = true` in host.toml.
    #[arg(long)]
    pub rbac: bool,
    /// Accept the bearer token TOKEN as USER (repeatable), for example
    /// `--token host=system:serviceaccount:wasm-informer:wasm-informer`.
    #[arg(long, value_name = "TOKEN=USER")]
    pub token: Vec<String>,
}

/// Flags of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The component (.wasm) or manifest (.toml).
    pub file: PathBuf,
    /// Compilation cache directory: checking compiles the component into it,
    /// so a host using the same cache loads it without compiling. Default: for
    /// a manifest in a config directory, that directory's `cache_dir`.
    #[arg(long, env = "WASM_INFORMER_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn parses_run_with_every_flag() {
        let cli = Cli::try_parse_from([
            "wasm-informer",
            "run",
            "--config",
            "config",
            "--sim",
            "--duration",
            "20",
            "--report",
            "r.json",
            "--context",
            "kind",
            "--identity",
            "web-0",
        ])
        .unwrap();
        let Command::Run(a) = cli.command else {
            panic!("not run")
        };
        assert_eq!(a.config, PathBuf::from("config"));
        assert!(a.sim);
        assert_eq!(a.duration, Some(20.0));
        assert_eq!(a.report, Some(PathBuf::from("r.json")));
        assert_eq!(a.context.as_deref(), Some("kind"));
        assert_eq!(a.status, StatusMode::Auto);
        assert_eq!(a.identity.as_deref(), Some("web-0"));
    }

    #[test]
    fn run_requires_config() {
        let err = Cli::try_parse_from(["wasm-informer", "run"]).unwrap_err();
        assert!(err.to_string().contains("--config"), "{err}");
    }

    #[test]
    fn parses_sim_and_check() {
        let cli = Cli::try_parse_from([
            "wasm-informer",
            "sim",
            "--listen",
            "127.0.0.1:8081",
            "--kubeconfig-out",
            "kc.yaml",
        ])
        .unwrap();
        let Command::Sim(s) = cli.command else {
            panic!("not sim")
        };
        assert_eq!(s.listen.port(), 8081);
        assert_eq!(s.kubeconfig_out, PathBuf::from("kc.yaml"));
        let cli = Cli::try_parse_from(["wasm-informer", "check", "p.wasm"]).unwrap();
        assert!(matches!(cli.command, Command::Check(c) if c.file == Path::new("p.wasm")));
    }
}
