/* Reading a bundle (compiler/bundle.py writes it): manifest.json first, its format and the
 * reader range checked against this runtime, then every file it lists, each checked against
 * its SHA-256. Only listed files are read; a file is never trusted before its hash matches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "sha256.h"

#define MANIFEST "manifest.json"
#define PLAN "plan.json"
#define FORMAT "pipec-bundle"

static pipec_status read_file(const char *path, unsigned char **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(PIPEC_ERROR_IO, "cannot read %s: %s", path, strerror(errno));
    unsigned char *buffer = NULL;
    size_t length = 0, capacity = 0;
    for (;;) {
        if (length == capacity) {
            capacity = capacity ? capacity * 2 : 1 << 16;
            unsigned char *bigger = realloc(buffer, capacity + 1);
            if (!bigger) {
                free(buffer);
                fclose(f);
                return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory reading %s", path);
            }
            buffer = bigger;
        }
        size_t got = fread(buffer + length, 1, capacity - length, f);
        length += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buffer);
        return fail(PIPEC_ERROR_IO, "cannot read %s", path);
    }
    buffer[length] = 0; /* one byte past the data: text files read as C strings */
    *data = buffer;
    *size = length;
    return PIPEC_OK;
}

static int safe_path(const char *path) {
    if (!*path || path[0] == '/' || strstr(path, "\\")) return 0;
    for (const char *part = path; part; part = strchr(part, '/') ? strchr(part, '/') + 1 : NULL)
        if (strncmp(part, "..", 2) == 0 && (part[2] == '/' || part[2] == 0)) return 0;
    return 1;
}

/* The manifest's checks that need no other file: format, version, reader range, listed files. */
static pipec_status check_manifest(const char *where, const json *m) {
    const json *format = json_get(m, "format"), *version = json_get(m, "format_version");
    const json *readers = json_get(m, "readers"), *files = json_get(m, "files");
    if (!format || format->kind != JSON_STRING || strcmp(format->string, FORMAT) != 0)
        return fail(PIPEC_ERROR_BUNDLE, "%s: %s is not a pipec bundle manifest (its format is not \"%s\")", where,
                    MANIFEST, FORMAT);
    if (!version || version->kind != JSON_NUMBER || !version->is_integer)
        return fail(PIPEC_ERROR_BUNDLE, "%s: %s has no format_version", where, MANIFEST);
    if (!readers || readers->kind != JSON_ARRAY || readers->count != 2 || !readers->items[0].is_integer ||
        !readers->items[1].is_integer)
        return fail(PIPEC_ERROR_BUNDLE, "%s: %s has no reader range (readers: [lowest, highest])", where, MANIFEST);
    int64_t lowest = readers->items[0].integer, highest = readers->items[1].integer;
    if (PIPEC_BUNDLE_FORMAT_VERSION < lowest || PIPEC_BUNDLE_FORMAT_VERSION > highest)
        return fail(PIPEC_ERROR_UNSUPPORTED,
                    "%s: bundle format version %lld needs a runtime reading versions %lld to %lld; this runtime "
                    "(pipec %s) reads version %d: rebuild the bundle with a matching pipec",
                    where, (long long)version->integer, (long long)lowest, (long long)highest, PIPEC_RUNTIME_VERSION,
                    PIPEC_BUNDLE_FORMAT_VERSION);
    if (!files || files->kind != JSON_OBJECT)
        return fail(PIPEC_ERROR_BUNDLE, "%s: %s lists no files", where, MANIFEST);
    if (!json_get(files, PLAN)) return fail(PIPEC_ERROR_BUNDLE, "%s: %s does not list %s", where, MANIFEST, PLAN);
    for (size_t i = 0; i < files->count; i++) {
        const json *hash = &files->items[i];
        if (!safe_path(files->keys[i]))
            return fail(PIPEC_ERROR_BUNDLE, "%s: %s lists a path outside the bundle: %s", where, MANIFEST, files->keys[i]);
        if (hash->kind != JSON_STRING || strncmp(hash->string, "sha256:", 7) != 0 || strlen(hash->string) != 71)
            return fail(PIPEC_ERROR_BUNDLE, "%s: %s: the hash of %s is not sha256:<64 hex digits>", where, MANIFEST,
                        files->keys[i]);
    }
    return PIPEC_OK;
}

