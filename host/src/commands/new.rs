//! `wasm-informer new --lang LANG NAME [--world WORLD]`: a plugin project,
//! anywhere on disk, that builds with one command and no checkout of this
//! repository.
//!
//! Job: write the template `templates/LANG/WORLD` into the directory `NAME`
//! (placeholders replaced), and beside it the SDK and the WIT package this
//! binary was built with (see [`vendor`]): a Rust project depends on its SDK
//! by a path dependency on `vendor/wasm-informer-sdk`; JavaScript and Python
//! projects import their SDK module from `vendor/` and fetch only the pinned
//! componentize tool from their registry; C generates its bindings from
//! `wit/`.
//!
//! Invariants: nothing is written unless the target directory is new or
//! empty, and every file is written (or none is left half-written: a failure
//! removes the directory it created); the project's plugin name passes the
//! manifest's own name check, so the generated manifest loads.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::Failure;
use crate::config::check_plugin_name;
use crate::embedded;

/// A plugin language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, with the wasm-informer SDK (cargo, target wasm32-wasip2).
    Rust,
    /// JavaScript, with componentize-js.
    Js,
    /// Python, with componentize-py.
    Python,
    /// C, with wit-bindgen and clang.
    C,
}

impl Lang {
    /// The template folder name.
    pub fn dir(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Js => "js",
            Lang::Python => "python",
            Lang::C => "c",
        }
    }

    /// The one command that builds a project of this language, run in its
    /// directory.
    pub fn build_command(self) -> &'static [&'static str] {
        match self {
            Lang::Rust => &["cargo", "build", "--release"],
            Lang::Js => &["npm", "run", "build"],
            Lang::Python => &["python3", "build.py"],
            Lang::C => &["make"],
        }
    }
}

/// A WIT world a plugin exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorldArg {
    /// Called once per change of a watched object.
    EventHandler,
    /// Called with the key of an object to reconcile, from a work queue.
    Controller,
}

impl WorldArg {
    /// The WIT world's name, which is also the template folder name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorldArg::EventHandler => "event-handler",
            WorldArg::Controller => "controller",
        }
    }
}

/// Flags of `new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's language.
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// The project directory to create; its last component is the plugin
    /// name (lower-case letters, digits, `-`, `_`).
    #[arg(value_name = "NAME")]
    pub name: PathBuf,
    /// The world the plugin exports.
    #[arg(long, value_enum, default_value = "event-handler")]
    pub world: WorldArg,
}

/// What `new` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The project directory.
    pub dir: PathBuf,
    /// The plugin name.
    pub name: String,
    /// Files written, relative to `dir`, sorted.
    pub files: Vec<String>,
}

/// The values of a template's placeholders.
struct Vars {
    name: String,
    krate: String,
    version: &'static str,
    world: &'static str,
}

impl Vars {
    fn apply(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name)
            .replace("{{crate}}", &self.krate)
            .replace("{{version}}", self.version)
            .replace("{{world}}", self.world)
    }
}

/// One file of the project: path relative to the project, bytes.
type ProjectFile = (String, Vec<u8>);

/// The files the project depends on, taken from this binary: the SDK of the
/// language and the WIT package, at the paths the template's build expects.
///
/// | language | SDK | WIT |
/// |---|---|---|
/// | Rust | `vendor/wasm-informer-sdk/` (a crate: `Cargo.toml`, `src/`) | `vendor/wasm-informer-sdk/wit/` |
/// | JavaScript | `vendor/wasm-informer/` (the ES module) | `wit/` |
/// | Python | `vendor/wasm_informer/` (the package) | `wit/` |
/// | C | (none: `wit-bindgen c` generates it) | `wit/` |
pub fn vendor(lang: Lang, vars_version: &str) -> Result<Vec<ProjectFile>, Failure> {
    let wit = embedded::file("wit/world.wit")
        .ok_or_else(|| Failure::runtime("this binary carries no wit/world.wit"))?;
    let mut out = Vec::new();
    match lang {
        Lang::Rust => {
            let manifest = embedded::file("templates/rust/sdk/Cargo.toml")
                .ok_or_else(|| Failure::runtime("this binary carries no Rust SDK manifest"))?;
            let manifest = String::from_utf8_lossy(manifest).replace("{{version}}", vars_version);
            out.push((
                "vendor/wasm-informer-sdk/Cargo.toml".to_string(),
                manifest.into_bytes(),
            ));
            for (rel, bytes) in embedded::under("sdk/rust/src") {
                let mut bytes = bytes.to_vec();
                if rel == "lib.rs" {
                    // In the repository the SDK finds wit/ two levels up; here
                    // it is inside the crate.
                    let text = String::from_utf8_lossy(&bytes);
                    let rewritten = text.replace("path: \"../../wit\"", "path: \"wit\"");
                    if rewritten == text {
                        return Err(Failure::runtime(
                            "the embedded Rust SDK no longer names its WIT as path: \"../../wit\"",
                        ));
                    }
                    bytes = rewritten.into_bytes();
                }
                out.push((format!("vendor/wasm-informer-sdk/src/{rel}"), bytes));
            }
            out.push((
                "vendor/wasm-informer-sdk/wit/world.wit".to_string(),
                wit.to_vec(),
            ));
        }
        Lang::Js => {
            for (rel, bytes) in embedded::under("sdk/js/src") {
                out.push((format!("vendor/wasm-informer/{rel}"), bytes.to_vec()));
            }
            out.push(("wit/world.wit".to_string(), wit.to_vec()));
        }
        Lang::Python => {
            for (rel, bytes) in embedded::under("sdk/python/wasm_informer") {
                out.push((format!("vendor/wasm_informer/{rel}"), bytes.to_vec()));
            }
            out.push(("wit/world.wit".to_string(), wit.to_vec()));
        }
        Lang::C => out.push(("wit/world.wit".to_string(), wit.to_vec())),
    }
    Ok(out)
}

