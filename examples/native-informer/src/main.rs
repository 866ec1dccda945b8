//! A native program on the informer crate alone: one shared informer on pods,
//! with an index on the node name, and a handler that keeps its own view of
//! the pods it was told about. No Wasm, no host.
//!
//! ```text
//! native-informer [--kubeconfig FILE] [--context NAME] [--namespace NS]
//!                 [--duration SECS] [--summary FILE]
//! ```
//!
//! Without `--kubeconfig` it uses the environment (`KUBECONFIG`, then
//! `~/.kube/config`, then the in-cluster service account). Against the
//! simulator: `wasm-informer sim --listen 127.0.0.1:8080 --kubeconfig-out /tmp/kc`,
//! then `native-informer --kubeconfig /tmp/kc --duration 10`.
//!
//! At the end it prints how many events of each kind its handler received, the
//! ten busiest nodes (from the index, no API call), and, with `--summary`,
//! writes its view (key → resourceVersion) as JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kube_informer::{
    Delivery, EventKind, Handler, HandlerOptions, NotificationRef, SharedInformer,
};

#[derive(Parser, Debug)]
#[command(about = "A shared pod informer with a node index and a typed handler, no Wasm")]
struct Args {
    /// Kubeconfig file (default: the environment, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    context: Option<String>,
    /// Only pods in this namespace (filtered per handler; the informer watches
    /// every namespace).
    #[arg(long)]
    namespace: Option<String>,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    duration: Option<u64>,
    /// Write the handler's view and counters to this JSON file at exit.
    #[arg(long)]
    summary: Option<PathBuf>,
}

/// What the handler saw: its view of every pod and a count per event kind.
#[derive(Default, serde::Serialize)]
struct Seen {
    added: u64,
    updated: u64,
    deleted: u64,
    synced: u64,
    /// key → resourceVersion of the last state received, for pods that exist.
    view: BTreeMap<String, String>,
    /// Pods whose JSON did not parse as a `Pod`.
    not_pods: u64,
}

/// Keeps [`Seen`] up to date. It runs on its own listener task: however slow
/// it is, the informer's dispatcher and any other handler go on.
struct PodView(Arc<Mutex<Seen>>);

impl Handler for PodView {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let mut seen = self.0.lock().expect("not poisoned");
        // Typed access: the cached JSON as a k8s-openapi Pod, parsed on demand.
        let rv = match n.object.parse::<Pod>() {
            Ok(pod) => pod.metadata.resource_version.unwrap_or_default(),
            Err(_) => {
                seen.not_pods += 1;
                n.object.meta.resource_version.clone()
            }
        };
        match n.kind {
            EventKind::Added => seen.added += 1,
            EventKind::Updated => seen.updated += 1,
            EventKind::Deleted => seen.deleted += 1,
            EventKind::Synced => seen.synced += 1,
        }
        if n.kind == EventKind::Deleted {
            seen.view.remove(&*n.key);
        } else {
            seen.view.insert(n.key.to_string(), rv);
        }
        Delivery::Ok
    }
}

async fn client(args: &Args) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = client(&args).await?;

    let pods = SharedInformer::for_type::<Pod>(client)
        .index("node", "spec.nodeName")
        .start()
        .await?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut options = HandlerOptions::named("pod-view").queue_capacity(4096);
    if let Some(ns) = &args.namespace {
        options = options.namespace(ns.clone());
    }
    let registration = pods.add_handler(PodView(seen.clone()), options)?;

    let wait = async {
        while !registration.has_synced() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .context("the informer did not sync within 60 s")?;
    eprintln!(
        "synced: {} pods cached, {} in the handler's view",
        pods.indexer().len(),
        seen.lock().expect("not poisoned").view.len()
    );

    match args.duration {
        Some(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
        None => tokio::signal::ctrl_c().await?,
    }

    // Let the handler finish what is already queued before reporting.
    let drained = async {
        while registration.stats().snapshot().queue_depth > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), drained).await;
    registration.remove();

    // The node index answers without an API call.
    let mut per_node: Vec<(usize, String)> = pods
        .indexer()
        .snapshot()
        .iter()
        .filter_map(|o| o.parse::<Pod>().ok()?.spec?.node_name)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|node| Ok((pods.indexer().by_index("node", &node)?.len(), node)))
        .collect::<Result<_, kube_informer::CacheError>>()?;
    per_node.sort_by(|a, b| b.cmp(a));
    let seen = seen.lock().expect("not poisoned");
    println!(
        "events: {} added, {} updated, {} deleted, {} synced; {} pods in view",
        seen.added,
        seen.updated,
        seen.deleted,
        seen.synced,
        seen.view.len()
    );
    for (count, node) in per_node.iter().take(10) {
        println!("  {node}: {count} pods");
    }
    if let Some(path) = &args.summary {
        std::fs::write(path, serde_json::to_vec_pretty(&*seen)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
