// --variant lrt (its natural schedule: interleaved:2)
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt", lrt::variants::Lrt, lrt::Interleaved<2>);
