/*
 * Template wasm-informer plugin in C: logs one line per event and the number
 * of cached objects in the event's namespace.
 *
 * Build: scripts/build-plugins.sh (it generates plugin.h with wit-bindgen and
 * compiles this file with sdk/c/wasm_informer.c and sdk/c/wi_json.c).
 */
#include <stdlib.h>
#include <string.h>

#include "wasm_informer.h"

static char *prefix;

bool exports_wasm_informer_plugin_handler_init(plugin_string_t *config, plugin_string_t *err) {
    char *json = wi_take(config); /* the manifest's [config] table as JSON */
    const char *p = wi_json_member(json, "prefix");
    free(prefix);
    prefix = p ? wi_json_string_dup(p) : wi_sprintf("event");
    free(json);
    if (!prefix) return wi_fail(err, "config.prefix must be a string");
    return true;
}

/*
 * `event->object` (and `event->old_object`, for an update) are references for
 * this call: read them with the wi_object_* getters; do not keep them.
 */
bool exports_wasm_informer_plugin_handler_on_event(exports_wasm_informer_plugin_handler_event_info_t *event,
                                                   plugin_string_t *err) {
    wi_object_t object = event->object; /* a reference for this call; event->old_object is the old state */
    static const char *const kinds[] = {"added", "updated", "deleted", "synced"};
    char *resource = wi_object_resource(object);
    char *key = wi_object_key(object);
    char *ns = wi_object_namespace(object);
    size_t peers = 0;
    bool ok = true;
    if (ns) {
        wi_objects_t list;
        wi_error_t e = {0};
        if (wi_cache_list(resource, ns, NULL, &list, &e)) {
            peers = list.len;
            wi_objects_free(&list);
        } else {
            ok = wi_fail(err, "%s", e.message);
            wi_error_free(&e);
        }
    }
    if (ok) {
        wi_info("%s kind=%s resource=%s key=%s namespace-objects=%zu", prefix, kinds[event->kind & 3], resource, key,
                peers);
    }
    free(resource);
    free(key);
    free(ns);
    return ok;
}
