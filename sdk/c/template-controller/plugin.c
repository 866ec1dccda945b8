/*
 * wasm-informer-world: controller
 *
 * Template wasm-informer controller in C: makes sure every object of its
 * primary resource carries the label `[config] label` = `value` (default
 * managed-by=wasm-informer), by a JSON merge patch, and records a Normal
 * Event `Labelled` when it sets it.
 *
 * Level-triggered: it is told which object to look at, never what changed,
 * and reads the current state from the cache. The manifest must grant
 * `[[write]] resource = RESOURCE verbs = ["patch"]` and `events = true`.
 *
 * Build: scripts/build-plugins.sh
 */
#include <stdlib.h>
#include <string.h>

#include "wasm_informer.h"

static char *label;
static char *value;
static int64_t requeue_ms;

bool exports_wasm_informer_plugin_reconciler_init(plugin_string_t *config, plugin_string_t *err) {
    char *json = wi_take(config);
    bool ok = true;
    free(label);
    free(value);
    label = wi_json_setting(json, "label", "managed-by", &ok);
    if (!ok) {
        free(json);
        return wi_fail(err, "config.label must be a non-empty string");
    }
    value = wi_json_setting(json, "value", "wasm-informer", &ok);
    if (!ok) {
        free(json);
        return wi_fail(err, "config.value must be a non-empty string");
    }
    const char *r = wi_json_member(json, "requeue_ms");
    requeue_ms = 0;
    if (r && (!wi_json_int(r, &requeue_ms) || requeue_ms < 0)) ok = false;
    free(json);
    if (!ok) return wi_fail(err, "config.requeue_ms must be a non-negative integer");
    return true;
}

static bool next(exports_wasm_informer_plugin_reconciler_action_t *ret) {
    return requeue_ms ? wi_requeue_after(ret, (uint64_t)requeue_ms) : wi_done(ret);
}

bool exports_wasm_informer_plugin_reconciler_reconcile(exports_wasm_informer_plugin_reconciler_request_t *request,
                                                       exports_wasm_informer_plugin_reconciler_action_t *ret,
                                                       exports_wasm_informer_plugin_reconciler_reconcile_error_t *err) {
    wi_request_t req;
    wi_request_take(request, &req);
    bool found = false, ok;
    wi_object_t obj;
    wi_error_t e = {0};
    if (!wi_cache_get(req.resource, req.key, &found, &obj, &e)) {
        ok = wi_retry(err, "%s", e.message);
    } else if (!found) {
        wi_info("gone %s", req.key);
        ok = wi_done(ret);
    } else {
        char *have = wi_object_label(obj, label);
        if (have && strcmp(have, value) == 0) {
            ok = next(ret);
        } else {
            wi_buf_t patch = {0};
            wi_buf_puts(&patch, "{\"metadata\":{\"labels\":{");
            wi_buf_json_string(&patch, label);
            wi_buf_puts(&patch, ":");
            wi_buf_json_string(&patch, value);
            wi_buf_puts(&patch, "}}}");
            if (wi_kube_patch(req.resource, req.namespace_, req.name, WI_PATCH_MERGE, wi_buf_str(&patch), false, NULL,
                              &e)) {
                char *note = wi_sprintf("set %s=%s", label, value);
                wi_error_free(&e);
                if (wi_event_normal(obj, "Labelled", "Label", note, &e)) {
                    wi_info("labelled %s %s=%s", req.key, label, value);
                    ok = next(ret);
                } else {
                    ok = wi_retry(err, "%s", e.message);
                }
                free(note);
            } else if (e.kind == WI_ERR_NOT_FOUND) {
                ok = wi_done(ret); /* deleted since: nothing to do */
            } else if (e.kind == WI_ERR_INVALID) {
                ok = wi_terminal(err, "%s", e.message); /* retrying cannot help */
            } else {
                ok = wi_retry(err, "%s", e.message);
            }
            wi_buf_free(&patch);
        }
        free(have);
    }
    wi_error_free(&e);
    wi_request_free(&req);
    return ok;
}
