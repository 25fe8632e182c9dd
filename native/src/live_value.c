/* The live-update record's expressions evaluated (plan/live.py), each operation as
 * plan/arithmetic.py does it: C's truncating division and remainder on integers, Python's shifts,
 * bitwise operators and exact comparisons of integers with floats, min/max keeping the first of
 * equals, pow exact on integers. Integers are 128-bit and refused past 127 bits, as the Python
 * evaluation refuses them. tests/test_native_live.py checks this file against plan/live.py. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"

#define DEPTH 64                  /* plan/live.py MAX_DEPTH */
#define MAX_POW_EXPONENT 4096
static const live_int INT_MIN_127 = (live_int)((unsigned __int128)1 << 127); /* -2**127, itself out of bounds */

static int bad(char *why, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int bad(char *why, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(why, LIVE_WHY, format, args);
    va_end(args);
    return 0;
}

static live_value integer_value(live_int i) { return (live_value){LIVE_INT, i, 0}; }
static live_value float_value(double d) { return (live_value){LIVE_FLOAT, 0, d}; }
static live_value bool_value(int b) { return (live_value){LIVE_BOOL, b != 0, 0}; }

static void decimal(live_int v, char *out, size_t size) {
    char digits[48];
    size_t n = 0;
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    do digits[n++] = (char)('0' + (int)(u % 10)); while ((u /= 10) && n < sizeof digits);
    size_t at = 0;
    if (v < 0 && at + 1 < size) out[at++] = '-';
    while (n && at + 1 < size) out[at++] = digits[--n];
    out[at] = 0;
}

/* Python's repr of a float: the shortest text that reads back, with ".0" when it looks integral. */
static void float_text(double d, char *out, size_t size) {
    if (isnan(d)) { snprintf(out, size, "nan"); return; }
    if (isinf(d)) { snprintf(out, size, d > 0 ? "inf" : "-inf"); return; }
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(out, size, "%.*g", precision, d);
        if (strtod(out, NULL) == d) break;
    }
    if (!strpbrk(out, ".e")) strncat(out, ".0", size - strlen(out) - 1);
}

void live_describe(live_value v, char *out, size_t size) {
    if (v.kind == LIVE_BOOL) snprintf(out, size, "%s", v.integer ? "true" : "false");
    else if (v.kind == LIVE_INT) decimal(v.integer, out, size);
    else if (v.kind == LIVE_FLOAT) float_text(v.number, out, size);
    else snprintf(out, size, "(no number)");
}

/* plan/arithmetic.py `describe`: "the integer `3`". */
static const char *described(live_value v, char *out, size_t size) {
    char text[64];
    live_describe(v, text, sizeof text);
    const char *kind = v.kind == LIVE_BOOL ? "boolean" : v.kind == LIVE_INT ? "integer" : "float";
    snprintf(out, size, "the %s `%s`", kind, text);
    return out;
}

static int bounded(live_value v, live_value *out, char *why) {
    if (v.kind == LIVE_INT && v.integer == INT_MIN_127)
        return bad(why, "an intermediate integer lies beyond 2**127, past what live updates compute (a rebuild "
                        "computes it)");
    *out = v;
    return 1;
}

static int beyond(char *why) { return bounded(integer_value(INT_MIN_127), NULL, why); }

static int number(live_value v, char *why) {
    char d[96];
    return v.kind == LIVE_INT || v.kind == LIVE_FLOAT ? 1 : bad(why, "expected a number, found %s",
                                                                described(v, d, sizeof d));
}

static int integer(live_value v, char *why) {
    char d[96];
    return v.kind == LIVE_INT ? 1 : bad(why, "expected an integer, found %s", described(v, d, sizeof d));
}

static int boolean(live_value v, char *why) {
    char d[96];
    return v.kind == LIVE_BOOL ? 1 : bad(why, "expected a boolean, found %s", described(v, d, sizeof d));
}

static double as_double(live_value v) { return v.kind == LIVE_FLOAT ? v.number : (double)v.integer; }

static int bit_length(live_int v) {
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    int n = 0;
    while (u) n++, u >>= 1;
    return n;
}

