// --variant lrt-src2 (its natural schedule: interleaved:2)
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt-src2", lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<2>>,
              lrt::Interleaved<2>);
