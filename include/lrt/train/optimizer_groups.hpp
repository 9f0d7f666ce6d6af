// lrt/train/optimizer_groups.hpp: the optimizer split the training options of spec §8
// (options.hpp) give a model, read from its parameter roster (Model::for_each_param_role): Muon for the
// matrices, AdamW groups for the head, the embeddings and the per-layer scalars, with the
// release's learning rates and scalings. The Trainer and the benchmarks build their optimizers here.
#pragma once

#include <array>
#include <cmath>
#include <memory>
#include <vector>

#include "../io/json.hpp"
#include "../model/gpt.hpp"
#include "../optim/adamw.hpp"
#include "../optim/muon.hpp"
#include "../optim/param_ref.hpp"
#include "../optim/lr_schedule.hpp"
#include "options.hpp"

namespace lrt {
inline namespace v0 {

/// The optimizers of one model: AdamW (groups head, embeddings, resid_scalars, x0_scalars and, with
/// gamma, memory_gains) and Muon (every matrix, gate and memory projection of the roster).
struct Optimizers {
  optim::AdamW adamw;
  optim::Muon muon;
  explicit Optimizers(optim::MuonOptions mo) : muon(mo) {}
};

/// The optimizers of make_optimizers, in the order they are built and save their state
/// (Optimizers::adamw's groups, then Muon): the one place that orders them.
enum class OptimizerGroup : int { Head, Embeddings, ResidLambdas, X0Lambdas, MemoryGains, Muon };
inline constexpr int optimizer_group_count = 6;

/// The optimizer that steps a parameter of role r.
constexpr OptimizerGroup optimizer_group(ParamRole r) noexcept {
  switch (r) {
    case ParamRole::Unembedding:
      return OptimizerGroup::Head;
    case ParamRole::Embedding:
    case ParamRole::ValueEmbedding:
      return OptimizerGroup::Embeddings;
    case ParamRole::ResidLambda:
      return OptimizerGroup::ResidLambdas;
    case ParamRole::X0Lambda:
      return OptimizerGroup::X0Lambdas;
    case ParamRole::MemoryGain:
      return OptimizerGroup::MemoryGains;
    case ParamRole::Matrix:
    case ParamRole::Gate:
    case ParamRole::Projection:
      break;
  }
  return OptimizerGroup::Muon;
}

/// The optimizer groups of model m for options o at tokens_per_step tokens per step (spec §8):
/// dls = (d / 768)^-0.5 scales the embedding and head rates; bls = sqrt(B_tok / 2^19) all rates
/// when o.release_batch_scaling (else 1). Betas (0.8, 0.95), eps 1e-10, no AdamW weight decay;
/// x0_lambdas use beta1 0.96.
/// `owned` (data-parallel training: one flag per parameter of the roster, in roster order) keeps
/// only the flagged parameters: each rank then holds optimizer state for what it owns alone.
/// Within a group, parameters keep roster order: one process saves its optimizer state in the
/// order (optimizer_group, roster index).
template <class V, class T, Device D>
std::unique_ptr<Optimizers> make_optimizers(const Model<V, T, D>& m, const TrainOptions& o, index_t tokens_per_step,
                                            const std::vector<char>* owned = nullptr) {
  const ModelConfig& c = m.config();
  const float dls = static_cast<float>(std::pow(static_cast<double>(c.n_embd) / 768.0, -0.5));
  const float bls =
      o.release_batch_scaling ? static_cast<float>(std::sqrt(static_cast<double>(tokens_per_step) / 524288.0)) : 1.f;
  using optim::ParamRef;
  auto opt = std::make_unique<Optimizers>(optim::MuonOptions{o.matrix_lr * bls, 0.95f, 5});
  // AdamW's groups, indexed by OptimizerGroup.
  std::array<optim::AdamWGroup, 5> adamw{{
      {"head", o.unembedding_lr * dls * bls, 0.8f, 0.95f, 1e-10f, 0.f, {}},
      {"embeddings", o.embedding_lr * dls * bls, 0.8f, 0.95f, 1e-10f, 0.f, {}},
      {"resid_scalars", o.resid_lr * bls, 0.8f, 0.95f, 1e-10f, 0.f, {}},
      {"x0_scalars", o.scalar_lr * bls, 0.96f, 0.95f, 1e-10f, 0.f, {}},
      {"memory_gains", o.memory_gain_lr() * bls, 0.8f, 0.95f, 1e-10f, 0.f, {}},
  }};
  std::size_t index = 0;
  m.for_each_param_role([&](auto& p, ParamRole r) {
    const std::size_t i = index++;
    if (owned != nullptr && (i >= owned->size() || (*owned)[i] == 0)) return;
    const OptimizerGroup g = optimizer_group(r);
    if (g == OptimizerGroup::Muon)
      opt->muon.add(ParamRef::of(p));
    else
      adamw[static_cast<std::size_t>(g)].params.push_back(ParamRef::of(p));
  });
  for (auto& g : adamw)
    if (!g.params.empty()) opt->adamw.add_group(std::move(g));
  return opt;
}

}  // namespace v0
}  // namespace lrt
