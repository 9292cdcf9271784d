/* cms.c — Count-Min Sketch (cms.h). */
#include "algo/cms.h"
#include "algo/bytes.h"
#include "algo/hash.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CMS_MAGIC      0x4d43464eu /* "NFCM" little-endian */
#define CMS_VERSION    1u
#define CMS_HEADER     (4 + 4 + 4 + 4 + 8 + 8) /* magic, version, width, depth, seed, total */
#define CMS_TRAILER    8
#define CMS_CHECK_SEED 0x636d73636865636bull

int nf_cms_init(nf_cms_t *c, uint32_t width, uint32_t depth, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    if (width == 0 || depth == 0 || width > NF_CMS_MAX_WIDTH || depth > NF_CMS_MAX_DEPTH)
        return -EINVAL;
    c->cells = calloc((size_t)width * depth, sizeof *c->cells);
    if (!c->cells)
        return -ENOMEM;
    c->width = width;
    c->depth = depth;
    c->seed = seed;
    return 0;
}

void nf_cms_free(nf_cms_t *c)
{
    free(c->cells);
    c->cells = NULL;
}

void nf_cms_clear(nf_cms_t *c)
{
    memset(c->cells, 0, (size_t)c->width * c->depth * sizeof *c->cells);
    c->total = 0;
}

uint64_t nf_cms_hash(const nf_cms_t *c, const void *key, size_t len)
{
    return nf_hash64(key, len, c->seed);
}

/* Row i's cell index: double hashing. h2 is odd so the rows' positions differ; the top 32 bits
 * of the row hash are reduced to [0, width) by multiply-shift (no modulo, any width). */
static inline size_t cms_cell(uint32_t width, uint32_t row, uint64_t h1, uint64_t h2)
{
    uint64_t x = h1 + (uint64_t)row * h2;
    return (size_t)row * width + (size_t)(((x >> 32) * (uint64_t)width) >> 32);
}

void nf_cms_add(nf_cms_t *c, uint64_t h, uint64_t n)
{
    uint64_t h2 = nf_mix64(h) | 1;
    for (uint32_t i = 0; i < c->depth; i++)
        c->cells[cms_cell(c->width, i, h, h2)] += n;
    c->total += n;
}

uint64_t nf_cms_add_estimate(nf_cms_t *c, uint64_t h, uint64_t n)
{
    uint64_t h2 = nf_mix64(h) | 1, est = UINT64_MAX;
    for (uint32_t i = 0; i < c->depth; i++) {
        uint64_t v = (c->cells[cms_cell(c->width, i, h, h2)] += n);
        est = v < est ? v : est;
    }
    c->total += n;
    return est;
}

uint64_t nf_cms_estimate(const nf_cms_t *c, uint64_t h)
{
    uint64_t h2 = nf_mix64(h) | 1, est = UINT64_MAX;
    for (uint32_t i = 0; i < c->depth; i++) {
        uint64_t v = c->cells[cms_cell(c->width, i, h, h2)];
        est = v < est ? v : est;
    }
    return est;
}

bool nf_cms_same_shape(const nf_cms_t *a, const nf_cms_t *b)
{
    return a->width == b->width && a->depth == b->depth && a->seed == b->seed;
}

int nf_cms_merge(nf_cms_t *dst, const nf_cms_t *src)
{
    if (!nf_cms_same_shape(dst, src))
        return -EINVAL;
    size_t n = (size_t)dst->width * dst->depth;
    for (size_t i = 0; i < n; i++)
        dst->cells[i] += src->cells[i];
    dst->total += src->total;
    return 0;
}

int nf_cms_subtract(nf_cms_t *dst, const nf_cms_t *src)
{
    if (!nf_cms_same_shape(dst, src))
        return -EINVAL;
    size_t n = (size_t)dst->width * dst->depth;
    if (src->total > dst->total)
        return -ERANGE;
    for (size_t i = 0; i < n; i++)
        if (src->cells[i] > dst->cells[i])
            return -ERANGE;
    for (size_t i = 0; i < n; i++)
        dst->cells[i] -= src->cells[i];
    dst->total -= src->total;
    return 0;
}

size_t nf_cms_bytes(const nf_cms_t *c)
{
    return sizeof *c + (size_t)c->width * c->depth * sizeof *c->cells;
}

/* ---- encoding ---- */

