// lrt/tensor/linalg.hpp: matrix products. gemm() writes C = alpha*A*B + beta*C for rank-2
// views; gemm_batched() does the same over a leading batch axis (any batch strides, 0 to
// broadcast one operand) or over lists of matrices; matmul() returns a new tensor.
// Transposed operands are just transposed views (a.t()): a view whose rows or columns are
// unit-stride goes to the backend as is; any other layout is copied once. Backends provide
// GemmBackend<D>.
//   A: (M, K)  B: (K, N)  C: (M, N)      batched: (Bt, M, K) (Bt, K, N) (Bt, M, N)
#pragma once

#include <span>
#include <vector>

#include "assign.hpp"

namespace lrt {
inline namespace v0 {

/// One operand as BLAS sees it: a row-major matrix at p with leading dimension ld, read
/// transposed when trans is set. Batched operands add a batch stride.
template <class T>
struct MatRef {
  const T* p;
  index_t ld;
  bool trans;
};

/// GEMM kernels of a device: C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b < batch,
/// A[b] = a.p + b * stride_a (and likewise), C row-major with leading dimension ldc.
template <class D>
struct GemmBackend {
  static_assert(detail::always_false<D>,
                "no GEMM for this device: include its backend header (<lrt/cuda.hpp> for "
                "lrt::cuda::Device)");
};

namespace detail {

/// How a rank-2 view can be handed to BLAS: row-major, transposed, or not at all.
template <class T, class D>
bool blas_layout(const TensorView<T, 2, D>& v, index_t& ld, bool& trans) {
  const index_t r = v.shape()[0], c = v.shape()[1], s0 = v.strides()[0], s1 = v.strides()[1];
  if (r == 0 || c == 0) {  // nothing is read: any layout will do
    ld = std::max<index_t>(c, 1);
    trans = false;
    return true;
  }
  if ((c <= 1 || s1 == 1) && (r <= 1 || s0 >= std::max<index_t>(c, 1))) {
    ld = r <= 1 ? std::max<index_t>(c, 1) : s0;
    trans = false;
    return true;
  }
  if ((r <= 1 || s0 == 1) && (c <= 1 || s1 >= std::max<index_t>(r, 1))) {
    ld = c <= 1 ? std::max<index_t>(r, 1) : s1;
    trans = true;
    return true;
  }
  return false;
}

template <class V>
auto as_view(V&& x) {
  return x.view();
}

}  // namespace detail

/// C = alpha * A * B + beta * C. A (M, K), B (K, N), C (M, N); any of them may be a transposed
/// or otherwise strided view. With beta == 0, C's old contents are ignored (even NaN).
template <class CV, class AV, class BV>
void gemm(CV&& c_, const AV& a_, const BV& b_, typename std::remove_cvref_t<CV>::value_type alpha = 1,
          typename std::remove_cvref_t<CV>::value_type beta = 0) {
  const auto c = detail::as_view(std::forward<CV>(c_));
  const auto a = detail::as_view(a_);
  const auto b = detail::as_view(b_);
  using T = typename decltype(c)::value_type;
  using D = typename decltype(c)::device_type;
  static_assert(decltype(a)::rank == 2 && decltype(b)::rank == 2 && decltype(c)::rank == 2,
                "gemm multiplies rank-2 views: use gemm_batched for rank 3");
  static_assert(
      std::is_same_v<typename decltype(a)::value_type, T> && std::is_same_v<typename decltype(b)::value_type, T>,
      "gemm operands must have the same element type");
  static_assert(
      std::is_same_v<typename decltype(a)::device_type, D> && std::is_same_v<typename decltype(b)::device_type, D>,
      "gemm operands must live on the same device");
  const index_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
  check(b.shape()[0] == K, "gemm", "inner dims differ: ", a.shape(), " vs ", b.shape());
  check(c.shape()[0] == M && c.shape()[1] == N, "gemm", "output shape ", c.shape(), " does not match ", a.shape(),
        " x ", b.shape());
  if (M == 0 || N == 0) return;
  index_t lda, ldb, ldc;
  bool ta, tb, tc;
  if (!detail::blas_layout(a, lda, ta)) return gemm(c, contiguous(a), b, alpha, beta);
  if (!detail::blas_layout(b, ldb, tb)) return gemm(c, a, contiguous(b), alpha, beta);
  if (!detail::blas_layout(c, ldc, tc)) {
    Tensor<T, 2, D> tmp(c.shape(), uninitialized);
    if (beta != T(0)) tmp = c;
    gemm(tmp, a, b, alpha, beta);
    assign(c, tmp.view());
    return;
  }
  if (tc) {  // C^T = B^T A^T: a column-major C is a row-major C^T
    GemmBackend<D>::run(1, N, M, K, alpha, MatRef<T>{b.data(), ldb, !tb}, 0, MatRef<T>{a.data(), lda, !ta}, 0, beta,
                        c.data(), ldc, 0);
    return;
  }
  GemmBackend<D>::run(1, M, N, K, alpha, MatRef<T>{a.data(), lda, ta}, 0, MatRef<T>{b.data(), ldb, tb}, 0, beta,
                      c.data(), ldc, 0);
}

/// Strided-batched GEMM: C[i] = alpha * A[i] * B[i] + beta * C[i] over the leading axis.
/// A batch stride of 0 (a broadcast view) shares one matrix across the batch.
template <class CV, class AV, class BV>
void gemm_batched(CV&& c_, const AV& a_, const BV& b_, typename std::remove_cvref_t<CV>::value_type alpha = 1,
                  typename std::remove_cvref_t<CV>::value_type beta = 0) {
  const auto c = detail::as_view(std::forward<CV>(c_));
  const auto a = detail::as_view(a_);
  const auto b = detail::as_view(b_);
  using T = typename decltype(c)::value_type;
  using D = typename decltype(c)::device_type;
  static_assert(decltype(a)::rank == 3 && decltype(b)::rank == 3 && decltype(c)::rank == 3,
                "gemm_batched multiplies rank-3 views (batch, rows, cols)");
  static_assert(
      std::is_same_v<typename decltype(a)::value_type, T> && std::is_same_v<typename decltype(b)::value_type, T>,
      "gemm operands must have the same element type");
  static_assert(
      std::is_same_v<typename decltype(a)::device_type, D> && std::is_same_v<typename decltype(b)::device_type, D>,
      "gemm operands must live on the same device");
  const index_t Bt = c.shape()[0], M = a.shape()[1], K = a.shape()[2], N = b.shape()[2];
  check(b.shape()[1] == K, "gemm_batched", "inner dims differ: ", a.shape(), " vs ", b.shape());
  check(a.shape()[0] == Bt && b.shape()[0] == Bt && c.shape()[1] == M && c.shape()[2] == N, "gemm_batched",
        "shapes do not match: ", c.shape(), " = ", a.shape(), " x ", b.shape());
  if (Bt == 0 || M == 0 || N == 0) return;
  index_t lda, ldb, ldc;
  bool ta, tb, tc;
  const auto a0 = a.select(0, 0);
  const auto b0 = b.select(0, 0);
  const auto c0 = c.select(0, 0);
  if (!detail::blas_layout(a0, lda, ta)) return gemm_batched(c, contiguous(a), b, alpha, beta);
  if (!detail::blas_layout(b0, ldb, tb)) return gemm_batched(c, a, contiguous(b), alpha, beta);
  if (!detail::blas_layout(c0, ldc, tc) || tc || (Bt > 1 && c.strides()[0] == 0)) {
    Tensor<T, 3, D> tmp(c.shape(), uninitialized);
    if (beta != T(0)) tmp = c;
    gemm_batched(tmp, a, b, alpha, beta);
    assign(c, tmp.view());
    return;
  }
  GemmBackend<D>::run(Bt, M, N, K, alpha, MatRef<T>{a.data(), lda, ta}, a.strides()[0], MatRef<T>{b.data(), ldb, tb},
                      b.strides()[0], beta, c.data(), ldc, c.strides()[0]);
}

/// Batched GEMM over lists of matrices (any shapes per entry must agree within the call).
template <class T, class D>
void gemm_batched(std::span<const TensorView<T, 2, D>> c, std::span<const TensorView<const T, 2, D>> a,
                  std::span<const TensorView<const T, 2, D>> b, T alpha = 1, T beta = 0) {
  check(a.size() == c.size() && b.size() == c.size(), "gemm_batched", "list lengths differ: C ", c.size(), ", A ",
        a.size(), ", B ", b.size());
  for (std::size_t i = 0; i < c.size(); ++i) gemm(c[i], a[i], b[i], alpha, beta);
}

/// A * B as a new tensor. Rank 2 x 2 -> 2; 3 x 3 -> batched 3; 3 x 2 -> 3 (B shared).
template <class AV, class BV>
auto matmul(const AV& a_, const BV& b_) {
  const auto a = detail::as_view(a_);
  const auto b = detail::as_view(b_);
  using T = typename decltype(a)::value_type;
  using D = typename decltype(a)::device_type;
  constexpr int Ra = decltype(a)::rank, Rb = decltype(b)::rank;
  static_assert((Ra == 2 || Ra == 3) && Rb <= Ra && Rb >= 2,
                "matmul supports (M,K)x(K,N), (B,M,K)x(B,K,N) and (B,M,K)x(K,N)");
  check(a.shape()[Ra - 1] == b.shape()[Rb - 2], "matmul", "inner dims differ: ", a.shape(), " vs ", b.shape());
  if constexpr (Ra == 2) {
    Tensor<T, 2, D> c(Shape<2>{a.shape()[0], b.shape()[1]}, uninitialized);
    gemm(c, a, b);
    return c;
  } else {
    Tensor<T, 3, D> c(Shape<3>{a.shape()[0], a.shape()[1], b.shape()[Rb - 1]}, uninitialized);
    if constexpr (Rb == 2) {
      if (a.is_contiguous()) {  // fold the batch into rows: one large GEMM
        gemm(c.template reshape<2>(Shape<2>{a.shape()[0] * a.shape()[1], b.shape()[1]}),
             a.template reshape<2>(Shape<2>{a.shape()[0] * a.shape()[1], a.shape()[2]}), b);
      } else {
        const TensorView<const T, 3, D> bb(b.data(), Shape<3>{a.shape()[0], b.shape()[0], b.shape()[1]},
                                           Strides<3>{0, b.strides()[0], b.strides()[1]});
        gemm_batched(c, a, bb);
      }
    } else {
      check(a.shape()[0] == b.shape()[0], "matmul", "batch sizes differ: ", a.shape(), " vs ", b.shape());
      gemm_batched(c, a, b);
    }
    return c;
  }
}

}  // namespace v0
}  // namespace lrt
