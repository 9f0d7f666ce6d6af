// include/lrt/runtime/compiled_pairs.cpp: the instantiations of lrt's templates that the runtime
// library (lrt::runtime) holds for the programs that link it and include the templates too:
// Model<V>, Trainer<V> (the variant's natural schedule) and Decoder<V>, float on the CPU, for the
// variants of LRT_COMPILED_VARIANTS (lrt/model/variant.hpp). Such a program is compiled with
// LRT_COMPILED_PAIRS defined (lrt::runtime's usage requirement, and lrt-runtime.pc's flags), where
// the headers declare them extern: its compiler parses them but generates none of their code (the
// README's quick start: about 40 % less compile time). Exported from the library (LRT_API), while
// everything they call stays the library's own (cmake/runtime_library.cmake).
#if !defined(LRT_COMPILED_PAIRS)  // the extern declarations give them default visibility (LRT_API)
#define LRT_COMPILED_PAIRS 1
#endif
#include "../decode/decoder.hpp"
#include "../model/gpt.hpp"
#include "../train/trainer.hpp"

namespace lrt {
inline namespace v0 {
#define LRT_DETAIL_COMPILE_PAIR(V)                \
  template class Model<V>;                        \
  template class Trainer<V, default_schedule<V>>; \
  template class Decoder<V>;
LRT_COMPILED_VARIANTS(LRT_DETAIL_COMPILE_PAIR)
#undef LRT_DETAIL_COMPILE_PAIR
}  // namespace v0
}  // namespace lrt