/* LEB128; returns bytes read, 0 if truncated or longer than 10 bytes / overflowing. */
static size_t get_varint(const unsigned char *p, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < len && i < 10; i++) {
        uint64_t b = p[i] & 0x7f;
        if (i == 9 && b > 1)
            return 0;
        v |= b << (7 * i);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

size_t nf_cms_encoded_max(const nf_cms_t *c)
{
    return CMS_HEADER + (size_t)c->width * c->depth * 10 + CMS_TRAILER;
}

size_t nf_cms_encode(const nf_cms_t *c, void *buf, size_t cap)
{
    unsigned char *p = buf;
    if (cap < CMS_HEADER + CMS_TRAILER)
        return 0;
    nf_put_le32(p, CMS_MAGIC);
    nf_put_le32(p + 4, CMS_VERSION);
    nf_put_le32(p + 8, c->width);
    nf_put_le32(p + 12, c->depth);
    nf_put_le64(p + 16, c->seed);
    nf_put_le64(p + 24, c->total);
    size_t at = CMS_HEADER, n = (size_t)c->width * c->depth;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = c->cells[i];
        if (cap - at < 10 + CMS_TRAILER)
            return 0;
        while (v >= 0x80) {
            p[at++] = (unsigned char)(v | 0x80);
            v >>= 7;
        }
        p[at++] = (unsigned char)v;
    }
    nf_put_le64(p + at, nf_hash64(p, at, CMS_CHECK_SEED));
    return at + CMS_TRAILER;
}

/* Validates a blob; on success fills the shape and total and points *cells at the varints. */
static int cms_parse(const unsigned char *p, size_t len, nf_cms_t *shape, size_t *cells_at)
{
    if (len < CMS_HEADER + CMS_TRAILER)
        return -EINVAL;
    if (nf_get_le64(p + len - CMS_TRAILER) != nf_hash64(p, len - CMS_TRAILER, CMS_CHECK_SEED))
        return -EINVAL;
    if (nf_get_le32(p) != CMS_MAGIC || nf_get_le32(p + 4) != CMS_VERSION)
        return -EINVAL;
    shape->width = nf_get_le32(p + 8);
    shape->depth = nf_get_le32(p + 12);
    shape->seed = nf_get_le64(p + 16);
    shape->total = nf_get_le64(p + 24);
    shape->cells = NULL;
    if (shape->width == 0 || shape->depth == 0 || shape->width > NF_CMS_MAX_WIDTH ||
        shape->depth > NF_CMS_MAX_DEPTH)
        return -EINVAL;
    /* Every cell must decode and the row sums must equal the total (each add touches one cell
     * per row), so structural garbage that survived the trailer is still refused. */
    size_t at = CMS_HEADER, end = len - CMS_TRAILER;
    for (uint32_t r = 0; r < shape->depth; r++) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < shape->width; i++) {
            uint64_t v;
            size_t k = get_varint(p + at, end - at, &v);
            if (!k)
                return -EINVAL;
            at += k;
            sum += v;
        }
        if (sum != shape->total)
            return -EINVAL;
    }
    if (at != end)
        return -EINVAL;
    *cells_at = CMS_HEADER;
    return 0;
}

static void cms_apply(nf_cms_t *dst, const unsigned char *p, size_t at, uint64_t total)
{
    size_t n = (size_t)dst->width * dst->depth;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        size_t k = get_varint(p + at, 10, &v);
        assert(k); /* validated by cms_parse */
        at += k;
        dst->cells[i] += v;
    }
    dst->total += total;
}

int nf_cms_decode(nf_cms_t *out, const void *buf, size_t len)
{
    nf_cms_t shape;
    size_t at;
    memset(out, 0, sizeof *out);
    int r = cms_parse(buf, len, &shape, &at);
    if (r)
        return r;
    r = nf_cms_init(out, shape.width, shape.depth, shape.seed);
    if (r)
        return r;
    cms_apply(out, buf, at, shape.total);
    return 0;
}

int nf_cms_decode_merge(nf_cms_t *dst, const void *buf, size_t len)
{
    nf_cms_t shape;
    size_t at;
    int r = cms_parse(buf, len, &shape, &at);
    if (r)
        return r;
    if (!nf_cms_same_shape(dst, &shape))
        return -EINVAL;
    cms_apply(dst, buf, at, shape.total);
    return 0;
}
