// A header that spells two tensor names: tree.tensor_names_reports expects both reported, and
// nothing for the names in comments (attn.c_q here) or for field and option names.
#pragma once

inline const char* query_weight() { return "attn.c_q"; }  // "mlp.c_fc" in a comment is fine
inline const char* head_weight() {
  /* "lm_head.weight" in a block comment is fine too */
  return "transformer.h.0.mlp.c_fc.weight";
}
inline const char* fine() { return "c_q is a field; use_resid_lambdas is an option; weights"; }
