// A core header that includes a model header: tree.include_layers_rejects expects the report.
#pragma once

#include "../model/high.hpp"
