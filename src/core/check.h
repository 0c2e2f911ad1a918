#pragma once

// CHECK(cond) << nothing: crashes loudly when one of Rampart's own invariants is broken.
// Never use it on untrusted input; that gets a Status.

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