/// The project's files: the template with its placeholders replaced, and the
/// vendored SDK and WIT.
pub fn render(lang: Lang, world: WorldArg, name: &str) -> Result<Vec<ProjectFile>, Failure> {
    check_plugin_name(name).map_err(Failure::input)?;
    let vars = Vars {
        name: name.to_string(),
        krate: name.replace('-', "_"),
        version: env!("CARGO_PKG_VERSION"),
        world: world.as_str(),
    };
    let dir = format!("templates/{}/{}", lang.dir(), world.as_str());
    let template = embedded::under(&dir);
    if template.is_empty() {
        return Err(Failure::input(format!(
            "no template for --lang {} --world {} in this build",
            lang.dir(),
            world.as_str()
        )));
    }
    let mut out = Vec::new();
    for (rel, bytes) in template {
        let path = vars.apply(rel);
        let bytes = match std::str::from_utf8(bytes) {
            Ok(text) => vars.apply(text).into_bytes(),
            Err(_) => bytes.to_vec(),
        };
        out.push((path, bytes));
    }
    out.extend(vendor(lang, vars.version)?);
    out.sort();
    Ok(out)
}

/// Writes a new project into `args.name`.
pub fn create(args: &NewArgs) -> Result<Created, Failure> {
    let dir = &args.name;
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Failure::input(format!("{}: not a directory name", dir.display())))?
        .to_string();
    let files = render(args.lang, args.world, &name)?;
    let existed = dir.exists();
    if existed {
        let empty = std::fs::read_dir(dir)
            .map_err(|e| Failure::input(format!("{}: {e}", dir.display())))?
            .next()
            .is_none();
        if !empty {
            return Err(Failure::input(format!(
                "{}: already exists and is not empty",
                dir.display()
            )));
        }
    }
    let written = write_all(dir, &files);
    if let Err(e) = written {
        if !existed {
            let _ = std::fs::remove_dir_all(dir);
        }
        return Err(Failure::runtime(e));
    }
    Ok(Created {
        dir: dir.clone(),
        name,
        files: files.into_iter().map(|(p, _)| p).collect(),
    })
}

fn write_all(dir: &Path, files: &[ProjectFile]) -> Result<(), String> {
    for (rel, bytes) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        #[cfg(unix)]
        if rel.ends_with(".sh") || rel == "build.py" {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
        }
    }
    Ok(())
}

/// Runs `new` and returns what to print.
pub fn run(args: NewArgs) -> Result<String, Failure> {
    let c = create(&args)?;
    let build = args.lang.build_command().join(" ");
    let dir = c.dir.display();
    Ok(format!(
        "created {} plugin {} ({}) in {dir}\n\n  cd {dir}\n  {build}\n  \
         wasm-informer test plugin.toml --objects fixtures/objects.yaml --events fixtures/events.yaml --expect fixtures/expected.json\n  \
         wasm-informer dev plugin.toml\n\nSee {dir}/README.md.\n",
        args.lang.dir(),
        c.name,
        args.world.as_str(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_project_carries_the_sdk_with_its_wit_inside_the_crate() {
        let files = render(Lang::Rust, WorldArg::EventHandler, "my-plugin").unwrap();
        let get = |p: &str| {
            files
                .iter()
                .find(|(q, _)| q == p)
                .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_else(|| panic!("{p} missing"))
        };
        assert!(get("vendor/wasm-informer-sdk/src/lib.rs").contains("path: \"wit\""));
        assert_eq!(
            get("vendor/wasm-informer-sdk/wit/world.wit").as_bytes(),
            embedded::file("wit/world.wit").unwrap()
        );
        let manifest = get("plugin.toml");
        assert!(manifest.contains("name = \"my-plugin\""), "{manifest}");
        assert!(
            manifest.contains("target/wasm32-wasip2/release/my_plugin.wasm"),
            "{manifest}"
        );
        assert!(!files
            .iter()
            .any(|(_, b)| String::from_utf8_lossy(b).contains("{{")));
    }

    #[test]
    fn vendored_sdk_manifest_names_the_repository_sdk_s_dependencies() {
        let sdk = embedded::file("templates/rust/sdk/Cargo.toml").unwrap();
        let vendored: toml::Table = toml::from_str(&String::from_utf8_lossy(sdk)).unwrap();
        let repo: toml::Table = toml::from_str(
            &std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/rust/Cargo.toml"),
            )
            .unwrap(),
        )
        .unwrap();
        let names = |t: &toml::Table| {
            let mut v: Vec<String> = t["dependencies"]
                .as_table()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&vendored), names(&repo));
        assert_eq!(vendored["features"], repo["features"]);
    }

    #[test]
    fn refuses_a_bad_name_and_a_non_empty_directory() {
        let err = render(Lang::Rust, WorldArg::EventHandler, "My Plugin").unwrap_err();
        assert_eq!(err.code, 2);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("taken");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("keep.txt"), "mine").unwrap();
        let args = NewArgs {
            lang: Lang::Rust,
            name: dir.clone(),
            world: WorldArg::EventHandler,
        };
        let err = create(&args).unwrap_err();
        assert!(err.message.contains("not empty"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
