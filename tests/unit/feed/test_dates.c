/* Tests src/feed/dates.c: a table of real-world spellings (RFC 822/1123/850, asctime, date(1),
 * named, numeric and military zones, ISO 8601 extended and basic) with their epoch ms, a table
 * of near misses that must be refused, and two models: nf_date_format -> nf_date_parse round
 * trips every millisecond, and parses of random calendar fields in several spellings and zones
 * agree with the C library's timegm(), which also decides which random fields are invalid. */
#include "feed/dates.h"
#include "nf_test.h"

#include <stdbool.h>
#include <stdlib.h>

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t next_rand(void)
{
    return nf_test_xorshift(&rng);
}

static int parse(const char *s, int64_t *ms)
{
    return nf_date_parse(s, strlen(s), ms);
}

static void test_real_world(void)
{
    /* Expected values computed independently (Python's datetime). */
    static const struct {
        const char *in;
        int64_t ms;
    } c[] = {
        {"Tue, 10 Jun 2003 04:00:00 GMT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 UT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 UTC", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 Z", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 +0000", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 -0000", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 -0500", 1055235600000LL},
        {"Tue, 10 Jun 2003 04:00:00 +0530", 1055197800000LL},
        {"Tue, 10 Jun 2003 04:00:00 +02:00", 1055210400000LL},
        {"Tue, 10 Jun 2003 04:00:00 -05", 1055235600000LL},
        {"Tue, 10 Jun 2003 04:00:00 +2", 1055210400000LL},
        {"Tue, 10 Jun 2003 04:00:00 EST", 1055235600000LL},
        /* generic US zone names at standard time, and the tz database's Etc/ names */
        {"Tue, 10 Jun 2003 04:00:00 ET", 1055235600000LL},
        {"Tue, 10 Jun 2003 04:00:00 PT", 1055246400000LL},
        {"Tue, 10 Jun 2003 04:00:00 AT", 1055232000000LL},
        {"Tue, 10 Jun 2003 04:00:00 Etc/GMT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 Etc/UTC", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 Etc/UCT", 1055217600000LL},
        /* a four-digit year first with slashes is unambiguous */
        {"2003/06/10 04:00:00", 1055217600000LL},
        {"Tue, 2003/06/10 04:00:00 EDT", 1055232000000LL},
        {"2003/6/9", 1055116800000LL},
        {"Tue, 10 Jun 2003 04:00:00 EDT", 1055232000000LL},
        {"Tue, 10 Jun 2003 04:00:00 CST", 1055239200000LL},
        {"Tue, 10 Jun 2003 04:00:00 CDT", 1055235600000LL},
        {"Tue, 10 Jun 2003 04:00:00 MST", 1055242800000LL},
        {"Tue, 10 Jun 2003 04:00:00 MDT", 1055239200000LL},
        {"Tue, 10 Jun 2003 04:00:00 PST", 1055246400000LL},
        {"Tue, 10 Jun 2003 04:00:00 PDT", 1055242800000LL},
        {"Tue, 10 Jun 2003 04:00:00 CET", 1055214000000LL},
        {"Tue, 10 Jun 2003 04:00:00 CEST", 1055210400000LL},
        {"Tue, 10 Jun 2003 04:00:00 BST", 1055214000000LL},
        {"Tue, 10 Jun 2003 04:00:00 JST", 1055185200000LL},
        {"Tue, 10 Jun 2003 04:00:00 AEST", 1055181600000LL},
        {"Tue, 10 Jun 2003 04:00:00 IST", 1055197800000LL},
        {"Tue, 10 Jun 2003 04:00:00 gmt", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 A", 1055214000000LL},
        {"Tue, 10 Jun 2003 04:00:00 M", 1055174400000LL},
        {"Tue, 10 Jun 2003 04:00:00 N", 1055221200000LL},
        {"Tue, 10 Jun 2003 04:00:00 Y", 1055260800000LL},
        {"Tue, 10 Jun 2003 04:00:00 XYZT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00 GMT+0100", 1055214000000LL},
        {"Tue, 10 Jun 2003 04:00:00 GMT-05:00", 1055235600000LL},
        {"Tue, 10 Jun 2003 04:00:00 UTC+2", 1055210400000LL},
        {"Tue, 10 Jun 2003 04:00:00 GMT +0100", 1055214000000LL},
        {"Tue, 10 Jun 2003 04:00:00 -0500 (EST)", 1055235600000LL},
        {"Tue, 10 Jun 2003 04:00:00 +0200 CEST", 1055210400000LL},
        {"Tue, 10 Jun 2003 04:00:00 +0000 (Coordinated Universal Time)", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00", 1055217600000LL},
        {"10 Jun 2003 04:00:00 GMT", 1055217600000LL},
        {"10 Jun 2003 04:00 GMT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00 +0000", 1055217600000LL},
        {"Tue, 10 Jun 2003 4:00:00 GMT", 1055217600000LL},
        {"Tue, 10 Jun 2003", 1055203200000LL},
        {"10 Jun 2003", 1055203200000LL},
        {"Tues, 10 June 2003 04:00:00 +0100", 1055214000000LL},
        {"Thurs, 12 Jun 2003 04:00:00 GMT", 1055390400000LL},
        {"Thu, 12 Jun 2003 04:00:00 GMT", 1055390400000LL},
        {"Wed, 10 Jun 2003 04:00:00 GMT", 1055217600000LL},
        {"Tuesday, 10 Jun 2003 04:00:00 GMT", 1055217600000LL},
        {"Tue., 10 Jun. 2003 04:00:00 GMT", 1055217600000LL},
        {"Tue,10 Jun 2003 04:00:00 GMT", 1055217600000LL},
        {"Tue,  10  Jun  2003   04:00:00   GMT", 1055217600000LL},
        {"  Tue, 10 Jun 2003 04:00:00 GMT \n", 1055217600000LL},
        {"Tue, 10 JUN 2003 04:00:00 GMT", 1055217600000LL},
        {"tue, 10 jun 2003 04:00:00 gmt", 1055217600000LL},
        {"Tue, 1 Jun 2003 04:00:00 GMT", 1054440000000LL},
        {"Tue, 10 Jun 03 04:00:00 GMT", 1055217600000LL},
        {"10 Jun 03", 1055203200000LL},
        {"Thu, 10 Jun 99 04:00:00 GMT", 928987200000LL},
        {"Sat, 1 Jan 49 00:00:00 GMT", 2493072000000LL},
        {"Sat, 1 Jan 50 00:00:00 GMT", -631152000000LL},
        {"Sat, 1 Jan 103 00:00:00 GMT", 1041379200000LL},
        {"Sun, 06 Nov 1994 08:49:37 GMT", 784111777000LL},
        {"Sunday, 06-Nov-94 08:49:37 GMT", 784111777000LL},
        {"Sun Nov  6 08:49:37 1994", 784111777000LL},
        {"Tue Jun 10 04:00:00 EDT 2003", 1055232000000LL},
        {"Jun 10, 2003 04:00 PM", 1055260800000LL},
        {"June 10, 2003 12:30 AM", 1055205000000LL},
        {"June 10, 2003 12:30 pm EST", 1055266200000LL},
        {"Tue, 10 Sept 2003 04:00:00 GMT", 1063166400000LL},
        {"Wed, 10 September 2003 04:00:00 GMT", 1063166400000LL},
        {"Fri, 29 Feb 2008 12:00:00 GMT", 1204286400000LL},
        {"Tue, 10 Jun 2003 04:00:00.250 GMT", 1055217600250LL},
        {"Tue, 10 Jun 2003 23:59:60 GMT", 1055289600000LL},
        {"Mon, 01 Jan 0001 00:00:00 GMT", -62135596800000LL},
        {"Fri, 31 Dec 9999 23:59:59 GMT", 253402300799000LL},
        {"Thu, 01 Jan 1970 00:00:00 GMT", 0LL},
        {"Wed, 31 Dec 1969 23:59:59 GMT", -1000LL},
        {"2003 Jun 10 04:00:00 GMT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00GMT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00:00+0200", 1055210400000LL},
        {"10-Jun-2003 04:00:00 GMT", 1055217600000LL},
        {"Tue, 10 Jun 2003 04:00PM GMT", 1055260800000LL},
        {"Tue, 10 Jun 2003 04:00 pm", 1055260800000LL},
        {"Tue, 10 Jun 2003 04:00:00 NZST", 1055174400000LL},
        {"2003-06-10T04:00:00Z", 1055217600000LL},
        {"2003-06-10t04:00:00z", 1055217600000LL},
        {"2003-06-10T04:00:00.123+02:00", 1055210400123LL},
        {"2003-06-10T04:00:00,5Z", 1055217600500LL},
        {"2003-06-10T04:00:00.123456789Z", 1055217600123LL},
        {"2003-06-10T04:00:00+0200", 1055210400000LL},
        {"2003-06-10T04:00:00+02", 1055210400000LL},
        {"2003-06-10T04:00:00-05:00", 1055235600000LL},
        {"2003-06-10T04:00:00-00:00", 1055217600000LL},
        {"2003-06-10T04:00:00 +02:00", 1055210400000LL},
        {"2003-06-10T04:00:00 GMT", 1055217600000LL},
        {"2003-06-10 04:00:00 EST", 1055235600000LL},
        {"2003-06-10T04:00Z", 1055217600000LL},
        {"2003-06-10T04:00+01:00", 1055214000000LL},
        {"2003-06-10 04:00:00", 1055217600000LL},
        {"2003-06-10T04:00:00", 1055217600000LL},
        {"2003-06-10", 1055203200000LL},
        {"2003-6-1", 1054425600000LL},
        {"2003-06", 1054425600000LL},
        {"2003", 1041379200000LL},
        {"20030610T040000Z", 1055217600000LL},
        {"20030610T0400Z", 1055217600000LL},
        {"20030610T040000+0200", 1055210400000LL},
        {"20030610T040000.5Z", 1055217600500LL},
        {"20030610", 1055203200000LL},
        {"2000-02-29T12:00:00Z", 951825600000LL},
        {"1969-12-31T23:59:59.999Z", -1LL},
        {"0001-01-01T00:00:00Z", -62135596800000LL},
        {"9999-12-31T23:59:59.999Z", 253402300799999LL},
        {"2016-12-31T23:59:60Z", 1483228800000LL},
        {"  2003-06-10T04:00:00Z  ", 1055217600000LL},
    };
    NF_CHECK(sizeof c / sizeof c[0] >= 60);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int64_t ms = 42;
        int rc = parse(c[i].in, &ms);
        if (rc != 0 || ms != c[i].ms) {
            fprintf(stderr, "  \"%s\": rc %d, %" PRId64 ", want %" PRId64 "\n", c[i].in, rc, ms,
                    c[i].ms);
            NF_CHECK(0);
        }
    }
}

static void test_rejected(void)
{
    static const char *const bad[] = {
        "",
        " ",
        "hello",
        "Tue, 10 Xyz 2003 04:00:00 GMT",
        "Tue, 10 Jun 2003 25:00:00 GMT",
        "Tue, 10 Jun 2003 24:00:00 GMT",
        "Tue, 10 Jun 2003 04:60:00 GMT",
        "Tue, 10 Jun 2003 04:00:61 GMT",
        "Sat, 29 Feb 2003 04:00:00 GMT",
        "Mon, 31 Apr 2003 04:00:00 GMT",
        "Tue, 32 Jan 2003 04:00:00 GMT",
        "Tue, 0 Jan 2003 04:00:00 GMT",
        "Thu, 29 Feb 1900 00:00:00 GMT",
        "2003-13-10T04:00:00Z",
        "2003-00-10",
        "2003-02-29",
        "2003-06-31",
        "2003-06-00",
        "2003-06-10T25:00:00Z",
        "2003-06-10T24:00:00Z",
        "2003-06-10T04:60Z",
        "2003-06-10T04Z",
        "2003-06-10T04:00:00+25:00",
        "2003-06-10T04:00:00+02:60",
        "2003-06-10T04:00:00Zjunk",
        "2003-06-10T",
        "2003-06-10X",
        "2003-06-10T04:00:00+",
        "0000-01-01",
        "2003-06-10T04:00:00 (junk",
        "06/10/2003",
        "2003/06",
        "2003/06/10/11",
        "2003/13/10",
        "10 Jun 2003 at 04:00",
        "Tue, 10 Jun 2003 04:00:00 Etc/",
        "Tue, 10 Jun 2003 04:00:00 Etc/Jupiter",
        "10.06.2003",
        "1055217600",
        "Jun 2003",
        "Tue, 10 Jun",
        "Tue, 10 Jun 2003 04:00:00 Jupiter",
        "Tue, 10 Jun 2003 04:00:00 GMT GMT",
        "Tue, 10 Jun 2003 04:00:00 +0100 +0200",
        "Tue, 10 Jun 2003 04:00:00 EST +0100",
        "Tue, 10 Jun 2003 13:00 PM",
        "Tue, 10 Jun 2003 04:00:00 J",
        "Tue, 10 Jun 2003 04:00:00 (unclosed",
        "10 Jun 20033",
        "10 Jun 2003 04:00:00:00",
        "Hello, 10 Jun 2003",
        "Tue, 10 Jun 2003 04:00:00 +12345",
        "Tue, 10 Jun 2003 04:00:00 GMT;",
        "2003-06-10T04:00:00.Z",
        "Tue, 10 Jun 1 04:00:00 GMT",
        "Jun Jun 10 2003",
        "10 10 Jun 2003",
        "12003-06-10",
        "Jun10 2003",
        "10 Jun 2003.5",
        "2003-06-10 04:00T",
        "10 Jun 2003 +0200",
        "Tue, 10 Jun 2003 04:00:00 GMT PM",
        "2003-06-10:00 Jun",
        "Tue Jun 10-10 2003",
        "Tue, 10 Jun 2003 04:00:00 +0200X",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        if (parse(bad[i], &ms) != -1) {
            fprintf(stderr, "  \"%s\" accepted as %" PRId64 "\n", bad[i], ms);
            NF_CHECK(0);
        }
    }
}

static void test_length_not_nul(void)
{
    int64_t ms;
    /* len, not a NUL, ends the string: "Z" is outside, so the date has no zone (UTC anyway),
     * and a trailing "+0200" outside must not shift it. */
    NF_CHECK_EQ(nf_date_parse("2003-06-10T04:00:00+0200", 19, &ms), 0);
    NF_CHECK_EQ(ms, 1055217600000LL);
    NF_CHECK_EQ(nf_date_parse("2003-06-10x", 10, &ms), 0);
    NF_CHECK_EQ(nf_date_parse("10 Jun 2003 04:00:00 GMT", 11, &ms), 0);
    NF_CHECK_EQ(ms, 1055203200000LL);
    NF_CHECK_EQ(nf_date_parse("2003-06-10T04:00:00Z\0", 21, &ms), 0);
    NF_CHECK_EQ(nf_date_parse("2003-06-10", 0, &ms), -1);
}

static void test_format(void)
{
    static const struct {
        int64_t ms;
        const char *want;
    } c[] = {
        {0, "1970-01-01T00:00:00Z"},
        {1055217600000LL, "2003-06-10T04:00:00Z"},
        {1055217600123LL, "2003-06-10T04:00:00.123Z"},
        {1055217600001LL, "2003-06-10T04:00:00.001Z"},
        {-1, "1969-12-31T23:59:59.999Z"},
        {951825600000LL, "2000-02-29T12:00:00Z"},
        {253402300799999LL, "9999-12-31T23:59:59.999Z"},
        {-62135596800000LL, "0001-01-01T00:00:00Z"},
        {INT64_MAX, "+292278994-08-17T07:12:55.807Z"},
        {INT64_MIN, "-292275055-05-16T16:47:04.192Z"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char buf[32];
        size_t n = nf_date_format(c[i].ms, buf, sizeof buf);
        NF_CHECK_STR(buf, c[i].want);
        NF_CHECK_EQ(n, strlen(c[i].want));
    }
    /* snprintf-style: the full length is returned, the output is cut and terminated. */
    char small[8];
    NF_CHECK_EQ(nf_date_format(0, small, sizeof small), 20);
    NF_CHECK_STR(small, "1970-01");
    NF_CHECK_EQ(nf_date_format(0, NULL, 0), 20);
}

static void test_round_trip(void)
{
    /* 1970-01-01 .. 2100-01-01 */
    const int64_t span = 4102444800000LL;
    for (int round = 0; round < 300000; round++) {
        int64_t ms = (int64_t)(next_rand() % (uint64_t)span);
        if (round % 3 == 0)
            ms -= ms % 1000; /* whole seconds: the form without a fraction */
        char buf[32];
        size_t n = nf_date_format(ms, buf, sizeof buf);
        int64_t back = -1;
        if (nf_date_parse(buf, n, &back) != 0 || back != ms) {
            fprintf(stderr, "  %" PRId64 " -> \"%s\" -> %" PRId64 "\n", ms, buf, back);
            NF_REQUIRE(0);
        }
    }
}

/* Random calendar fields, some out of range, written in one of several spellings with a
 * random zone; timegm() (with gmtime_r() to see whether it had to normalise) is the model. */
static void test_against_timegm(void)
{
    static const char *const mon[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static const char *const day[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const struct {
        const char *name;
        int off;
    } zone[] = {{"GMT", 0},   {"EST", -300}, {"PDT", -420}, {"CEST", 120},
                {"JST", 540}, {"Z", 0},      {"A", 60},     {"Q", -240}};
    int accepted = 0, rejected = 0;
    for (int round = 0; round < 300000; round++) {
        struct tm tm = {0};
        tm.tm_year = 1900 + (int)(next_rand() % 300) - 1900; /* 1900..2199 */
        tm.tm_mon = (int)(next_rand() % 12);
        tm.tm_mday = 1 + (int)(next_rand() % 31);
        tm.tm_hour = (int)(next_rand() % (next_rand() % 16 ? 24 : 26));
        tm.tm_min = (int)(next_rand() % 60);
        tm.tm_sec = (int)(next_rand() % 60);
        struct tm want = tm;
        time_t t = timegm(&want);
        struct tm back;
        gmtime_r(&t, &back);
        bool valid = back.tm_mday == tm.tm_mday && back.tm_mon == tm.tm_mon &&
                     back.tm_hour == tm.tm_hour && back.tm_year == tm.tm_year;

        int off = 0, y = tm.tm_year + 1900;
        char s[96];
        switch (next_rand() % 6) {
        case 0: {
            int z = (int)(next_rand() % (sizeof zone / sizeof zone[0]));
            off = zone[z].off;
            snprintf(s, sizeof s, "%s, %02d %s %04d %02d:%02d:%02d %s", day[next_rand() % 7],
                     tm.tm_mday, mon[tm.tm_mon], y, tm.tm_hour, tm.tm_min, tm.tm_sec, zone[z].name);
            break;
        }
        case 1:
            off = (int)(next_rand() % 1681) - 840; /* -14:00..+14:00 */
            snprintf(s, sizeof s, "%d %s %d %d:%02d:%02d %c%02d%02d", tm.tm_mday, mon[tm.tm_mon], y,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, off < 0 ? '-' : '+', abs(off) / 60,
                     abs(off) % 60);
            break;
        case 2:
            off = (int)(next_rand() % 1681) - 840;
            snprintf(s, sizeof s, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", y, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, off < 0 ? '-' : '+',
                     abs(off) / 60, abs(off) % 60);
            break;
        case 3:
            snprintf(s, sizeof s, "%04d%02d%02dT%02d%02d%02dZ", y, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
            break;
        case 4:
            snprintf(s, sizeof s, "%s %s %2d %02d:%02d:%02d %d", day[next_rand() % 7],
                     mon[tm.tm_mon], tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, y);
            break;
        default:
            snprintf(s, sizeof s, "%04d-%02d-%02d %02d:%02d:%02d", y, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
            break;
        }
        int64_t ms = 0;
        int rc = nf_date_parse(s, strlen(s), &ms);
        if (valid) {
            int64_t expect = ((int64_t)t - (int64_t)off * 60) * 1000;
            if (rc != 0 || ms != expect) {
                fprintf(stderr, "  \"%s\": rc %d, %" PRId64 ", want %" PRId64 "\n", s, rc, ms,
                        expect);
                NF_REQUIRE(0);
            }
            accepted++;
        } else {
            if (rc != -1) {
                fprintf(stderr, "  \"%s\" accepted (invalid per timegm)\n", s);
                NF_REQUIRE(0);
            }
            rejected++;
        }
    }
    /* both sides of the model were exercised */
    NF_CHECK(accepted > 250000 && rejected > 5000);
}

static void test_garbage(void)
{
    /* Random mixes of date pieces: no crash, no read past len (ASan), and whatever is
     * accepted formats to something that parses back to the same instant. */
    static const char *const pieces[] = {
        "Tue", ",", " ",          "10", "Jun", "2003", "04:00", ":00", ".5", "GMT", "+0200",   "-",
        "T",   "Z", "2003-06-10", "(",  ")",   "PM",   "x",     "99",  "+",  ":",   "20030610"};
    char s[128];
    for (int round = 0; round < 200000; round++) {
        size_t n = 0, k = 1 + (size_t)(next_rand() % 10);
        for (size_t j = 0; j < k; j++) {
            const char *p = pieces[next_rand() % (sizeof pieces / sizeof pieces[0])];
            size_t l = strlen(p);
            if (n + l >= sizeof s)
                break;
            memcpy(s + n, p, l);
            n += l;
        }
        int64_t ms;
        /* An exact-size heap copy, so ASan sees any read past len. */
        char *exact = malloc(n ? n : 1);
        NF_REQUIRE(exact);
        memcpy(exact, s, n);
        int rc = nf_date_parse(exact, n, &ms);
        free(exact);
        if (rc == 0) {
            char buf[32];
            int64_t back;
            size_t m = nf_date_format(ms, buf, sizeof buf);
            NF_REQUIRE(nf_date_parse(buf, m, &back) == 0 && back == ms);
        }
    }
}

int main(void)
{
    NF_RUN(test_real_world);
    NF_RUN(test_rejected);
    NF_RUN(test_length_not_nul);
    NF_RUN(test_format);
    NF_RUN(test_round_trip);
    NF_RUN(test_against_timegm);
    NF_RUN(test_garbage);
    return nf_test_report();
}
