// Registry entry: variant `lrt-src1`, schedule Interleaved<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_src1 {
  using variant = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>;
  using schedule = lrt::Interleaved<2>;
  static constexpr const char* name = "lrt-src1";
};
LRT_TOOL_REGISTER(lrt_src1);
}  // namespace tool::pairs
