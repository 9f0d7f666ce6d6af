// lrt/train.hpp: training and evaluation: Trainer<V, Sched, T, D> (accumulation, optimizer
// groups, LR schedules, checkpoints and resume), the optimizer groups of the parameter roster,
// and validation bits per byte in parallel and sequential mode. Device-neutral like <lrt/model.hpp>.
#pragma once

#include "train/eval.hpp"
#include "train/optimizer_groups.hpp"
#include "train/trainer.hpp"
