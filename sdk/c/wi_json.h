/*
 * JSON for C plugins: a small read-only scanner that walks compact JSON text
 * in place, without allocating (find object members, iterate arrays, read
 * numbers and strings), and a growable text buffer that writes JSON-escaped
 * strings, for patch and Event bodies built from values a plugin read.
 *
 * Invariants: every reading function takes a pointer to the first character
 * of a JSON value inside a NUL-terminated buffer and never reads past the
 * terminator; on malformed input it returns NULL (or false) instead of
 * reading further. A wi_buf_t is always NUL-terminated; an allocation failure
 * aborts (a trap), so no call here returns a half-written buffer.
 */
#ifndef WASM_INFORMER_WI_JSON_H
#define WASM_INFORMER_WI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- reading ---- */

/* Skips whitespace. */
const char *wi_json_ws(const char *p);

/* Returns the first character after the value starting at p, or NULL if malformed. */
const char *wi_json_skip(const char *p);

/* In the object starting at obj, returns the value of member `key`, or NULL. */
const char *wi_json_member(const char *obj, const char *key);

/* Follows a path of member names; `path` is NULL-terminated. */
const char *wi_json_path(const char *obj, const char *const *path);

/*
 * Array iteration. `wi_json_array_first` returns the first element of the
 * array at arr (NULL when empty or not an array); `wi_json_array_next` returns
 * the element after `elem`, or NULL at the end.
 */
const char *wi_json_array_first(const char *arr);
const char *wi_json_array_next(const char *elem);

/* Reads an integer value; false if the value is not an integer. */
bool wi_json_int(const char *v, int64_t *out);

/* Reads `true` or `false`; false if the value is neither. */
bool wi_json_bool(const char *v, bool *out);

/*
 * Copies a string value into buf of size cap, NUL-terminated, decoding the
 * escapes (\uXXXX of a character above 0x7f becomes '?'; the API server writes
 * those characters as UTF-8, unescaped). False if the value is not a string or
 * does not fit.
 */
bool wi_json_string(const char *v, char *buf, size_t cap);

/* A string value as a malloc'd C string (free it), or NULL if v is not a string. */
char *wi_json_string_dup(const char *v);

/*
 * The string member `key` of the object `obj` (a plugin's [config]) as a malloc'd C string, or
 * a copy of `fallback` when the member is absent. A member that is not a non-empty string sets
 * *ok to false (and the result may be NULL); *ok is left alone otherwise.
 */
char *wi_json_setting(const char *obj, const char *key, const char *fallback, bool *ok);

/* The JSON text of the value at v as a malloc'd C string (free it), or NULL if malformed. */
char *wi_json_value_dup(const char *v);

/* ---- writing ---- */

/* A growable, NUL-terminated text buffer. Zero-initialise it: `wi_buf_t b = {0};`. */
typedef struct {
    char *ptr;
    size_t len;
    size_t cap;
} wi_buf_t;

/* Appends text. */
void wi_buf_puts(wi_buf_t *b, const char *s);
/* Appends printf-formatted text. */
void wi_buf_printf(wi_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends `s` as a quoted, escaped JSON string (`null` when s is NULL). */
void wi_buf_json_string(wi_buf_t *b, const char *s);
/* The text (never NULL); the buffer keeps owning it. */
const char *wi_buf_str(const wi_buf_t *b);
/* Hands the text over to the caller (free it) and empties the buffer. */
char *wi_buf_take(wi_buf_t *b);
/* Frees the text. */
void wi_buf_free(wi_buf_t *b);

#endif
