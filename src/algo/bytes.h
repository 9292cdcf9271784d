/* bytes.h — little-endian integers in byte buffers: the one encoding of every persisted value
 * (keyed-state records, store headers, sketches, trending blobs), independent of the host's byte
 * order and alignment. On a little-endian host each is one unaligned load or store (memcpy; the
 * byte loops were not merged by the compiler, and the read path encodes a user's vector per
 * event); elsewhere, byte by byte. Big-endian 64-bit integers too, for keys whose byte order
 * must be their numeric order (RocksDB compares keys as bytes). Pure inline functions, any
 * thread. */
#ifndef NF_BYTES_H
#define NF_BYTES_H

#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline void nf_put_le32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static inline void nf_put_le64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static inline uint32_t nf_get_le32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t nf_get_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
#else
static inline void nf_put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void nf_put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t nf_get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static inline uint64_t nf_get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}
#endif

static inline void nf_put_le16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static inline uint16_t nf_get_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline void nf_put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

static inline uint64_t nf_get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

#endif
