//! Validation as the apiserver runs it on every create and update (POST, PUT, every patch type,
//! server-side apply, dry runs included), on the object that would be stored.
//!
//! The flow is `k8s.io/apiserver/pkg/registry/rest`: on create (`BeforeCreate`) the kind's
//! strategy `Validate` first, and only when it passes the generic metadata check with
//! path-segment names; on update (`BeforeUpdate`) the common fields (metadata with path-segment
//! names and `ValidateObjectMetaAccessorUpdate`) followed by the strategy's `ValidateUpdate`.
//! Any error is a 422 built like `errors.NewInvalid`. The rules live in one file per concern:
//! [`names`], [`labels`], [`meta`], [`pod`], [`apps`], [`service`], [`data`], [`event`],
//! [`custom`], [`other_kinds`]; [`field`] prints them.
//!
//! Invariant: a write is stored only if this module accepts the object; the error names the
//! kind as the apiserver does (`Kind[.group]`, core Events as `Event` whichever API served the
//! request), the object's (possibly generated) name, and one cause per field error.

pub mod apps;
pub mod custom;
pub mod data;
pub mod event;
pub mod field;
pub mod labels;
pub mod meta;
pub mod names;
pub mod other_kinds;
pub mod pod;
pub mod service;

use serde_json::Value;

use crate::resource::ResourceType;
use crate::status::ApiError;
use field::ErrorList;

/// What a validation needs besides the object.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The type the request was served as (events.k8s.io/v1 or core v1 for Events).
    pub served: &'a ResourceType,
    /// The type the object is stored as (and is in when validated).
    pub stored: &'a ResourceType,
    /// For a custom resource, the `openAPIV3Schema` of its version in the CRD.
    pub schema: Option<&'a Value>,
}

enum Kind {
    Namespace,
    Pod,
    ConfigMap,
    Secret,
    Service,
    ServiceAccount,
    Event,
    Deployment,
    Lease,
    Role { namespaced: bool },
    RoleBinding { namespaced: bool },
    PodDisruptionBudget,
    CustomResourceDefinition,
    Custom,
    Other,
}

fn kind_of(rt: &ResourceType) -> Kind {
    if rt.custom {
        return Kind::Custom;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => Kind::Namespace,
        ("", "pods") => Kind::Pod,
        ("", "configmaps") => Kind::ConfigMap,
        ("", "secrets") => Kind::Secret,
        ("", "services") => Kind::Service,
        ("", "serviceaccounts") => Kind::ServiceAccount,
        ("", "events") => Kind::Event,
        ("apps", "deployments") => Kind::Deployment,
        ("coordination.k8s.io", "leases") => Kind::Lease,
        ("rbac.authorization.k8s.io", "roles") => Kind::Role { namespaced: true },
        ("rbac.authorization.k8s.io", "clusterroles") => Kind::Role { namespaced: false },
        ("rbac.authorization.k8s.io", "rolebindings") => Kind::RoleBinding { namespaced: true },
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            Kind::RoleBinding { namespaced: false }
        }
        ("policy", "poddisruptionbudgets") => Kind::PodDisruptionBudget,
        ("apiextensions.k8s.io", "customresourcedefinitions") => Kind::CustomResourceDefinition,
        _ => Kind::Other,
    }
}

fn strict_events(ctx: &Context<'_>) -> bool {
    ctx.served.group == "events.k8s.io"
}

