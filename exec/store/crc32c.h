/* crc32c: CRC-32C (Castagnoli), for the store's per-chunk checksums. A table-driven reference
 * and an SSE4.2 path (the crc32 instruction in three chains at once), chosen at run time; all
 * give the same value. Thread-safe. */
#ifndef FUYOU_CRC32C_H
#define FUYOU_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CRC of buf continuing from crc (0 to start). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t crc32c_ref(uint32_t crc, const void *buf, size_t len);
/* The crc32 instruction in one dependent chain (the reference without SSE4.2): what crc32c's
 * three chains are timed against (bench_store). */
uint32_t crc32c_one_chain(uint32_t crc, const void *buf, size_t len);
bool crc32c_hw_available(void);

#endif
