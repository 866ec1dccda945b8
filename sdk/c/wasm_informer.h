/*
 * wasm-informer plugin SDK for C: helpers over the bindings that
 * `wit-bindgen c` generates for WIT `wasm-informer:plugin@0.2.1` (either
 * world), so that a plugin deals in NUL-terminated C strings, JSON text and
 * one error type.
 *
 * scripts/build-plugins.sh generates the bindings with `--rename-world
 * plugin` (both worlds give `plugin.h`, which this header includes) and
 * compiles this file and wi_json.c with the plugin.
 *
 * Conventions:
 * - every `char *` a function returns is malloc'd: free() it. NULL means
 *   "absent" (no namespace, no such label), never an error;
 * - every call that can fail returns bool and, on failure, fills the
 *   `wi_error_t *err` it was given (which may be NULL to ignore the details);
 *   free it with wi_error_free. Nothing here traps on a host error;
 * - an object (`wi_object_t`) is a reference the host hands out for the
 *   current call into the plugin only: the event's objects, a query's or an
 *   API call's answer. There is nothing to release, but a reference kept past
 *   the call that produced it must not be used: the host traps the instance
 *   (copy out what you keep, with the getters). API calls take
 *   `wi_object_t *out`, which may be NULL when the answer is not needed;
 * - string arguments are NUL-terminated C strings; `ns` is NULL for
 *   cluster-scoped resources.
 */
#ifndef WASM_INFORMER_H
#define WASM_INFORMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin.h"
#include "wi_json.h"

/* ---- strings ---- */

/* A malloc'd, NUL-terminated copy of a WIT string. */
char *wi_cstr(const plugin_string_t *s);
/* wi_cstr, then frees the WIT string (for the owned arguments of an export, such as `config`). */
char *wi_take(plugin_string_t *s);
/* A malloc'd printf-formatted string. */
char *wi_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Sets the `err` result of an export (`*err`, a WIT string the bindings free
 * after the call) to the formatted message and returns false, so that
 * `return wi_fail(err, "...", ...);` ends a failing export.
 */
