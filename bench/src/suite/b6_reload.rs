//! B6: hot-reload latency: from the moment a plugin's new version is read to
//! the first event the new version handled, with the cache (5k objects)
//! replayed into it; for the Rust no-op plugin and a JavaScript no-op plugin.
//!
//! Three kinds of change are measured: a manifest change that keeps the
//! component (new `[config]`, compiled code comes from the compilation cache);
//! a new component (new bytes: a full compile while the old version keeps
//! running); and a new component that was checked first with the host's cache
//! (`wasm-informer check`, as a deployment step before the file is dropped in),
//! so that the reload finds it compiled.
//!
//! Invariant: the reload goes through the same runtime and listener API the
//! host uses (load, start an instance, subscribe with replay, drop the old
//! version); the host's file watcher and its debounce are not included.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{handler, ours, spawn, Bench, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::plan::Mode;
use crate::spec::{Command, HandlerKind, ReloadTiming};
use crate::stats::{show_in, Spread};
use crate::table::{Row, Verdict};
use crate::target::Target;
use crate::wasm;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B6",
    title: "hot-reload latency",
    target: "Rust <= 300 ms, JS <= 1.5 s",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only (kube-runtime has no plugins to reload): from the moment a plugin's new version is read \
to the first event it handled, with the cache replayed into it, in a host-like side (registry, \
managedFields stripped, streaming list). Three changes: a manifest change that keeps the \
component (compiled code from the cache), a new component (full compile while the old version \
keeps serving), and a new component checked first with `wasm-informer check` and the host's \
compilation cache (a deployment step), so the reload finds it compiled. The Rust no-op plugin in \
both modes; a JavaScript no-op plugin in the full mode only (its full compile alone exceeds the \
quick mode's budget). Each round is a fresh process; the verdict is met only when every round's \
first event is within the target.";

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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = root.join("target/plugins/bench-js-noop.wasm");
    if out.exists() {
        return Ok(out.display().to_string());
    }
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

/// The timings of each kind of change, over the rounds.
#[derive(Default)]
struct Measured {
    same: Vec<ReloadTiming>,
    fresh: Vec<ReloadTiming>,
    checked: Vec<ReloadTiming>,
    /// How long each `check` (the compile moved ahead of the reload) took, ms.
    check_ms: Vec<f64>,
}

fn measure(ctx: &Ctx, fx: &Fixture, lang: &Lang) -> Result<Measured> {
    let mut out = Measured::default();
    let reload =
        |child: &mut crate::driver::ChildProc, path: &Path, config: &str| -> Result<ReloadTiming> {
            let r = child.cmd(&Command::Reload {
                path: path.display().to_string(),
                config: config.into(),
                timeout_ms: 1000,
            });
            r?.reload.context("no reload timing")
        };
    for round in 0..ctx.plan.rounds {
        let kind = HandlerKind::Wasm {
            path: lang.path.clone(),
            config: "{}".into(),
            timeout_ms: 1000,
        };
        let (mut child, _) = spawn(fx, &ours(fx, vec![handler("plugin", kind)]))?;
        let config = format!(r#"{{"version":{}}}"#, round + 2);
        out.same
            .push(reload(&mut child, Path::new(&lang.path), &config)?);
        if lang.new_bytes {
            let tag = |k: &str| format!("{}-{k}-{round}-{}", lang.name, crate::probe::now_ns());
            let p = new_version(&lang.path, &tag("fresh"))?;
            let r = reload(&mut child, &p, "{}");
            let _ = std::fs::remove_file(&p);
            out.fresh.push(r?);
            // The same check `wasm-informer check` runs, with the engine
            // configuration and compilation cache the host side uses.
            let p = new_version(&lang.path, &tag("checked"))?;
            let t = std::time::Instant::now();
            let checked = wasm::engine().and_then(|e| {
                wasm_informer_runtime::check_file(&e, &p).map_err(|e| anyhow::anyhow!("{e}"))
            });
            out.check_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            let r = checked.and_then(|_| reload(&mut child, &p, "{}"));
            let _ = std::fs::remove_file(&p);
            out.checked.push(r?);
        }
        child.exit();
    }
    Ok(out)
}

fn row(lang: &Lang, change: &str, t: &[ReloadTiming]) -> Row {
    let of = |f: fn(&ReloadTiming) -> f64| t.iter().map(f).collect::<Vec<f64>>();
    let (load, first, replay) = (
        of(|x| x.load_ms),
        of(|x| x.first_event_ms),
        of(|x| x.replayed_ms),
    );
    let objects = t.first().map(|x| x.objects).unwrap_or(0);
    Row {
        id: "B6",
        what: format!("hot reload, {}: {change}, {objects} objects replayed", lang.name),
        ours: format!(
            "first event {} (load {}, replay done {})",
            show_in(&first, 0, "ms"),
            show_in(&load, 0, "ms"),
            show_in(&replay, 0, "ms")
        ),
        peer: "-".into(),
        ratio: "-".into(),
        target: format!("<= {:.0} ms", lang.target_ms),
        verdict: Target::AtMost(lang.target_ms).judge(Spread::of(&first).as_ref()),
        note: format!(
            "{} rounds, each a fresh process; first-event times [{}] ms. Excludes the host's manifest watcher and debounce.",
            t.len(),
            first
                .iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Runs B6.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let rust = wasm::plugin_path("noop")?;
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
        let m = measure(ctx, &fx, lang)?;
        rows.push(row(lang, "manifest change, same component", &m.same));
        if !m.fresh.is_empty() {
            rows.push(row(lang, "new component (full compile)", &m.fresh));
        }
        if !m.checked.is_empty() {
            let mut r = row(
                lang,
                "new component, checked first (`wasm-informer check` with the host's cache)",
                &m.checked,
            );
            r.note = format!(
                "{} The check itself (the compile, done before the file is dropped in, while the old version serves) took {}.",
                r.note,
                show_in(&m.check_ms, 0, "ms")
            );
            rows.push(r);
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
