/* Tests src/engine/notify.c against a reference model: 90 readers in four key groups, split
 * between two shards' engines by their user key, subscribe and unsubscribe to 8 topics while
 * windows of breaking stories (a pool of 24, so stories break again) arrive with end times
 * moving over several days. The model, written here from the rule in notify.h (a set of topics,
 * a queue of remembered stories, a count per day), says which notifications each window makes;
 * the engines' must be the same, as a sorted list, window by window.
 * Every few steps the state goes through an epoch into a real store; now and then the engines
 * are dropped and new ones rebuild their subscribers from the store (a clean restart), or are
 * dropped WITHOUT the epoch since the last commit (a kill -9): the model goes back to its
 * committed copy, the steps since are replayed, and the notifications of the replay must equal
 * the ones the lost run made (exactly once: the lost run's outputs were never committed). */
#include "engine/interest.h"
#include "engine/notify.h"
#include "nf_test.h"
#include "state/kstate.h"
#include "teststore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { READERS = 90, TOPICS = 8, STORIES = 24, STEPS = 3000, CAP = 3, SHARDS = 2 };

static uint64_t rng = 0x13198a2e03707344ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

/* ---- the model ---- */
typedef struct mreader {
    bool topic[TOPICS];
    int remembered[NF_NOTIFY_REMEMBER]; /* story numbers, oldest first */
    int nrem;
    int64_t day;
    int count;
} mreader_t;

typedef struct model {
    mreader_t r[READERS];
} model_t;

static bool subscribed(const mreader_t *m)
{
    for (int t = 0; t < TOPICS; t++)
        if (m->topic[t])
            return true;
    return false;
}

static void model_setting(model_t *m, unsigned r, bool sub, unsigned t)
{
    m->r[r].topic[t] = sub;
    if (!subscribed(&m->r[r])) /* forgotten whole */
        memset(&m->r[r], 0, sizeof m->r[r]);
}

/* ---- steps: settings and windows, kept for a replay ---- */
typedef struct step {
    bool window;
    unsigned reader, topic;
    bool sub;
    int64_t end_ms;
    int n;
    int story[4];
    unsigned story_topic[4];
    uint64_t reads[4];
} step_t;

static int story_topic[STORIES];

static nf_id128_t story_id(int s)
{
    return (nf_id128_t){0x5000 + (uint64_t)s, 0xabc};
}

static void user_name(unsigned r, char *out, size_t n)
{
    snprintf(out, n, "reader-%u", r);
}

static nf_id128_t user(unsigned r)
{
    char id[32];
    user_name(r, id, sizeof id);
    return nf_interest_user_key(id);
}

static uint16_t kg_of(unsigned r)
{
    return (uint16_t)(r % 4);
}

static unsigned shard_of(nf_id128_t u)
{
    return (unsigned)(u.hi % SHARDS);
}

static bool owns(uint16_t kg, nf_id128_t u, void *ctx)
{
    (void)kg;
    return shard_of(u) == *(unsigned *)ctx;
}

/* A notification as "reader story": sorted lists compare. */
typedef struct notes {
    char (*v)[48];
    size_t n, cap;
} notes_t;

static void notes_add(notes_t *l, const char *user_id, int story)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        NF_REQUIRE(l->v);
    }
    memset(l->v[l->n], 0, sizeof l->v[l->n]); /* compared whole */
    snprintf(l->v[l->n++], 48, "%s %d", user_id, story);
}

static int cmp_note(const void *a, const void *b)
{
    return strcmp(a, b);
}

static bool notes_equal(notes_t *a, notes_t *b)
{
    if (a->n) /* an empty list has no array (qsort's base may not be NULL) */
        qsort(a->v, a->n, sizeof *a->v, cmp_note);
    if (b->n)
        qsort(b->v, b->n, sizeof *b->v, cmp_note);
    return a->n == b->n && (!a->n || !memcmp(a->v, b->v, a->n * sizeof *a->v));
}

/* The model's notifications of a window (stories in the window's order). */
static void model_window(model_t *m, const step_t *s, const int *order, notes_t *out)
{
    int64_t day = nf_notify_day(s->end_ms);
    for (unsigned r = 0; r < READERS; r++) {
        mreader_t *x = &m->r[r];
        for (int k = 0; k < s->n; k++) {
            int i = order[k], st = s->story[i];
            if (!x->topic[s->story_topic[i]])
                continue;
            bool seen = false;
            for (int j = 0; j < x->nrem; j++)
                seen |= x->remembered[j] == st;
            if (seen)
                continue;
            if (day > x->day) {
                x->day = day;
                x->count = 0;
            }
            if (x->count >= CAP)
                continue;
            x->count++;
            if (x->nrem == NF_NOTIFY_REMEMBER) {
                memmove(x->remembered, x->remembered + 1, (NF_NOTIFY_REMEMBER - 1) * sizeof(int));
                x->nrem--;
            }
            x->remembered[x->nrem++] = st;
            char id[32];
            user_name(r, id, sizeof id);
            notes_add(out, id, st);
        }
    }
}