bool wi_fail(plugin_string_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- log ---- */

/* Writes one printf-formatted message to the host log. */
void wi_log(wasm_informer_plugin_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define wi_trace(...) wi_log(WASM_INFORMER_PLUGIN_LOG_LEVEL_TRACE, __VA_ARGS__)
#define wi_debug(...) wi_log(WASM_INFORMER_PLUGIN_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define wi_info(...) wi_log(WASM_INFORMER_PLUGIN_LOG_LEVEL_INFO, __VA_ARGS__)
#define wi_warn(...) wi_log(WASM_INFORMER_PLUGIN_LOG_LEVEL_WARN, __VA_ARGS__)
#define wi_error(...) wi_log(WASM_INFORMER_PLUGIN_LOG_LEVEL_ERROR, __VA_ARGS__)

/* ---- errors ---- */

typedef enum {
    WI_ERR_NONE = 0,
    /* api-error */
    WI_ERR_FORBIDDEN,
    WI_ERR_NOT_FOUND,
    WI_ERR_CONFLICT,
    WI_ERR_ALREADY_EXISTS,
    WI_ERR_INVALID,
    WI_ERR_RATE_LIMITED,
    WI_ERR_TIMEOUT,
    WI_ERR_UNAVAILABLE,
    /* cache-error (forbidden is WI_ERR_FORBIDDEN) */
    WI_ERR_UNKNOWN_RESOURCE,
    WI_ERR_INVALID_SELECTOR,
    WI_ERR_UNKNOWN_INDEX,
    WI_ERR_TOO_MANY_OBJECTS, /* a query would reference more objects than a call may */
} wi_error_kind_t;

/* A failed cache query or API call. */
typedef struct {
    wi_error_kind_t kind;
    /* "CALL: KIND: DETAIL", for example "patch v1/pods prod/web: not-found: ...";
     * for `invalid`, the field causes follow in parentheses. */
    char *message;
    /* The server's (or the host's) message alone. */
    char *detail;
} wi_error_t;

/* The WIT case name of a kind: "forbidden", "not-found", ..., "unknown-index". */
const char *wi_error_kind_name(wi_error_kind_t kind);
/* Frees the strings of an error (and zeroes it); safe on a zeroed error. */
void wi_error_free(wi_error_t *err);

/* ---- objects ---- */

/* An object reference, valid for the current call (see above). */
typedef wasm_informer_plugin_types_object_ref_t wi_object_t;
/* A list of references (a cache query's answer): wi_objects_free it. */
typedef wasm_informer_plugin_cache_list_object_ref_t wi_objects_t;

/* The i-th object of a list. */
wi_object_t wi_objects_at(const wi_objects_t *list, size_t i);
/* Frees a list's array (the references need no release). */
void wi_objects_free(wi_objects_t *list);

/* Getters: each is one call into the host that copies only what it returns. */
char *wi_object_resource(wi_object_t o);         /* "v1/pods" */
char *wi_object_key(wi_object_t o);              /* "namespace/name" or "name" */
char *wi_object_namespace(wi_object_t o);        /* NULL for cluster-scoped objects */
char *wi_object_name(wi_object_t o);
char *wi_object_uid(wi_object_t o);
char *wi_object_resource_version(wi_object_t o);
bool wi_object_generation(wi_object_t o, int64_t *out); /* false when it has none */
char *wi_object_label(wi_object_t o, const char *key);      /* NULL when absent */
char *wi_object_annotation(wi_object_t o, const char *key); /* NULL when absent */
char *wi_object_labels_json(wi_object_t o);      /* {"key":"value",...} */
char *wi_object_annotations_json(wi_object_t o); /* {"key":"value",...} */
char *wi_object_reference_json(wi_object_t o);   /* {"apiVersion","kind","namespace","name","uid"} */
char *wi_object_json(wi_object_t o);             /* the whole object */
/* `metadata.deletionTimestamp` is set: finalizers hold the deleted object. */
bool wi_object_is_deleting(wi_object_t o);

/* ---- cache ---- */

/* One cached object by key: *found tells whether it exists; when it does, *out is it. */
bool wi_cache_get(const char *resource, const char *key, bool *found, wi_object_t *out, wi_error_t *err);
/* Objects of a resource, optionally in one namespace (NULL: all) and matching a selector (NULL: all). */
bool wi_cache_list(const char *resource, const char *ns, const char *selector, wi_objects_t *out, wi_error_t *err);
/* Objects whose value for the named index equals `value` (the index "namespace" always exists). */
bool wi_cache_by_index(const char *resource, const char *index, const char *value, wi_objects_t *out,
                       wi_error_t *err);
/* Whether the informer for `resource` finished its first list. */
bool wi_cache_has_synced(const char *resource, bool *out, wi_error_t *err);

/* ---- kube: the Kubernetes API, as the manifest's [[write]] grants allow ---- */

typedef enum {
    WI_PATCH_MERGE = WASM_INFORMER_PLUGIN_KUBE_PATCH_TYPE_MERGE,                     /* RFC 7386 */
    WI_PATCH_JSON = WASM_INFORMER_PLUGIN_KUBE_PATCH_TYPE_JSON,                       /* RFC 6902 */
    WI_PATCH_STRATEGIC_MERGE = WASM_INFORMER_PLUGIN_KUBE_PATCH_TYPE_STRATEGIC_MERGE, /* Kubernetes */
    WI_PATCH_APPLY = WASM_INFORMER_PLUGIN_KUBE_PATCH_TYPE_APPLY,                     /* server-side apply */
} wi_patch_t;

typedef enum {
    WI_PROPAGATION_DEFAULT = 0, /* the server's default */
    WI_PROPAGATION_ORPHAN,
    WI_PROPAGATION_BACKGROUND,
    WI_PROPAGATION_FOREGROUND,
} wi_propagation_t;

/* Options of a delete; zero-initialise: `wi_delete_options_t o = {0};`. */
typedef struct {
    const char *uid;              /* delete only if the object still has this uid */
    const char *resource_version; /* ... and is still at this resourceVersion */
    wi_propagation_t propagation;
} wi_delete_options_t;

/* Options of a server-side apply; zero-initialise: `wi_apply_options_t o = {0};`. */
typedef struct {
    /* Take over fields another manager owns instead of failing with WI_ERR_CONFLICT. */
    bool force;
    /*
     * Never create the object: when the host's cache does not hold it, the answer is
     * WI_ERR_NOT_FOUND and nothing is sent. Needs only `patch` in the grant (an apply that
     * may create needs `create` too). Use it for writes made from an event: the object may
     * be gone by the time the event is handled.
     */
    bool must_exist;
} wi_apply_options_t;

/* Bodies are JSON text. `out` (the server's answer) may be NULL. */
bool wi_kube_get(const char *resource, const char *ns, const char *name, wi_object_t *out, wi_error_t *err);
bool wi_kube_create(const char *resource, const char *ns, const char *body, wi_object_t *out, wi_error_t *err);
/* The body's metadata.resourceVersion is the precondition: a stale one is WI_ERR_CONFLICT. */
bool wi_kube_replace(const char *resource, const char *ns, const char *name, const char *body, wi_object_t *out,
                     wi_error_t *err);
/* `force` applies to WI_PATCH_APPLY only: take over fields another manager owns. An apply sent
 * this way may create the object (the grant needs `create` too); wi_kube_apply can forbid that. */
bool wi_kube_patch(const char *resource, const char *ns, const char *name, wi_patch_t type, const char *body,
                   bool force, wi_object_t *out, wi_error_t *err);
/*
 * Server-side apply of `intent`, the fully specified object (apiVersion, kind, metadata.name and
 * the fields this plugin owns), as field manager `wasm-informer/PLUGIN` (verb `patch`, and
 * `create` too unless `opts->must_exist`). `opts` may be NULL: no force, and it may create.
 */
bool wi_kube_apply(const char *resource, const char *ns, const char *name, const char *intent,
                   const wi_apply_options_t *opts, wi_object_t *out, wi_error_t *err);
/* `opts` may be NULL. *present (may be NULL) tells whether the server answered with the object
 * (finalizers or foreground deletion hold it); then *out (may be NULL) is it. */
bool wi_kube_delete(const char *resource, const char *ns, const char *name, const wi_delete_options_t *opts,
                    bool *present, wi_object_t *out, wi_error_t *err);
bool wi_kube_get_status(const char *resource, const char *ns, const char *name, wi_object_t *out, wi_error_t *err);
bool wi_kube_replace_status(const char *resource, const char *ns, const char *name, const char *body,
                            wi_object_t *out, wi_error_t *err);
bool wi_kube_patch_status(const char *resource, const char *ns, const char *name, wi_patch_t type,
                          const char *body, bool force, wi_object_t *out, wi_error_t *err);
/* Whether this plugin's writes are dry runs. */
bool wi_kube_dry_run(void);

/* ---- events: Kubernetes Events (events.k8s.io/v1); needs `events = true` ---- */

typedef enum {
    WI_EVENT_NORMAL = WASM_INFORMER_PLUGIN_EVENTS_EVENT_TYPE_NORMAL,
    WI_EVENT_WARNING = WASM_INFORMER_PLUGIN_EVENTS_EVENT_TYPE_WARNING,
} wi_event_type_t;

/* Records an Event about `regarding`; a repeat within six minutes folds into its `series`. */
bool wi_event_publish(wi_object_t regarding, wi_event_type_t type, const char *reason, const char *action,
                      const char *note, wi_error_t *err);
#define wi_event_normal(o, reason, action, note, err) wi_event_publish(o, WI_EVENT_NORMAL, reason, action, note, err)
#define wi_event_warning(o, reason, action, note, err) wi_event_publish(o, WI_EVENT_WARNING, reason, action, note, err)

/* ---- the controller world ---- */

#ifdef EXPORTS_WASM_INFORMER_PLUGIN_RECONCILER_ACTION_DONE
/* A reconcile request as C strings (namespace_ NULL for cluster-scoped objects). */
typedef struct {
    char *resource;
    char *namespace_;
    char *name;
    char *key;
} wi_request_t;

/* Copies the export's request argument into *out and frees the argument. */
void wi_request_take(exports_wasm_informer_plugin_reconciler_request_t *request, wi_request_t *out);
void wi_request_free(wi_request_t *request);
/* Sets the action and returns true: `return wi_done(ret);`, `return wi_requeue_after(ret, 5000);`. */
bool wi_done(exports_wasm_informer_plugin_reconciler_action_t *ret);
bool wi_requeue_after(exports_wasm_informer_plugin_reconciler_action_t *ret, uint64_t ms);
/* Sets the reconcile error and returns false: retried with backoff, or not (terminal). */
bool wi_retry(exports_wasm_informer_plugin_reconciler_reconcile_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool wi_terminal(exports_wasm_informer_plugin_reconciler_reconcile_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#endif

#endif
