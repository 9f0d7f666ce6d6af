// Registry entry: variant `lrt`, schedule Interleaved<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_interleaved2 {
  using variant = lrt::variants::Lrt;
  using schedule = lrt::Interleaved<2>;
  static constexpr const char* name = "lrt";
};
LRT_TOOL_REGISTER(lrt_interleaved2);
}  // namespace tool::pairs
