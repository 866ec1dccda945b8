/*
 * wasm-informer plugin SDK for C (see wasm_informer.h): C strings in and out,
 * and one error type for cache and API failures.
 *
 * Invariant: every WIT value a helper receives is freed (or handed to the
 * caller as documented) before it returns, on every path.
 */
#include "wasm_informer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings ---- */

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

char *wi_cstr(const plugin_string_t *s) {
    char *out = xmalloc(s->len + 1);
    memcpy(out, s->ptr, s->len);
    out[s->len] = 0;
    return out;
}

char *wi_take(plugin_string_t *s) {
    char *out = wi_cstr(s);
    plugin_string_free(s);
    return out;
}

static char *vformat(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) abort();
    char *out = xmalloc((size_t)n + 1);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    return out;
}

char *wi_sprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *out = vformat(fmt, ap);
    va_end(ap);
    return out;
}

/* Hands a malloc'd C string to a WIT string the bindings will free. */
static void give(plugin_string_t *dst, char *s) {
    dst->ptr = (uint8_t *)s;
    dst->len = strlen(s);
}

bool wi_fail(plugin_string_t *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    give(err, vformat(fmt, ap));
    va_end(ap);
    return false;
}

/* A WIT string view of a C string (import arguments are only read). */
static plugin_string_t view(const char *s) {
    plugin_string_t v;
    plugin_string_set(&v, s ? s : "");
    return v;
}

static char *opt(plugin_option_string_t *o) {
    char *out = o->is_some ? wi_cstr(&o->val) : NULL;
    plugin_option_string_free(o);
    return out;
}

static char *own(plugin_string_t *s) {
    return wi_take(s);
}

/* ---- log ---- */

void wi_log(wasm_informer_plugin_log_level_t level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    plugin_string_t s = view(msg);
    wasm_informer_plugin_log_log(level, &s);
    free(msg);
}

/* ---- errors ---- */

static const char *const KIND_NAMES[] = {
    [WI_ERR_NONE] = "none",
    [WI_ERR_FORBIDDEN] = "forbidden",
    [WI_ERR_NOT_FOUND] = "not-found",
    [WI_ERR_CONFLICT] = "conflict",
    [WI_ERR_ALREADY_EXISTS] = "already-exists",
    [WI_ERR_INVALID] = "invalid",
    [WI_ERR_RATE_LIMITED] = "rate-limited",
    [WI_ERR_TIMEOUT] = "timeout",
    [WI_ERR_UNAVAILABLE] = "unavailable",
    [WI_ERR_UNKNOWN_RESOURCE] = "unknown-resource",
    [WI_ERR_INVALID_SELECTOR] = "invalid-selector",
    [WI_ERR_UNKNOWN_INDEX] = "unknown-index",
    [WI_ERR_TOO_MANY_OBJECTS] = "too-many-objects",
};

const char *wi_error_kind_name(wi_error_kind_t kind) {
    if ((size_t)kind >= sizeof KIND_NAMES / sizeof KIND_NAMES[0]) return "unknown";
    return KIND_NAMES[kind];
}

void wi_error_free(wi_error_t *err) {
    if (!err) return;
    free(err->message);
    free(err->detail);
    err->message = NULL;
    err->detail = NULL;
    err->kind = WI_ERR_NONE;
}

static void set_error(wi_error_t *err, wi_error_kind_t kind, const char *call, char *detail, const char *causes) {
    if (err) {
        err->kind = kind;
        err->message = causes && *causes ? wi_sprintf("%s: %s: %s (%s)", call, wi_error_kind_name(kind), detail, causes)
                                         : wi_sprintf("%s: %s: %s", call, wi_error_kind_name(kind), detail);
        err->detail = detail;
    } else {
        free(detail);
    }
}

