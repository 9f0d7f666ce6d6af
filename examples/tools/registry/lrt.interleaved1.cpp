// Registry entry: variant `lrt`, schedule Interleaved<1>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_interleaved1 {
  using variant = lrt::variants::Lrt;
  using schedule = lrt::Interleaved<1>;
  static constexpr const char* name = "lrt";
};
LRT_TOOL_REGISTER(lrt_interleaved1);
}  // namespace tool::pairs
