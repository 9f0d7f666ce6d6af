// examples/tools/embedded/count_allocations.cpp: the heap allocation counter of
// lrt_embedded_alloc_check, which is lrt-embedded-generate's object code with this file linked in.
// Every heap allocation of the process passes through these malloc family replacements (glibc's
// allocator underneath); generate.cpp turns counting on once the model is loaded and reads the
// count at the end (through weak declarations, null in lrt-embedded-generate itself).
#include <cstddef>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {
bool g_counting = false;
long g_allocations = 0;
void note() {
  if (g_counting) ++g_allocations;
}
}  // namespace

extern "C" {
void lrt_embedded_count_allocations(int on) { g_counting = on != 0; }
long lrt_embedded_allocations_counted() { return g_allocations; }

void* malloc(std::size_t n) { return note(), __libc_malloc(n); }
void* calloc(std::size_t a, std::size_t b) { return note(), __libc_calloc(a, b); }
void* realloc(void* p, std::size_t n) { return note(), __libc_realloc(p, n); }
void* aligned_alloc(std::size_t al, std::size_t n) { return note(), __libc_memalign(al, n); }
void* memalign(std::size_t al, std::size_t n) { return note(), __libc_memalign(al, n); }
int posix_memalign(void** out, std::size_t al, std::size_t n) {
  note();
  *out = __libc_memalign(al, n);
  return *out ? 0 : 12;  // ENOMEM
}
}