static void cache_error(wi_error_t *err, const char *call, wasm_informer_plugin_cache_cache_error_t *e) {
    static const wi_error_kind_t kinds[] = {
        [WASM_INFORMER_PLUGIN_TYPES_CACHE_ERROR_FORBIDDEN] = WI_ERR_FORBIDDEN,
        [WASM_INFORMER_PLUGIN_TYPES_CACHE_ERROR_UNKNOWN_RESOURCE] = WI_ERR_UNKNOWN_RESOURCE,
        [WASM_INFORMER_PLUGIN_TYPES_CACHE_ERROR_INVALID_SELECTOR] = WI_ERR_INVALID_SELECTOR,
        [WASM_INFORMER_PLUGIN_TYPES_CACHE_ERROR_UNKNOWN_INDEX] = WI_ERR_UNKNOWN_INDEX,
        [WASM_INFORMER_PLUGIN_TYPES_CACHE_ERROR_TOO_MANY_OBJECTS] = WI_ERR_TOO_MANY_OBJECTS,
    };
    wi_error_kind_t kind = e->tag < 5 ? kinds[e->tag] : WI_ERR_UNKNOWN_RESOURCE;
    /* Every other case carries one string. */
    char *detail = kind == WI_ERR_TOO_MANY_OBJECTS
                       ? wi_sprintf("one call may reference at most %u objects; narrow the query",
                                    (unsigned)e->val.too_many_objects)
                       : wi_cstr(&e->val.forbidden);
    char *what = wi_sprintf("cache %s", call);
    set_error(err, kind, what, detail, NULL);
    free(what);
    wasm_informer_plugin_cache_cache_error_free(e);
}

static void api_error(wi_error_t *err, const char *call, wasm_informer_plugin_types_api_error_t *e) {
    static const wi_error_kind_t kinds[] = {
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_FORBIDDEN] = WI_ERR_FORBIDDEN,
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_NOT_FOUND] = WI_ERR_NOT_FOUND,
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_CONFLICT] = WI_ERR_CONFLICT,
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_ALREADY_EXISTS] = WI_ERR_ALREADY_EXISTS,
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_INVALID] = WI_ERR_INVALID,
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_RATE_LIMITED] = WI_ERR_RATE_LIMITED,
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_TIMEOUT] = WI_ERR_TIMEOUT,
        [WASM_INFORMER_PLUGIN_TYPES_API_ERROR_UNAVAILABLE] = WI_ERR_UNAVAILABLE,
    };
    wi_error_kind_t kind = e->tag < 8 ? kinds[e->tag] : WI_ERR_UNAVAILABLE;
    if (kind == WI_ERR_INVALID) {
        wasm_informer_plugin_types_invalid_details_t *d = &e->val.invalid;
        wi_buf_t causes = {0};
        for (size_t i = 0; i < d->causes.len; i++) {
            char *field = wi_cstr(&d->causes.ptr[i].field);
            char *msg = wi_cstr(&d->causes.ptr[i].message);
            wi_buf_printf(&causes, "%s%s: %s", i ? "; " : "", field, msg);
            free(field);
            free(msg);
        }
        set_error(err, kind, call, wi_cstr(&d->message), wi_buf_str(&causes));
        wi_buf_free(&causes);
    } else {
        /* Every other case carries one string. */
        set_error(err, kind, call, wi_cstr(&e->val.forbidden), NULL);
    }
    wasm_informer_plugin_types_api_error_free(e);
}

/* ---- objects ---- */

wi_object_t wi_objects_at(const wi_objects_t *list, size_t i) {
    return list->ptr[i];
}

void wi_objects_free(wi_objects_t *list) {
    wasm_informer_plugin_cache_list_object_ref_free(list);
    list->ptr = NULL;
    list->len = 0;
}

#define GETTER(fn, method)                       \
    char *fn(wi_object_t o) {                    \
        plugin_string_t s;                       \
        wasm_informer_plugin_objects_##method(o, &s); \
        return own(&s);                          \
    }

GETTER(wi_object_resource, resource)
GETTER(wi_object_key, key)
GETTER(wi_object_name, name)
GETTER(wi_object_uid, uid)
GETTER(wi_object_resource_version, resource_version)
GETTER(wi_object_json, json)

char *wi_object_namespace(wi_object_t o) {
    plugin_string_t s;
    if (!wasm_informer_plugin_objects_namespace(o, &s)) return NULL;
    return own(&s);
}

bool wi_object_generation(wi_object_t o, int64_t *out) {
    return wasm_informer_plugin_objects_generation(o, out);
}

char *wi_object_label(wi_object_t o, const char *key) {
    plugin_string_t k = view(key), s;
    if (!wasm_informer_plugin_objects_label(o, &k, &s)) return NULL;
    return own(&s);
}

char *wi_object_annotation(wi_object_t o, const char *key) {
    plugin_string_t k = view(key), s;
    if (!wasm_informer_plugin_objects_annotation(o, &k, &s)) return NULL;
    return own(&s);
}

static void put_string(wi_buf_t *b, const plugin_string_t *s) {
    char *c = wi_cstr(s);
    wi_buf_json_string(b, c);
    free(c);
}

