// --variant lrt --schedule interleaved:4
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt", lrt::variants::Lrt, lrt::Interleaved<4>);
