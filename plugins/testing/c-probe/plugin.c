/*
 * c-probe: exercises the C SDK (sdk/c) for the guest-level tests. On every
 * event it runs the ops of its [config] `ops`, in order, and returns the
 * outcome of each as JSON in its `err` result (the op schema is
 * plugins/testing/js-probe's). `use-after` keeps the event's object reference
 * and reads it in the next event, which the host must refuse with a trap.
 *
 * Invariant: `on-event` always returns `err([<outcome>, ...])`.
 */
#include <stdlib.h>
#include <string.h>

#include "wasm_informer.h"

static char *ops; /* the JSON array of ops, from [config] */
static bool kept_some;
static wi_object_t kept; /* `use-after`: a reference from an earlier call */

static char *str(const char *op, const char *key) {
    return wi_json_string_dup(wi_json_member(op, key));
}

static void put_field(wi_buf_t *b, const char *name, char *value_json) {
    wi_buf_printf(b, ",\"%s\":%s", name, value_json ? value_json : "null");
    free(value_json);
}

static char *quoted(char *s) {
    wi_buf_t b = {0};
    wi_buf_json_string(&b, s);
    free(s);
    return wi_buf_take(&b);
}

static char *read_object(wi_object_t o) {
    wi_buf_t b = {0};
    wi_buf_puts(&b, "{\"resource\":");
    char *r = wi_object_resource(o);
    wi_buf_json_string(&b, r);
    free(r);
    put_field(&b, "key", quoted(wi_object_key(o)));
    char *ns = wi_object_namespace(o);
    put_field(&b, "namespace", ns ? quoted(ns) : NULL);
    put_field(&b, "name", quoted(wi_object_name(o)));
    put_field(&b, "uid", quoted(wi_object_uid(o)));
    put_field(&b, "resource_version", quoted(wi_object_resource_version(o)));
    int64_t g;
    put_field(&b, "generation", wi_object_generation(o, &g) ? wi_sprintf("%lld", (long long)g) : NULL);
    char *app = wi_object_label(o, "app");
    put_field(&b, "label_app", app ? quoted(app) : NULL);
    char *note = wi_object_annotation(o, "note");
    put_field(&b, "annotation_note", note ? quoted(note) : NULL);
    put_field(&b, "labels", wi_object_labels_json(o));
    put_field(&b, "annotations", wi_object_annotations_json(o));
    put_field(&b, "reference", wi_object_reference_json(o));
    put_field(&b, "body", wi_object_json(o));
    wi_buf_puts(&b, "}");
    return wi_buf_take(&b);
}

static void put_error(wi_buf_t *out, wi_error_t *e) {
    wi_buf_printf(out, "{\"ok\":false,\"error\":");
    wi_buf_json_string(out, wi_error_kind_name(e->kind));
    wi_buf_puts(out, ",\"message\":");
    wi_buf_json_string(out, e->message);
    wi_buf_puts(out, "}");
}

/* An outcome with the answer's JSON (or null). */
static void put_answer(wi_buf_t *out, bool ok, bool present, wi_object_t h, wi_error_t *e) {
    if (!ok) {
        put_error(out, e);
        return;
    }
    wi_buf_puts(out, "{\"ok\":true,\"object\":");
    if (present) {
        char *json = wi_object_json(h);
        wi_buf_puts(out, json);
        free(json);
    } else {
        wi_buf_puts(out, "null");
    }
    wi_buf_puts(out, "}");
}

static void put_keys(wi_buf_t *out, bool ok, wi_objects_t *l, wi_error_t *e, bool is_cache) {
    if (!ok) {
        wi_buf_puts(out, "{\"ok\":false,\"error\":");
        char *kind = wi_sprintf("%s%s", is_cache ? "cache:" : "", wi_error_kind_name(e->kind));
        wi_buf_json_string(out, kind);
        free(kind);
        wi_buf_puts(out, ",\"message\":");
        wi_buf_json_string(out, e->message);
        wi_buf_puts(out, "}");
        return;
    }
    wi_buf_puts(out, "{\"ok\":true,\"keys\":[");
    for (size_t i = 0; i < l->len; i++) {
        char *k = wi_object_key(wi_objects_at(l, i));
        if (i) wi_buf_puts(out, ",");
        wi_buf_json_string(out, k);
        free(k);
    }
    wi_buf_puts(out, "]}");
    wi_objects_free(l);
}

