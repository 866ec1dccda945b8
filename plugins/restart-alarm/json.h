/*
 * A small read-only JSON scanner for plugins: it walks compact JSON text in
 * place, without allocating, to find object members, iterate arrays and read
 * numbers and strings.
 *
 * Invariant: every function takes a pointer to the first character of a JSON
 * value inside a NUL-terminated buffer and never reads past the terminator; on
 * malformed input it returns NULL (or false) instead of reading further.
 */
#ifndef RESTART_ALARM_JSON_H
#define RESTART_ALARM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Skips whitespace. */
const char *json_ws(const char *p);

/* Returns the first character after the value starting at p, or NULL if malformed. */
const char *json_skip(const char *p);

/* In the object starting at obj, returns the value of member `key`, or NULL. */
const char *json_member(const char *obj, const char *key);

/* Follows a path of member names; `path` is NULL-terminated. */
const char *json_path(const char *obj, const char *const *path);

/*
 * Array iteration. `json_array_first` returns the first element of the array at
 * arr (NULL when empty or not an array); `json_array_next` returns the element
 * after `elem`, or NULL at the end.
 */
const char *json_array_first(const char *arr);
const char *json_array_next(const char *elem);

/* Reads an integer value; false if the value is not an integer. */
bool json_int(const char *v, int64_t *out);

/*
 * Copies a string value (escapes \" \\ \/ \n \t and \uXXXX below 0x80 decoded,
 * others kept verbatim) into buf of size cap, NUL-terminated. False if the
 * value is not a string or does not fit.
 */
bool json_string(const char *v, char *buf, size_t cap);

#endif
