/*
 * restart-alarm: a wasm-informer plugin in C, on the C SDK (sdk/c). It watches
 * pods and raises an alarm when a container's restart count reaches the
 * threshold from the manifest's [config] (`threshold`, default 5):
 *
 *   alarm pod=NS/NAME container=C restarts=N threshold=T namespace-pods-alarming=K
 *
 * K is the number of cached pods in the same namespace with a container at or
 * above the threshold (a cache `list` query), so a crash-looping rollout shows
 * its extent at once. With `[config] events = true` each alarm is also a
 * Warning Event `RestartThreshold` (action `Alarm`) about the pod; alarms
 * about one pod fold into the Event's `series` (the manifest then needs
 * `events = true`).
 *
 * Invariant: one alarm per container per restart count increase at or above
 * the threshold; resyncs and unrelated updates stay quiet; a deleted pod is
 * forgotten, so a recreated pod of the same name alarms afresh. Object
 * references are used only in the call that received them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seen.h"
#include "wasm_informer.h"

static int64_t threshold = 5;
static bool record_events = false;
static seen_table_t seen;

static const char *const CONTAINER_STATUSES[] = {"status", "containerStatuses", NULL};
static const char *const INIT_STATUSES[] = {"status", "initContainerStatuses", NULL};

/* True when any container of the pod JSON has restarted `threshold` times or more. */
static bool pod_alarming(const char *json) {
    const char *const *paths[] = {CONTAINER_STATUSES, INIT_STATUSES};
    for (size_t i = 0; i < 2; i++) {
        for (const char *st = wi_json_array_first(wi_json_path(json, paths[i])); st; st = wi_json_array_next(st)) {
            int64_t n;
            if (wi_json_int(wi_json_member(st, "restartCount"), &n) && n >= threshold) return true;
        }
    }
    return false;
}

/* Pods of the namespace at or above the threshold, from the cache; -1 on a cache error. */
static int64_t namespace_alarming(const char *resource, const char *ns, plugin_string_t *err) {
    wi_objects_t pods;
    wi_error_t e = {0};
    if (!wi_cache_list(resource, ns, NULL, &pods, &e)) {
        wi_fail(err, "%s", e.message);
        wi_error_free(&e);
        return -1;
    }
    int64_t count = 0;
    for (size_t i = 0; i < pods.len; i++) {
        char *json = wi_object_json(wi_objects_at(&pods, i));
        if (pod_alarming(json)) count++;
        free(json);
    }
    wi_objects_free(&pods);
    return count;
}

bool exports_wasm_informer_plugin_handler_init(plugin_string_t *config, plugin_string_t *err) {
    char *json = wi_take(config);
    bool ok = true;
    const char *p = wi_json_ws(json);
    if (*p != '{' || !wi_json_skip(p)) {
        ok = wi_fail(err, "config is not a JSON table");
    } else {
        const char *t = wi_json_member(p, "threshold");
        int64_t n;
        if (t && (!wi_json_int(t, &n) || n < 1)) {
            ok = wi_fail(err, "config.threshold must be a positive integer");
        } else if (t) {
            threshold = n;
        }
        const char *ev = wi_json_member(p, "events");
        if (ok && ev && !wi_json_bool(ev, &record_events)) {
            ok = wi_fail(err, "config.events must be true or false");
        }
    }
    free(json);
    if (ok) wi_info("policy threshold=%lld", (long long)threshold);
    return ok;
}

bool exports_wasm_informer_plugin_handler_on_event(exports_wasm_informer_plugin_handler_event_info_t *event,
                                                   plugin_string_t *err) {
    wi_object_t object = event->object; /* a reference for this call; event->old_object is the old state */
    bool ok = true;
    char *key = wi_object_key(object);
    if (event->kind == WASM_INFORMER_PLUGIN_TYPES_EVENT_KIND_DELETED) {
        seen_forget_pod(&seen, key);
        free(key);
        return true;
    }
    char *json = wi_object_json(object);
    if (!wi_json_skip(json)) {
        ok = wi_fail(err, "pod %s: object is not valid JSON", key);
        free(json);
        free(key);
        return ok;
    }
    int64_t ns_count = -2; /* not queried yet */
    const char *const *paths[] = {INIT_STATUSES, CONTAINER_STATUSES};
    for (size_t i = 0; i < 2 && ok; i++) {
        for (const char *st = wi_json_array_first(wi_json_path(json, paths[i])); st; st = wi_json_array_next(st)) {
            char name[254];
            int64_t restarts;
            if (!wi_json_string(wi_json_member(st, "name"), name, sizeof name)) continue;
            if (!wi_json_int(wi_json_member(st, "restartCount"), &restarts)) continue;
            int64_t last = seen_get(&seen, key, name);
            if (restarts < threshold || restarts <= last) {
                if (restarts < last) seen_set(&seen, key, name, restarts); /* container was reset */
                continue;
            }
            if (ns_count == -2) {
                char *resource = wi_object_resource(object);
                char *ns = wi_object_namespace(object);
                ns_count = namespace_alarming(resource, ns, err);
                free(resource);
                free(ns);
                if (ns_count < 0) {
                    ok = false;
                    break;
                }
            }
            wi_warn("alarm pod=%s container=%s restarts=%lld threshold=%lld namespace-pods-alarming=%lld", key, name,
                    (long long)restarts, (long long)threshold, (long long)ns_count);
            if (record_events) {
                char note[400];
                snprintf(note, sizeof note, "container %s restarted %lld times (threshold %lld)", name,
                         (long long)restarts, (long long)threshold);
                wi_error_t e = {0};
                if (!wi_event_warning(object, "RestartThreshold", "Alarm", note, &e)) {
                    /* Not remembered: the alarm is raised again on the next event. */
                    ok = wi_fail(err, "%s", e.message);
                    wi_error_free(&e);
                    break;
                }
            }
            seen_set(&seen, key, name, restarts);
        }
    }
    free(json);
    free(key);
    return ok;
}
