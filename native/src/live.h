/* Live updates in C (runtime/live.py): the values of the live-update record's expressions
 * (plan/live.py's language, plan/arithmetic.py's operations), and what a kernel node's field
 * receives for one. Integers are exact within 127 bits, as in Python's record evaluation. */
#ifndef PIPEC_LIVE_H
#define PIPEC_LIVE_H

#include "runtime.h"

__extension__ typedef __int128 live_int;

typedef enum live_kind { LIVE_NONE, LIVE_INT, LIVE_FLOAT, LIVE_BOOL } live_kind;

typedef struct live_value {
    live_kind kind;     /* LIVE_NONE: a value the record does not hold (a string) */
    live_int integer;   /* LIVE_INT; LIVE_BOOL: 0 or 1 */
    double number;      /* LIVE_FLOAT */
} live_value;

#define LIVE_WHY 256 /* the size of a reason's buffer */

/* The value of `expr` with `values[0..count)` for its references; 0 with the reason in `why`
 * when it has none (an operation that cannot take its operands, an integer beyond 127 bits). */
int live_evaluate(const json *expr, const live_value *values, size_t count, live_value *out, char *why);
/* The JSON number (as plan.json holds it) a scalar argument of type `t` receives for `v`,
 * checked as the compiler checks it (PC204); 0 with the reason in `why`. */
int live_argument(live_value v, dtype t, json *out, char *why);
/* A launch dimension or byte count from `low` to `high`, a multiple of `multiple`; 0 with the
 * reason (naming `what`) in `why`. */
int live_dimension(live_value v, const char *what, long long low, long long high, long long multiple, long long *out,
                   char *why);
/* `v` as the language writes it (`true`, `3`, `0.5`). */
void live_describe(live_value v, char *out, size_t size);

#endif
