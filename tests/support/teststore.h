/* teststore.h — a RocksDB store for tests of keyed state: a small temporary store, one epoch's
 * batch committed the way the epoch module does it (pending record, then apply), and removal of
 * the directory. Test code only. */
#ifndef NF_TESTSTORE_H
#define NF_TESTSTORE_H

#include "state/store.h"

#include <stddef.h>
#include <stdint.h>

/* A fresh directory "/tmp/nf-test-<tag>-XXXXXX" in buf; NULL if it cannot be made. */
char *nf_teststore_tmpdir(const char *tag, char *buf, size_t n);
/* Removes dir and everything in it. */
void nf_teststore_rmtree(const char *dir);
/* A store with small caches and one background thread; NULL (message on stderr) on failure. */
nf_store_t *nf_teststore_open(const char *dir);
/* Writes b as epoch's pending record and applies it. 0, or -1 (message on stderr). */
int nf_teststore_commit(nf_store_t *st, uint64_t epoch, nf_store_batch_t *b);

#endif
