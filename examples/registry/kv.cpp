// Registry entry: variant `kv`, schedule Interleaved<2> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::KVOnly, lrt::Interleaved<2>> registered_kv{"kv"};