static char *pairs_json(plugin_list_tuple2_string_string_t *l) {
    wi_buf_t b = {0};
    wi_buf_puts(&b, "{");
    for (size_t i = 0; i < l->len; i++) {
        if (i) wi_buf_puts(&b, ",");
        put_string(&b, &l->ptr[i].f0);
        wi_buf_puts(&b, ":");
        put_string(&b, &l->ptr[i].f1);
    }
    wi_buf_puts(&b, "}");
    plugin_list_tuple2_string_string_free(l);
    return wi_buf_take(&b);
}

char *wi_object_labels_json(wi_object_t o) {
    plugin_list_tuple2_string_string_t l;
    wasm_informer_plugin_objects_labels(o, &l);
    return pairs_json(&l);
}

char *wi_object_annotations_json(wi_object_t o) {
    plugin_list_tuple2_string_string_t l;
    wasm_informer_plugin_objects_annotations(o, &l);
    return pairs_json(&l);
}

static void put_option(wi_buf_t *b, const plugin_option_string_t *s) {
    if (s->is_some) {
        put_string(b, &s->val);
    } else {
        wi_buf_puts(b, "null");
    }
}

char *wi_object_reference_json(wi_object_t o) {
    wasm_informer_plugin_types_object_reference_t r;
    wasm_informer_plugin_objects_reference(o, &r);
    wi_buf_t b = {0};
    wi_buf_puts(&b, "{\"apiVersion\":");
    put_string(&b, &r.api_version);
    wi_buf_puts(&b, ",\"kind\":");
    put_string(&b, &r.kind);
    wi_buf_puts(&b, ",\"namespace\":");
    put_option(&b, &r.namespace_);
    wi_buf_puts(&b, ",\"name\":");
    put_string(&b, &r.name);
    wi_buf_puts(&b, ",\"uid\":");
    put_option(&b, &r.uid);
    wi_buf_puts(&b, "}");
    wasm_informer_plugin_types_object_reference_free(&r);
    return wi_buf_take(&b);
}

bool wi_object_is_deleting(wi_object_t o) {
    wasm_informer_plugin_types_object_meta_t m;
    wasm_informer_plugin_objects_meta(o, &m);
    bool deleting = m.deletion_timestamp.is_some;
    wasm_informer_plugin_types_object_meta_free(&m);
    return deleting;
}

/* ---- cache ---- */

bool wi_cache_get(const char *resource, const char *key, bool *found, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), k = view(key);
    wasm_informer_plugin_cache_option_object_ref_t ret;
    wasm_informer_plugin_cache_cache_error_t e;
    if (!wasm_informer_plugin_cache_get(&r, &k, &ret, &e)) {
        char *call = wi_sprintf("get %s %s", resource, key);
        cache_error(err, call, &e);
        free(call);
        if (found) *found = false;
        return false;
    }
    if (found) *found = ret.is_some;
    if (ret.is_some && out) *out = ret.val;
    return true;
}

static bool list_result(bool ok, const char *call, wasm_informer_plugin_cache_list_object_ref_t *ret,
                        wasm_informer_plugin_cache_cache_error_t *e, wi_objects_t *out, wi_error_t *err) {
    if (!ok) {
        cache_error(err, call, e);
        if (out) {
            out->ptr = NULL;
            out->len = 0;
        }
        return false;
    }
    if (out) {
        *out = *ret;
    } else {
        wi_objects_free(ret);
    }
    return true;
}

bool wi_cache_list(const char *resource, const char *ns, const char *selector, wi_objects_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), s = view(selector);
    wasm_informer_plugin_cache_list_object_ref_t ret;
    wasm_informer_plugin_cache_cache_error_t e;
    bool ok = wasm_informer_plugin_cache_list(&r, ns ? &n : NULL, selector ? &s : NULL, &ret, &e);
    char *call = wi_sprintf("list %s", resource);
    bool r2 = list_result(ok, call, &ret, &e, out, err);
    free(call);
    return r2;
}

bool wi_cache_by_index(const char *resource, const char *index, const char *value, wi_objects_t *out,
                       wi_error_t *err) {
    plugin_string_t r = view(resource), i = view(index), v = view(value);
    wasm_informer_plugin_cache_list_object_ref_t ret;
    wasm_informer_plugin_cache_cache_error_t e;
    bool ok = wasm_informer_plugin_cache_by_index(&r, &i, &v, &ret, &e);
    char *call = wi_sprintf("by-index %s %s", resource, index);
    bool r2 = list_result(ok, call, &ret, &e, out, err);
    free(call);
    return r2;
}

