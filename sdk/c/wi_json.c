/*
 * JSON for C plugins (see wi_json.h): a read-only scanner that finds members,
 * iterates arrays and reads scalars in place, and a text buffer that writes
 * escaped strings. Invariant: the scanner never reads past the NUL
 * terminator and yields NULL/false on malformed input.
 */
#include "wi_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *wi_json_ws(const char *p) {
    while (p && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static const char *skip_string(const char *p) {
    if (*p != '"') return NULL;
    p++;
    while (*p && *p != '"') {
        if (*p == '\\') {
            p++;
            if (!*p) return NULL;
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *skip_container(const char *p, char open, char close) {
    if (*p != open) return NULL;
    p = wi_json_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
        if (open == '{') {
            p = skip_string(wi_json_ws(p));
            if (!p) return NULL;
            p = wi_json_ws(p);
            if (*p != ':') return NULL;
            p = wi_json_ws(p + 1);
        }
        p = wi_json_skip(p);
        if (!p) return NULL;
        p = wi_json_ws(p);
        if (*p == ',') {
            p = wi_json_ws(p + 1);
            continue;
        }
        return *p == close ? p + 1 : NULL;
    }
}

const char *wi_json_skip(const char *p) {
    if (!p) return NULL;
    p = wi_json_ws(p);
    switch (*p) {
        case '"': return skip_string(p);
        case '{': return skip_container(p, '{', '}');
        case '[': return skip_container(p, '[', ']');
        case 't': return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
        case 'f': return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
        case 'n': return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
        default:
            if (*p == '-' || (*p >= '0' && *p <= '9')) {
                p++;
                while ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-') p++;
                return p;
            }
            return NULL;
    }
}

const char *wi_json_member(const char *obj, const char *key) {
    if (!obj) return NULL;
    const char *p = wi_json_ws(obj);
    if (*p != '{') return NULL;
    size_t klen = strlen(key);
    p = wi_json_ws(p + 1);
    if (*p == '}') return NULL;
    for (;;) {
        const char *name = p;
        const char *end = skip_string(name);
        if (!end) return NULL;
        p = wi_json_ws(end);
        if (*p != ':') return NULL;
        p = wi_json_ws(p + 1);
        /* Member names in Kubernetes objects carry no escapes; compare raw. */
        if ((size_t)(end - name - 2) == klen && strncmp(name + 1, key, klen) == 0) return p;
        p = wi_json_skip(p);
        if (!p) return NULL;
        p = wi_json_ws(p);
        if (*p != ',') return NULL;
        p = wi_json_ws(p + 1);
    }
}

const char *wi_json_path(const char *obj, const char *const *path) {
    for (; obj && *path; path++) obj = wi_json_member(obj, *path);
    return obj;
}

const char *wi_json_array_first(const char *arr) {
    if (!arr) return NULL;
    const char *p = wi_json_ws(arr);
    if (*p != '[') return NULL;
    p = wi_json_ws(p + 1);
    return *p == ']' || !*p ? NULL : p;
}

const char *wi_json_array_next(const char *elem) {
    const char *p = wi_json_ws(wi_json_skip(elem));
    if (!p || *p != ',') return NULL;
    return wi_json_ws(p + 1);
}

bool wi_json_int(const char *v, int64_t *out) {
    if (!v) return false;
    const char *p = wi_json_ws(v);
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    if (*p < '0' || *p > '9') return false;
    int64_t n = 0;
    while (*p >= '0' && *p <= '9') {
        if (n > (INT64_MAX - 9) / 10) return false;
        n = n * 10 + (*p - '0');
        p++;
    }
    if (*p == '.' || *p == 'e' || *p == 'E') return false;
    *out = neg ? -n : n;
    return true;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool wi_json_string(const char *v, char *buf, size_t cap) {
    if (!v || cap == 0) return false;
    const char *p = wi_json_ws(v);
    if (*p != '"') return false;
    p++;
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            char e = *p++;
            switch (e) {
                case '"': c = '"'; break;
                case '\\': c = '\\'; break;
                case '/': c = '/'; break;
                case 'n': c = '\n'; break;
                case 't': c = '\t'; break;
                case 'r': c = '\r'; break;
                case 'b': c = '\b'; break;
                case 'f': c = '\f'; break;
                case 'u': {
                    int h[4];
                    for (int i = 0; i < 4; i++) {
                        h[i] = hexval(p[i]);
                        if (h[i] < 0) return false;
                    }
                    int cp = (h[0] << 12) | (h[1] << 8) | (h[2] << 4) | h[3];
                    p += 4;
                    c = cp < 0x80 ? (char)cp : '?';
                    break;
                }
                default: return false;
            }
        }
        if (n + 1 >= cap) return false;
        buf[n++] = c;
    }
    if (*p != '"') return false;
    buf[n] = 0;
    return true;
}

bool wi_json_bool(const char *v, bool *out) {
    if (!v) return false;
    const char *p = wi_json_ws(v);
    if (strncmp(p, "true", 4) == 0) {
        *out = true;
        return true;
    }
    if (strncmp(p, "false", 5) == 0) {
        *out = false;
        return true;
    }
    return false;
}

char *wi_json_string_dup(const char *v) {
    const char *end = wi_json_skip(v);
    if (!end || *wi_json_ws(v) != '"') return NULL;
    /* The decoded string is never longer than its JSON text. */
    size_t cap = (size_t)(end - v) + 1;
    char *out = malloc(cap);
    if (!out) abort();
    if (!wi_json_string(v, out, cap)) {
        free(out);
        return NULL;
    }
    return out;
}

char *wi_json_setting(const char *obj, const char *key, const char *fallback, bool *ok) {
    const char *v = wi_json_member(obj, key);
    if (!v) {
        char *copy = strdup(fallback);
        if (!copy) abort();
        return copy;
    }
    char *s = wi_json_string_dup(v);
    if (!s || !*s) *ok = false;
    return s;
}

char *wi_json_value_dup(const char *v) {
    if (!v) return NULL;
    const char *start = wi_json_ws(v);
    const char *end = wi_json_skip(start);
    if (!end) return NULL;
    size_t n = (size_t)(end - start);
    char *out = malloc(n + 1);
    if (!out) abort();
    memcpy(out, start, n);
    out[n] = 0;
    return out;
}

/* ---- writing ---- */

static void reserve(wi_buf_t *b, size_t more) {
    if (b->len + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + more + 1) cap *= 2;
    char *p = realloc(b->ptr, cap);
    if (!p) abort();
    b->ptr = p;
    b->cap = cap;
}

static void put(wi_buf_t *b, const char *s, size_t n) {
    reserve(b, n);
    memcpy(b->ptr + b->len, s, n);
    b->len += n;
    b->ptr[b->len] = 0;
}

void wi_buf_puts(wi_buf_t *b, const char *s) {
    put(b, s, strlen(s));
}

void wi_buf_printf(wi_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) abort();
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void wi_buf_json_string(wi_buf_t *b, const char *s) {
    if (!s) {
        put(b, "null", 4);
        return;
    }
    put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
            case '"': put(b, "\\\"", 2); break;
            case '\\': put(b, "\\\\", 2); break;
            case '\n': put(b, "\\n", 2); break;
            case '\r': put(b, "\\r", 2); break;
            case '\t': put(b, "\\t", 2); break;
            default:
                if (*p < 0x20) {
                    char esc[8];
                    snprintf(esc, sizeof esc, "\\u%04x", *p);
                    put(b, esc, 6);
                } else {
                    put(b, (const char *)p, 1);
                }
        }
    }
    put(b, "\"", 1);
}

const char *wi_buf_str(const wi_buf_t *b) {
    return b->ptr ? b->ptr : "";
}

char *wi_buf_take(wi_buf_t *b) {
    char *s = b->ptr;
    if (!s) {
        s = malloc(1);
        if (!s) abort();
        s[0] = 0;
    }
    b->ptr = NULL;
    b->len = b->cap = 0;
    return s;
}

void wi_buf_free(wi_buf_t *b) {
    free(b->ptr);
    b->ptr = NULL;
    b->len = b->cap = 0;
}
