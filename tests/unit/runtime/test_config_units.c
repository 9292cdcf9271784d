/* test_config_units.c — src/runtime/config.c's key table against the arithmetic that uses it:
 * every duration key (a name ending in _us, _ms or _s) has a documented maximum whose
 * nanoseconds fit in int64, so that converting an accepted value to the clocks' unit (the
 * runtime's timers and deadlines are in ns) cannot wrap. runtime.stop_after_ms once accepted
 * 2^63 ms and stopped the job at once after an overflow (issue 15, item 5).
 *
 * The table is read through nf_config_describe(), one line per key ending "[min, max]", so a
 * key added later is checked without touching this test. */
#include "nf_test.h"
#include "runtime/config.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ns per unit of a key named by its suffix; 0 when it is not a duration. */
static uint64_t unit_ns(const char *path, size_t len)
{
    static const struct {
        const char *suffix;
        uint64_t ns;
    } units[] = {{"_us", 1000ull}, {"_ms", 1000000ull}, {"_s", 1000000000ull}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].suffix);
        if (len > n && memcmp(path + len - n, units[i].suffix, n) == 0)
            return units[i].ns;
    }
    return 0;
}

static void test_duration_maxima_fit_in_int64_ns(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    NF_REQUIRE(f);
    nf_config_describe(f);
    fclose(f);
    int durations = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t plen = strcspn(line, " ");
        uint64_t ns = unit_ns(line, plen);
        if (!ns)
            continue;
        const char *r = strrchr(line, '[');
        uint64_t min, max;
        if (!r || sscanf(r, "[%" SCNu64 ", %" SCNu64 "]", &min, &max) != 2) {
            fprintf(stderr, "%s:%d: no integer range on the line of a duration key: %s\n", __FILE__,
                    __LINE__, line);
            nf_test_failed_checks++;
            continue;
        }
        durations++;
        if (max > (uint64_t)INT64_MAX / ns) {
            fprintf(stderr,
                    "%s:%d: %.*s: max %" PRIu64 " is %" PRIu64
                    " ns per unit beyond int64 nanoseconds (max allowed %" PRIu64 ")\n",
                    __FILE__, __LINE__, (int)plen, line, max, ns, (uint64_t)INT64_MAX / ns);
            nf_test_failed_checks++;
        }
    }
    free(text);
    /* The parse found the table's durations (24 when this was written: runtime.spin_us ...
     * interest.seen_ttl_s). */
    NF_CHECK(durations >= 24);
}

/* The documented maximum itself is accepted and one more is refused, with the range named. */
static void test_stop_after_ms_range(void)
{
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    char set[64];
    snprintf(set, sizeof set, "runtime.stop_after_ms=%" PRIu64, (uint64_t)INT64_MAX / 1000000);
    char *sets[] = {set};
    NF_CHECK_EQ(nf_config_load(&cfg, NULL, sets, 1, false, err, sizeof err), 0);
    NF_CHECK(cfg.runtime.stop_after_ms == (uint64_t)INT64_MAX / 1000000);
    snprintf(set, sizeof set, "runtime.stop_after_ms=%" PRIu64, (uint64_t)INT64_MAX / 1000000 + 1);
    NF_CHECK_EQ(nf_config_load(&cfg, NULL, sets, 1, false, err, sizeof err), -1);
    NF_CHECK_STR(err, "--set runtime.stop_after_ms=9223372036855: runtime.stop_after_ms: "
                      "9223372036855 is out of range [0, 9223372036854]");
}

int main(void)
{
    NF_RUN(test_duration_maxima_fit_in_int64_ns);
    NF_RUN(test_stop_after_ms_range);
    return nf_test_report();
}
