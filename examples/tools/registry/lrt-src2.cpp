// Registry entry: variant `lrt-src2`, schedule Interleaved<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_src2 {
  using variant = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<2>>;
  using schedule = lrt::Interleaved<2>;
  static constexpr const char* name = "lrt-src2";
};
LRT_TOOL_REGISTER(lrt_src2);
}  // namespace tool::pairs
