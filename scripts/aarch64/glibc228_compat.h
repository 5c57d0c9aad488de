/* Keep a cross-built extension's glibc floor at or below manylinux_2_28 with Debian 12's
   aarch64 g++ 12 (glibc 2.36 headers): libstdc++ 12 reads glibc's __libc_single_threaded
   (a GLIBC_2.32 symbol) whenever <sys/single_threaded.h> exists. Force-included first
   (-include), this declares glibc's variable, then renames every later use to a per-file
   constant 0 ("not single-threaded": the always-correct atomic path). No symbol is left. */
#if defined(__cplusplus) && defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
static constexpr char archproof_libc_single_threaded = 0;
#define __libc_single_threaded archproof_libc_single_threaded
#endif
#endif
