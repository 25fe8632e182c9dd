/* The start of the manifest the C tests write for their in-memory bundles: the bundle format
 * this runtime writes and reads (plan/bundle_format.py), in one place for every test. */
#ifndef PIPEC_TESTS_BUNDLE_VERSION_H
#define PIPEC_TESTS_BUNDLE_VERSION_H

#define TEST_FORMAT_VERSION "2"
#define TEST_READERS "[1, 2]"
#define TEST_MANIFEST_START "{\"format\": \"pipec-bundle\", \"format_version\": " TEST_FORMAT_VERSION ", "

#endif
