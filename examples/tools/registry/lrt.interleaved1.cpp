// --variant lrt --schedule interleaved:1
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt", lrt::variants::Lrt, lrt::Interleaved<1>);