/* -1, 0 or 1 as a < b, ==, >, exactly (an integer against a float too); 2 when unordered (NaN). */
static int compare(live_value a, live_value b) {
    if (a.kind != LIVE_FLOAT && b.kind != LIVE_FLOAT) return a.integer < b.integer ? -1 : a.integer > b.integer;
    if (a.kind == LIVE_FLOAT && b.kind == LIVE_FLOAT) {
        if (isnan(a.number) || isnan(b.number)) return 2;
        return a.number < b.number ? -1 : a.number > b.number;
    }
    int flip = a.kind == LIVE_FLOAT; /* compare the integer i with the float f, then turn it around */
    live_int i = flip ? b.integer : a.integer;
    double f = flip ? a.number : b.number, whole = trunc(f);
    int order;
    if (isnan(f)) return 2;
    if (f >= 0x1p127) order = -1;
    else if (f < -0x1p127) order = 1;
    else if (i != (live_int)whole) order = i < (live_int)whole ? -1 : 1;
    else order = f - whole > 0 ? -1 : f - whole < 0 ? 1 : 0;
    return flip ? -order : order;
}

static int compared(const char *op, live_value a, live_value b, live_value *out, char *why) {
    if ((a.kind == LIVE_BOOL) != (b.kind == LIVE_BOOL)) {
        char x[96], y[96];
        return bad(why, "cannot compare %s with %s", described(a, x, sizeof x), described(b, y, sizeof y));
    }
    int c = compare(a, b);
    int result = strcmp(op, "==") == 0 ? c == 0 : strcmp(op, "!=") == 0 ? c != 0 : strcmp(op, "<") == 0 ? c == -1
                 : strcmp(op, "<=") == 0 ? c == -1 || c == 0 : strcmp(op, ">") == 0 ? c == 1 : c == 1 || c == 0;
    *out = bool_value(result);
    return 1;
}

static int arithmetic(char op, live_value a, live_value b, live_value *out, char *why) {
    if (!number(a, why) || !number(b, why)) return 0;
    if ((op == '/' || op == '%') && (b.kind == LIVE_INT ? b.integer == 0 : b.number == 0))
        return bad(why, "division by zero");
    if (a.kind == LIVE_INT && b.kind == LIVE_INT) {
        live_int r = 0;
        int overflow = 0;
        switch (op) {
        case '+': overflow = __builtin_add_overflow(a.integer, b.integer, &r); break;
        case '-': overflow = __builtin_sub_overflow(a.integer, b.integer, &r); break;
        case '*': overflow = __builtin_mul_overflow(a.integer, b.integer, &r); break;
        case '/': r = a.integer / b.integer; break; /* C truncates, as plan/arithmetic.py c_div */
        default: r = a.integer % b.integer; break;
        }
        return overflow ? beyond(why) : bounded(integer_value(r), out, why);
    }
    double x = as_double(a), y = as_double(b);
    if (op == '%') {
        if (isinf(x) && !isnan(y)) return bad(why, "the remainder of an infinite number");
        *out = float_value(fmod(x, y));
    } else {
        *out = float_value(op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : x / y);
    }
    return 1;
}

static int bitwise(const char *op, live_value a, live_value b, live_value *out, char *why) {
    if (!integer(a, why) || !integer(b, why)) return 0;
    live_int x = a.integer, y = b.integer;
    if (op[0] == '<' || op[0] == '>') {
        if (y < 0 || y >= 256) {
            char count[48];
            decimal(y, count, sizeof count);
            return bad(why, "shift by %s bits", count);
        }
        int by = (int)y;
        if (op[0] == '>') /* Python's >> floors: -1 for a negative shifted out, 0 otherwise */
            return bounded(integer_value(by >= 127 ? (x < 0 ? -1 : 0) : x >= 0 ? x >> by : ~((~x) >> by)), out, why);
        if (x == 0) return bounded(integer_value(0), out, why);
        if (bit_length(x) + by > 127) return beyond(why);
        return bounded(integer_value((live_int)((unsigned __int128)x << by)), out, why);
    }
    return bounded(integer_value(op[0] == '&' ? x & y : op[0] == '|' ? x | y : x ^ y), out, why);
}

