// --variant lrt-release (its natural schedule: interleaved:2)
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt-release", lrt::variants::LrtRelease, lrt::Interleaved<2>);
