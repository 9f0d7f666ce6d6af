// lrt/backend/nn_checks.hpp: the argument checks of NnBackend<D>'s kernels, written once for
// every device (same conditions, same messages): shapes that must agree, the vocabulary range,
// head-dim parity, attention's shapes and query positions. Each takes the shapes (not the
// views), so it runs on the host whatever the device. A device adds only what its kernels
// alone need (the CUDA attention's largest head dim, a contiguous rinv, ...) and the element
// checks it does while reading (ids and targets on the CPU).
#pragma once

#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"

namespace lrt {
inline namespace v0 {
namespace detail {

// ---- RMSNorm: x, y, gy, gx (N, C), rinv (N) ----

inline void check_rmsnorm_forward(const Shape<2>& x, const Shape<2>& y, const Shape<1>& rinv) {
  check(y == x && rinv[0] == x[0], "rmsnorm", "shapes x ", x, ", y ", y, ", rinv ", rinv, " do not match");
}
inline void check_rmsnorm_backward(const Shape<2>& y, const Shape<1>& rinv, const Shape<2>& gy, const Shape<2>& gx) {
  check(gy == y && gx == y && rinv[0] == y[0], "rmsnorm_backward", "shapes y ", y, ", gy ", gy, ", gx ", gx, ", rinv ",
        rinv, " do not match");
}

// ---- RoPE: x, y (B, T, H, Dh), cos, sin (T, Dh/2) ----

/// Dh must be even: the rotation pairs dim j with dim j + Dh/2.
inline void check_rope_head_dim(const char* op, const Shape<4>& x) {
  check(x[3] % 2 == 0, op, "head dim must be even, got x ", x);
}
inline void check_rope(const Shape<4>& x, const Shape<2>& cos, const Shape<2>& sin, const Shape<4>& y) {
  check_rope_head_dim("rope", x);
  const Shape<2> table{x[1], x[3] / 2};
  check(cos == table && sin == cos && y == x, "rope", "x ", x, " needs tables of shape ", table, ", got ", cos, " and ",
        sin, " (y ", y, ")");
}
/// rinv: (B*T*H), one scale per head vector.
inline void check_rope_rmsnorm_forward(const Shape<4>& x, const Shape<2>& cos, const Shape<2>& sin, const Shape<4>& y,
                                       const Shape<1>& rinv) {
  check_rope_head_dim("rope_rmsnorm", x);
  const Shape<2> table{x[1], x[3] / 2};
  const index_t rows = x[0] * x[1] * x[2];
  check(cos == table && sin == cos && y == x && rinv[0] == rows, "rope_rmsnorm", "x ", x, " needs tables of shape ",
        table, ", y of its shape and rinv (", rows, "), got ", cos, ", ", sin, ", ", y, ", ", rinv);
}
inline void check_rope_rmsnorm_backward(const Shape<4>& y, const Shape<1>& rinv, const Shape<4>& gy,
                                        const Shape<2>& cos, const Shape<2>& sin, const Shape<4>& gx) {
  check_rope_head_dim("rope_rmsnorm_backward", y);
  const Shape<2> table{y[1], y[3] / 2};
  check(cos == table && sin == cos && gy == y && gx == y && rinv[0] == y[0] * y[1] * y[2], "rope_rmsnorm_backward",
        "shapes y ", y, ", gy ", gy, ", gx ", gx, ", rinv ", rinv, ", tables ", cos, " and ", sin, " do not match");
}

// ---- Softmax: x, y, gy, gx (N, C) ----

inline void check_softmax_forward(const Shape<2>& x, const Shape<2>& y) {
  check(y == x, "softmax", "shapes ", x, " and ", y, " differ");
}
inline void check_softmax_backward(const Shape<2>& y, const Shape<2>& gy, const Shape<2>& gx) {
  check(gy == y && gx == y, "softmax_backward", "shapes y ", y, ", gy ", gy, ", gx ", gx, " do not match");
}

// ---- Softcapped cross-entropy: logits, dlogits (N, Vp), targets, loss, lse, g (N), 1 <= V <= Vp ----
// (The targets' values are the device's to check: the CPU reads them, CUDA's kernels skip a
// target out of range and rely on the caller, autodiff/nn.hpp.)

inline void check_softcap_xent_forward(const Shape<2>& logits, const Shape<1>& targets, index_t V, const Shape<1>& loss,
                                       const Shape<1>& lse) {
  check(V >= 1 && V <= logits[1], "cross_entropy", "vocab ", V, " out of range for logits ", logits);
  const index_t N = logits[0];
  check(targets[0] == N && loss[0] == N && lse[0] == N, "cross_entropy", "logits ", logits, " and targets ", targets,
        " disagree on rows (loss ", loss, ", lse ", lse, ")");
}
inline void check_softcap_xent_backward(const Shape<2>& logits, const Shape<1>& targets, index_t V, const Shape<1>& lse,
                                        const Shape<1>& g, const Shape<2>& dlogits) {
  const char* op = "cross_entropy_backward";
  check(dlogits == logits, op, "dlogits ", dlogits, " vs logits ", logits);
  check(V >= 1 && V <= logits[1], op, "vocab ", V, " out of range for logits ", logits);
  const index_t N = logits[0];
  check(targets[0] == N && lse[0] == N && g[0] == N, op, "logits ", logits, ", targets ", targets, ", lse ", lse,
        " and g ", g, " disagree on rows");
}

// ---- Embedding: ids (N), table, gtable (V, C), out, gout (N, C) ----
// (The ids' values are the device's to check.)

inline void check_embedding_forward(const Shape<1>& ids, const Shape<2>& table, const Shape<2>& out) {
  check(out == Shape<2>{ids[0], table[1]}, "embedding", "output ", out, " for ", ids[0], " ids and table ", table);
}
/// n: the number of ids (from their view, or from a device's plan of them).
inline void check_embedding_backward(index_t n, const Shape<2>& gout, const Shape<2>& gtable) {
  check(gout == Shape<2>{n, gtable[1]}, "embedding_backward", "gradient ", gout, " for ", n, " ids and table ", gtable);
}

// ---- Attention: q, out, dout, dq (B, Tq, H, Dh), k, v, dk, dv (B, Tk, Hkv, Dh), qpos (Tq),
//      lse (B, H, Tq) ----

/// The inputs: q, k, v, qpos and window >= 0.
inline void check_attention_shapes(const char* op, const Shape<4>& qs, const Shape<4>& ks, const Shape<4>& vs,
                                   const Shape<1>& ps, index_t window) {
  check(ks == vs, op, "k ", ks, " and v ", vs, " differ in shape");
  check(qs[0] == ks[0], op, "q ", qs, " and k ", ks, ": batch sizes differ");
  check(qs[3] == ks[3], op, "q ", qs, " and k ", ks, ": head dims differ");
  check(ks[2] > 0, op, "k ", ks, " has no heads (Hkv = 0)");
  check(qs[2] % ks[2] == 0, op, "q ", qs, " and k ", ks, ": H % Hkv != 0");
  check(window >= 0, op, "window must be >= 0, got ", window);
  check(ps[0] == qs[1], op, "qpos ", ps, " has ", ps[0], " entries but q ", qs, " has Tq = ", qs[1]);
}
/// Tensor `name` must have the shape of tensor `like`.
template <int R>
void check_same_shape(const char* op, const char* name, const Shape<R>& got, const char* like, const Shape<R>& want) {
  check(got == want, op, name, " ", got, " must have the shape of ", like, " ", want);
}
/// lse: (B, H, Tq) for q (B, Tq, H, Dh).
inline void check_lse_shape(const char* op, const Shape<3>& got, const Shape<4>& qs) {
  const Shape<3> want{qs[0], qs[2], qs[1]};
  check(got == want, op, "lse ", got, " must be (B, H, Tq) = ", want);
}
/// attention_forward's shapes: the inputs, out and lse.
inline void check_attention_forward(const Shape<4>& qs, const Shape<4>& ks, const Shape<4>& vs, const Shape<1>& ps,
                                    index_t window, const Shape<4>& out, const Shape<3>& lse) {
  const char* op = "attention";
  check_attention_shapes(op, qs, ks, vs, ps, window);
  check_same_shape(op, "out", out, "q", qs);
  check_lse_shape(op, lse, qs);
}
/// attention_backward's shapes: the inputs, the forward's out and lse, dout and the gradients.
inline void check_attention_backward(const Shape<4>& qs, const Shape<4>& ks, const Shape<4>& vs, const Shape<1>& ps,
                                     index_t window, const Shape<4>& out, const Shape<3>& lse, const Shape<4>& dout,
                                     const Shape<4>& dq, const Shape<4>& dk, const Shape<4>& dv) {
  const char* op = "attention_backward";
  check_attention_shapes(op, qs, ks, vs, ps, window);
  check_same_shape(op, "out", out, "q", qs);
  check_lse_shape(op, lse, qs);
  check_same_shape(op, "dout", dout, "q", qs);
  check_same_shape(op, "dq", dq, "q", qs);
  check_same_shape(op, "dk", dk, "k", ks);
  check_same_shape(op, "dv", dv, "v", vs);
}
/// Query positions (on the host) must be non-negative, strictly increasing and < Tk.
inline void check_query_positions(const char* op, const std::vector<index_t>& pos, const Shape<4>& ks) {
  const index_t Tk = ks[1];
  for (std::size_t i = 0; i < pos.size(); ++i) {
    check(pos[i] >= 0, op, "qpos[", i, "] = ", pos[i], " is negative");
    if (i > 0)
      check(pos[i] > pos[i - 1], op, "qpos must be strictly increasing: qpos[", i, "] = ", pos[i], " after qpos[",
            i - 1, "] = ", pos[i - 1]);
    check(pos[i] < Tk, op, "qpos[", i, "] = ", pos[i], " is not < Tk = ", Tk, " (k ", ks, ")");
  }
}

}  // namespace detail
}  // namespace v0
}  // namespace lrt
