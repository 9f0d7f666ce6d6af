// lrt/tensor/format.hpp: fmt support. fmt::format("{}", shape) gives "(2, 3)";
// fmt::format("{}", tensor) prints the elements nested by axis, summarising axes longer than 6
// with "..." (first and last 3), numbers with the element format spec ("{:.3f}").
// Host-only: CUDA translation units do not include fmt (nvcc 13 rejects it in C++20 mode).
#pragma once

#include <fmt/format.h>

#include "tensor.hpp"

template <int R>
struct fmt::formatter<lrt::Shape<R>> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const lrt::Shape<R>& s, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(lrt::to_string(s), ctx);
  }
};

namespace lrt {
inline namespace v0 {
namespace detail {
template <class T>
struct TensorFormatter {
  fmt::formatter<T> elem;
  static constexpr lrt::index_t edge = 3, limit = 6;
  constexpr auto parse(fmt::format_parse_context& ctx) { return elem.parse(ctx); }

  template <int R, class D, class Out, class Ctx>
  Out write(const TensorView<const T, R, D>& v, Out out, Ctx& ctx, int depth) const {
    if constexpr (R == 0) {
      ctx.advance_to(out);
      return elem.format(v(), ctx);
    } else {
      *out++ = '[';
      const index_t n = v.shape()[0];
      for (index_t i = 0; i < n; ++i) {
        if (n > limit && i == edge) {
          out = fmt::format_to(out, "...");
          i = n - edge;
          out = R > 1 ? fmt::format_to(out, ",\n{:{}}", "", depth + 1) : fmt::format_to(out, ", ");
        }
        out = write<R - 1, D>(v.select(0, i), out, ctx, depth + 1);
        ctx.advance_to(out);
        if (i + 1 < n) out = R > 1 ? fmt::format_to(out, ",\n{:{}}", "", depth + 1) : fmt::format_to(out, ", ");
      }
      *out++ = ']';
      return out;
    }
  }
};
}  // namespace detail
}  // namespace v0
}  // namespace lrt

template <class T, int R, class D>
struct fmt::formatter<lrt::TensorView<T, R, D>> {
  lrt::detail::TensorFormatter<std::remove_const_t<T>> f;
  constexpr auto parse(fmt::format_parse_context& ctx) { return f.parse(ctx); }
  template <class Ctx>
  auto format(const lrt::TensorView<T, R, D>& v, Ctx& ctx) const {
    static_assert(D::host_accessible,
                  "formatting a device tensor: copy it to the host with lrt::to<lrt::cpu::Device>(t)");
    return f.template write<R, D>(lrt::TensorView<const std::remove_const_t<T>, R, D>(v), ctx.out(), ctx, 0);
  }
};

template <class T, int R, class D>
struct fmt::formatter<lrt::Tensor<T, R, D>> : fmt::formatter<lrt::TensorView<const T, R, D>> {
  template <class Ctx>
  auto format(const lrt::Tensor<T, R, D>& t, Ctx& ctx) const {
    return fmt::formatter<lrt::TensorView<const T, R, D>>::format(t.view(), ctx);
  }
};