static int binary(const char *op, live_value a, live_value b, live_value *out, char *why) {
    static const char *const comparisons[] = {"==", "!=", "<", "<=", ">", ">="};
    for (size_t i = 0; i < sizeof comparisons / sizeof *comparisons; i++)
        if (strcmp(op, comparisons[i]) == 0) return compared(op, a, b, out, why);
    if (strlen(op) == 1 && strchr("+-*/%", op[0])) return arithmetic(op[0], a, b, out, why);
    return bitwise(op, a, b, out, why);
}

static int unary(const char *op, live_value a, live_value *out, char *why) {
    if (strcmp(op, "not") == 0) return boolean(a, why) ? (*out = bool_value(!a.integer), 1) : 0;
    if (strcmp(op, "~") == 0) return integer(a, why) ? bounded(integer_value(~a.integer), out, why) : 0;
    if (!number(a, why)) return 0;
    if (op[0] == '+') return bounded(a, out, why);
    return bounded(a.kind == LIVE_INT ? integer_value(-a.integer) : float_value(-a.number), out, why);
}

/* plan/arithmetic.py `_pow`, the float case as Python's float ** float: an infinite result of
 * finite operands overflows. */
static int power(live_value a, live_value b, live_value *out, char *why) {
    if (!number(a, why) || !number(b, why)) return 0;
    if (a.kind == LIVE_INT && b.kind == LIVE_INT && b.integer >= 0) {
        if (b.integer > MAX_POW_EXPONENT) return bad(why, "`pow` exponent too large");
        live_int r = 1;
        for (live_int i = 0; i < b.integer; i++)
            if (__builtin_mul_overflow(r, a.integer, &r) || r == INT_MIN_127) return beyond(why);
        return bounded(integer_value(r), out, why);
    }
    double x = as_double(a), y = as_double(b);
    if (x == 0 && y < 0) return bad(why, "`pow(0, negative)`");
    if (x < 0 && !(isfinite(y) && y == floor(y))) return bad(why, "`pow` result is not a real number");
    double r = pow(x, y);
    if (isinf(r) && isfinite(x) && isfinite(y)) return bad(why, "`pow` result is not a real number");
    *out = float_value(r);
    return 1;
}

static int function(const char *name, const live_value *args, size_t n, live_value *out, char *why) {
    if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0) {
        if (n == 0) return bad(why, "`min`/`max` need at least one argument");
        int wanted = name[1] == 'i' ? -1 : 1;
        live_value chosen = args[0];
        if (!number(chosen, why)) return 0;
        for (size_t i = 1; i < n; i++) {
            if (!number(args[i], why)) return 0;
            if (compare(args[i], chosen) == wanted) chosen = args[i];
        }
        return bounded(chosen, out, why);
    }
    if (strcmp(name, "abs") == 0 && n == 1)
        return number(args[0], why) ? bounded(args[0].kind == LIVE_INT ? integer_value(args[0].integer < 0 ? -args[0].integer
                                              : args[0].integer) : float_value(fabs(args[0].number)), out, why) : 0;
    if (strcmp(name, "log2") == 0 && n == 1) {
        if (!integer(args[0], why)) return 0;
        live_int v = args[0].integer;
        if (v <= 0 || (v & (v - 1))) {
            char text[48];
            decimal(v, text, sizeof text);
            return bad(why, "`log2` of %s, which is not a power of two", text);
        }
        return bounded(integer_value(bit_length(v) - 1), out, why);
    }
    if (strcmp(name, "ceil_div") == 0 && n == 2) {
        if (!integer(args[0], why) || !integer(args[1], why)) return 0;
        live_int a = -args[0].integer, b = args[1].integer;
        if (b <= 0) {
            char text[48];
            decimal(b, text, sizeof text);
            return bad(why, "`ceil_div` by %s", text);
        }
        live_int floor_div = a / b - (a % b != 0 && a < 0); /* Python's // of -a by b, negated */
        return bounded(integer_value(-floor_div), out, why);
    }
    if (strcmp(name, "sqrt") == 0 && n == 1) {
        if (!number(args[0], why)) return 0;
        if (args[0].kind == LIVE_INT ? args[0].integer < 0 : args[0].number < 0)
            return bad(why, "`sqrt` of a negative number");
        *out = float_value(sqrt(as_double(args[0])));
        return 1;
    }
    if (strcmp(name, "pow") == 0 && n == 2) return power(args[0], args[1], out, why);
    return bad(why, "not an expression of the record: `%s` with %zu operand%s", name, n, n == 1 ? "" : "s");
}

