/*
 * A small read-only JSON scanner (see json.h): finds members, iterates arrays
 * and reads scalars in place. Invariant: never reads past the NUL terminator;
 * malformed input yields NULL/false.
 */
#include "json.h"

#include <string.h>

const char *json_ws(const char *p) {
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
    p = json_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
        if (open == '{') {
            p = skip_string(json_ws(p));
            if (!p) return NULL;
            p = json_ws(p);
            if (*p != ':') return NULL;
            p = json_ws(p + 1);
        }
        p = json_skip(p);
        if (!p) return NULL;
        p = json_ws(p);
        if (*p == ',') {
            p = json_ws(p + 1);
            continue;
        }
        return *p == close ? p + 1 : NULL;
    }
}

const char *json_skip(const char *p) {
    if (!p) return NULL;
    p = json_ws(p);
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

const char *json_member(const char *obj, const char *key) {
    if (!obj) return NULL;
    const char *p = json_ws(obj);
    if (*p != '{') return NULL;
    size_t klen = strlen(key);
    p = json_ws(p + 1);
    if (*p == '}') return NULL;
    for (;;) {
        const char *name = p;
        const char *end = skip_string(name);
        if (!end) return NULL;
        p = json_ws(end);
        if (*p != ':') return NULL;
        p = json_ws(p + 1);
        /* Member names in Kubernetes objects carry no escapes; compare raw. */
        if ((size_t)(end - name - 2) == klen && strncmp(name + 1, key, klen) == 0) return p;
        p = json_skip(p);
        if (!p) return NULL;
        p = json_ws(p);
        if (*p != ',') return NULL;
        p = json_ws(p + 1);
    }
}

const char *json_path(const char *obj, const char *const *path) {
    for (; obj && *path; path++) obj = json_member(obj, *path);
    return obj;
}

const char *json_array_first(const char *arr) {
    if (!arr) return NULL;
    const char *p = json_ws(arr);
    if (*p != '[') return NULL;
    p = json_ws(p + 1);
    return *p == ']' || !*p ? NULL : p;
}

const char *json_array_next(const char *elem) {
    const char *p = json_ws(json_skip(elem));
    if (!p || *p != ',') return NULL;
    return json_ws(p + 1);
}

bool json_int(const char *v, int64_t *out) {
    if (!v) return false;
    const char *p = json_ws(v);
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

bool json_string(const char *v, char *buf, size_t cap) {
    if (!v || cap == 0) return false;
    const char *p = json_ws(v);
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