static int on_note(void *arg, const char *user_id, size_t ulen, const nf_notify_story_t *s,
                   int64_t end_ms)
{
    (void)end_ms;
    NF_CHECK_EQ(strlen(user_id), ulen);
    notes_add(arg, user_id, (int)(s->story.hi - 0x5000));
    return 0;
}

/* The engines' answer to one step; windows' notifications into out. */
static void engine_step(nf_notify_t **e, const step_t *s, notes_t *out, uint64_t *counts)
{
    if (!s->window) {
        char id[32];
        user_name(s->reader, id, sizeof id);
        nf_id128_t u = user(s->reader);
        int rc = nf_notify_apply(e[shard_of(u)], kg_of(s->reader), u, id, strlen(id), s->sub,
                                 s->topic, 1000);
        NF_CHECK(rc == 0 || rc == 1);
        return;
    }
    nf_notify_window_t *w = malloc(sizeof *w + (size_t)s->n * sizeof w->s[0]);
    NF_REQUIRE(w);
    w->end_ms = s->end_ms;
    w->n = (size_t)s->n;
    for (int i = 0; i < s->n; i++)
        w->s[i] = (nf_notify_story_t){.story = story_id(s->story[i]),
                                      .lead = story_id(s->story[i]),
                                      .reads = s->reads[i],
                                      .topic = (uint16_t)s->story_topic[i]};
    nf_notify_window_sort(w);
    for (unsigned sh = 0; sh < SHARDS; sh++) {
        if (rnd() % 2) { /* whole, or in slices of 1..7 readers as the reads actor runs it */
            NF_CHECK_EQ(nf_notify_window(e[sh], w, on_note, out, counts), 0);
            continue;
        }
        nf_notify_run_t *run = nf_notify_run_new(e[sh], w);
        NF_REQUIRE(run);
        int rc;
        while ((rc = nf_notify_run_step(e[sh], run, 1 + rnd() % 7, on_note, out, counts)) == 1)
            ;
        NF_CHECK_EQ(rc, 0);
        NF_CHECK_EQ(nf_notify_run_left(run), 0);
        nf_notify_run_free(run);
    }
    free(w);
}

/* The order nf_notify_window_sort gives: reads descending, then story id. */
static void window_order(const step_t *s, int *order)
{
    for (int i = 0; i < s->n; i++)
        order[i] = i;
    for (int i = 1; i < s->n; i++)
        for (int j = i; j > 0; j--) {
            const int a = order[j - 1], b = order[j];
            bool swap = s->reads[a] < s->reads[b] ||
                        (s->reads[a] == s->reads[b] && s->story[a] > s->story[b]);
            if (!swap)
                break;
            order[j - 1] = b;
            order[j] = a;
        }
}

static step_t random_step(int64_t *clock)
{
    step_t s = {0};
    if (rnd() % 3) {
        s.reader = (unsigned)(rnd() % READERS);
        s.topic = (unsigned)(rnd() % TOPICS);
        s.sub = rnd() % 4 != 0;
        return s;
    }
    s.window = true;
    *clock += (int64_t)(rnd() % (8 * 3600000ull));
    s.end_ms = *clock;
    s.n = 1 + (int)(rnd() % 4);
    for (int i = 0; i < s.n; i++) {
        bool dup;
        do { /* a story once per window */
            s.story[i] = (int)(rnd() % STORIES);
            dup = false;
            for (int j = 0; j < i; j++)
                dup |= s.story[j] == s.story[i];
        } while (dup);
        s.story_topic[i] = (unsigned)story_topic[s.story[i]];
        s.reads[i] = 20 + rnd() % 6; /* ties: the story id orders */
    }
    return s;
}

static void engines_open(nf_notify_t **e, nf_store_t *st)
{
    static unsigned shard_ids[SHARDS] = {0, 1};
    char err[128];
    for (unsigned sh = 0; sh < SHARDS; sh++) {
        NF_REQUIRE((e[sh] = nf_notify_new(st, 0, CAP)) != NULL);
        NF_CHECK(nf_notify_load(e[sh], NULL, 0, owns, &shard_ids[sh], err, sizeof err) >= 0);
    }
}

