//! B11: what an idle plugin instance costs (ours only). One component is
//! loaded, one instance started, then N more, each as the host starts a plugin
//! (a runner with its instance, `init` done, no events); the figure is the RSS
//! and live heap the N added, per instance, with wasmtime's on-demand
//! allocator (the host's default) and with its pooling allocator sized from
//! the instance count.
//!
//! Invariant: one fresh process per arm and round, arms alternating their
//! order; every instance counted is running when memory is read; nothing is
//! extrapolated (the N instances are all started).

use anyhow::Result;

use super::{Bench, Ctx};
use crate::instances::{self, InstancesReport, InstancesSpec};
use crate::plan::Mode;
use crate::rounds::{self, Arm};
use crate::stats::{show, Spread};
use crate::table::{bytes, Row, Verdict};
use crate::target::Target;
use crate::wasm;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B11",
    title: "idle instances",
    target: "Rust <= 256 KB RSS per idle instance",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only: the memory one more idle plugin costs. In a fresh process with no informer, one \
component is loaded and one instance of it started (which also maps the compiled code), then N \
more (50, as many as B7's plugins, in both modes), each started as the host starts a plugin: a \
`PluginRunner` whose instance ran `init` and waits for events. An idle instance has handled no \
event, so its memory holds only what `init` touched; B7's plugins have each handled every pod. \
The per-instance figure falls as N grows (memory the allocators and the runtime add in steps is \
shared out over more instances), so it is the figure at this N. The figures are the RSS \
(`/proc/self/statm`, after `mi_collect` and `malloc_trim`) and the live heap (counting allocator) \
the N added, divided by N, and the RSS the first instance added. Memories start as copy-on-write \
images of the module's data in every arm. Arms: the Rust no-op plugin with wasmtime's on-demand \
allocator (the host's default) and with its pooling allocator sized for the N + 1 instances; in the \
full mode also the JavaScript (`js-noop`) and Python (`py-noop`) no-op plugins, on demand. These are \
the project's no-op test plugins, not the `wasm-informer new` templates. The target applies to the \
Rust plugin in both arms, per round.";

/// Runs B11.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let n = p.b11_instances;
    let rust = wasm::plugin_path("noop")?;
    let spec = |path: &str, pooling| InstancesSpec {
        path: path.to_string(),
        count: n,
        pooling,
    };
    let mut arms = vec![
        Arm {
            name: "rust",
            it: spec(&rust, false),
        },
        Arm {
            name: "rust-pooling",
            it: spec(&rust, true),
        },
    ];
    if p.mode == Mode::Full {
        arms.push(Arm {
            name: "js",
            it: spec(&wasm::built_plugin("js-noop")?, false),
        });
        arms.push(Arm {
            name: "python",
            it: spec(&wasm::built_plugin("py-noop")?, false),
        });
    }
    let s = rounds::run("B11", p.rounds, &arms, |a| instances::measure(&a.it))?;
    let row = |arm: &str, what: &str, target: bool| {
        let rss = s.map(arm, InstancesReport::rss_per_instance);
        let heap = s.map(arm, InstancesReport::heap_per_instance);
        let first = s.map(arm, InstancesReport::rss_first);
        Row {
            id: "B11",
            what: format!("{what}: RSS / heap per idle instance, {n} instances after the first"),
            ours: format!("{} / {}", show(&rss, bytes), show(&heap, bytes)),
            peer: "-".into(),
            ratio: format!("first instance {}", show(&first, bytes)),
            target: if target {
                "<= 256 KB RSS".into()
            } else {
                "-".into()
            },
            verdict: if target {
                Target::AtMost(256e3).judge(Spread::of(&rss).as_ref())
            } else {
                Verdict::Info
            },
            note: format!(
                "RSS added per instance, per round (ABBA order): [{}].",
                rss.iter().map(|x| bytes(*x)).collect::<Vec<_>>().join(", ")
            ),
        }
    };
    let mut rows = vec![
        row("rust", "Rust no-op plugin, on-demand allocator", true),
        row(
            "rust-pooling",
            "Rust no-op plugin, pooling allocator sized for the instances",
            true,
        ),
    ];
    if p.mode == Mode::Full {
        rows.push(row(
            "js",
            "JavaScript no-op plugin, on-demand allocator",
            false,
        ));
        rows.push(row(
            "python",
            "Python no-op plugin, on-demand allocator",
            false,
        ));
    } else {
        rows.push(Row {
            id: "B11",
            what: "idle instances, JavaScript and Python".into(),
            ours: "not run in quick mode".into(),
            peer: "-".into(),
            ratio: "-".into(),
            target: "-".into(),
            verdict: Verdict::Info,
            note: "building and compiling the JavaScript and Python components takes longer than the quick mode's budget; the full mode measures them".into(),
        });
    }
    Ok(rows)
}
