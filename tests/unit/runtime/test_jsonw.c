/* Tests src/runtime/jsonw.c: what it writes parses back (cJSON) to the same values, for
 * strings with every control byte, quotes, backslashes and UTF-8, nested objects and arrays,
 * integers at their limits, and a reused buffer. */
#include "nf_test.h"
#include "runtime/jsonw.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include <cjson/cJSON.h>
#include <stdlib.h>

static void test_round_trip(void)
{
    char nasty[64];
    size_t n = 0;
    for (int c = 1; c < 0x20; c++)
        nasty[n++] = (char)c;
    static const char tail[] = "\"\\/é漢"; /* quote, backslash, slash, 2- and 3-byte UTF-8 */
    memcpy(nasty + n, tail, sizeof tail - 1);
    n += sizeof tail - 1;
    nasty[n] = '\0';
    nf_jw_t w;
    nf_jw_init(&w);
    for (int round = 0; round < 2; round++) { /* the second round reuses the buffer */
        nf_jw_reset(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "s");
        nf_jw_str(&w, nasty);
        nf_jw_key(&w, "null");
        nf_jw_str(&w, NULL);
        nf_jw_key(&w, "min");
        nf_jw_i64(&w, INT64_MIN + 1);
        nf_jw_key(&w, "max");
        nf_jw_u64(&w, 9007199254740991ull);
        nf_jw_key(&w, "arr");
        nf_jw_arr_open(&w);
        for (int i = 0; i < 3; i++) {
            nf_jw_elem(&w);
            nf_jw_obj_open(&w);
            nf_jw_key(&w, "i");
            nf_jw_i64(&w, i);
            nf_jw_key(&w, "b");
            nf_jw_bool(&w, i % 2);
            nf_jw_obj_close(&w);
        }
        nf_jw_arr_close(&w);
        nf_jw_key(&w, "empty");
        nf_jw_arr_open(&w);
        nf_jw_arr_close(&w);
        nf_jw_obj_close(&w);
        NF_REQUIRE(!w.failed);
        cJSON *j = cJSON_Parse(w.buf);
        NF_REQUIRE(j);
        NF_CHECK_STR(cJSON_GetObjectItem(j, "s")->valuestring, nasty);
        NF_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "null")));
        NF_CHECK(cJSON_GetObjectItem(j, "max")->valuedouble == 9007199254740991.0);
        cJSON *arr = cJSON_GetObjectItem(j, "arr");
        NF_CHECK_EQ(cJSON_GetArraySize(arr), 3);
        NF_CHECK_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 2), "i")->valueint, 2);
        NF_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "b")));
        NF_CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "empty")), 0);
        cJSON_Delete(j);
    }
    NF_CHECK(strstr(w.buf, "\"min\":-9223372036854775807") != NULL);
    nf_jw_free(&w);
}

/* The reference escaping (RFC 8259), a byte at a time. */
static size_t str_reference(const unsigned char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        const char *e = c == '"'    ? "\\\""
                        : c == '\\' ? "\\\\"
                        : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t"
                        : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f"
                                    : NULL;
        if (e) {
            memcpy(out + o, e, 2);
            o += 2;
        } else if (c < 0x20) {
            memcpy(out + o, "\\u00", 4);
            out[o + 4] = hex[c >> 4];
            out[o + 5] = hex[c & 15];
            o += 6;
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    return o;
}

/* nf_jw_strn (8 bytes a step while nothing needs an escape) against the reference, on random
 * strings of every length up to 40 made of plain bytes with a few controls, quotes,
 * backslashes and UTF-8 bytes at random places. */
static void test_strn_matches_reference(void)
{
    nf_jw_t w;
    nf_jw_init(&w);
    uint64_t x = 0x5717;
    int bad = 0;
    for (int n = 0; n < 100000 && bad < 3; n++) {
        unsigned char in[40];
        char want[40 * 6 + 2];
        size_t len = (size_t)n % 41;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            unsigned r = (unsigned)(x % 100);
            in[i] = r < 3    ? (unsigned char)(x >> 8) % 0x20
                    : r < 5  ? '"'
                    : r < 7  ? '\\'
                    : r < 10 ? (unsigned char)(0x80 + (x >> 8) % 0x80)
                             : (unsigned char)(0x20 + (x >> 8) % 0x60);
        }
        size_t wl = str_reference(in, len, want);
        nf_jw_reset(&w);
        nf_jw_strn(&w, (const char *)in, len);
        if (w.len != wl || memcmp(w.buf, want, wl) != 0)
            bad++;
    }
    NF_CHECK_EQ(bad, 0);
    nf_jw_free(&w);
}

/* The reference: round to 15 decimals, one digit per division, trailing zeros dropped. */
static void unit_reference(double v, char out[24])
{
    uint64_t q = (uint64_t)(v * 1e15 + 0.5);
    if (q == 0 || q >= 1000000000000000ull) {
        strcpy(out, q ? "1" : "0");
        return;
    }
    char b[18] = {'0', '.'};
    for (int i = 16; i >= 2; i--, q /= 10)
        b[i] = (char)('0' + q % 10);
    size_t n = 17;
    while (b[n - 1] == '0')
        n--;
    b[n] = '\0';
    strcpy(out, b);
}

