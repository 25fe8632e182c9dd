/* SHA-256 (FIPS 180-4): the manifest's content hashes. */
#ifndef PIPEC_SHA256_H
#define PIPEC_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256 {
    uint32_t state[8];
    uint64_t length;
    unsigned char block[64];
    size_t used;
} sha256;

void sha256_init(sha256 *s);
void sha256_update(sha256 *s, const void *data, size_t n);
void sha256_final(sha256 *s, unsigned char digest[32]);
/* The lowercase hex digest of `n` bytes into `hex` (65 bytes with the NUL). */
void sha256_hex(const void *data, size_t n, char hex[65]);

#endif
