//! `wasm-informer new --lang LANG NAME [--world WORLD]`: a plugin project,
//! anywhere on disk, that builds with one command and no checkout of this
//! repository.
//!
//! Job: write a project into the directory `NAME`, layered from the
//! templates this binary carries (placeholders replaced; a later layer's
//! file replaces an earlier one's):
//!
//! 1. `templates/common/WORLD/`: the manifest and the `wasm-informer test`
//!    fixtures, the same for every language (the four languages' plugins of
//!    one world do the same thing, so one expected output checks them all);
//! 2. `templates/LANG/common/`: the build files;
//! 3. `templates/LANG/WORLD/`: the Rust source; for JavaScript, Python and C
//!    the source is the SDK's own template plugin (`sdk/LANG/template*/`,
//!    the one the SDK's tests run), with its import of the SDK pointed at
//!    the vendored copy;
//! 4. `README.md`: `templates/common/README.md` with the language's part
//!    (`templates/LANG/README.md`) and the world's `ABOUT.md` inserted;
//!
//! and beside it the SDK and the WIT package this binary was built with (see
//! [`vendor`]): a Rust project depends on its SDK by a path dependency on
//! `vendor/wasm-informer-sdk`; JavaScript and Python projects import their
//! SDK module from `vendor/` and fetch only the pinned componentize tool from
//! their registry on the first build; C compiles the vendored SDK and
//! generates its bindings from `wit/`.
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

    /// The language's name in prose.
    pub fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Js => "JavaScript",
            Lang::Python => "Python",
            Lang::C => "C",
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

    /// Where the build writes the component, relative to the project.
    pub fn component(self, name: &str) -> String {
        match self {
            Lang::Rust => format!(
                "target/wasm32-wasip2/release/{}.wasm",
                name.replace('-', "_")
            ),
            Lang::Js | Lang::Python | Lang::C => format!("dist/{name}.wasm"),
        }
    }

    /// The plugin's source file in a project.
    pub fn source_file(self) -> &'static str {
        match self {
            Lang::Rust => "src/lib.rs",
            Lang::Js => "plugin.js",
            Lang::Python => "app.py",
            Lang::C => "plugin.c",
        }
    }

    /// The SDK template plugin a project's source comes from (`None`: the
    /// project template holds it).
    fn sdk_template(self, world: WorldArg) -> Option<String> {
        let dir = match world {
            WorldArg::EventHandler => "template",
            WorldArg::Controller => "template-controller",
        };
        (self != Lang::Rust).then(|| format!("sdk/{}/{dir}/{}", self.dir(), self.source_file()))
    }

    /// Fuel, deadline and memory for one call of a plugin of this language:
    /// an interpreter's call costs more and its heap starts larger.
    fn limits(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Lang::Rust | Lang::C => ("50_000_000", "1000", "32"),
            Lang::Js | Lang::Python => ("200_000_000", "2000", "64"),
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
    lang: Lang,
    /// What the plugin does (`templates/common/WORLD/ABOUT.md`).
    about: String,
    /// The README's part about the language: its files, its build and its
    /// SDK (`templates/LANG/README.md`).
    lang_readme: String,
}

impl Vars {
    fn apply(&self, text: &str) -> String {
        let (fuel, timeout, memory) = self.lang.limits();
        // The inserted parts first: they hold placeholders of their own.
        text.replace("{{about}}", self.about.trim_end())
            .replace("{{lang_readme}}", self.lang_readme.trim_end())
            .replace("{{name}}", &self.name)
            .replace("{{crate}}", &self.krate)
            .replace("{{version}}", self.version)
            .replace("{{world}}", self.world)
            .replace("{{lang}}", self.lang.title())
            .replace("{{build}}", &self.lang.build_command().join(" "))
            .replace("{{wasm}}", &self.lang.component(&self.name))
            .replace("{{fuel}}", fuel)
            .replace("{{timeout_ms}}", timeout)
            .replace("{{memory_mb}}", memory)
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
            out.push((
                "vendor/wasm-informer/build.mjs".to_string(),
                embedded_file("sdk/js/build.mjs")?.to_vec(),
            ));
            out.push(("wit/world.wit".to_string(), wit.to_vec()));
        }
        Lang::Python => {
            for (rel, bytes) in embedded::under("sdk/python/wasm_informer") {
                out.push((format!("vendor/wasm_informer/{rel}"), bytes.to_vec()));
            }
            out.push(("wit/world.wit".to_string(), wit.to_vec()));
        }
        Lang::C => {
            for f in [
                "wasm_informer.c",
                "wasm_informer.h",
                "wi_json.c",
                "wi_json.h",
            ] {
                out.push((
                    format!("vendor/wasm-informer/{f}"),
                    embedded_file(&format!("sdk/c/{f}"))?.to_vec(),
                ));
            }
            out.push(("wit/world.wit".to_string(), wit.to_vec()));
        }
    }
    Ok(out)
}

fn text_of(path: &str) -> Result<String, Failure> {
    Ok(String::from_utf8_lossy(embedded_file(path)?).into_owned())
}

fn embedded_file(path: &str) -> Result<&'static [u8], Failure> {
    embedded::file(path).ok_or_else(|| Failure::runtime(format!("this binary carries no {path}")))
}