bool wi_cache_has_synced(const char *resource, bool *out, wi_error_t *err) {
    plugin_string_t r = view(resource);
    bool ret = false;
    wasm_informer_plugin_cache_cache_error_t e;
    if (!wasm_informer_plugin_cache_has_synced(&r, &ret, &e)) {
        char *call = wi_sprintf("has-synced %s", resource);
        cache_error(err, call, &e);
        free(call);
        return false;
    }
    if (out) *out = ret;
    return true;
}

/* ---- kube ---- */

static char *where(const char *verb, const char *resource, const char *ns, const char *name) {
    return wi_sprintf("%s %s %s%s%s", verb, resource, ns ? ns : "", ns && name ? "/" : "", name ? name : "");
}

/* Finishes a call that answers with one object. */
static bool one(bool ok, const char *verb, const char *resource, const char *ns, const char *name,
                wi_object_t ret, wasm_informer_plugin_types_api_error_t *e, wi_object_t *out, wi_error_t *err) {
    if (!ok) {
        char *call = where(verb, resource, ns, name);
        api_error(err, call, e);
        free(call);
        return false;
    }
    if (out) *out = ret;
    return true;
}

bool wi_kube_get(const char *resource, const char *ns, const char *name, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name);
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_get(&r, ns ? &n : NULL, &m, &ret, &e);
    return one(ok, "get", resource, ns, name, ret, &e, out, err);
}

bool wi_kube_create(const char *resource, const char *ns, const char *body, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), b = view(body);
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_create(&r, ns ? &n : NULL, &b, &ret, &e);
    return one(ok, "create", resource, ns, NULL, ret, &e, out, err);
}

bool wi_kube_replace(const char *resource, const char *ns, const char *name, const char *body, wi_object_t *out,
                     wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name), b = view(body);
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_replace(&r, ns ? &n : NULL, &m, &b, &ret, &e);
    return one(ok, "replace", resource, ns, name, ret, &e, out, err);
}

bool wi_kube_patch(const char *resource, const char *ns, const char *name, wi_patch_t type, const char *body,
                   bool force, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name), b = view(body);
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_patch(&r, ns ? &n : NULL, &m, (wasm_informer_plugin_kube_patch_type_t)type,
                                              &b, force, &ret, &e);
    return one(ok, "patch", resource, ns, name, ret, &e, out, err);
}

bool wi_kube_apply(const char *resource, const char *ns, const char *name, const char *intent,
                   const wi_apply_options_t *opts, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name), b = view(intent);
    wasm_informer_plugin_kube_apply_options_t o = {0};
    if (opts) {
        o.force = opts->force;
        o.must_exist = opts->must_exist;
    }
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_apply(&r, ns ? &n : NULL, &m, &b, &o, &ret, &e);
    return one(ok, "apply", resource, ns, name, ret, &e, out, err);
}

bool wi_kube_delete(const char *resource, const char *ns, const char *name, const wi_delete_options_t *opts,
                    bool *present, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name);
    wasm_informer_plugin_kube_delete_options_t o = {0};
    if (opts) {
        if (opts->uid) {
            o.uid.is_some = true;
            o.uid.val = view(opts->uid);
        }
        if (opts->resource_version) {
            o.resource_version.is_some = true;
            o.resource_version.val = view(opts->resource_version);
        }
        if (opts->propagation != WI_PROPAGATION_DEFAULT) {
            o.propagation.is_some = true;
            o.propagation.val = opts->propagation == WI_PROPAGATION_ORPHAN       ? WASM_INFORMER_PLUGIN_KUBE_PROPAGATION_ORPHAN
                                : opts->propagation == WI_PROPAGATION_BACKGROUND ? WASM_INFORMER_PLUGIN_KUBE_PROPAGATION_BACKGROUND
                                                                                 : WASM_INFORMER_PLUGIN_KUBE_PROPAGATION_FOREGROUND;
        }
    }
    wasm_informer_plugin_kube_option_object_ref_t ret = {0};
    wasm_informer_plugin_types_api_error_t e;
    if (present) *present = false;
    if (!wasm_informer_plugin_kube_delete(&r, ns ? &n : NULL, &m, &o, &ret, &e)) {
        char *call = where("delete", resource, ns, name);
        api_error(err, call, &e);
        free(call);
        return false;
    }
    if (ret.is_some) {
        if (present) *present = true;
        if (out) *out = ret.val;
    }
    return true;
}

