/* Tests src/state/identity.c and the store's refusal to create a database where one was
 * (store.h nf_store_open), on real RocksDB databases in temporary directories: the identity is
 * recorded on the first open and matched after; every field of another job's (group, topic
 * prefix, writer) and a newer format are refused with a message naming both sides and the way
 * out; a db directory without CURRENT, or a missing one beside named checkpoints, is refused
 * with EUCLEAN and its files are left as they were. */
#include "nf_test.h"
#include "state/identity.h"
#include "state/store.h"
#include "teststore.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[PATH_MAX];

static const char *tmpdir_new(void)
{
    if (!nf_teststore_tmpdir("identity", g_dir, sizeof g_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    return g_dir;
}

static void tmpdir_free(const char *dir)
{
    nf_teststore_rmtree(dir);
}

static const nf_identity_t job = {"newsflow", "prod.", "newsflow-0"};

/* open, check id, close: the check's result, its message in err */
static int check_once(const char *dir, const nf_identity_t *id, bool *recorded, char *err,
                      size_t errlen)
{
    nf_store_t *st = nf_store_open(dir, NULL, err, errlen);
    if (!st)
        return -999;
    int r = nf_identity_check(st, id, recorded, err, errlen);
    nf_store_close(st);
    return r;
}

/* Puts an identity record of format `format`, written by newsflow `version`, into st. */
static void put_record(nf_store_t *st, int format, const char *version)
{
    char rec[256], err[256];
    snprintf(rec, sizeof rec,
             "{\"format\":%d,\"group\":\"newsflow\",\"topic_prefix\":\"prod.\","
             "\"writer\":\"newsflow-0\",\"version\":\"%s\",\"commit\":\"abcdef0\"}",
             format, version);
    NF_CHECK_EQ(nf_store_meta_put(st, "identity", rec, err, sizeof err), 0);
}

/* Whether the identity record v names this build's state format. */
static bool names_this_format(const char *v)
{
    char fmt[32];
    snprintf(fmt, sizeof fmt, "\"format\":%d,", NF_STATE_FORMAT);
    return v && strstr(v, fmt);
}

static void test_recorded_then_matched(void)
{
    const char *dir = tmpdir_new();
    char err[2048];
    bool rec = false;
    NF_CHECK_EQ(check_once(dir, &job, &rec, err, sizeof err), 0);
    NF_CHECK(rec);
    NF_CHECK_EQ(check_once(dir, &job, &rec, err, sizeof err), 0);
    NF_CHECK(!rec);
    nf_store_t *st = nf_store_open(dir, NULL, err, sizeof err);
    NF_REQUIRE(st);
    char *v = NULL;
    NF_CHECK_EQ(nf_store_meta_get(st, "identity", &v, err, sizeof err), 1);
    NF_CHECK(names_this_format(v) && strstr(v, "\"group\":\"newsflow\"") &&
             strstr(v, "\"topic_prefix\":\"prod.\"") && strstr(v, "\"writer\":\"newsflow-0\"") &&
             strstr(v, "\"version\":"));
    free(v);
    nf_store_close(st);
    tmpdir_free(dir);
}

/* Each field of another job's identity: refused, both values named, the directory named. */
static void test_another_job_refused(void)
{
    const nf_identity_t others[] = {{"other", "prod.", "newsflow-0"},
                                    {"newsflow", "staging.", "newsflow-0"},
                                    {"newsflow", "prod.", "newsflow-7"}};
    const char *field[] = {"group", "topic_prefix", "writer"};
    const char *theirs[] = {"\"other\"", "\"staging.\"", "\"newsflow-7\""};
    for (size_t i = 0; i < 3; i++) {
        const char *dir = tmpdir_new();
        char err[2048];
        bool rec;
        NF_CHECK_EQ(check_once(dir, &job, &rec, err, sizeof err), 0);
        NF_CHECK_EQ(check_once(dir, &others[i], &rec, err, sizeof err), -EEXIST);
        NF_CHECK(strstr(err, "another job") && strstr(err, field[i]) && strstr(err, theirs[i]) &&
                 strstr(err, dir) && strstr(err, "State from another job"));
        /* the refusal changed nothing: the job's own identity still matches */
        NF_CHECK_EQ(check_once(dir, &job, &rec, err, sizeof err), 0);
        tmpdir_free(dir);
    }
}

static void test_newer_format_refused(void)
{
    const char *dir = tmpdir_new();
    char err[2048];
    nf_store_t *st = nf_store_open(dir, NULL, err, sizeof err);
    NF_REQUIRE(st);
    put_record(st, 99, "9.9.9");
    bool rec;
    NF_CHECK_EQ(nf_identity_check(st, &job, &rec, err, sizeof err), -EEXIST);
    NF_CHECK(strstr(err, "format 99") && strstr(err, "9.9.9") && strstr(err, "abcdef0"));
    NF_CHECK_EQ(nf_store_meta_put(st, "identity", "{not json", err, sizeof err), 0);
    NF_CHECK_EQ(nf_identity_check(st, &job, &rec, err, sizeof err), -EEXIST);
    NF_CHECK(strstr(err, "does not parse"));
    nf_store_close(st);
    tmpdir_free(dir);
}

/* A state of an older format is read, and recorded as this build's from then on (a build of the
 * older format then refuses it: test_newer_format_refused). */
static void test_older_format_taken(void)
{
    const char *dir = tmpdir_new();
    char err[2048];
    nf_store_t *st = nf_store_open(dir, NULL, err, sizeof err);
    NF_REQUIRE(st);
    put_record(st, 1, "0.1.0");
    bool rec;
    NF_CHECK_EQ(nf_identity_check(st, &job, &rec, err, sizeof err), 0);
    char *v = NULL;
    NF_CHECK_EQ(nf_store_meta_get(st, "identity", &v, err, sizeof err), 1);
    NF_CHECK(NF_STATE_FORMAT > 1 && names_this_format(v));
    free(v);
    nf_store_close(st);
    tmpdir_free(dir);
}

static int count_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void test_missing_current_refused(void)
{
    const char *dir = tmpdir_new();
    char err[2048], db[PATH_MAX], cur[PATH_MAX + 16];
    snprintf(db, sizeof db, "%s/db", dir);
    snprintf(cur, sizeof cur, "%s/CURRENT", db);
    nf_store_t *st = nf_store_open(dir, NULL, err, sizeof err);
    NF_REQUIRE(st);
    nf_store_close(st);
    int files = count_files(db);
    NF_REQUIRE(files > 1 && unlink(cur) == 0);
    errno = 0;
    st = nf_store_open(dir, NULL, err, sizeof err);
    NF_CHECK(!st);
    NF_CHECK_EQ(errno, EUCLEAN);
    NF_CHECK(strstr(err, "CURRENT file is missing") && strstr(err, db) &&
             strstr(err, "--from-checkpoint") && strstr(err, "Corrupt live store"));
    NF_CHECK_EQ(count_files(db), files - 1); /* nothing created, nothing deleted */
    NF_CHECK(access(cur, F_OK) != 0);
    /* read-only opens (checkpoints show, status) are not refused here: they fail on their own */
    nf_store_close(st);
    tmpdir_free(dir);
}

static void test_lost_db_beside_checkpoints_refused(void)
{
    const char *dir = tmpdir_new();
    char err[2048], chk[PATH_MAX + 32], db[PATH_MAX];
    snprintf(chk, sizeof chk, "%s/checkpoints", dir);
    NF_REQUIRE(mkdir(chk, 0755) == 0);
    snprintf(chk, sizeof chk, "%s/checkpoints/chk-12", dir);
    NF_REQUIRE(mkdir(chk, 0755) == 0);
    errno = 0;
    nf_store_t *st = nf_store_open(dir, NULL, err, sizeof err);
    NF_CHECK(!st);
    NF_CHECK_EQ(errno, EUCLEAN);
    NF_CHECK(strstr(err, "is missing but 1 named checkpoints") && strstr(err, "Lost disk"));
    snprintf(db, sizeof db, "%s/db", dir);
    NF_CHECK(access(db, F_OK) != 0 || count_files(db) == 0);
    nf_store_close(st);
    tmpdir_free(dir);
}

int main(void)
{
    NF_RUN(test_recorded_then_matched);
    NF_RUN(test_another_job_refused);
    NF_RUN(test_newer_format_refused);
    NF_RUN(test_older_format_taken);
    NF_RUN(test_missing_current_refused);
    NF_RUN(test_lost_db_beside_checkpoints_refused);
    return nf_test_report();
}
