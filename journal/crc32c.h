/*
 * crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by the frame and
 * segment-header checksums (FORMAT.md). Standard parameters: the running value starts at
 * 0xFFFFFFFF and is complemented at the end, so crc32c("123456789") == 0xE3069283.
 */
#ifndef STELE_JOURNAL_CRC32C_H
#define STELE_JOURNAL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of buf[0..len). */
uint32_t crc32c(const void *buf, size_t len);

/* Continues a CRC: crc32c_extend(crc32c(a), b) == crc32c(a || b). Start with 0. */
uint32_t crc32c_extend(uint32_t crc, const void *buf, size_t len);

/* 1 when the SSE4.2 instruction is used on this CPU, 0 when the table fallback is. */
int crc32c_is_hardware(void);

/* The table implementation, always; for tests that compare both paths. */
uint32_t crc32c_extend_portable(uint32_t crc, const void *buf, size_t len);

#endif /* STELE_JOURNAL_CRC32C_H */
