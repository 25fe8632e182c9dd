/* A small strict JSON parser (RFC 8259): the whole text must be one value, no trailing commas,
 * no comments, strings valid UTF-8 escapes. Numbers keep both readings: an integer text (no
 * fraction or exponent) that fits 64 bits is exact in `integer` (or `uinteger`), and `number`
 * is strtod's correctly rounded double, as Python's json reads it. */
#ifndef PIPEC_JSON_H
#define PIPEC_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;

typedef struct json json;
struct json {
    json_kind kind;
    int boolean;
    int is_integer;     /* the text was an integer that fits int64 (or uint64: is_unsigned) */
    int is_unsigned;
    int64_t integer;
    uint64_t uinteger;
    double number;
    char *string;       /* NUL-terminated; strings holding NUL are refused */
    size_t count;       /* array items, object members */
    json *items;        /* array items, object values */
    char **keys;        /* object keys */
};

/* Parses `length` bytes; NULL on failure with a one-line reason in `error`. */
json *json_parse(const char *source, size_t length, char *error, size_t error_size);
void json_free(json *value);

const json *json_get(const json *object, const char *key); /* NULL when absent or not an object */
int json_equal(const json *a, const json *b);
/* Compact text of a value (Python-like: lists as [a, b]); caller frees. */
char *json_render(const json *value);

#endif