/// The strategy's `Validate` for a new object.
fn strategy_validate(ctx: &Context<'_>, obj: &Value) -> ErrorList {
    let namespaced = ctx.stored.namespaced;
    match kind_of(ctx.stored) {
        Kind::Namespace => other_kinds::validate_namespace(obj),
        Kind::Pod => pod::validate_pod_create(obj),
        Kind::ConfigMap => data::validate_config_map(obj),
        Kind::Secret => data::validate_secret(obj),
        Kind::Service => service::validate_service(obj),
        Kind::ServiceAccount | Kind::Other => {
            other_kinds::validate_meta_only(obj, namespaced, &names::name_is_dns_subdomain)
        }
        Kind::Event => event::validate_event_create(obj, strict_events(ctx)),
        Kind::Deployment => apps::validate_deployment(obj),
        Kind::Lease => other_kinds::validate_lease(obj),
        Kind::Role { namespaced } => other_kinds::validate_role(obj, namespaced),
        Kind::RoleBinding { namespaced } => other_kinds::validate_role_binding(obj, namespaced),
        Kind::PodDisruptionBudget => other_kinds::validate_pdb(obj),
        Kind::CustomResourceDefinition => other_kinds::validate_crd(obj),
        Kind::Custom => custom::validate_custom_resource(obj, namespaced, ctx.schema),
    }
}

/// The strategy's `ValidateUpdate`.
fn strategy_validate_update(ctx: &Context<'_>, new: &Value, old: &Value) -> ErrorList {
    let namespaced = ctx.stored.namespaced;
    let with_meta = |mut errs: ErrorList| {
        errs.extend(meta::validate_object_meta_update(new, old));
        errs
    };
    match kind_of(ctx.stored) {
        Kind::Namespace => other_kinds::validate_namespace_update(new, old),
        Kind::Pod => pod::validate_pod_update(new, old),
        Kind::ConfigMap => data::validate_config_map_update(new, old),
        Kind::Secret => data::validate_secret_update(new, old),
        Kind::Service => service::validate_service_update(new, old),
        Kind::ServiceAccount | Kind::Other => {
            let mut errs = meta::validate_object_meta_update(new, old);
            errs.extend(other_kinds::validate_meta_only(
                new,
                namespaced,
                &names::name_is_dns_subdomain,
            ));
            errs
        }
        Kind::Event => event::validate_event_update(new, old, strict_events(ctx)),
        Kind::Deployment => apps::validate_deployment_update(new, old),
        Kind::Lease => with_meta(other_kinds::validate_lease(new)),
        Kind::Role { namespaced } => with_meta(other_kinds::validate_role(new, namespaced)),
        Kind::RoleBinding { namespaced } => {
            other_kinds::validate_role_binding_update(new, old, namespaced)
        }
        Kind::PodDisruptionBudget => with_meta(other_kinds::validate_pdb(new)),
        Kind::CustomResourceDefinition => with_meta(other_kinds::validate_crd(new)),
        Kind::Custom => custom::validate_custom_resource_update(new, old, ctx.schema),
    }
}

fn reject(ctx: &Context<'_>, obj: &Value, errs: &[field::FieldError]) -> ApiError {
    field::invalid_status(
        &ctx.stored.group,
        &ctx.stored.kind,
        obj["metadata"]["name"].as_str().unwrap_or(""),
        errs,
    )
}

/// `rest.BeforeCreate`'s validation of a new object (name generated, defaults applied).
pub fn validate_create(ctx: &Context<'_>, obj: &Value) -> Result<(), ApiError> {
    let errs = strategy_validate(ctx, obj);
    if !errs.is_empty() {
        return Err(reject(ctx, obj, &errs));
    }
    let errs = meta::validate_object_meta(obj, ctx.stored.namespaced, &names::path_segment_name);
    if !errs.is_empty() {
        return Err(reject(ctx, obj, &errs));
    }
    Ok(())
}

/// `rest.BeforeUpdate`'s validation of the object an update would store. A `/status` write
/// keeps the stored spec and metadata, so only the common fields are checked for it.
pub fn validate_update(
    ctx: &Context<'_>,
    new: &Value,
    old: &Value,
    status_only: bool,
) -> Result<(), ApiError> {
    let mut errs =
        meta::validate_object_meta(new, ctx.stored.namespaced, &names::path_segment_name);
    errs.extend(meta::validate_object_meta_update(new, old));
    if !status_only {
        errs.extend(strategy_validate_update(ctx, new, old));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(reject(ctx, new, &errs))
    }
}
