/* A growing text buffer, for JSON written by hand (json.c's rendering, state.c's header). */
#ifndef PIPEC_TEXT_H
#define PIPEC_TEXT_H

#include <stddef.h>

typedef struct text {
    char *data; /* NUL-terminated; NULL while empty */
    size_t length, capacity;
    int failed; /* out of memory: later writes do nothing */
} text;

void text_put(text *t, const char *s, size_t n);
void text_puts(text *t, const char *s);

#endif
