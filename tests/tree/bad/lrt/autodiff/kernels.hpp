// An autodiff header that reaches Eigen: tree.include_layers_rejects expects the report.
#pragma once

#include <Eigen/Core>
