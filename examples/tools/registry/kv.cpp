// --variant kv (its natural schedule: interleaved:2)
#include "../registry.hpp"

LRT_TOOL_PAIR("kv", lrt::variants::KVOnly, lrt::Interleaved<2>);
