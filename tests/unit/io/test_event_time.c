/* Tests nf_read_event_check_time (src/io/events.h; issue 15, item 2): the bounds a read event's
 * ts must meet against the job's wall clock, and their exact messages. */
#include "io/events.h"
#include "nf_test.h"

#include <string.h>

#define NOW  1795633554764ll /* 2026-11-25T19:05:54.764Z */
#define SKEW 300000ll

static void test_accepted(void)
{
    char err[256] = "x";
    NF_CHECK_EQ(nf_read_event_check_time(NOW, NOW, SKEW, err, sizeof err), 0);
    NF_CHECK_EQ(nf_read_event_check_time(NOW + SKEW, NOW, SKEW, err, sizeof err), 0);
    NF_CHECK_EQ(nf_read_event_check_time(NF_EVENT_TS_FLOOR, NOW, SKEW, err, sizeof err), 0);
    NF_CHECK_EQ(nf_read_event_check_time(NOW - 86400000ll * 365, NOW, SKEW, err, sizeof err), 0);
    /* no upper bound when max_future_ms is 0 (benchmarks) */
    NF_CHECK_EQ(nf_read_event_check_time(NF_EVENT_TS_MAX, NOW, 0, err, sizeof err), 0);
}

static void test_future_refused(void)
{
    char err[256];
    NF_CHECK_EQ(nf_read_event_check_time(NF_EVENT_TS_MAX, NOW, SKEW, err, sizeof err),
                -NF_EVENT_E_TS);
    NF_CHECK_STR(err, "field \"ts\": 9999-12-31T23:59:59.999Z is 251606667245235 ms ahead of the "
                      "wall clock (2026-11-25T19:05:54.764Z), more than the 300000 allowed "
                      "(trending.max_future_ms)");
    NF_CHECK_EQ(nf_read_event_check_time(NOW + SKEW + 1, NOW, SKEW, err, sizeof err),
                -NF_EVENT_E_TS);
    NF_CHECK(strstr(err, "is 300001 ms ahead") != NULL);
    /* NULL err is allowed */
    NF_CHECK_EQ(nf_read_event_check_time(NOW + SKEW + 1, NOW, SKEW, NULL, 0), -NF_EVENT_E_TS);
}

static void test_floor_refused(void)
{
    char err[256];
    NF_CHECK_EQ(nf_read_event_check_time(0, NOW, SKEW, err, sizeof err), -NF_EVENT_E_TS);
    NF_CHECK_STR(err, "field \"ts\": 1970-01-01T00:00:00Z is before 2000-01-01T00:00:00Z (a clock "
                      "that was not set, or epoch seconds sent as milliseconds?)");
    /* epoch seconds sent as milliseconds */
    NF_CHECK_EQ(nf_read_event_check_time(1795633554, NOW, SKEW, err, sizeof err), -NF_EVENT_E_TS);
    NF_CHECK(strstr(err, "1970-01-21T18:47:13.554Z is before") != NULL);
    NF_CHECK_EQ(nf_read_event_check_time(NF_EVENT_TS_FLOOR - 1, NOW, SKEW, err, sizeof err),
                -NF_EVENT_E_TS);
    NF_CHECK_EQ(nf_read_event_check_time(-5, NOW, 0, err, sizeof err), -NF_EVENT_E_TS);
    NF_CHECK_EQ(nf_read_event_check_time(INT64_MIN, NOW, SKEW, err, sizeof err), -NF_EVENT_E_TS);
}

/* The decoder accepts what the check refuses (it reads no clock): the two are separate steps. */
static void test_decoder_then_check(void)
{
    const char *j = "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":\"9999-12-31T23:59:59.999Z\"}";
    nf_read_event_t ev;
    char err[256];
    NF_CHECK_EQ(nf_read_event_decode(j, strlen(j), 0, &ev, err, sizeof err), 0);
    NF_CHECK(ev.ts_ms == NF_EVENT_TS_MAX);
    NF_CHECK_EQ(nf_read_event_check_time(ev.ts_ms, NOW, SKEW, err, sizeof err), -NF_EVENT_E_TS);
    NF_CHECK_STR(nf_event_error_name(-NF_EVENT_E_TS), "ts");
}

int main(void)
{
    NF_RUN(test_accepted);
    NF_RUN(test_future_refused);
    NF_RUN(test_floor_refused);
    NF_RUN(test_decoder_then_check);
    return nf_test_report();
}