static void engines_close(nf_notify_t **e)
{
    for (unsigned sh = 0; sh < SHARDS; sh++)
        nf_notify_free(e[sh]);
}

static void engines_commit(nf_notify_t **e, nf_store_t *st, uint64_t epoch)
{
    nf_store_batch_t *b = nf_store_batch_new();
    for (unsigned sh = 0; sh < SHARDS; sh++)
        nf_notify_snapshot(e[sh], b, epoch);
    NF_REQUIRE(nf_teststore_commit(st, epoch, b) == 0);
    nf_store_batch_free(b);
    for (unsigned sh = 0; sh < SHARDS; sh++)
        nf_notify_committed(e[sh], epoch);
}

static size_t model_subscribers(const model_t *m)
{
    size_t n = 0;
    for (unsigned r = 0; r < READERS; r++)
        n += subscribed(&m->r[r]);
    return n;
}

static void test_notify_model(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("notify", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    for (int s = 0; s < STORIES; s++)
        story_topic[s] = (int)(rnd() % TOPICS);
    static model_t model, committed;
    static step_t since[64];
    int nsince = 0, wrong = 0, crashes = 0, restarts = 0;
    nf_notify_t *e[SHARDS];
    engines_open(e, st);
    notes_t lost = {0};
    uint64_t epoch = 0, counts[NF_NOTIFY__OUTCOMES] = {0};
    int64_t clock = 1767225600000ll;
    for (int i = 0; i < STEPS; i++) {
        step_t s = random_step(&clock);
        notes_t want = {0}, got = {0};
        if (s.window) {
            int order[4];
            window_order(&s, order);
            model_window(&model, &s, order, &want);
        } else {
            model_setting(&model, s.reader, s.sub, s.topic);
        }
        engine_step(e, &s, &got, counts);
        wrong += !notes_equal(&want, &got);
        for (size_t k = 0; k < got.n; k++)
            notes_add(&lost, got.v[k], 0); /* the run's notifications since the commit */
        free(want.v);
        free(got.v);
        since[nsince++] = s;
        size_t subs = nf_notify_subscribers(e[0]) + nf_notify_subscribers(e[1]);
        wrong += subs != model_subscribers(&model);
        uint64_t what = rnd() % 64;
        if (nsince == 64 || what < 4) { /* an epoch */
            engines_commit(e, st, ++epoch);
            committed = model;
            nsince = 0;
            lost.n = 0;
            if (what < 2) { /* a clean restart */
                engines_close(e);
                engines_open(e, st);
                restarts++;
            }
        } else if (what == 4) { /* kill -9: the uncommitted steps again, on the committed state */
            engines_close(e);
            engines_open(e, st);
            model = committed;
            notes_t again = {0};
            for (int k = 0; k < nsince; k++) {
                notes_t one = {0};
                engine_step(e, &since[k], &one, counts);
                if (since[k].window) {
                    int order[4];
                    notes_t m1 = {0};
                    window_order(&since[k], order);
                    model_window(&model, &since[k], order, &m1);
                    wrong += !notes_equal(&m1, &one);
                    free(m1.v);
                } else {
                    model_setting(&model, since[k].reader, since[k].sub, since[k].topic);
                }
                for (size_t j = 0; j < one.n; j++)
                    notes_add(&again, one.v[j], 0);
                free(one.v);
            }
            wrong += !notes_equal(&lost, &again);
            free(again.v);
            crashes++;
        }
    }
    NF_CHECK_EQ(wrong, 0);
    /* every outcome happened, and the test went through both kinds of restart */
    NF_CHECK(counts[NF_NOTIFY_SENT] > 200 && counts[NF_NOTIFY_REPEAT] > 50 &&
             counts[NF_NOTIFY_CAPPED] > 50);
    NF_CHECK(crashes >= 5 && restarts >= 5);
    free(lost.v);
    engines_close(e);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* The codec refuses what the engine never writes; the key's top bits; days before 1970. */
static void test_notify_codec(void)
{
    nf_notify_val_t v = {.topics = 6, .updated_ms = 77, .day = 20000, .count = 2}, w;
    strcpy(v.user, "ann");
    v.user_len = 3;
    for (int i = 0; i < 3; i++)
        NF_CHECK_EQ(nf_notify_step(&v, story_id(i), 20000, 5), NF_NOTIFY_SENT);
    NF_CHECK_EQ(nf_notify_step(&v, story_id(1), 20001, 5), NF_NOTIFY_REPEAT);
    unsigned char b[NF_NOTIFY_VALUE_MAX];
    size_t len = nf_notify_encode(&v, b);
    NF_CHECK_EQ(len, NF_NOTIFY_HEADER + 3 + 16 * 3);
    NF_CHECK_EQ(nf_notify_decode(b, len, &w), 0);
    NF_CHECK(w.topics == 6 && w.count == 5 && w.nstories == 3 && !strcmp(w.user, "ann"));
    NF_CHECK(nf_notify_decode(b, len - 1, &w) != 0);
    NF_CHECK(nf_notify_decode(b, 24, &w) != 0); /* a reader's follows value */
    b[26] = NF_NOTIFY_REMEMBER + 1;
    NF_CHECK(nf_notify_decode(b, len, &w) != 0);
    NF_CHECK_EQ(nf_notify_key((nf_id128_t){1, 2}).hi >> 48, 0xFFFF);
    NF_CHECK(nf_id128_cmp(nf_notify_key((nf_id128_t){1, 2}), nf_notify_key((nf_id128_t){1, 3})));
    NF_CHECK_EQ(nf_notify_day(-1), -1);
    NF_CHECK_EQ(nf_notify_day(NF_NOTIFY_DAY_MS), 1);
    /* a full memory forgets its oldest story; the cap holds per day */
    nf_notify_val_t x = {.topics = 1};
    for (int i = 0; i < NF_NOTIFY_REMEMBER + 1; i++)
        NF_CHECK_EQ(nf_notify_step(&x, story_id(i), i, 1), NF_NOTIFY_SENT);
    NF_CHECK_EQ(nf_notify_step(&x, story_id(0), 100, 1), NF_NOTIFY_SENT);
    NF_CHECK_EQ(nf_notify_step(&x, story_id(99), 100, 1), NF_NOTIFY_CAPPED);
}

/* A run in slices with settings between them: a reader who unsubscribes before their slice is
 * skipped, one who subscribes after the window came is not in it, the others are each judged
 * once. */
static void test_run_between_settings(void)
{
    nf_notify_t *e = nf_notify_new(NULL, 0, 5);
    NF_REQUIRE(e);
    char id[32];
    for (unsigned r = 0; r < 10; r++) {
        user_name(r, id, sizeof id);
        NF_CHECK_EQ(nf_notify_apply(e, 0, user(r), id, strlen(id), true, 3, 1000), 1);
    }
    nf_notify_window_t *w = malloc(sizeof *w + sizeof w->s[0]);
    NF_REQUIRE(w);
    w->end_ms = 86400000;
    w->n = 1;
    w->s[0] =
        (nf_notify_story_t){.story = story_id(1), .lead = story_id(1), .reads = 9, .topic = 3};
    nf_notify_run_t *run = nf_notify_run_new(e, w);
    free(w); /* the run holds its own copy */
    NF_REQUIRE(run);
    NF_CHECK_EQ(nf_notify_run_left(run), 10);
    notes_t got = {0};
    uint64_t counts[NF_NOTIFY__OUTCOMES] = {0};
    NF_CHECK_EQ(nf_notify_run_step(e, run, 3, on_note, &got, counts), 1);
    NF_CHECK_EQ(got.n, 3);
    unsigned gone = 9, late = 10; /* the last slot: not judged yet */
    user_name(gone, id, sizeof id);
    NF_CHECK_EQ(nf_notify_apply(e, 0, user(gone), id, strlen(id), false, 3, 1001), 1);
    user_name(late, id, sizeof id);
    NF_CHECK_EQ(nf_notify_apply(e, 0, user(late), id, strlen(id), true, 3, 1001), 1);
    NF_CHECK_EQ(nf_notify_run_step(e, run, 100, on_note, &got, counts), 0);
    NF_CHECK_EQ(got.n, 9);
    NF_CHECK_EQ(counts[NF_NOTIFY_SENT], 9);
    for (size_t i = 0; i < got.n; i++) {
        char no[48];
        user_name(gone, no, sizeof no);
        NF_CHECK(strncmp(got.v[i], no, strlen(no)) != 0 || got.v[i][strlen(no)] != ' ');
        user_name(late, no, sizeof no);
        NF_CHECK(strncmp(got.v[i], no, strlen(no)) != 0 || got.v[i][strlen(no)] != ' ');
    }
    nf_notify_run_free(run);
    free(got.v);
    nf_notify_free(e);
}

int main(void)
{
    NF_RUN(test_notify_model);
    NF_RUN(test_notify_codec);
    NF_RUN(test_run_between_settings);
    return nf_test_report();
}
