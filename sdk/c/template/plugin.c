/*
 * Template wasm-informer plugin in C, world event-handler.
 *
 * For every pod it is told about, it logs one line with the number of pods
 * cached in the pod's namespace, and it gives a pod that lacks the label
 * `[config] label` (default `team`) that label, with the value
 * `[config] value` (default `unassigned`), by server-side apply, then records
 * a Normal Event `Labelled` about the pod. It decides from the pod as the cache holds it when the
 * event is handled (an event may be stale). The apply must find the pod (a pod
 * deleted while its event waited is never re-created), so the manifest needs
 * to grant only `[[write]] resource = "v1/pods" verbs = ["patch"]`, and
 * `events = true`.
 *
 * Build: scripts/build-plugins.sh (wit-bindgen, then clang with the SDK in sdk/c).
 */
#include <stdlib.h>
#include <string.h>

#include "wasm_informer.h"

static char *label;
static char *value;

bool exports_wasm_informer_plugin_handler_init(plugin_string_t *config, plugin_string_t *err) {
    char *json = wi_take(config); /* the manifest's [config] table as JSON */
    bool ok = true;
    free(label);
    free(value);
    label = wi_json_setting(json, "label", "team", &ok);
    if (!ok) {
        free(json);
        return wi_fail(err, "config.label must be a string");
    }
    value = wi_json_setting(json, "value", "unassigned", &ok);
    free(json);
    if (!ok) return wi_fail(err, "config.value must be a string");
    return true;
}

/* Gives `pod` the label by server-side apply and records the Event; a pod gone since the event is
 * left alone. */
static bool label_pod(wi_object_t pod, const char *ns, const char *name, const char *key, plugin_string_t *err) {
    wi_buf_t intent = {0};
    wi_buf_puts(&intent, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":");
    wi_buf_json_string(&intent, name);
    wi_buf_puts(&intent, ",\"namespace\":");
    wi_buf_json_string(&intent, ns);
    wi_buf_puts(&intent, ",\"labels\":{");
    wi_buf_json_string(&intent, label);
    wi_buf_puts(&intent, ":");
    wi_buf_json_string(&intent, value);
    wi_buf_puts(&intent, "}}}");
    wi_error_t e = {0};
    /* The pod may be gone since the event: must_exist never re-creates it. */
    wi_apply_options_t opts = {.must_exist = true};
    bool ok = wi_kube_apply("v1/pods", ns, name, wi_buf_str(&intent), &opts, NULL, &e);
    wi_buf_free(&intent);
    if (!ok && e.kind == WI_ERR_NOT_FOUND) {
        wi_info("gone %s", key);
        wi_error_free(&e);
        return true;
    }
    if (ok) {
        char *note = wi_sprintf("set %s=%s", label, value);
        ok = wi_event_normal(pod, "Labelled", "Label", note, &e);
        free(note);
    }
    if (ok) {
        wi_info("labelled %s %s=%s", key, label, value);
    } else {
        wi_fail(err, "%s", e.message);
    }
    wi_error_free(&e);
    return ok;
}

/*
 * `event->object` (and `event->old_object`, for an update) are references for
 * this call: read them with the wi_object_* getters; do not keep them.
 */
bool exports_wasm_informer_plugin_handler_on_event(exports_wasm_informer_plugin_handler_event_info_t *event,
                                                   plugin_string_t *err) {
    static const char *const kinds[] = {"added", "updated", "deleted", "synced"};
    const char *kind = kinds[event->kind & 3];
    wi_object_t pod = event->object;
    char *key = wi_object_key(pod);
    bool ok = true;
    if (strcmp(kind, "deleted") == 0) {
        wi_info("deleted %s", key);
    } else if (strcmp(kind, "synced") != 0) {
        char *ns = wi_object_namespace(pod);
        char *name = wi_object_name(pod);
        const char *in = ns ? ns : "";
        /* A query of the host's shared cache: no API call. */
        wi_objects_t list;
        wi_error_t e = {0};
        if (wi_cache_list("v1/pods", in, NULL, &list, &e)) {
            wi_info("%s %s (%zu pods in %s)", kind, key, list.len, in);
            wi_objects_free(&list);
            /* The event may be stale: decide from the pod as the cache holds it now. */
            bool found = false;
            wi_object_t now;
            if (!wi_cache_get("v1/pods", key, &found, &now, &e)) {
                ok = wi_fail(err, "%s", e.message);
            } else if (!found) {
                wi_info("gone %s", key);
            } else {
                char *have = wi_object_label(now, label);
                if (!have && !wi_object_is_deleting(now)) ok = label_pod(now, in, name, key, err);
                free(have);
            }
        } else {
            ok = wi_fail(err, "%s", e.message);
        }
        wi_error_free(&e);
        free(ns);
        free(name);
    }
    free(key);
    return ok;
}
