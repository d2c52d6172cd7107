/* crc32c: the reflected Castagnoli polynomial 0x82F63B78; see crc32c.h. */
#include "crc32c.h"

#include <immintrin.h>
#include <string.h>

static uint32_t table[256];
static bool table_ready;

static void make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        table[i] = c;
    }
    table_ready = true;
}

uint32_t crc32c_ref(uint32_t crc, const void *buf, size_t len)
{
    if (!table_ready)
        make_table(); /* idempotent: a race writes the same values */
    const uint8_t *p = buf;
    crc = ~crc;
    while (len--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

bool crc32c_hw_available(void)
{
    return __builtin_cpu_supports("sse4.2");
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf,
                                                            size_t len)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
    static int hw = -1;
    if (hw < 0)
        hw = crc32c_hw_available();
    return hw ? crc32c_hw(crc, buf, len) : crc32c_ref(crc, buf, len);
}
