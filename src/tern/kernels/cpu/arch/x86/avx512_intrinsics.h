// <immintrin.h> for the AVX-512 and AMX kernel files (and only them), without GCC 12's false
// warnings: its AVX-512 intrinsics fill "undefined" operands with self-initialized variables
// that -Wuninitialized reports wherever they are inlined (GCC bug 105593, fixed in 13). The
// warnings stay off for the rest of the including file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
