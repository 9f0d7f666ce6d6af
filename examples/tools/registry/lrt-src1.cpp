// --variant lrt-src1 (its natural schedule: interleaved:2)
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt-src1", lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>,
              lrt::Interleaved<2>);
