//! Shared helpers for the integration tests: start a simulator, build a kube client for it, and
//! wait for conditions with generous timeouts.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use apisim::{RunningSim, Sim, SimConfig};
use serde_json::{json, Value};

/// Generous upper bound for anything that should happen "soon" on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub async fn start(config: SimConfig) -> RunningSim {
    Sim::new(config)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("simulator starts")
}

pub fn client(sim: &RunningSim) -> kube::Client {
    let cfg = kube::Config::new(sim.url().parse().unwrap());
    kube::Client::try_from(cfg).expect("client builds")
}

pub fn configmap(name: &str, ns: &str, labels: Value) -> Value {
    json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":ns,"labels":labels},"data":{"k":"v"}})
}

/// Polls `check` until it returns true, panicking with `what` after [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
