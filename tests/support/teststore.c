/* teststore.c — see teststore.h. */
#include "teststore.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

char *nf_teststore_tmpdir(const char *tag, char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/nf-test-%s-XXXXXX", tag);
    return mkdtemp(buf);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void nf_teststore_rmtree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

nf_store_t *nf_teststore_open(const char *dir)
{
    nf_store_opts_t o;
    nf_store_opts_default(&o);
    o.block_cache_mb = 8;
    o.write_buffer_mb = 4;
    o.bg_threads = 1;
    char err[512] = "";
    nf_store_t *st = nf_store_open(dir, &o, err, sizeof err);
    if (!st)
        fprintf(stderr, "nf_store_open(%s): %s\n", dir, err);
    return st;
}

int nf_teststore_commit(nf_store_t *st, uint64_t epoch, nf_store_batch_t *b)
{
    char err[512] = "";
    nf_store_batch_t *bs[1] = {b};
    int r = nf_store_pending_write(st, epoch, "{}", bs, 1, NULL, 0, err, sizeof err);
    if (r == 0)
        r = nf_store_pending_apply(st, err, sizeof err);
    if (r != 0) {
        fprintf(stderr, "commit of epoch %llu: %s\n", (unsigned long long)epoch, err);
        return -1;
    }
    return 0;
}
