#include "text.h"

#include <stdlib.h>
#include <string.h>

void text_put(text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->length + n + 1 > t->capacity) {
        size_t next = (t->length + n + 1) * 2;
        char *bigger = realloc(t->data, next);
        if (!bigger) {
            t->failed = 1;
            return;
        }
        t->data = bigger;
        t->capacity = next;
    }
    memcpy(t->data + t->length, s, n);
    t->length += n;
    t->data[t->length] = 0;
}

void text_puts(text *t, const char *s) { text_put(t, s, strlen(s)); }