/// The SDK's template plugin `path` as the project's source: its import of
/// the SDK points at `vendor/`, and its build line names the project's build
/// command.
fn project_source(lang: Lang, path: &str) -> Result<Vec<u8>, Failure> {
    let text = text_of(path)?;
    let text = match lang {
        Lang::Js => {
            let from = "from '../src/informer.js'";
            if !text.contains(from) {
                return Err(Failure::runtime(format!(
                    "the embedded {path} no longer imports the SDK {from}"
                )));
            }
            text.replace(from, "from './vendor/wasm-informer/informer.js'")
        }
        _ => text,
    };
    let build = lang.build_command().join(" ");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.find("Build:") {
            Some(at) => out.push_str(&format!("{}Build: {build}", &line[..at])),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out.into_bytes())
}

/// The project's files: the template layers with their placeholders
/// replaced, the plugin source, and the vendored SDK and WIT.
pub fn render(lang: Lang, world: WorldArg, name: &str) -> Result<Vec<ProjectFile>, Failure> {
    check_plugin_name(name).map_err(Failure::input)?;
    let common = format!("templates/common/{}", world.as_str());
    let vars = Vars {
        name: name.to_string(),
        krate: name.replace('-', "_"),
        version: env!("CARGO_PKG_VERSION"),
        world: world.as_str(),
        lang,
        about: text_of(&format!("{common}/ABOUT.md"))?,
        lang_readme: text_of(&format!("templates/{}/README.md", lang.dir()))?,
    };
    let layers = [
        common,
        format!("templates/{}/common", lang.dir()),
        format!("templates/{}/{}", lang.dir(), world.as_str()),
    ];
    let mut files = std::collections::BTreeMap::new();
    for layer in &layers {
        for (rel, bytes) in embedded::under(layer) {
            if rel == "ABOUT.md" {
                continue;
            }
            let bytes = match std::str::from_utf8(bytes) {
                Ok(text) => vars.apply(text).into_bytes(),
                Err(_) => bytes.to_vec(),
            };
            files.insert(vars.apply(rel), bytes);
        }
    }
    files.insert(
        "README.md".to_string(),
        vars.apply(&text_of("templates/common/README.md")?)
            .into_bytes(),
    );
    if let Some(from) = lang.sdk_template(world) {
        files.insert(lang.source_file().to_string(), project_source(lang, &from)?);
    }
    if !files.contains_key(lang.source_file()) {
        return Err(Failure::input(format!(
            "no template for --lang {} --world {} in this build",
            lang.dir(),
            world.as_str()
        )));
    }
    let mut out: Vec<ProjectFile> = files.into_iter().collect();
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
        args.lang.title(),
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
    fn every_language_and_world_renders_a_complete_project() {
        for lang in [Lang::Rust, Lang::Js, Lang::Python, Lang::C] {
            for world in [WorldArg::EventHandler, WorldArg::Controller] {
                let what = format!("{} {}", lang.dir(), world.as_str());
                let files = render(lang, world, "my-plugin").unwrap();
                let get = |p: &str| {
                    files
                        .iter()
                        .find(|(q, _)| q == p)
                        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
                        .unwrap_or_else(|| panic!("{what}: {p} missing"))
                };
                let manifest: toml::Table = toml::from_str(&get("plugin.toml")).unwrap();
                assert_eq!(
                    manifest["wasm"].as_str(),
                    Some(lang.component("my-plugin").as_str()),
                    "{what}"
                );
                assert_eq!(
                    manifest.contains_key("for"),
                    world == WorldArg::Controller,
                    "{what}"
                );
                let expected: serde_json::Value =
                    serde_json::from_str(&get("fixtures/expected.json")).unwrap();
                assert_eq!(expected["plugin"], "my-plugin", "{what}");
                assert!(
                    expected["world"].as_str().unwrap().contains(world.as_str()),
                    "{what}"
                );
                let readme = get("README.md");
                assert!(readme.contains(&lang.build_command().join(" ")), "{what}");
                assert!(
                    readme.contains(&format!("world `{}`", world.as_str())),
                    "{what}"
                );
                for (p, b) in &files {
                    let text = String::from_utf8_lossy(b);
                    assert!(!text.contains("{{"), "{what}: {p} keeps a placeholder");
                    assert!(
                        p.starts_with("vendor/") || !text.contains("scripts/build-plugins.sh"),
                        "{what}: {p} names the repository's build"
                    );
                }
                let source = match lang {
                    Lang::Rust => get("src/lib.rs"),
                    Lang::Js => {
                        get("vendor/wasm-informer/build.mjs");
                        get("plugin.js")
                    }
                    Lang::Python => get("app.py"),
                    Lang::C => {
                        get("vendor/wasm-informer/wasm_informer.c");
                        get("plugin.c")
                    }
                };
                if lang == Lang::Js {
                    assert!(
                        source.contains("from './vendor/wasm-informer/informer.js'"),
                        "{what}"
                    );
                }
                if lang != Lang::Rust {
                    let build = format!("Build: {}", lang.build_command().join(" "));
                    assert!(source.contains(&build), "{what}: {source}");
                }
            }
        }
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