bool wi_kube_get_status(const char *resource, const char *ns, const char *name, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name);
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_get_status(&r, ns ? &n : NULL, &m, &ret, &e);
    return one(ok, "get-status", resource, ns, name, ret, &e, out, err);
}

bool wi_kube_replace_status(const char *resource, const char *ns, const char *name, const char *body,
                            wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name), b = view(body);
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_replace_status(&r, ns ? &n : NULL, &m, &b, &ret, &e);
    return one(ok, "replace-status", resource, ns, name, ret, &e, out, err);
}

bool wi_kube_patch_status(const char *resource, const char *ns, const char *name, wi_patch_t type,
                          const char *body, bool force, wi_object_t *out, wi_error_t *err) {
    plugin_string_t r = view(resource), n = view(ns), m = view(name), b = view(body);
    wi_object_t ret = 0;
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_kube_patch_status(&r, ns ? &n : NULL, &m,
                                                     (wasm_informer_plugin_kube_patch_type_t)type, &b, force, &ret, &e);
    return one(ok, "patch-status", resource, ns, name, ret, &e, out, err);
}

bool wi_kube_dry_run(void) {
    return wasm_informer_plugin_kube_dry_run();
}

/* ---- events ---- */

bool wi_event_publish(wi_object_t regarding, wi_event_type_t type, const char *reason, const char *action,
                      const char *note, wi_error_t *err) {
    wasm_informer_plugin_events_event_t ev;
    wasm_informer_plugin_objects_reference(regarding, &ev.regarding);
    ev.type = (wasm_informer_plugin_events_event_type_t)type;
    ev.reason = view(reason);
    ev.action = view(action);
    ev.note = view(note);
    wasm_informer_plugin_types_api_error_t e;
    bool ok = wasm_informer_plugin_events_publish(&ev, &e);
    if (!ok) {
        char *kind = wi_cstr(&ev.regarding.kind);
        char *ns = opt(&ev.regarding.namespace_);
        char *name = wi_cstr(&ev.regarding.name);
        char *call = wi_sprintf("event %s about %s %s%s%s", reason, kind, ns ? ns : "", ns ? "/" : "", name);
        api_error(err, call, &e);
        free(call);
        free(kind);
        free(ns);
        free(name);
    }
    wasm_informer_plugin_types_object_reference_free(&ev.regarding);
    return ok;
}

/* ---- the controller world ---- */

#ifdef EXPORTS_WASM_INFORMER_PLUGIN_RECONCILER_ACTION_DONE
void wi_request_take(exports_wasm_informer_plugin_reconciler_request_t *request, wi_request_t *out) {
    out->resource = wi_cstr(&request->resource);
    out->namespace_ = request->namespace_.is_some ? wi_cstr(&request->namespace_.val) : NULL;
    out->name = wi_cstr(&request->name);
    out->key = wi_cstr(&request->key);
    exports_wasm_informer_plugin_reconciler_request_free(request);
}

void wi_request_free(wi_request_t *request) {
    free(request->resource);
    free(request->namespace_);
    free(request->name);
    free(request->key);
    memset(request, 0, sizeof *request);
}

bool wi_done(exports_wasm_informer_plugin_reconciler_action_t *ret) {
    ret->tag = EXPORTS_WASM_INFORMER_PLUGIN_RECONCILER_ACTION_DONE;
    return true;
}

bool wi_requeue_after(exports_wasm_informer_plugin_reconciler_action_t *ret, uint64_t ms) {
    ret->tag = EXPORTS_WASM_INFORMER_PLUGIN_RECONCILER_ACTION_REQUEUE_AFTER;
    ret->val.requeue_after = ms;
    return true;
}

bool wi_retry(exports_wasm_informer_plugin_reconciler_reconcile_error_t *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err->tag = EXPORTS_WASM_INFORMER_PLUGIN_RECONCILER_RECONCILE_ERROR_RETRY;
    give(&err->val.retry, vformat(fmt, ap));
    va_end(ap);
    return false;
}

bool wi_terminal(exports_wasm_informer_plugin_reconciler_reconcile_error_t *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err->tag = EXPORTS_WASM_INFORMER_PLUGIN_RECONCILER_RECONCILE_ERROR_TERMINAL;
    give(&err->val.terminal, vformat(fmt, ap));
    va_end(ap);
    return false;
}
#endif
