// --variant lrt-release --schedule multirefine:2:
// what a release checkpoint trained with use_multi_refine, multi_refine_num_passes 2 evaluates with.
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt-release", lrt::variants::LrtRelease, lrt::MultiRefine<2>);
