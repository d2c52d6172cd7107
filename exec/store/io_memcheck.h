/* io_memcheck: IO_FILLED(p, n) tells memcheck that the kernel filled n bytes at p through
 * io_uring, which it cannot see, when built where its header is (a no-op elsewhere), so that
 * `meson test --setup valgrind` checks the rest honestly. */
#ifndef FUYOU_IO_MEMCHECK_H
#define FUYOU_IO_MEMCHECK_H

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define IO_FILLED(p, n) VALGRIND_MAKE_MEM_DEFINED(p, n)
#endif
#endif
#ifndef IO_FILLED
#define IO_FILLED(p, n) ((void)(p), (void)(n))
#endif

#endif
