/* The sink's COPY text (sink/pg_db.h): every byte string survives nf_pg_copy_escape and
 * PostgreSQL's text-format unescaping (a reference decoder of the format written from its
 * documentation: backslash sequences \\ \n \r \t and the bytes as they are), and an escaped
 * value never holds a raw tab or newline, which would end the column or the row. */
#include "nf_test.h"
#include "sink/pg_db.h"

#include <stdlib.h>
#include <string.h>

/* COPY's text format decoded, for the sequences the escaper writes; -1 on anything else. */
static long unescape(const char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == '\t' || in[i] == '\n' || in[i] == '\r')
            return -1; /* would split the column or the row */
        if (in[i] != '\\') {
            out[o++] = in[i];
            continue;
        }
        if (++i == n)
            return -1;
        switch (in[i]) {
        case '\\':
            out[o++] = '\\';
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        default:
            return -1;
        }
    }
    return (long)o;
}

static void test_round_trip(void)
{
    srand(39);
    char *buf = NULL;
    size_t cap = 0;
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(rand() % 300);
        char in[300], out[300];
        static const char pick[] = "\\\n\r\tab{}\"\x01\xff";
        for (size_t i = 0; i < n; i++)
            in[i] = rand() % 3 ? pick[rand() % (sizeof pick - 1)] : (char)(rand() % 255 + 1);
        size_t len = 0;
        NF_CHECK_EQ(nf_pg_copy_escape(&buf, &len, &cap, in, n), 0);
        NF_CHECK(len <= 2 * n);
        NF_CHECK_EQ(unescape(buf, len, out), (long)n);
        NF_CHECK(memcmp(in, out, n) == 0);
    }
    free(buf);
}

static void test_appends(void)
{
    char *buf = NULL;
    size_t cap = 0, len = 0;
    NF_CHECK_EQ(nf_pg_copy_escape(&buf, &len, &cap, "a\tb", 3), 0);
    NF_CHECK_EQ(nf_pg_copy_escape(&buf, &len, &cap, "\\", 1), 0);
    NF_CHECK(len == 6 && memcmp(buf, "a\\tb\\\\", 6) == 0);
    /* growing past the first allocation keeps what was written */
    char big[100000];
    memset(big, '\n', sizeof big);
    NF_CHECK_EQ(nf_pg_copy_escape(&buf, &len, &cap, big, sizeof big), 0);
    NF_CHECK(len == 6 + 2 * sizeof big && memcmp(buf, "a\\tb\\\\\\n", 8) == 0);
    free(buf);
}

static void test_kinds(void)
{
    NF_CHECK_STR(nf_pg_kind_topic(NF_PG_ARTICLES), "articles");
    NF_CHECK_STR(nf_pg_kind_topic(NF_PG_READ_EVENTS), "read-events");
    NF_CHECK_STR(nf_pg_kind_topic(NF_PG_KINDS), "?");
    NF_CHECK(nf_pg_schema_latest() >= 1);
}

int main(void)
{
    NF_RUN(test_round_trip);
    NF_RUN(test_appends);
    NF_RUN(test_kinds);
    return nf_test_report();
}
