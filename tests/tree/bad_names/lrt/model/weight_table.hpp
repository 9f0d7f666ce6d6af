// The table itself may spell names: tree.tensor_names_reports expects nothing from this file.
#pragma once

inline const char* table_name() { return "lm_head.weight"; }
