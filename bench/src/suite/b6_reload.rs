//! B6: hot-reload latency: from the moment a plugin's new version is read to
//! the first event the new version handled, with the cache (5k objects)
//! replayed into it; for the Rust no-op plugin and JavaScript and Python no-op
//! plugins.
//!
//! The kinds of change measured: a manifest change that keeps the component
//! (new `[config]`, compiled code comes from the compilation cache); a new
//! component with the same code (new bytes only: every function found in
//! cranelift's incremental cache); for JavaScript and Python, a new component
//! built from the script with one function added (what an author's edit
//! gives: the same embedded engine, a changed script), not checked first; and
//! a new component that was checked first with the host's cache
//! (`wasm-informer check`, as a deployment step before the file is dropped
//! in), so that the reload finds it compiled.
//!
//! Invariant: the reload goes through the same runtime and listener API the
//! host uses (load, start an instance, subscribe with replay, drop the old
//! version); the host's file watcher and its debounce are not included.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

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
    target: "Rust <= 300 ms, JS and Python <= 1.5 s",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only (kube-runtime has no plugins to reload): from the moment a plugin's new version is read \
to the first event it handled, with the cache replayed into it, in a host-like side (registry, \
managedFields stripped, streaming list), with the engine the host uses (compilation cache and \
cranelift's incremental cache on disk). The changes: a manifest change that keeps the component \
(compiled code from the cache); a new component with the same code (new bytes only); for \
JavaScript and Python, a new component built from the plugin's script with one function added \
(an author's edit: the same embedded engine, a changed script), not checked first, the case the \
1.5 s target is about; and a new component checked first with `wasm-informer check` and the \
host's cache (a deployment step), so the reload finds it compiled. The Rust no-op plugin in both \
modes; JavaScript and Python no-op plugins in the full mode only (building and compiling them \
exceeds the quick mode's budget). Each round is a fresh process and builds its own edited \
component (the build is not timed); the verdict is met only when every round's first event is \
within the target.";

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

/// How a plugin's source is edited and rebuilt, for the "script edited"
/// change: one function added whose body names the round, so every round's
/// component is new to the compilation cache while all but a few of its
/// functions are the ones compiled before.
#[derive(Clone, Copy)]
enum Edit {
    /// `plugins/testing/NAME/plugin.js`, built with `sdk/js/build.mjs`.
    Js(&'static str),
    /// `plugins/testing/NAME/app.py`, built with componentize-py and the SDK.
    Python(&'static str),
}

impl Edit {
    /// Builds the edited plugin for `round` and returns its path.
    fn build(self, round: usize) -> Result<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let (name, file, line) = match self {
            Edit::Js(n) => (
                n,
                "plugin.js",
                format!("\nfunction benchEdit() {{ return {round}; }}\nglobalThis.benchEdit = benchEdit;\n"),
            ),
            Edit::Python(n) => (
                n,
                "app.py",
                format!("\n\ndef bench_edit():\n    return {round}\n"),
            ),
        };
        // Three levels below the root, as plugins/testing/NAME is, so the
        // plugin's relative import of the SDK resolves the same.
        let dir = root
            .join("target/bench-edits")
            .join(format!("{name}-{round}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let src = root.join("plugins/testing").join(name).join(file);
        let mut text =
            std::fs::read_to_string(&src).with_context(|| format!("reading {}", src.display()))?;
        text.push_str(&line);
        std::fs::write(dir.join(file), text)?;
        let out = dir.join(format!("{name}.wasm"));
        let wit = root.join("wit");
        let mut cmd = match self {
            Edit::Js(_) => {
                let mut c = std::process::Command::new("node");
                c.current_dir(&root)
                    .arg("sdk/js/build.mjs")
                    .arg(dir.join(file))
                    .arg(&out)
                    .arg("--wit")
                    .arg(&wit)
                    .args(["--world", "event-handler"]);
                c
            }
            Edit::Python(_) => {
                let mut c = std::process::Command::new(root.join(".venv/bin/componentize-py"));
                c.current_dir(&dir)
                    .arg("-d")
                    .arg(&wit)
                    .args(["-w", "event-handler", "componentize", "-p"])
                    .arg(&dir)
                    .arg("-p")
                    .arg(root.join("sdk/python"))
                    .args(["app", "-o"])
                    .arg(&out);
                c
            }
        };
        let st = cmd
            .stdout(std::process::Stdio::null())
            .status()
            .with_context(|| format!("building the edited {name} (run scripts/setup.sh)"))?;
        anyhow::ensure!(st.success(), "building the edited {name} failed ({st})");
        Ok(out)
    }
}

struct Lang {
    name: &'static str,
    path: String,
    target_ms: f64,
    /// The "script edited" change, for a JavaScript or Python plugin.
    edit: Option<Edit>,
}

/// The timings of each kind of change, over the rounds.
#[derive(Default)]
struct Measured {
    same: Vec<ReloadTiming>,
    fresh: Vec<ReloadTiming>,
    edited: Vec<ReloadTiming>,
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
        let tag = |k: &str| format!("{}-{k}-{round}-{}", lang.name, crate::probe::now_ns());
        let p = new_version(&lang.path, &tag("fresh"))?;
        let r = reload(&mut child, &p, "{}");
        let _ = std::fs::remove_file(&p);
        out.fresh.push(r?);
        if let Some(edit) = lang.edit {
            // Built before the clock starts: the build is the author's.
            let p = edit.build(round)?;
            let r = reload(&mut child, &p, "{}");
            if let Some(d) = p.parent() {
                let _ = std::fs::remove_dir_all(d);
            }
            out.edited.push(r?);
        }
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
        edit: None,
    }];
    if p.mode == Mode::Full {
        langs.push(Lang {
            name: "JavaScript",
            path: wasm::built_plugin("js-noop")?,
            target_ms: 1500.0,
            edit: Some(Edit::Js("js-noop")),
        });
        langs.push(Lang {
            name: "Python",
            path: wasm::built_plugin("py-noop")?,
            target_ms: 1500.0,
            edit: Some(Edit::Python("py-noop")),
        });
    }
    let mut rows = Vec::new();
    for lang in &langs {
        let m = measure(ctx, &fx, lang)?;
        rows.push(row(lang, "manifest change, same component", &m.same));
        rows.push(row(
            lang,
            "new component, same code (new bytes, no check)",
            &m.fresh,
        ));
        if !m.edited.is_empty() {
            rows.push(row(
                lang,
                "new component, script edited (one function added, no check)",
                &m.edited,
            ));
        }
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
    if p.mode == Mode::Quick {
        rows.push(Row {
            id: "B6",
            what: "hot reload, JavaScript and Python".into(),
            ours: "not run in quick mode".into(),
            peer: "-".into(),
            ratio: "-".into(),
            target: "<= 1500 ms".into(),
            verdict: Verdict::Info,
            note: "building and compiling the 12 MB JavaScript and 18 MB Python components takes longer than the quick mode's budget; the full mode measures them".into(),
        });
    }
    fx.shutdown(&ctx.rt);
    Ok(rows)
}
