/* fuzz_config.c — libFuzzer target for the configuration file parser (src/runtime/config.c),
 * fed through nf_config_load_buffer(), which is the code nf_config_load() runs on a file's
 * bytes. abort()s, so that libFuzzer keeps the input, when the contract in config.h breaks:
 *   - the result is 0 or -1;
 *   - on -1 *cfg is untouched, and err holds one non-empty NUL-terminated message that starts
 *     with "NAME:" and then either a whole-file complaint (" empty...", " larger than...",
 *     " out of memory") or the place: "LINE:" with LINE within the input, or for a syntax
 *     error "LINE:COL:" with COL within that line (+1 for its end); a smaller err receives a
 *     prefix of the same message;
 *   - on 0 the canonical JSON of the result loads back to the same canonical JSON and to the
 *     same struct, byte for byte (a round trip: nf_config_to_json() writes only what the
 *     loader accepts and loses nothing, and the loader stores exactly what it was given).
 * Leaks are reported by LeakSanitizer, which libFuzzer runs after each input. */
#include "runtime/config.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME     "fuzz.json"
#define SMALLERR 9 /* a second, small err buffer: the message must be cut, not overrun */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_config: %s\n  message: %s\n", what, msg ? msg : "(none)");
    abort();
}

/* An unsigned decimal at *p (advanced past it); 0 if there is none. */
static size_t take_number(const char **p)
{
    size_t v = 0;
    if (!isdigit((unsigned char)**p))
        return 0;
    for (; isdigit((unsigned char)**p); (*p)++)
        v = v * 10 + (size_t)(**p - '0');
    return v;
}

static void check_message(const char *in, size_t size, const char *err)
{
    if (err[0] == '\0')
        fail("-1 with an empty message", err);
    if (strncmp(err, NAME ":", sizeof NAME) != 0)
        fail("message does not start with NAME:", err);
    const char *p = err + sizeof NAME;
    if (*p == ' ') {
        if (strncmp(p, " empty; expected a JSON object", 30) != 0 &&
            strncmp(p, " larger than ", 13) != 0 && strcmp(p, " out of memory") != 0)
            fail("message names no line", err);
        return;
    }
    size_t line = take_number(&p);
    if (line == 0 || *p != ':')
        fail("message does not start with NAME:LINE:", err);
    /* The line must exist, and a column must fall within it (or just past its end). */
    const char *bol = in, *end = in + size;
    for (size_t l = 1; l < line; l++) {
        const char *nl = memchr(bol, '\n', (size_t)(end - bol));
        if (!nl)
            fail("line number past the end of the input", err);
        bol = nl + 1;
    }
    p++;
    if (!isdigit((unsigned char)*p))
        return;
    size_t col = take_number(&p);
    const char *eol = memchr(bol, '\n', (size_t)(end - bol));
    size_t linelen = (size_t)((eol ? eol : end) - bol);
    if (*p != ':' || col == 0 || col > linelen + 1)
        fail("column outside its line", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    /* Exactly sized heap buffers, so that ASan sees any write past errlen. */
    char *err = malloc(NF_CONFIG_ERRLEN), *small = malloc(SMALLERR);
    if (!err || !small)
        abort();
    memset(err, 0x55, NF_CONFIG_ERRLEN);
    nf_config_t cfg, untouched;
    memset(&cfg, 0x5a, sizeof cfg);
    memcpy(&untouched, &cfg, sizeof cfg);

    int rc = nf_config_load_buffer(&cfg, NAME, in, size, err, NF_CONFIG_ERRLEN);
    if (rc != 0 && rc != -1)
        fail("result is neither 0 nor -1", NULL);
    if (rc == -1) {
        if (!memchr(err, '\0', NF_CONFIG_ERRLEN))
            fail("message not NUL-terminated within errlen", NULL);
        if (memcmp(&cfg, &untouched, sizeof cfg) != 0)
            fail("*cfg changed by a failed load", err);
        check_message(in, size, err);
        memset(small, 0x55, SMALLERR);
        if (nf_config_load_buffer(&cfg, NAME, in, size, small, SMALLERR) != -1)
            fail("the same input failed once and then loaded", err);
        if (!memchr(small, '\0', SMALLERR) || strncmp(small, err, SMALLERR - 1) != 0)
            fail("a smaller err is not a prefix of the message", err);
    } else {
        char *json = nf_config_to_json(&cfg);
        if (!json)
            abort();
        nf_config_t again; /* starts as cfg did, so padding cannot differ (see below) */
        memset(&again, 0x5a, sizeof again);
        if (nf_config_load_buffer(&again, "canonical", json, strlen(json), err, NF_CONFIG_ERRLEN) !=
            0)
            fail("the canonical JSON of a loaded config does not load", err);
        char *json2 = nf_config_to_json(&again);
        if (!json2)
            abort();
        if (strcmp(json, json2) != 0) {
            fprintf(stderr, "first:\n%s\nreloaded:\n%s\n", json, json2);
            fail("canonical JSON round trip changed the configuration", NULL);
        }
        /* Equal JSON is not enough: a lossy emitter (one that cuts a long string, say) is
         * lossy the same way twice. The loaded structs must be equal byte for byte. Both
         * destinations started with the same bytes and the loader builds on a zeroed struct,
         * writing whole fields only, so padding and the bytes after a string's NUL agree too. */
        if (memcmp(&cfg, &again, sizeof cfg) != 0)
            fail("the canonical JSON loads to a different struct: nf_config_to_json() loses "
                 "something",
                 NULL);
        free(json2);
        free(json);
    }
    free(small);
    free(err);
    return 0;
}
