/* Tests src/algo/sha256.c: the NIST FIPS 180-4 example vectors, lengths around the padding
 * boundaries (55/56/63/64 bytes, where the length field does or does not fit the last block),
 * and the incremental API fed in random pieces giving the one-shot digest. All of that runs
 * once per compression function the CPU has (portable C, and SHA-NI where present), and the
 * two are compared with each other on random inputs of every length up to a few blocks. */
#include "algo/sha256.h"
#include "nf_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void)
{
    return nf_test_xorshift(&rng);
}

static void hex_of(const void *data, size_t len, char out[65])
{
    uint8_t d[32];
    nf_sha256(data, len, d);
    nf_hex(d, 32, out);
}

static void test_nist_vectors(void)
{
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopq"
         "rlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char hex[65];
        hex_of(v[i].in, strlen(v[i].in), hex);
        NF_CHECK_STR(hex, v[i].hex);
    }
}

static void test_million_a(void)
{
    static char a[1000000];
    memset(a, 'a', sizeof a);
    char hex[65];
    hex_of(a, sizeof a, hex);
    NF_CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    /* The same million fed one byte at a time exercises the buffered path only. */
    nf_sha256_t c;
    uint8_t d[32];
    nf_sha256_init(&c);
    for (size_t i = 0; i < sizeof a; i++)
        nf_sha256_update(&c, "a", 1);
    nf_sha256_final(&c, d);
    nf_hex(d, 32, hex);
    NF_CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_padding_boundaries(void)
{
    /* Reference digests from coreutils sha256sum. */
    static const struct {
        size_t n;
        const char *hex;
    } v[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
    };
    char a[128];
    memset(a, 'a', sizeof a);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char hex[65];
        hex_of(a, v[i].n, hex);
        NF_CHECK_STR(hex, v[i].hex);
    }
}

static void test_incremental_equals_oneshot(void)
{
    static uint8_t data[4096];
    for (int round = 0; round < 2000; round++) {
        size_t len = (size_t)(next_rand() % sizeof data);
        for (size_t i = 0; i < len; i++)
            data[i] = (uint8_t)next_rand();
        uint8_t want[32], got[32];
        nf_sha256(data, len, want);

        nf_sha256_t c;
        nf_sha256_init(&c);
        size_t pos = 0;
        while (pos < len) {
            /* Mostly small pieces so splits land at every offset within a block. */
            size_t piece = (size_t)(next_rand() % (next_rand() % 4 ? 70 : 300));
            if (piece > len - pos)
                piece = len - pos;
            nf_sha256_update(&c, data + pos, piece);
            pos += piece;
        }
        nf_sha256_final(&c, got);
        NF_CHECK(memcmp(want, got, 32) == 0);
    }
}

static void test_hex(void)
{
    const uint8_t in[] = {0x00, 0x0f, 0xa5, 0xff};
    char out[9];
    nf_hex(in, 4, out);
    NF_CHECK_STR(out, "000fa5ff");
    nf_hex(in, 0, out);
    NF_CHECK_STR(out, "");
}

static void test_shani_matches_portable(void)
{
    if (nf_sha256_use(NF_SHA256_SHANI) == -ENOTSUP) {
        fprintf(stderr, "  this CPU has no SHA-NI: only the portable path is tested\n");
        NF_CHECK_EQ(nf_sha256_impl(), NF_SHA256_PORTABLE);
        return;
    }
    NF_CHECK_EQ(nf_sha256_impl(), NF_SHA256_SHANI);
    static uint8_t data[4096];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)next_rand();
    for (int round = 0; round < 2000; round++) {
        /* Every length up to 300 (all padding cases), then random longer ones. */
        size_t len = round <= 300 ? (size_t)round : (size_t)(next_rand() % sizeof data);
        size_t off = (size_t)(next_rand() % (sizeof data - len + 1)); /* any alignment */
        uint8_t a[32], b[32];
        NF_REQUIRE(nf_sha256_use(NF_SHA256_PORTABLE) == 0);
        nf_sha256(data + off, len, a);
        NF_REQUIRE(nf_sha256_use(NF_SHA256_SHANI) == 0);
        nf_sha256(data + off, len, b);
        if (memcmp(a, b, 32) != 0) {
            fprintf(stderr, "  length %zu at offset %zu: SHA-NI and portable differ\n", len, off);
            nf_test_failed_checks++;
            break;
        }
    }
    /* Switching in the middle of a hash: both keep the same state. */
    nf_sha256_t c;
    uint8_t want[32], got[32];
    nf_sha256(data, sizeof data, want);
    nf_sha256_init(&c);
    for (size_t pos = 0; pos < sizeof data; pos += 1000) {
        NF_REQUIRE(nf_sha256_use(pos / 1000 % 2 ? NF_SHA256_SHANI : NF_SHA256_PORTABLE) == 0);
        nf_sha256_update(&c, data + pos, sizeof data - pos < 1000 ? sizeof data - pos : 1000);
    }
    nf_sha256_final(&c, got);
    NF_CHECK(memcmp(want, got, 32) == 0);
}

static void test_use_rejects(void)
{
    NF_CHECK_EQ(nf_sha256_use((nf_sha256_impl_t)7), -EINVAL);
    NF_CHECK_EQ(nf_sha256_use(NF_SHA256_AUTO), 0);
    nf_sha256_impl_t auto_impl = nf_sha256_impl();
    NF_CHECK(auto_impl == NF_SHA256_PORTABLE || auto_impl == NF_SHA256_SHANI);
}

/* The known-answer tests, with the compression function forced to `which`. */
static void known_answers(nf_sha256_impl_t which, const char *name)
{
    if (nf_sha256_use(which) != 0)
        return;
    fprintf(stderr, "  [%s]\n", name);
    NF_RUN(test_nist_vectors);
    NF_RUN(test_million_a);
    NF_RUN(test_padding_boundaries);
    NF_RUN(test_incremental_equals_oneshot);
}

int main(void)
{
    known_answers(NF_SHA256_PORTABLE, "portable");
    known_answers(NF_SHA256_SHANI, "SHA-NI");
    NF_RUN(test_shani_matches_portable);
    NF_RUN(test_use_rejects);
    NF_RUN(test_hex);
    return nf_test_report();
}
