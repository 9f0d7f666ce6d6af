// lrt/optim.hpp: the optimizers and learning-rate schedules of LRT-SPEC §8: AdamW, Muon (Polar
// Express) on the CPU and, through a device table (DeviceOpsOf; optim/cuda.cuh), on a GPU, the LR /
// momentum / weight-decay schedules (optim/lr_schedule.hpp), and format-free state I/O (NamedBuffer).
//
//   lrt::optim::AdamW adam;
//   adam.add_group({"lm_head", 0.004f, 0.8f, 0.95f, 1e-10f, 0.f, {lrt::optim::ParamRef::of(head)}});
//   lrt::optim::Muon muon({.lr = 0.02f});
//   muon.add(lrt::optim::ParamRef::of(w_q));
//   for (std::int64_t it = 0; it < N; ++it) {
//     ... forward, backward ...
//     const float mult = lrt::optim::lr_multiplier(it, N);
//     adam.step(mult);
//     muon.step(mult, lrt::optim::muon_momentum(it),
//               lrt::optim::muon_weight_decay(it, N, lrt::optim::cpu_muon_weight_decay));
//   }
#pragma once

#include "optim/adamw.hpp"
#include "optim/muon.hpp"
#include "optim/param_ref.hpp"
#include "optim/lr_schedule.hpp"
