/* crc32c: the reflected Castagnoli polynomial 0x82F63B78; see crc32c.h.
 *
 * The crc32 instruction takes 3 cycles and can start one a cycle, so one dependent chain of it
 * runs at a third of what the core can do. crc32c runs three chains over three neighbouring
 * blocks and joins them: the CRC register is linear over GF(2), so the register after block A
 * then block B is Z(reg after A) ^ (reg after B from 0), where Z is the register's change over
 * |B| zero bytes, a 32 x 32 bit matrix kept as four 256-entry tables (one per byte of the
 * register). Long blocks first, then short ones, then the tail in one chain. */
#include "crc32c.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

enum {
    LONG_BLOCK = 8192, /* bytes a chain: a round's 24 KiB joined with two table lookups */
    SHORT_BLOCK = 256, /* the same over what is left under 24 KiB, down to 768 bytes */
};

static uint32_t table[256];
static uint32_t long_zeros[4][256], short_zeros[4][256];
static bool hw;
static pthread_once_t ready = PTHREAD_ONCE_INIT;

static void make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        table[i] = c;
    }
}

/* z's tables: the register after n zero bytes (n a multiple of 8), from each of its 32 bits
 * set alone, then every byte's combinations of them. */
__attribute__((target("sse4.2"))) static void make_zeros(uint32_t z[4][256], size_t n)
{
    uint32_t bit[32];
    for (int i = 0; i < 32; i++) {
        uint64_t c = 1u << i;
        for (size_t k = 0; k < n / 8; k++)
            c = _mm_crc32_u64(c, 0);
        bit[i] = (uint32_t)c;
    }
    for (int b = 0; b < 4; b++)
        for (int v = 0; v < 256; v++) {
            uint32_t x = 0;
            for (int j = 0; j < 8; j++)
                if (v >> j & 1)
                    x ^= bit[8 * b + j];
            z[b][v] = x;
        }
}

static void init(void)
{
    make_table();
    hw = __builtin_cpu_supports("sse4.2");
    if (hw) {
        make_zeros(long_zeros, LONG_BLOCK);
        make_zeros(short_zeros, SHORT_BLOCK);
    }
}

uint32_t crc32c_ref(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&ready, init);
    const uint8_t *p = buf;
    crc = ~crc;
    while (len--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

bool crc32c_hw_available(void)
{
    pthread_once(&ready, init);
    return hw;
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static uint32_t zeros(const uint32_t z[4][256], uint32_t c)
{
    return z[0][c & 0xff] ^ z[1][c >> 8 & 0xff] ^ z[2][c >> 16 & 0xff] ^ z[3][c >> 24];
}

/* Rounds of three chains over block bytes each, from *p while 3 blocks are left. */
__attribute__((target("sse4.2"))) static uint32_t three_chains(uint32_t c, const uint8_t **p,
                                                               size_t *len, size_t block,
                                                               const uint32_t z[4][256])
{
    while (*len >= 3 * block) {
        const uint8_t *a = *p, *end = a + block;
        uint64_t c0 = c, c1 = 0, c2 = 0;
        do {
            c0 = _mm_crc32_u64(c0, load64(a));
            c1 = _mm_crc32_u64(c1, load64(a + block));
            c2 = _mm_crc32_u64(c2, load64(a + 2 * block));
            a += 8;
        } while (a < end);
        c = zeros(z, zeros(z, (uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
        *p += 3 * block;
        *len -= 3 * block;
    }
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t one_chain(uint32_t c, const uint8_t *p,
                                                            size_t len)
{
    uint64_t c64 = c;
    for (; len >= 8; p += 8, len -= 8)
        c64 = _mm_crc32_u64(c64, load64(p));
    c = (uint32_t)c64;
    while (len--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}

uint32_t crc32c_one_chain(uint32_t crc, const void *buf, size_t len)
{
    return crc32c_hw_available() ? ~one_chain(~crc, buf, len) : crc32c_ref(crc, buf, len);
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
    if (!crc32c_hw_available())
        return crc32c_ref(crc, buf, len);
    const uint8_t *p = buf;
    uint32_t c = three_chains(~crc, &p, &len, LONG_BLOCK, long_zeros);
    c = three_chains(c, &p, &len, SHORT_BLOCK, short_zeros);
    return ~one_chain(c, p, len);
}