static pipec_status check_hash(const char *where, const char *path, const unsigned char *data, size_t size,
                               const char *expected) {
    char hex[65];
    sha256_hex(data, size, hex);
    if (strcmp(hex, expected + 7) != 0)
        return fail(PIPEC_ERROR_BUNDLE,
                    "%s: %s does not match the manifest (sha256 %.12s..., the manifest says %.12s...): the file is "
                    "truncated or changed; rebuild the bundle",
                    where, path, hex, expected + 7);
    return PIPEC_OK;
}

typedef pipec_status (*file_source)(const void *context, const char *path, unsigned char **data, size_t *size);

static pipec_status load(const char *where, const void *context, file_source source, bundle *out) {
    memset(out, 0, sizeof *out);
    unsigned char *text = NULL;
    size_t length = 0;
    pipec_status status = source(context, MANIFEST, &text, &length);
    if (status != PIPEC_OK) return status;
    char error[256];
    json *manifest = json_parse((const char *)text, length, error, sizeof error);
    free(text);
    if (!manifest) return fail(PIPEC_ERROR_BUNDLE, "%s: %s is not valid JSON (%s): truncated or not a bundle", where,
                               MANIFEST, error);
    status = check_manifest(where, manifest);
    const json *files = json_get(manifest, "files");
    out->where = strdup(where);
    if (status == PIPEC_OK) {
        out->files = calloc(files->count ? files->count : 1, sizeof *out->files);
        if (!out->files || !out->where) status = fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    for (size_t i = 0; status == PIPEC_OK && i < files->count; i++) {
        bundle_file *f = &out->files[i];
        status = source(context, files->keys[i], &f->data, &f->size);
        if (status != PIPEC_OK) break;
        out->file_count++;
        f->path = strdup(files->keys[i]);
        status = check_hash(where, files->keys[i], f->data, f->size, files->items[i].string);
    }
    json_free(manifest);
    if (status != PIPEC_OK) {
        bundle_free(out);
        return status;
    }
    const bundle_file *plan_file = bundle_find(out, PLAN);
    out->plan_text = (char *)plan_file->data;
    out->plan_length = plan_file->size;
    return PIPEC_OK;
}

static pipec_status from_dir(const void *context, const char *path, unsigned char **data, size_t *size) {
    const char *dir = context;
    size_t n = strlen(dir) + strlen(path) + 2;
    char *full = malloc(n);
    if (!full) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    snprintf(full, n, "%s/%s", dir, path);
    pipec_status status = read_file(full, data, size);
    free(full);
    return status;
}

pipec_status bundle_from_dir(const char *dir, bundle *out) {
    return load(dir, dir, from_dir, out);
}

typedef struct memory_table {
    const pipec_file *files;
    size_t count;
} memory_table;

static pipec_status from_memory(const void *context, const char *path, unsigned char **data, size_t *size) {
    const memory_table *table = context;
    for (size_t i = 0; i < table->count; i++) {
        if (!table->files[i].path || strcmp(table->files[i].path, path) != 0) continue;
        if (!table->files[i].data && table->files[i].size)
            return fail(PIPEC_ERROR_INVALID_ARGUMENT, "<memory>: %s has no data", path);
        *data = malloc(table->files[i].size + 1);
        if (!*data) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
        if (table->files[i].size) memcpy(*data, table->files[i].data, table->files[i].size);
        (*data)[table->files[i].size] = 0;
        *size = table->files[i].size;
        return PIPEC_OK;
    }
    return fail(PIPEC_ERROR_BUNDLE, "<memory>: the bundle has no %s", path);
}

pipec_status bundle_from_memory(const pipec_file *files, size_t count, bundle *out) {
    memory_table table = {files, count};
    return load("<memory>", &table, from_memory, out);
}

const bundle_file *bundle_find(const bundle *b, const char *path) {
    for (size_t i = 0; i < b->file_count; i++)
        if (strcmp(b->files[i].path, path) == 0) return &b->files[i];
    return NULL;
}

void bundle_free(bundle *b) {
    for (size_t i = 0; i < b->file_count; i++) {
        free(b->files[i].path);
        free(b->files[i].data);
    }
    free(b->files);
    free(b->where);
    memset(b, 0, sizeof *b);
}