static wi_patch_t patch_type(const char *op) {
    char *p = str(op, "patch");
    wi_patch_t t = WI_PATCH_MERGE;
    if (p && strcmp(p, "json") == 0) t = WI_PATCH_JSON;
    if (p && strcmp(p, "strategic-merge") == 0) t = WI_PATCH_STRATEGIC_MERGE;
    if (p && strcmp(p, "apply") == 0) t = WI_PATCH_APPLY;
    free(p);
    return t;
}

static const char *const KINDS[] = {"added", "updated", "deleted", "synced"};

static void run(const char *op, const exports_wasm_informer_plugin_handler_event_info_t *event, wi_object_t object,
                const wi_object_t *old, wi_buf_t *out) {
    char *call = str(op, "call");
    char *res = str(op, "resource");
    char *ns = str(op, "namespace");
    char *name = str(op, "name");
    char *body = wi_json_value_dup(wi_json_member(op, "body"));
    bool force = false;
    wi_json_bool(wi_json_member(op, "force"), &force);
    wi_error_t e = {0};
    wi_object_t h = 0;
    bool ok, present = true;
    if (!call) call = wi_sprintf("?");
    if (strcmp(call, "read") == 0) {
        char *o = read_object(object);
        wi_buf_printf(out, "{\"ok\":true,\"object\":%s,\"old\":", o);
        free(o);
        if (old) {
            char *p = read_object(*old);
            wi_buf_puts(out, p);
            free(p);
        } else {
            wi_buf_puts(out, "null");
        }
        wi_buf_printf(out, ",\"kind\":\"%s\",\"initial\":%s,\"final_state_unknown\":%s}",
                      event->kind < 4 ? KINDS[event->kind] : "?", event->is_in_initial_list ? "true" : "false",
                      event->final_state_unknown ? "true" : "false");
    } else if (strcmp(call, "cache-get") == 0) {
        char *key = str(op, "key");
        bool found = false;
        ok = wi_cache_get(res, key, &found, &h, &e);
        free(key);
        if (!ok) {
            put_keys(out, false, NULL, &e, true);
        } else {
            wi_buf_puts(out, "{\"ok\":true,\"keys\":[");
            if (found) {
                char *k = wi_object_key(h);
                wi_buf_json_string(out, k);
                free(k);
            }
            wi_buf_puts(out, "]}");
        }
    } else if (strcmp(call, "cache-list") == 0) {
        char *sel = str(op, "selector");
        wi_objects_t l;
        ok = wi_cache_list(res, ns, sel, &l, &e);
        put_keys(out, ok, &l, &e, true);
        free(sel);
    } else if (strcmp(call, "by-index") == 0) {
        char *index = str(op, "index");
        char *value = str(op, "value");
        wi_objects_t l;
        ok = wi_cache_by_index(res, index, value, &l, &e);
        put_keys(out, ok, &l, &e, true);
        free(index);
        free(value);
    } else if (strcmp(call, "get") == 0) {
        ok = wi_kube_get(res, ns, name, &h, &e);
        put_answer(out, ok, true, h, &e);
    } else if (strcmp(call, "create") == 0) {
        ok = wi_kube_create(res, ns, body, &h, &e);
        put_answer(out, ok, true, h, &e);
    } else if (strcmp(call, "replace") == 0) {
        ok = wi_kube_replace(res, ns, name, body, &h, &e);
        put_answer(out, ok, true, h, &e);
    } else if (strcmp(call, "patch") == 0) {
        ok = wi_kube_patch(res, ns, name, patch_type(op), body, force, &h, &e);
        put_answer(out, ok, true, h, &e);
    } else if (strcmp(call, "delete") == 0) {
        const char *d = wi_json_member(op, "delete");
        char *uid = str(d, "uid");
        char *rv = str(d, "resource_version");
        char *prop = str(d, "propagation");
        wi_delete_options_t o = {.uid = uid, .resource_version = rv};
        if (prop && strcmp(prop, "orphan") == 0) o.propagation = WI_PROPAGATION_ORPHAN;
        if (prop && strcmp(prop, "background") == 0) o.propagation = WI_PROPAGATION_BACKGROUND;
        if (prop && strcmp(prop, "foreground") == 0) o.propagation = WI_PROPAGATION_FOREGROUND;
        ok = wi_kube_delete(res, ns, name, &o, &present, &h, &e);
        put_answer(out, ok, present, h, &e);
        free(uid);
        free(rv);
        free(prop);
    } else if (strcmp(call, "get-status") == 0) {
        ok = wi_kube_get_status(res, ns, name, &h, &e);
        put_answer(out, ok, true, h, &e);
    } else if (strcmp(call, "replace-status") == 0) {
        ok = wi_kube_replace_status(res, ns, name, body, &h, &e);
        put_answer(out, ok, true, h, &e);
    } else if (strcmp(call, "patch-status") == 0) {
        ok = wi_kube_patch_status(res, ns, name, patch_type(op), body, force, &h, &e);
        put_answer(out, ok, true, h, &e);
    } else if (strcmp(call, "event") == 0) {
        const char *ev = wi_json_member(op, "event");
        char *type = str(ev, "type");
        char *reason = str(ev, "reason");
        char *action = str(ev, "action");
        char *note = str(ev, "note");
        wi_event_type_t t = type && strcmp(type, "warning") == 0 ? WI_EVENT_WARNING : WI_EVENT_NORMAL;
        ok = wi_event_publish(object, t, reason ? reason : "", action ? action : "", note ? note : "", &e);
        if (ok) {
            wi_buf_puts(out, "{\"ok\":true}");
        } else {
            put_error(out, &e);
        }
        free(type);
        free(reason);
        free(action);
        free(note);
    } else if (strcmp(call, "use-after") == 0) {
        if (kept_some) {
            char *n = wi_object_name(kept); /* traps: the reference is from an earlier call */
            free(n);
        }
        kept_some = true;
        kept = object;
        wi_buf_puts(out, "{\"ok\":true}");
    } else if (strcmp(call, "dry-run") == 0) {
        wi_buf_printf(out, "{\"ok\":true,\"dry_run\":%s}", wi_kube_dry_run() ? "true" : "false");
    } else {
        wi_buf_puts(out, "{\"ok\":false,\"error\":\"sdk\",\"message\":");
        wi_buf_json_string(out, call);
        wi_buf_puts(out, "}");
    }
    wi_error_free(&e);
    free(call);
    free(res);
    free(ns);
    free(name);
    free(body);
}

bool exports_wasm_informer_plugin_handler_init(plugin_string_t *config, plugin_string_t *err) {
    char *json = wi_take(config);
    free(ops);
    ops = wi_json_value_dup(wi_json_member(json, "ops"));
    free(json);
    if (!ops) ops = wi_sprintf("[]");
    return true;
}

bool exports_wasm_informer_plugin_handler_on_event(exports_wasm_informer_plugin_handler_event_info_t *event,
                                                   plugin_string_t *err) {
    wi_object_t object = event->object;
    const wi_object_t *old = event->old_object.is_some ? &event->old_object.val : NULL;
    wi_buf_t out = {0};
    wi_buf_puts(&out, "[");
    size_t i = 0;
    for (const char *op = wi_json_array_first(ops); op; op = wi_json_array_next(op), i++) {
        if (i) wi_buf_puts(&out, ",");
        run(op, event, object, old, &out);
    }
    wi_buf_puts(&out, "]");
    char *text = wi_buf_take(&out);
    bool r = wi_fail(err, "%s", text);
    free(text);
    return r;
}
