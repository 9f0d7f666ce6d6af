// lrt/eval.hpp: CORE, the in-context-learning evaluation of DCLM as nanochat and the LRT release
// compute it: a bundle's tasks (eval/core.hpp), Python's random.Random (eval/py_random.hpp) and a
// model as a scorer (eval/score.hpp). Device-neutral like <lrt/model.hpp>.
#pragma once

#include "eval/core.hpp"
#include "eval/py_random.hpp"
#include "eval/score.hpp"