static int literal(const json *e, live_value *out, char *why) {
    if (e->kind == JSON_BOOL) {
        *out = bool_value(e->boolean);
        return 1;
    }
    if (e->kind == JSON_NUMBER) {
        *out = e->is_integer ? integer_value(e->is_unsigned ? (live_int)e->uinteger : (live_int)e->integer)
                             : float_value(e->number);
        return 1;
    }
    const char *tag = e->items[0].string, *text = e->items[1].string;
    if (strcmp(tag, "float") == 0) {
        if (strcmp(text, "nan") && strcmp(text, "inf") && strcmp(text, "-inf"))
            return bad(why, "not a float of the record: `%s`", text);
        *out = float_value(strcmp(text, "nan") == 0 ? NAN : text[0] == '-' ? -INFINITY : INFINITY);
        return 1;
    }
    live_int v = 0;
    int negative = text[0] == '-';
    if (!text[negative]) return bad(why, "not an integer of the record: `%s`", text);
    for (const char *c = text + negative; *c; c++) {
        if (*c < '0' || *c > '9') return bad(why, "not an integer of the record: `%s`", text);
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c - '0', &v)) return beyond(why);
    }
    return bounded(integer_value(negative ? -v : v), out, why);
}

static int is_tagged(const json *e, const char *tag) {
    return e->kind == JSON_ARRAY && e->count == 2 && e->items[0].kind == JSON_STRING && e->items[1].kind == JSON_STRING &&
           strcmp(e->items[0].string, tag) == 0;
}

static int evaluate(const json *e, const live_value *values, size_t count, live_value *out, char *why, int depth) {
    if (e->kind == JSON_BOOL || e->kind == JSON_NUMBER || is_tagged(e, "int") || is_tagged(e, "float"))
        return literal(e, out, why);
    if (e->kind != JSON_ARRAY || e->count == 0 || e->items[0].kind != JSON_STRING || depth == 0)
        return bad(why, "not an expression of the record");
    const char *op = e->items[0].string;
    const json *operands = e->items + 1;
    size_t n = e->count - 1;
    if (strcmp(op, "ref") == 0) {
        if (n != 1 || operands[0].kind != JSON_NUMBER || !operands[0].is_integer || operands[0].integer < 0 ||
            (uint64_t)operands[0].integer >= count || values[operands[0].integer].kind == LIVE_NONE)
            return bad(why, "a reference to no value of the record");
        *out = values[operands[0].integer];
        return 1;
    }
    live_value args[2];
    if ((strcmp(op, "and") == 0 || strcmp(op, "or") == 0) && n == 2) {
        if (!evaluate(&operands[0], values, count, &args[0], why, depth - 1) || !boolean(args[0], why)) return 0;
        if (args[0].integer == (op[0] == 'o')) return *out = args[0], 1;
        return evaluate(&operands[1], values, count, out, why, depth - 1) && boolean(*out, why);
    }
    static const char *const functions[] = {"min", "max", "abs", "log2", "ceil_div", "sqrt", "pow"};
    int call = 0;
    for (size_t i = 0; i < sizeof functions / sizeof *functions; i++) call |= strcmp(op, functions[i]) == 0;
    if (!call) {
        if (n > 2) return bad(why, "not an expression of the record: `%s` with %zu operands", op, n);
        for (size_t i = 0; i < n; i++)
            if (!evaluate(&operands[i], values, count, &args[i], why, depth - 1)) return 0;
        if (n == 1 && (strcmp(op, "-") == 0 || strcmp(op, "+") == 0 || strcmp(op, "~") == 0 || strcmp(op, "not") == 0))
            return unary(op, args[0], out, why);
        static const char *const operators[] = {"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^",
                                                "==", "!=", "<", "<=", ">", ">="};
        for (size_t i = 0; n == 2 && i < sizeof operators / sizeof *operators; i++)
            if (strcmp(op, operators[i]) == 0) return binary(op, args[0], args[1], out, why);
        return bad(why, "not an expression of the record: `%s` with %zu operand%s", op, n, n == 1 ? "" : "s");
    }
    live_value *all = calloc(n ? n : 1, sizeof *all);
    if (!all) return bad(why, "out of host memory");
    int ok = 1;
    for (size_t i = 0; ok && i < n; i++) ok = evaluate(&operands[i], values, count, &all[i], why, depth - 1);
    ok = ok && function(op, all, n, out, why);
    free(all);
    return ok;
}

