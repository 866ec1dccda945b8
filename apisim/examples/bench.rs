//! Simulator benchmark: paged list of many pods and watch throughput to one watcher.
//!
//! `cargo run --release -p apisim --example bench -- [--pods 50000] [--events 200000]`
//!
//! Measures, over HTTP on 127.0.0.1 with kube-client:
//! - seeding the store with workload pods (about 3 KB each);
//! - a paged list (limit=500) of every pod, raw (server + transport) and typed (kube `Api<Pod>`);
//! - store write throughput (status updates);
//! - watch throughput to one watcher replaying those updates, raw (lines read) and typed.

use std::time::Instant;

use apisim::workload::{Workload, WorkloadConfig};
use apisim::{Sim, SimConfig, Subresource};
use futures::AsyncReadExt;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} needs a number, got {v:?}"))
        })
        .unwrap_or(default)
}

#[derive(serde::Deserialize)]
struct ListMeta {
    metadata: Meta,
    items: Vec<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct Meta {
    #[serde(rename = "continue", default)]
    cont: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let pods = arg("--pods", 50_000);
    let events = arg("--events", 200_000);
    let sim = Sim::new(SimConfig {
        history_window: pods + events + 10_000,
        ..SimConfig::default()
    });
    let t = Instant::now();
    Workload::seed(sim.store().clone(), WorkloadConfig::new(pods, 20, 1))?;
    let seed_time = t.elapsed();
    let store = sim.store().clone();
    let pod_rid = store.rid("v1", "pods");
    let bytes: usize = store.list_all(pod_rid).iter().map(|o| o.json.len()).sum();
    println!(
        "seed: {pods} pods, {:.1} MB ({} B/pod avg) in {:.2?} ({:.0} creates/s)",
        bytes as f64 / 1e6,
        bytes / pods.max(1),
        seed_time,
        pods as f64 / seed_time.as_secs_f64()
    );
    let running = sim.start("127.0.0.1:0".parse()?).await?;
    let client = kube::Client::try_from(kube::Config::new(running.url().parse()?))?;

    // Paged list, raw.
    for round in 0..2 {
        let t = Instant::now();
        let mut cont: Option<String> = None;
        let (mut pages, mut items, mut total) = (0, 0, 0usize);
        loop {
            let mut uri = "/api/v1/pods?limit=500".to_string();
            if let Some(c) = &cont {
                uri.push_str(&format!("&continue={c}"));
            }
            let text = client
                .request_text(http::Request::get(uri).body(Vec::new())?)
                .await?;
            total += text.len();
            let l: ListMeta = serde_json::from_str(&text)?;
            pages += 1;
            items += l.items.len();
            cont = l.metadata.cont.filter(|c| !c.is_empty());
            if cont.is_none() {
                break;
            }
        }
        let d = t.elapsed();
        println!(
            "paged list raw (round {round}): {items} pods in {pages} pages, {:.1} MB in {d:.2?} ({:.0} pods/s, {:.0} MB/s)",
            total as f64 / 1e6,
            items as f64 / d.as_secs_f64(),
            total as f64 / 1e6 / d.as_secs_f64()
        );
        assert_eq!(items, pods);
    }

    // Paged list, typed.
    let api: Api<Pod> = Api::all(client.clone());
    let t = Instant::now();
    let mut lp = ListParams::default().limit(500);
    let mut n = 0;
    loop {
        let l = api.list(&lp).await?;
        n += l.items.len();
        match l.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    let d = t.elapsed();
    println!(
        "paged list typed (kube Api<Pod>): {n} pods in {d:.2?} ({:.0} pods/s)",
        n as f64 / d.as_secs_f64()
    );

    // Store write throughput: status updates.
    let names: Vec<(String, String)> = store
        .list_all(pod_rid)
        .iter()
        .map(|o| (o.namespace.clone(), o.name.clone()))
        .collect();
    let rv0 = store.current_rv();
    let t = Instant::now();
    for i in 0..events {
        let (ns, name) = &names[i % names.len()];
        store.update_with(pod_rid, ns, name, Subresource::Status, |mut v| {
            v["status"]["conditions"][2]["lastTransitionTime"] =
                json!(format!("2026-01-01T00:00:{:02}Z", i % 60));
            v["status"]["containerStatuses"][0]["restartCount"] = json!(i);
            Ok(v)
        })?;
    }
    let d = t.elapsed();
    println!(
        "store writes: {events} status updates in {d:.2?} ({:.0} writes/s)",
        events as f64 / d.as_secs_f64()
    );

    // Watch throughput, raw: count event lines.
    let t = Instant::now();
    let uri = format!("/api/v1/pods?watch=true&resourceVersion={rv0}&timeoutSeconds=600");
    let body = client
        .request_stream(http::Request::get(uri).body(Vec::new())?)
        .await?;
    let mut body = Box::pin(body);
    let mut buf = vec![0u8; 1 << 20];
    let (mut lines, mut total) = (0usize, 0usize);
    while lines < events {
        let n = body.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n;
        lines += buf[..n].iter().filter(|b| **b == b'\n').count();
    }
    let d = t.elapsed();
    println!(
        "watch raw: {lines} events, {:.1} MB in {d:.2?} ({:.0} events/s, {:.0} MB/s)",
        total as f64 / 1e6,
        lines as f64 / d.as_secs_f64(),
        total as f64 / 1e6 / d.as_secs_f64()
    );
    drop(body);

    // Watch throughput, typed (kube deserializes every Pod).
    let t = Instant::now();
    let mut s = api
        .watch(&WatchParams::default().timeout(600), &rv0.to_string())
        .await?
        .boxed();
    let mut got = 0;
    while got < events {
        match s.try_next().await? {
            Some(WatchEvent::Modified(_)) => got += 1,
            Some(_) => {}
            None => break,
        }
    }
    let d = t.elapsed();
    println!(
        "watch typed (kube Api<Pod>::watch): {got} events in {d:.2?} ({:.0} events/s)",
        got as f64 / d.as_secs_f64()
    );
    running.shutdown().await;
    Ok(())
}
