/*
 * Open-addressing hash table of (pod key, container) -> last alarmed restart
 * count (see seen.h). Invariant: load (live + tombstones) stays below 3/4.
 */
#include "seen.h"

#include <stdlib.h>
#include <string.h>

static char TOMBSTONE[] = "";

static uint64_t hash(const char *pod, const char *container) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = pod; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ '/') * 1099511628211ull;
    for (const char *p = container; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d) abort();
    memcpy(d, s, n);
    return d;
}

static seen_entry_t *find(const seen_table_t *t, const char *pod, const char *container) {
    if (t->cap == 0) return NULL;
    for (size_t i = hash(pod, container) & (t->cap - 1), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
        seen_entry_t *e = &t->slots[i];
        if (!e->pod) return NULL;
        if (e->pod != TOMBSTONE && strcmp(e->pod, pod) == 0 && strcmp(e->container, container) == 0) return e;
    }
    return NULL;
}

int64_t seen_get(const seen_table_t *t, const char *pod, const char *container) {
    const seen_entry_t *e = find(t, pod, container);
    return e ? e->count : -1;
}

static void insert_new(seen_table_t *t, char *pod, char *container, int64_t count) {
    for (size_t i = hash(pod, container) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        seen_entry_t *e = &t->slots[i];
        if (!e->pod) {
            e->pod = pod;
            e->container = container;
            e->count = count;
            t->used++;
            return;
        }
    }
}

static void grow(seen_table_t *t) {
    seen_table_t old = *t;
    size_t live = 0;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].pod && old.slots[i].pod != TOMBSTONE) live++;
    }
    size_t cap = 16;
    while (cap * 3 / 4 <= (live + 1) * 2) cap *= 2;
    t->slots = calloc(cap, sizeof(seen_entry_t));
    if (!t->slots) abort();
    t->cap = cap;
    t->used = 0;
    for (size_t i = 0; i < old.cap; i++) {
        seen_entry_t *e = &old.slots[i];
        if (e->pod && e->pod != TOMBSTONE) insert_new(t, e->pod, e->container, e->count);
    }
    free(old.slots);
}

void seen_set(seen_table_t *t, const char *pod, const char *container, int64_t count) {
    seen_entry_t *e = find(t, pod, container);
    if (e) {
        e->count = count;
        return;
    }
    if ((t->used + 1) * 4 >= t->cap * 3) grow(t);
    insert_new(t, dup(pod), dup(container), count);
}

void seen_forget_pod(seen_table_t *t, const char *pod) {
    for (size_t i = 0; i < t->cap; i++) {
        seen_entry_t *e = &t->slots[i];
        if (e->pod && e->pod != TOMBSTONE && strcmp(e->pod, pod) == 0) {
            free(e->pod);
            free(e->container);
            e->pod = TOMBSTONE;
            e->container = NULL;
        }
    }
}
