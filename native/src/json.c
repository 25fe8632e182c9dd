#include "json.h"
#include "text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 200

typedef struct parser {
    const char *text;
    size_t length, at;
    char *error;
    size_t error_size;
    int failed;
} parser;

static void fail(parser *p, const char *what) {
    if (!p->failed) {
        snprintf(p->error, p->error_size, "%s at byte %zu", what, p->at);
        p->failed = 1;
    }
}

static void skip_space(parser *p) {
    while (p->at < p->length && strchr(" \t\r\n", p->text[p->at]) && p->text[p->at])
        p->at++;
}

static int literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->length - p->at < n || memcmp(p->text + p->at, word, n) != 0) {
        fail(p, "invalid literal");
        return 0;
    }
    p->at += n;
    return 1;
}

static int hex4(parser *p, unsigned *out) {
    unsigned v = 0;
    if (p->length - p->at < 4) {
        fail(p, "truncated \\u escape");
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        char c = p->text[p->at++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else {
            fail(p, "invalid \\u escape");
            return 0;
        }
    }
    *out = v;
    return 1;
}

static size_t utf8(unsigned code, char *out) {
    if (code < 0x80) { out[0] = (char)code; return 1; }
    if (code < 0x800) { out[0] = (char)(0xC0 | code >> 6); out[1] = (char)(0x80 | (code & 0x3F)); return 2; }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | code >> 12); out[1] = (char)(0x80 | (code >> 6 & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | code >> 18); out[1] = (char)(0x80 | (code >> 12 & 0x3F));
    out[2] = (char)(0x80 | (code >> 6 & 0x3F)); out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

static int escape(parser *p, char *out, size_t *n) {
    char c = p->text[p->at++];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        out[(*n)++] = to[hit - from];
        return 1;
    }
    if (c != 'u') {
        fail(p, "invalid escape");
        return 0;
    }
    unsigned code;
    if (!hex4(p, &code)) return 0;
    if (code >= 0xD800 && code < 0xDC00) {
        unsigned low;
        if (p->length - p->at < 2 || p->text[p->at] != '\\' || p->text[p->at + 1] != 'u') {
            fail(p, "unpaired surrogate");
            return 0;
        }
        p->at += 2;
        if (!hex4(p, &low)) return 0;
        if (low < 0xDC00 || low >= 0xE000) {
            fail(p, "unpaired surrogate");
            return 0;
        }
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    } else if (code >= 0xDC00 && code < 0xE000) {
        fail(p, "unpaired surrogate");
        return 0;
    }
    if (code == 0) {
        fail(p, "a string holding NUL");
        return 0;
    }
    *n += utf8(code, out + *n);
    return 1;
}

static char *string(parser *p) {
    p->at++; /* the opening quote */
    size_t start = p->at, n = 0;
    /* the decoded string is never longer than the text */
    size_t end = start;
    while (end < p->length && p->text[end] != '"') end += p->text[end] == '\\' ? 2 : 1;
    if (end >= p->length) {
        fail(p, "unterminated string");
        return NULL;
    }
    char *out = malloc(end - start + 1);
    if (!out) {
        fail(p, "out of memory");
        return NULL;
    }
    while (p->text[p->at] != '"') {
        unsigned char c = (unsigned char)p->text[p->at];
        if (c < 0x20) {
            fail(p, "a control character in a string");
            free(out);
            return NULL;
        }
        if (c == '\\') {
            p->at++;
            if (!escape(p, out, &n)) {
                free(out);
                return NULL;
            }
        } else {
            out[n++] = (char)c;
            p->at++;
        }
    }
    p->at++;
    out[n] = 0;
    return out;
}

static int number(parser *p, json *v) {
    size_t start = p->at;
    int integer = 1;
    if (p->text[p->at] == '-') p->at++;
    if (p->at >= p->length || !(p->text[p->at] >= '0' && p->text[p->at] <= '9')) {
        fail(p, "invalid number");
        return 0;
    }
    if (p->text[p->at] == '0') p->at++;
    else while (p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9') p->at++;
    if (p->at < p->length && p->text[p->at] == '.') {
        integer = 0;
        p->at++;
        size_t digits = p->at;
        while (p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9') p->at++;
        if (p->at == digits) { fail(p, "invalid number"); return 0; }
    }
    if (p->at < p->length && (p->text[p->at] == 'e' || p->text[p->at] == 'E')) {
        integer = 0;
        p->at++;
        if (p->at < p->length && (p->text[p->at] == '+' || p->text[p->at] == '-')) p->at++;
        size_t digits = p->at;
        while (p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9') p->at++;
        if (p->at == digits) { fail(p, "invalid number"); return 0; }
    }
    char buffer[128];
    size_t n = p->at - start;
    if (n >= sizeof buffer) { fail(p, "number too long"); return 0; }
    memcpy(buffer, p->text + start, n);
    buffer[n] = 0;
    v->kind = JSON_NUMBER;
    v->number = strtod(buffer, NULL);
    if (integer) {
        errno = 0;
        long long i = strtoll(buffer, NULL, 10);
        if (errno == 0) {
            v->is_integer = 1;
            v->integer = i;
            v->uinteger = (uint64_t)i;
        } else if (buffer[0] != '-') {
            errno = 0;
            unsigned long long u = strtoull(buffer, NULL, 10);
            if (errno == 0) {
                v->is_integer = v->is_unsigned = 1;
                v->uinteger = u;
                v->integer = (int64_t)u;
            }
        }
    }
    return 1;
}

static int value(parser *p, json *v, int depth);

static int grow(parser *p, json *v, size_t *capacity, int object) {
    if (v->count < *capacity) return 1;
    size_t next = *capacity ? *capacity * 2 : 4;
    json *items = realloc(v->items, next * sizeof *items);
    if (!items) { fail(p, "out of memory"); return 0; }
    v->items = items;
    if (object) {
        char **keys = realloc(v->keys, next * sizeof *keys);
        if (!keys) { fail(p, "out of memory"); return 0; }
        v->keys = keys;
    }
    *capacity = next;
    return 1;
}

static int container(parser *p, json *v, int depth, int object) {
    char close = object ? '}' : ']';
    size_t capacity = 0;
    v->kind = object ? JSON_OBJECT : JSON_ARRAY;
    p->at++;
    skip_space(p);
    if (p->at < p->length && p->text[p->at] == close) { p->at++; return 1; }
    for (;;) {
        skip_space(p);
        if (!grow(p, v, &capacity, object)) return 0;
        json *item = &v->items[v->count];
        memset(item, 0, sizeof *item);
        if (object) {
            if (p->at >= p->length || p->text[p->at] != '"') { fail(p, "expected a key"); return 0; }
            char *key = string(p);
            if (!key) return 0;
            v->keys[v->count] = key;
            v->count++; /* counted now so that a failure below frees the key */
            skip_space(p);
            if (p->at >= p->length || p->text[p->at] != ':') { fail(p, "expected ':'"); return 0; }
            p->at++;
            if (!value(p, item, depth + 1)) return 0;
        } else {
            v->count++;
            if (!value(p, item, depth + 1)) return 0;
        }
        skip_space(p);
        if (p->at >= p->length) { fail(p, "unexpected end"); return 0; }
        if (p->text[p->at] == close) { p->at++; return 1; }
        if (p->text[p->at] != ',') { fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'"); return 0; }
        p->at++;
    }
}

static int value(parser *p, json *v, int depth) {
    if (depth > MAX_DEPTH) { fail(p, "nested too deeply"); return 0; }
    skip_space(p);
    if (p->at >= p->length) { fail(p, "unexpected end"); return 0; }
    switch (p->text[p->at]) {
    case '{': return container(p, v, depth, 1);
    case '[': return container(p, v, depth, 0);
    case '"': v->kind = JSON_STRING; return (v->string = string(p)) != NULL;
    case 't': v->kind = JSON_BOOL; v->boolean = 1; return literal(p, "true");
    case 'f': v->kind = JSON_BOOL; return literal(p, "false");
    case 'n': v->kind = JSON_NULL; return literal(p, "null");
    default: return number(p, v);
    }
}

static void release(json *v) {
    free(v->string);
    for (size_t i = 0; i < v->count; i++) {
        release(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void json_free(json *v) {
    if (!v) return;
    release(v);
    free(v);
}

json *json_parse(const char *source, size_t length, char *error, size_t error_size) {
    parser p = {source, length, 0, error, error_size, 0};
    json *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    if (value(&p, v, 0)) {
        skip_space(&p);
        if (p.at != p.length) fail(&p, "trailing characters");
    }
    if (p.failed) {
        json_free(v);
        return NULL;
    }
    return v;
}

const json *json_get(const json *object, const char *key) {
    if (!object || object->kind != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], key) == 0) return &object->items[i];
    return NULL;
}

int json_equal(const json *a, const json *b) {
    if (a->kind != b->kind) return 0;
    switch (a->kind) {
    case JSON_NULL: return 1;
    case JSON_BOOL: return a->boolean == b->boolean;
    case JSON_NUMBER:
        if (a->is_integer && b->is_integer) return a->integer == b->integer && a->is_unsigned == b->is_unsigned;
        return a->number == b->number;
    case JSON_STRING: return strcmp(a->string, b->string) == 0;
    default:
        if (a->count != b->count) return 0;
        for (size_t i = 0; i < a->count; i++) {
            if (a->kind == JSON_OBJECT && strcmp(a->keys[i], b->keys[i]) != 0) return 0;
            if (!json_equal(&a->items[i], &b->items[i])) return 0;
        }
        return 1;
    }
}

static void render(text *t, const json *v) {
    char buffer[64];
    switch (v->kind) {
    case JSON_NULL: text_put(t, "None", 4); break;
    case JSON_BOOL: text_put(t, v->boolean ? "True" : "False", v->boolean ? 4 : 5); break;
    case JSON_NUMBER:
        if (v->is_integer && v->is_unsigned) snprintf(buffer, sizeof buffer, "%llu", (unsigned long long)v->uinteger);
        else if (v->is_integer) snprintf(buffer, sizeof buffer, "%lld", (long long)v->integer);
        else snprintf(buffer, sizeof buffer, "%.17g", v->number);
        text_put(t, buffer, strlen(buffer));
        break;
    case JSON_STRING: text_put(t, v->string, strlen(v->string)); break;
    default:
        text_put(t, v->kind == JSON_ARRAY ? "(" : "{", 1);
        for (size_t i = 0; i < v->count; i++) {
            if (i) text_put(t, ", ", 2);
            if (v->kind == JSON_OBJECT) {
                text_put(t, v->keys[i], strlen(v->keys[i]));
                text_put(t, ": ", 2);
            }
            render(t, &v->items[i]);
        }
        text_put(t, v->kind == JSON_ARRAY ? ")" : "}", 1);
    }
}

char *json_render(const json *v) {
    text t = {0};
    render(&t, v);
    if (t.failed) {
        free(t.data);
        return NULL;
    }
    return t.data ? t.data : calloc(1, 1);
}