int live_evaluate(const json *expr, const live_value *values, size_t count, live_value *out, char *why) {
    return evaluate(expr, values, count, out, why, DEPTH);
}

/* plan/arithmetic.py FLOAT_LIMITS */
static double float_limit(dtype t) {
    return t == DT_F16 ? 65504.0 : t == DT_BF16 ? 3.3895e38 : t == DT_F32 ? 3.4028234e38 : 1.7976931348623157e308;
}

static void integer_json(live_int v, json *out) {
    memset(out, 0, sizeof *out);
    out->kind = JSON_NUMBER;
    out->is_integer = 1;
    out->number = (double)v;
    out->integer = (int64_t)v;
    out->uinteger = (uint64_t)v;
    out->is_unsigned = v > INT64_MAX;
}

int live_argument(live_value v, dtype t, json *out, char *why) {
    char text[64];
    live_describe(v, text, sizeof text);
    const char *type = dtype_name(t);
    if (dtype_kind(t) == 'b') {
        int truth = v.kind == LIVE_FLOAT ? v.number != 0 : v.integer != 0;
        if (v.kind != LIVE_BOOL && (v.kind == LIVE_FLOAT ? v.number != 0 && v.number != 1 : v.integer != 0 && v.integer != 1))
            return bad(why, "`%s` is not a boolean, and the argument is `%s`", text, type);
        integer_json(truth, out);
        return 1;
    }
    if (dtype_kind(t) == 'f') {
        if (fabs(as_double(v)) > float_limit(t)) return bad(why, "%s overflows `%s`, and the argument is `%s`", text, type, type);
        memset(out, 0, sizeof *out);
        out->kind = JSON_NUMBER;
        out->number = as_double(v);
        return 1;
    }
    if (v.kind == LIVE_FLOAT)
        return bad(why, "%s is not an integer, and `%s` holds integers, and the argument is `%s`", text, type, type);
    size_t bits = dtype_size(t) * 8;
    live_int low = dtype_kind(t) == 'u' ? 0 : -((live_int)1 << (bits - 1));
    live_int high = dtype_kind(t) == 'u' ? ((live_int)1 << bits) - 1 : ((live_int)1 << (bits - 1)) - 1;
    if (v.integer < low || v.integer > high) {
        char a[48], b[48];
        decimal(low, a, sizeof a);
        decimal(high, b, sizeof b);
        return bad(why, "%s is outside the range of `%s` (%s to %s), and the argument is `%s`", text, type, a, b, type);
    }
    integer_json(v.integer, out);
    return 1;
}

int live_dimension(live_value v, const char *what, long long low, long long high, long long multiple, long long *out,
                   char *why) {
    if (v.kind != LIVE_INT)
        return bad(why, "%s must be an integer, not %s", what, v.kind == LIVE_BOOL ? "a boolean" : "a float");
    char text[48];
    decimal(v.integer, text, sizeof text);
    if (v.integer < low || v.integer > high) return bad(why, "%s = %s lies outside %lld to %lld", what, text, low, high);
    if (v.integer % multiple) return bad(why, "%s = %s is not a multiple of the kernel's %lld-block clusters", what, text, multiple);
    *out = (long long)v.integer;
    return 1;
}
