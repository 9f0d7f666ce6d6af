// Registry entry: variant `lrt`, schedule Chunked<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_chunked2 {
  using variant = lrt::variants::Lrt;
  using schedule = lrt::Chunked<2>;
  static constexpr const char* name = "lrt";
};
LRT_TOOL_REGISTER(lrt_chunked2);
}  // namespace tool::pairs
