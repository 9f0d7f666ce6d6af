// Registry entry: variant `lrt`, schedule Interleaved<4>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_interleaved4 {
  using variant = lrt::variants::Lrt;
  using schedule = lrt::Interleaved<4>;
  static constexpr const char* name = "lrt";
};
LRT_TOOL_REGISTER(lrt_interleaved4);
}  // namespace tool::pairs
