//! Loads one plugin component with the default limits, delivers N pod events
//! through a `PluginInstance` and prints each outcome's kind, the fuel each
//! event consumed and the time per event: a quick way to see whether the
//! default budgets fit a guest.
//!
//! Run: `cargo run -p wasm-informer --example runtime_try -- FILE.wasm [N] [CACHE_DIR]`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::{Object, ObjectRef, Transform};
use wasm_informer_runtime::host_state::Granted;
use wasm_informer_runtime::log_sink::LogSink;
use wasm_informer_runtime::{
    CallOutcome, EngineConfig, LoadedPlugin, LogLimits, PluginEngine, PluginInstance, PluginSpec,
    PluginStatus,
};

/// A cache holding the one pod the events are about.
struct OnePod(ObjectRef);

impl CacheView for OnePod {
    fn get(&self, _: &str, key: &str) -> Result<Option<ObjectRef>, CacheError> {
        Ok((key == self.0.key()).then(|| self.0.clone()))
    }
    fn list(
        &self,
        _: &str,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        Ok(vec![self.0.clone()])
    }
    fn by_index(&self, _: &str, _: &str, _: &str) -> Result<Vec<ObjectRef>, CacheError> {
        Ok(vec![self.0.clone()])
    }
    fn has_synced(&self, _: &str) -> Result<bool, CacheError> {
        Ok(true)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: runtime_try FILE.wasm [N] [CACHE_DIR]");
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let cache_dir = args.next().map(Into::into);
    let engine = PluginEngine::new(EngineConfig {
        cache_dir,
        ..Default::default()
    })
    .unwrap();
    let t = Instant::now();
    let spec = PluginSpec {
        read: vec!["v1/pods".into(), "apps/v1/deployments".into()],
        ..PluginSpec::new("try")
    };
    let plugin = LoadedPlugin::from_file(&engine, spec, path.as_ref()).unwrap();
    println!("compile + link: {:?}", t.elapsed());
    let pod = Arc::new(
        Object::from_json(
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"default","uid":"u1","resourceVersion":"5","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"registry.local/app:latest"}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
            &Transform::default(),
        )
        .unwrap(),
    );
    let status = Arc::new(PluginStatus::new("try"));
    let log = Arc::new(LogSink::new("try".into(), LogLimits::default(), status));
    let t = Instant::now();
    let mut inst = match PluginInstance::start(
        &engine,
        &plugin,
        Granted::cache_only(&plugin, Arc::new(OnePod(pod.clone())), log),
    ) {
        Ok(i) => i,
        Err(e) => {
            println!("start failed: {e}");
            return;
        }
    };
    println!("instantiate + init: {:?}", t.elapsed());
    let note = Notification {
        kind: EventKind::Added,
        resource: "v1/pods".into(),
        key: pod.key().into(),
        object: pod.clone(),
        old: None,
        in_initial_list: false,
        final_state_unknown: false,
    };
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..n {
        let t = Instant::now();
        let o = inst.handle(&note);
        let took = t.elapsed();
        let label = match &o {
            CallOutcome::Ok => "ok".to_string(),
            CallOutcome::HandlerError(m) => format!("error: {m}"),
            CallOutcome::Trap(t) => format!("trap {}", t.kind),
        };
        if i < 3 || i + 1 == n {
            println!(
                "event {i}: {label}; fuel {}; {:?}",
                inst.fuel_consumed(),
                took
            );
        }
        *kinds
            .entry(label.split(':').next().unwrap().to_string())
            .or_default() += 1;
        if matches!(o, CallOutcome::Trap(_)) {
            break;
        }
    }
    println!("outcomes: {kinds:?}");
}
