/*
 * The restart counts restart-alarm has already alarmed on, per pod key and
 * container name: a hash table with open addressing and tombstones.
 *
 * Invariant: `seen_get` returns the last count stored for (pod, container), or
 * -1; `seen_forget_pod` removes every container of a pod.
 */
#ifndef RESTART_ALARM_SEEN_H
#define RESTART_ALARM_SEEN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *pod;       /* NULL: empty slot */
    char *container; /* NULL with pod == TOMBSTONE: deleted slot */
    int64_t count;
} seen_entry_t;

typedef struct {
    seen_entry_t *slots;
    size_t cap;  /* power of two, or 0 */
    size_t used; /* live + tombstones */
} seen_table_t;

int64_t seen_get(const seen_table_t *t, const char *pod, const char *container);
void seen_set(seen_table_t *t, const char *pod, const char *container, int64_t count);
void seen_forget_pod(seen_table_t *t, const char *pod);

#endif
