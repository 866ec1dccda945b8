//! Builds every Rust guest (plugins and check fixtures) for `wasm32-wasip2` with
//! a nested `cargo build --profile guest`, in its own target directory
//! (`<target>/guests/<checkout>`) so it never waits on the lock the outer build
//! holds, and writes their paths as constants.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (cargo package, constant name)
const GUESTS: &[(&str, &str)] = &[
    ("noop", "NOOP"),
    ("noop-v01", "NOOP_V01"),
    ("pod-ready-counter", "POD_READY_COUNTER"),
    ("label-enforcer", "LABEL_ENFORCER"),
    ("service-exposer", "SERVICE_EXPOSER"),
    ("spin-forever", "SPIN_FOREVER"),
    ("memory-bomb", "MEMORY_BOMB"),
    ("stack-overflow", "STACK_OVERFLOW"),
    ("panic-every-n", "PANIC_EVERY_N"),
    ("log-flood", "LOG_FLOOD"),
    ("slow", "SLOW"),
    ("sandbox-probe", "SANDBOX_PROBE"),
    ("echo", "ECHO"),
    ("echo-v01", "ECHO_V01"),
    ("echo-v02", "ECHO_V02"),
    ("api-probe", "API_PROBE"),
    ("noop-controller", "NOOP_CONTROLLER"),
    ("reconcile-probe", "RECONCILE_PROBE"),
    ("event-log", "EVENT_LOG"),
    ("parse-pod", "PARSE_POD"),
    ("read-fields", "READ_FIELDS"),
    ("annotate", "ANNOTATE"),
    ("fixture-wrong-world", "FIXTURE_WRONG_WORLD"),
    ("fixture-wrong-version", "FIXTURE_WRONG_VERSION"),
    ("fixture-extra-import", "FIXTURE_EXTRA_IMPORT"),
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .and_then(Path::parent)
        .expect("host/guest-artifacts sits two levels below the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out. Checkouts that
    // share one target directory get one guest directory each, so one never
    // overwrites another's components.
    let checkout = root
        .to_string_lossy()
        .trim_matches('/')
        .replace(['/', '\\', ':'], "_");
    let target_dir = match env::var_os("WASM_INFORMER_GUEST_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => out_dir
            .ancestors()
            .nth(4)
            .expect("OUT_DIR has the usual depth")
            .join("guests")
            .join(checkout),
    };

    for dir in ["sdk/rust", "plugins", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    println!("cargo:rerun-if-env-changed=WASM_INFORMER_GUEST_TARGET_DIR");

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .arg("build")
        .arg("--profile")
        .arg("guest")
        .arg("--target")
        .arg("wasm32-wasip2")
        .arg("--target-dir")
        .arg(&target_dir);
    for (pkg, _) in GUESTS {
        cmd.arg("-p").arg(pkg);
    }
    // The outer build's flags are for the host target; do not leak them.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the Rust plugins: {e}"));
    assert!(
        status.success(),
        "building the Rust plugins for wasm32-wasip2 failed ({status}); \
         is the target installed? (`rustup target add wasm32-wasip2`)"
    );

    let wasm_dir = target_dir.join("wasm32-wasip2").join("guest");
    let mut src = String::new();
    let mut all = String::new();
    for (pkg, konst) in GUESTS {
        let path = wasm_dir.join(format!("{}.wasm", pkg.replace('-', "_")));
        assert!(path.exists(), "expected {} after the build", path.display());
        let path = path.display().to_string();
        writeln!(src, "/// Path of the `{pkg}` component.").unwrap();
        writeln!(src, "pub const {konst}: &str = {path:?};").unwrap();
        writeln!(all, "    ({pkg:?}, {konst}),").unwrap();
    }
    writeln!(src, "/// Every guest as (package, path).").unwrap();
    writeln!(src, "pub const ALL: &[(&str, &str)] = &[\n{all}];").unwrap();
    std::fs::write(out_dir.join("guests.rs"), src).expect("write guests.rs");
}