/* nf_jw_unit: 15 decimals in [0, 1], exact formatting checked against a printf reference. */
static void test_unit(void)
{
    nf_jw_t w;
    nf_jw_init(&w);
    const struct {
        double v;
        const char *want;
    } cases[] = {{0.0, "0"},
                 {1.0, "1"},
                 {0.5, "0.5"},
                 {0.1 + 0.2, "0.3"},
                 {1.0 / 3.0, "0.333333333333333"},
                 {1e-16, "0"},
                 {6e-16, "0.000000000000001"},
                 {0.9999999999999999, "1"},
                 {2.5, "2.5"},
                 {-0.25, "-0.25"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nf_jw_reset(&w);
        nf_jw_unit(&w, cases[i].v);
        nf_jw_raw(&w, "", 1);
        NF_CHECK_STR(w.buf, cases[i].want);
    }
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v = (double)(x >> 11) / 9007199254740992.0;
        if (i % 4 == 1) /* few decimals: trailing zeros in either half of the 15 digits */
            v = (double)(x % 100000001) / 1e8;
        else if (i % 4 == 2)
            v = (double)(x % 1001) / 1e3;
        nf_jw_reset(&w);
        nf_jw_unit(&w, v);
        nf_jw_raw(&w, "", 1);
        char want[24];
        unit_reference(v, want);
        if (strcmp(w.buf, want) != 0) {
            fprintf(stderr, "nf_jw_unit(%.17g) wrote %s, the reference %s\n", v, w.buf, want);
            NF_CHECK(0);
            break;
        }
        double back = strtod(w.buf, NULL);
        if (!(fabs(back - v) <=
              6e-16)) { /* half a unit of the 15th decimal + the product's rounding */
            fprintf(stderr, "nf_jw_unit(%.17g) wrote %s\n", v, w.buf);
            NF_CHECK(0);
            break;
        }
    }
    nf_jw_free(&w);
}

/* nf_jw_score: 15 significant digits for 1 < v < 10^6 (no exponent, no trailing zeros), what
 * nf_jw_unit writes elsewhere; integers through nf_jw_i64 as printf writes them. */
static void test_score_and_i64(void)
{
    nf_jw_t w;
    nf_jw_init(&w);
    const struct {
        double v;
        const char *want;
    } cases[] = {{0.5, "0.5"},
                 {1.0, "1"},
                 {1.5, "1.5"},
                 {2.0, "2"},
                 {10.0, "10"},
                 {123.456, "123.456"},
                 {999999.5, "999999.5"},
                 {9.9999999999999999, "10"},
                 {1.0 / 3.0 + 1, "1.33333333333333"},
                 {1e6, "1000000"},
                 {2e6, "2000000"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nf_jw_reset(&w);
        nf_jw_score(&w, cases[i].v);
        nf_jw_raw(&w, "", 1);
        NF_CHECK_STR(w.buf, cases[i].want);
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v = 1.0 + (double)(x >> 11) / 9007199254740992.0 * pow(10, (double)(x % 6));
        if (i % 3 == 1) /* few decimals: trailing zeros */
            v = 1.0 + (double)(x % 100000001) / 1e4;
        nf_jw_reset(&w);
        nf_jw_score(&w, v);
        nf_jw_raw(&w, "", 1);
        size_t n = strlen(w.buf), digits = 0;
        bool point = false, ok = n > 0 && w.buf[0] != '.' && w.buf[n - 1] != '.';
        for (size_t k = 0; k < n && ok; k++) {
            if (w.buf[k] == '.')
                ok = !point, point = true;
            else
                ok = w.buf[k] >= '0' && w.buf[k] <= '9', digits++;
        }
        ok = ok && digits <= 16 && !(point && w.buf[n - 1] == '0');
        double back = strtod(w.buf, NULL);
        if (!ok || !(fabs(back - v) <= 6e-15 * v)) {
            fprintf(stderr, "nf_jw_score(%.17g) wrote %s\n", v, w.buf);
            NF_CHECK(0);
            break;
        }
    }
    const int64_t ints[] = {0, 1, -1, 9, -10, 1795989326110, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        nf_jw_reset(&w);
        nf_jw_i64(&w, ints[i]);
        nf_jw_raw(&w, "", 1);
        char want[24];
        snprintf(want, sizeof want, "%lld", (long long)ints[i]);
        NF_CHECK_STR(w.buf, want);
    }
    nf_jw_free(&w);
}

int main(void)
{
    NF_RUN(test_unit);
    NF_RUN(test_score_and_i64);
    NF_RUN(test_strn_matches_reference);
    NF_RUN(test_round_trip);
    return nf_test_report();
}
