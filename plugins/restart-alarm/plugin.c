/*
 * restart-alarm: a wasm-informer plugin in C. It watches pods and raises an
 * alarm when a container's restart count reaches the threshold from the
 * manifest's [config] (`threshold`, default 5):
 *
 *   alarm pod=NS/NAME container=C restarts=N threshold=T namespace-pods-alarming=K
 *
 * K is the number of cached pods in the same namespace with a container at or
 * above the threshold (a cache `list` query), so a crash-looping rollout shows
 * its extent at once.
 *
 * Invariant: one alarm per container per restart count increase at or above
 * the threshold; resyncs and unrelated updates stay quiet; a deleted pod is
 * forgotten, so a recreated pod of the same name alarms afresh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event_handler.h"
#include "json.h"
#include "seen.h"

static int64_t threshold = 5;
static seen_table_t seen;

static const char *const CONTAINER_STATUSES[] = {"status", "containerStatuses", NULL};
static const char *const INIT_STATUSES[] = {"status", "initContainerStatuses", NULL};

static char *cstr(const event_handler_string_t *s) {
    char *out = malloc(s->len + 1);
    if (!out) abort();
    memcpy(out, s->ptr, s->len);
    out[s->len] = 0;
    return out;
}

static void log_msg(wasm_informer_plugin_log_level_t level, const char *msg) {
    event_handler_string_t s;
    event_handler_string_set(&s, msg);
    wasm_informer_plugin_log_log(level, &s);
}

static bool fail(event_handler_string_t *err, const char *msg) {
    event_handler_string_dup(err, msg);
    return false;
}

/* True when any container of the pod JSON has restarted `threshold` times or more. */
static bool pod_alarming(const char *json) {
    const char *const *paths[] = {CONTAINER_STATUSES, INIT_STATUSES};
    for (size_t i = 0; i < 2; i++) {
        for (const char *st = json_array_first(json_path(json, paths[i])); st; st = json_array_next(st)) {
            int64_t n;
            if (json_int(json_member(st, "restartCount"), &n) && n >= threshold) return true;
        }
    }
    return false;
}

/* Pods of the namespace at or above the threshold, from the cache; -1 on a cache error. */
static int64_t namespace_alarming(event_handler_string_t *resource, const event_handler_option_string_t *ns,
                                  event_handler_string_t *err) {
    wasm_informer_plugin_cache_list_object_view_t pods;
    wasm_informer_plugin_cache_cache_error_t cerr;
    event_handler_string_t ns_copy = ns->val;
    if (!wasm_informer_plugin_cache_list(resource, ns->is_some ? &ns_copy : NULL, NULL, &pods, &cerr)) {
        static const char *const kinds[] = {"forbidden", "unknown-resource", "invalid-selector", "unknown-index"};
        char *detail = cstr(&cerr.val.forbidden); /* every case carries a string */
        char msg[512];
        snprintf(msg, sizeof msg, "cache list v1/pods: %s: %s", cerr.tag < 4 ? kinds[cerr.tag] : "unknown", detail);
        free(detail);
        wasm_informer_plugin_cache_cache_error_free(&cerr);
        fail(err, msg);
        return -1;
    }
    int64_t count = 0;
    for (size_t i = 0; i < pods.len; i++) {
        char *json = cstr(&pods.ptr[i].json);
        if (pod_alarming(json)) count++;
        free(json);
    }
    wasm_informer_plugin_cache_list_object_view_free(&pods);
    return count;
}

bool exports_wasm_informer_plugin_handler_init(event_handler_string_t *config, event_handler_string_t *err) {
    char *json = cstr(config);
    event_handler_string_free(config);
    bool ok = true;
    const char *p = json_ws(json);
    if (*p != '{' || !json_skip(p)) {
        ok = fail(err, "config is not a JSON table");
    } else {
        const char *t = json_member(p, "threshold");
        if (t) {
            int64_t n;
            if (!json_int(t, &n) || n < 1) {
                ok = fail(err, "config.threshold must be a positive integer");
            } else {
                threshold = n;
            }
        }
    }
    free(json);
    if (ok) {
        char msg[64];
        snprintf(msg, sizeof msg, "policy threshold=%lld", (long long)threshold);
        log_msg(WASM_INFORMER_PLUGIN_LOG_LEVEL_INFO, msg);
    }
    return ok;
}

bool exports_wasm_informer_plugin_handler_on_event(exports_wasm_informer_plugin_handler_event_t *event,
                                                   event_handler_string_t *err) {
    bool ok = true;
    char *key = cstr(&event->key);
    if (event->kind == WASM_INFORMER_PLUGIN_TYPES_EVENT_KIND_DELETED) {
        seen_forget_pod(&seen, key);
        goto done;
    }
    char *json = cstr(&event->object.json);
    if (!json_skip(json)) {
        char msg[256];
        snprintf(msg, sizeof msg, "pod %s: object is not valid JSON", key);
        ok = fail(err, msg);
        free(json);
        goto done;
    }
    int64_t ns_count = -2; /* not queried yet */
    const char *const *paths[] = {INIT_STATUSES, CONTAINER_STATUSES};
    for (size_t i = 0; i < 2 && ok; i++) {
        for (const char *st = json_array_first(json_path(json, paths[i])); st; st = json_array_next(st)) {
            char name[254];
            int64_t restarts;
            if (!json_string(json_member(st, "name"), name, sizeof name)) continue;
            if (!json_int(json_member(st, "restartCount"), &restarts)) continue;
            int64_t last = seen_get(&seen, key, name);
            if (restarts < threshold || restarts <= last) {
                if (restarts < last) seen_set(&seen, key, name, restarts); /* container was reset */
                continue;
            }
            if (ns_count == -2) {
                ns_count = namespace_alarming(&event->resource, &event->object.meta.namespace_, err);
                if (ns_count < 0) {
                    ok = false;
                    break;
                }
            }
            char msg[768];
            snprintf(msg, sizeof msg, "alarm pod=%s container=%s restarts=%lld threshold=%lld namespace-pods-alarming=%lld",
                     key, name, (long long)restarts, (long long)threshold, (long long)ns_count);
            log_msg(WASM_INFORMER_PLUGIN_LOG_LEVEL_WARN, msg);
            seen_set(&seen, key, name, restarts);
        }
    }
    free(json);
done:
    free(key);
    exports_wasm_informer_plugin_handler_event_free(event);
    return ok;
}
