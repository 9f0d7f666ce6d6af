// Registry entry: variant `lrt`, schedule MultiRefine<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_multirefine2 {
  using variant = lrt::variants::Lrt;
  using schedule = lrt::MultiRefine<2>;
  static constexpr const char* name = "lrt";
};
LRT_TOOL_REGISTER(lrt_multirefine2);
}  // namespace tool::pairs
