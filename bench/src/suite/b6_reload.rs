//! B6: hot-reload latency: from the moment a plugin's new version is read to
//! the first event the new version handled, with the cache (5k objects)
//! replayed into it; for the Rust no-op plugin and a JavaScript no-op plugin.
//!
//! Two kinds of change are measured: a manifest change that keeps the
//! component (new `[config]`, compiled code comes from the compilation cache),
//! and a new component (new bytes: a full compile).
//!
//! Invariant: the reload goes through the same runtime and listener API the
//! host uses (load, start an instance, subscribe with replay, drop the old
//! version); the host's file watcher and its debounce are not included.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{handlers, side, spawn, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::plan::Mode;
use crate::spec::{Command, HandlerKind, ReloadTiming, Side};
use crate::stats::median;
use crate::table::{Row, Verdict};
use crate::wasm;

fn leb(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A copy of the component at `src` with one extra custom section, so its bytes
/// (and its compilation-cache key) differ while its behaviour is the same.
fn new_version(src: &str, tag: &str) -> Result<PathBuf> {
    let mut bytes = std::fs::read(src).with_context(|| format!("reading {src}"))?;
    let name = b"wasm-informer-bench-version";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(tag.as_bytes());
    bytes.push(0);
    leb(body.len(), &mut bytes);
    bytes.extend_from_slice(&body);
    let out = std::env::temp_dir().join(format!(
        "wasm-informer-bench-{}-{tag}.wasm",
        std::process::id()
    ));
    std::fs::write(&out, bytes).with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

/// The JavaScript no-op plugin, built with the project's JS SDK when missing.
fn js_noop() -> Result<String> {
    if let Some(p) = wasm::js_plugin_path("bench-js-noop") {
        return Ok(p.display().to_string());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = root.join("target/plugins/bench-js-noop.wasm");
    std::fs::create_dir_all(root.join("target/plugins"))?;
    let st = std::process::Command::new("node")
        .current_dir(&root)
        .args(["sdk/js/build.mjs", "bench/plugins/js-noop/plugin.js"])
        .arg(&out)
        .status()
        .context("running node sdk/js/build.mjs (is Node.js installed? run scripts/setup.sh)")?;
    if !st.success() {
        bail!("building bench/plugins/js-noop/plugin.js failed ({st}); run scripts/setup.sh for the JS SDK");
    }
    Ok(out.display().to_string())
}

struct Lang {
    name: &'static str,
    path: String,
    target_ms: f64,
    new_bytes: bool,
}

fn measure(ctx: &Ctx, fx: &Fixture, lang: &Lang) -> Result<(Vec<ReloadTiming>, Vec<ReloadTiming>)> {
    let (mut same, mut fresh) = (Vec::new(), Vec::new());
    for round in 0..ctx.plan.rounds {
        let kind = HandlerKind::Wasm {
            path: lang.path.clone(),
            config: "{}".into(),
            timeout_ms: 1000,
        };
        let (mut child, _) = spawn(&side(Side::Ours, fx, handlers("plugin", 1, &kind)))?;
        let r = child.cmd(&Command::Reload {
            path: lang.path.clone(),
            config: format!(r#"{{"version":{}}}"#, round + 2),
            timeout_ms: 1000,
        })?;
        same.push(r.reload.context("no reload timing")?);
        if lang.new_bytes {
            let p = new_version(
                &lang.path,
                &format!("{}-{round}-{}", lang.name, crate::probe::now_ns()),
            )?;
            let r = child.cmd(&Command::Reload {
                path: p.display().to_string(),
                config: "{}".into(),
                timeout_ms: 1000,
            });
            let _ = std::fs::remove_file(&p);
            fresh.push(r?.reload.context("no reload timing")?);
        }
        child.exit();
    }
    Ok((same, fresh))
}

fn row(lang: &Lang, change: &str, t: &[ReloadTiming]) -> Row {
    let m = |f: fn(&ReloadTiming) -> f64| {
        median(&t.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let (load, first, replay) = (
        m(|x| x.load_ms),
        m(|x| x.first_event_ms),
        m(|x| x.replayed_ms),
    );
    let objects = t.first().map(|x| x.objects).unwrap_or(0);
    Row {
        id: "B6",
        what: format!("hot reload, {}: {change}, {objects} objects replayed", lang.name),
        ours: format!("first event {first:.0} ms (load {load:.0} ms, replay done {replay:.0} ms)"),
        peer: "-".into(),
        ratio: "-".into(),
        target: format!("<= {:.0} ms", lang.target_ms),
        verdict: Verdict::of(first <= lang.target_ms),
        note: format!(
            "medians of {} rounds; first-event times {:?} ms. Excludes the host's manifest watcher and debounce.",
            t.len(),
            t.iter().map(|x| x.first_event_ms.round()).collect::<Vec<_>>()
        ),
    }
}

/// Runs B6.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let rust = wasm::plugin_path("noop").context("the Rust no-op plugin was not built")?;
    let fx = Fixture::new(&ctx.rt, p.b6_objects, Mix::Default)?;
    let mut langs = vec![Lang {
        name: "Rust",
        path: rust,
        target_ms: 300.0,
        new_bytes: true,
    }];
    if p.mode == Mode::Full {
        langs.push(Lang {
            name: "JavaScript",
            path: js_noop()?,
            target_ms: 1500.0,
            new_bytes: true,
        });
    }
    let mut rows = Vec::new();
    for lang in &langs {
        let (same, fresh) = measure(ctx, &fx, lang)?;
        rows.push(row(lang, "manifest change, same component", &same));
        if !fresh.is_empty() {
            rows.push(row(lang, "new component (full compile)", &fresh));
        }
    }
    if p.mode == Mode::Quick {
        rows.push(Row {
            id: "B6",
            what: "hot reload, JavaScript".into(),
            ours: "not run in quick mode".into(),
            peer: "-".into(),
            ratio: "-".into(),
            target: "<= 1500 ms".into(),
            verdict: Verdict::Info,
            note: "compiling the 12 MB JavaScript component takes longer than the quick mode's budget; the full mode measures it".into(),
        });
    }
    fx.shutdown(&ctx.rt);
    Ok(rows)
}
