/* The C runtime's evaluation of live-update expressions (src/live_value.c), driven from
 * tests/test_native_live.py, which compares it with plan/live.py's. One JSON object a line on
 * stdin, {"expr": E, "values": [literals], "argument": "f32"} (or "dimension": [low, high,
 * multiple]); one line out: {"ok": 1, "kind": "int" | "float" | "bool", "value": "..."}, integers
 * in decimal and floats in C's %a, or {"ok": 0, "why": "..."}.
 *   live_eval < cases.jsonl */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"

static void print_value(live_value v) {
    if (v.kind == LIVE_FLOAT) {
        printf("{\"ok\": 1, \"kind\": \"float\", \"value\": \"%a\"}\n", v.number);
        return;
    }
    char text[64];
    live_describe(v, text, sizeof text);
    printf("{\"ok\": 1, \"kind\": \"%s\", \"value\": \"%s\"}\n", v.kind == LIVE_BOOL ? "bool" : "int", text);
}

static void print_failure(const char *why) {
    printf("{\"ok\": 0, \"why\": \"");
    for (const char *c = why; *c; c++) printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
    printf("\"}\n");
}

static void run(const json *line) {
    const json *expr = json_get(line, "expr"), *values = json_get(line, "values");
    const json *argument = json_get(line, "argument"), *dimension = json_get(line, "dimension");
    char why[LIVE_WHY];
    size_t count = values ? values->count : 0;
    live_value *known = calloc(count ? count : 1, sizeof *known), v;
    int ok = 1;
    for (size_t i = 0; ok && i < count; i++) ok = live_evaluate(&values->items[i], NULL, 0, &known[i], why);
    ok = ok && live_evaluate(expr, known, count, &v, why);
    free(known);
    if (ok && argument) {
        int type = dtype_from_name(argument->string);
        json number;
        ok = live_argument(v, (dtype)type, &number, why);
        v = number.is_integer ? (live_value){LIVE_INT, number.is_unsigned ? (live_int)number.uinteger : number.integer, 0}
                              : (live_value){LIVE_FLOAT, 0, number.number};
    }
    if (ok && dimension) {
        long long d;
        ok = live_dimension(v, "it", dimension->items[0].integer, dimension->items[1].integer,
                            dimension->items[2].integer, &d, why);
        v = (live_value){LIVE_INT, d, 0};
    }
    if (ok) print_value(v);
    else print_failure(why);
}

int main(void) {
    static char buffer[1 << 20];
    while (fgets(buffer, sizeof buffer, stdin)) {
        char error[128];
        json *line = json_parse(buffer, strcspn(buffer, "\n"), error, sizeof error);
        if (!line) {
            fprintf(stderr, "live_eval: %s\n", error);
            return 2;
        }
        run(line);
        json_free(line);
    }
    return 0;
}
