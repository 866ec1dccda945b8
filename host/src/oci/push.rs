//! `wasm-informer push FILE.wasm oci://HOST/REPO:TAG`: publishes a component
//! as the Wasm OCI artifact (config `application/vnd.wasm.config.v0+json`,
//! one layer `application/wasm`), after checking that it is a plugin of one
//! of the host's worlds.
//!
//! Invariant: only a component the host would load is pushed; the digest
//! printed is the manifest's, which `oci://HOST/REPO@DIGEST` pins.

use std::path::PathBuf;

use clap::Args;

use super::{
    auth, classify, client_for, sha256_digest, OciError, OciRef, WASM_CONFIG_MEDIA_TYPE,
    WASM_LAYER_MEDIA_TYPE,
};
use crate::commands::Failure;

/// Flags of `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component.
    #[arg(value_name = "FILE.wasm")]
    pub file: PathBuf,
    /// Where: `oci://HOST/REPOSITORY:TAG`.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
}

/// What a push published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The manifest's digest.
    pub digest: String,
    /// The layer's digest (the component's bytes').
    pub layer: String,
}

/// The artifact's config: architecture, os, the layer digests and the
/// component's world (the CNCF Wasm OCI format).
fn config_json(layer: &str, world: &str) -> Vec<u8> {
    serde_json::json!({
        "created": chrono_now(),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer],
        "component": { "exports": [world], "target": null },
    })
    .to_string()
    .into_bytes()
}

fn chrono_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Pushes `bytes` (a component of `world`) to `r`.
pub async fn push(bytes: Vec<u8>, world: &str, r: &OciRef) -> Result<Pushed, OciError> {
    let layer_digest = sha256_digest(&bytes);
    let layer = oci_client::client::ImageLayer::new(bytes, WASM_LAYER_MEDIA_TYPE.into(), None);
    let config = oci_client::client::Config::new(
        config_json(&layer_digest, world),
        WASM_CONFIG_MEDIA_TYPE.into(),
        None,
    );
    let mut manifest =
        oci_client::manifest::OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    manifest.artifact_type = Some(WASM_CONFIG_MEDIA_TYPE.into());
    let client = client_for(&r.registry);
    let auth = auth::for_registry(&r.registry);
    client
        .push(&r.reference(), &[layer], config, &auth, Some(manifest))
        .await
        .map_err(|e| classify(r, e))?;
    // The digest that pins the artifact is that of the manifest's bytes as
    // the registry stores them.
    let (stored, _) = client
        .pull_manifest_raw(
            &r.reference(),
            &auth,
            &[oci_client::manifest::OCI_IMAGE_MEDIA_TYPE],
        )
        .await
        .map_err(|e| classify(r, e))?;
    Ok(Pushed {
        digest: sha256_digest(&stored),
        layer: layer_digest,
    })
}

/// Runs `push`: checks the component, pushes it, prints the pinned reference.
pub fn run(args: PushArgs) -> Result<String, Failure> {
    let r = OciRef::parse(&args.reference).map_err(Failure::input)?;
    let bytes = std::fs::read(&args.file)
        .map_err(|e| Failure::input(format!("{}: {e}", args.file.display())))?;
    let engine =
        wasm_informer_runtime::PluginEngine::new(Default::default()).map_err(Failure::runtime)?;
    let report =
        wasm_informer_runtime::check_bytes(&engine, &args.file.display().to_string(), &bytes)
            .map_err(Failure::input)?;
    let world = report.world;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::runtime)?;
    let pushed = rt
        .block_on(push(bytes, &world, &r))
        .map_err(Failure::runtime)?;
    let pinned = OciRef {
        tag: None,
        ..r.pinned(&pushed.digest)
    };
    Ok(format!(
        "pushed {} ({world}) to {r}\ndigest: {}\npin it with: wasm = \"{pinned}\"\n",
        args.file.display(),
        pushed.digest,
    ))
}
