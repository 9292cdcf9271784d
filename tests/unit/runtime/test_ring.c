/* Tests src/runtime/ring.h: capacity, batched publication, the backpressure handshake
 * (including the race where the producer's re-check finds space after the consumer drained
 * everything: the waiting flag must not be left set), and a two-thread FIFO stress. */
#include "nf_test.h"
#include "runtime/ring.h"

#include <errno.h>
#include <pthread.h>

static nf_msg_t msg(uint64_t v)
{
    nf_msg_t m = {0};
    m.body.u64[0] = v;
    return m;
}

static void test_capacity_and_publication(void)
{
    nf_ring_t r;
    NF_REQUIRE(nf_ring_init(&r, 8) == 0);
    NF_CHECK_EQ(nf_ring_init(&(nf_ring_t){0}, 6), -EINVAL);
    for (uint64_t i = 0; i < 8; i++) {
        nf_msg_t m = msg(i);
        NF_CHECK(nf_ring_put(&r, &m));
    }
    nf_msg_t extra = msg(99);
    NF_CHECK(!nf_ring_put(&r, &extra));    /* full */
    NF_CHECK_EQ(nf_ring_available(&r), 0); /* written, not published */
    NF_CHECK_EQ(nf_ring_unpublished(&r), 8);
    NF_CHECK_EQ(nf_ring_publish(&r), 8);
    NF_CHECK_EQ(nf_ring_publish(&r), 0);
    NF_CHECK_EQ(nf_ring_available(&r), 8);
    NF_CHECK_EQ(nf_ring_depth(&r), 8);
    for (uint64_t i = 0; i < 3; i++)
        NF_CHECK_EQ(nf_ring_take(&r)->body.u64[0], i);
    NF_CHECK(!nf_ring_put(&r, &extra)); /* taken but not released: still full */
    NF_CHECK(!nf_ring_release(&r));
    NF_CHECK(nf_ring_put(&r, &extra));
    nf_ring_destroy(&r);
}

static void test_waiting_handshake(void)
{
    nf_ring_t r;
    NF_REQUIRE(nf_ring_init(&r, 4) == 0);
    nf_msg_t m = msg(1);
    while (nf_ring_put(&r, &m))
        ;
    nf_ring_publish(&r);
    /* Refused while still full: the flag stays, the consumer's release reports it once. */
    NF_CHECK(!nf_ring_mark_waiting(&r));
    NF_CHECK_EQ(atomic_load(&r.waiting), 1);
    while (nf_ring_available(&r))
        nf_ring_take(&r);
    NF_CHECK(nf_ring_release(&r));
    NF_CHECK_EQ(atomic_load(&r.waiting), 0);
    NF_CHECK(!nf_ring_release(&r));

    /* The race: refused, then the consumer drains everything before the flag is set. The
     * re-check finds space, and the flag must not be left set (nobody would clear it). */
    while (nf_ring_put(&r, &m))
        ;
    nf_ring_publish(&r);
    while (nf_ring_available(&r))
        nf_ring_take(&r);
    NF_CHECK(!nf_ring_release(&r));
    NF_CHECK(nf_ring_mark_waiting(&r));
    NF_CHECK_EQ(atomic_load(&r.waiting), 0);
    nf_ring_destroy(&r);
}

#define STRESS_N 20000000ull

static void *producer(void *arg)
{
    nf_ring_t *r = arg;
    for (uint64_t i = 0; i < STRESS_N;) {
        nf_msg_t m = msg(i);
        if (nf_ring_put(r, &m)) {
            i++;
            if ((i & 31) == 0)
                nf_ring_publish(r);
        } else {
            nf_ring_publish(r);
        }
    }
    nf_ring_publish(r);
    return NULL;
}

static void test_two_thread_fifo(void)
{
    nf_ring_t r;
    NF_REQUIRE(nf_ring_init(&r, 256) == 0);
    pthread_t t;
    pthread_create(&t, NULL, producer, &r);
    uint64_t expect = 0, errors = 0;
    while (expect < STRESS_N) {
        uint64_t n = nf_ring_available(&r);
        for (uint64_t i = 0; i < n; i++)
            errors += nf_ring_take(&r)->body.u64[0] != expect++;
        if (n)
            nf_ring_release(&r);
    }
    pthread_join(t, NULL);
    NF_CHECK_EQ(errors, 0);
    NF_CHECK_EQ(expect, STRESS_N);
    NF_CHECK_EQ(nf_ring_available(&r), 0);
    nf_ring_destroy(&r);
}

int main(void)
{
    NF_RUN(test_capacity_and_publication);
    NF_RUN(test_waiting_handshake);
    NF_RUN(test_two_thread_fifo);
    return nf_test_report();
}
