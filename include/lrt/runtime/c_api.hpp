// lrt/runtime/c_api.hpp: the implementation of lrt's C API (include/lrt.h), as a single-header
// library: every file may include it for the declarations; exactly one C++ translation unit
// defines LRT_C_IMPLEMENTATION before including it, and so compiles the definitions. The CMake
// target lrt::c is that unit and the runtime's (include/lrt/runtime/runtime.cpp) as a static
// library, compiled with portable flags (no -march), and installed with the package; a project may
// instead compile the two units itself:
//
//   // lrt_c.cpp, the one unit of a project that builds the C API itself (beside runtime.cpp):
//   #define LRT_C_IMPLEMENTATION
//   #include <lrt/runtime/c_api.hpp>
//
// A checkpoint is opened by the runtime (lrt::runtime::open_decoding: the one loader's checks,
// then the decoder compiled for the variant it records, from the runtime's table: the variants of
// the build's pairs, at least lrt::LeanVariants); text goes through the tokenizer it records.
// Every lrt::Error and std::exception becomes a status and lrt_last_error(). The file is mapped,
// and the decoder reads its weights where they lie (decode/lean_file.hpp): an open model holds the
// mapping and the decoder's state, no copy of the weights.
#pragma once

#include <lrt.h>

#if defined(LRT_C_IMPLEMENTATION)

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "decoding.hpp"
#include "text.hpp"

namespace lrt::capi_detail {

thread_local std::string g_error;

lrt_status fail(lrt_status s, std::string msg) {
  g_error = std::move(msg);
  return s;
}

}  // namespace lrt::capi_detail

using lrt::capi_detail::fail;

struct lrt_model {
  lrt::runtime::DecodingModel m;      // the checkpoint and its decoder, one row
  lrt::runtime::Text text;            // its tokenizer
  lrt::index_t row = -1;              // the row in use after lrt_prefill; -1: none
  std::vector<lrt::index_t> encoded;  // lrt_encode's ids
  std::vector<lrt::index_t> ids;      // lrt_prefill's tokens, widened
  bool started = false;
};

extern "C" {

lrt_status lrt_open(const char* path, lrt_model** out) {
  if (!out) return fail(LRT_ERROR_ARGUMENT, "lrt_open: out is NULL");
  *out = nullptr;
  if (!path) return fail(LRT_ERROR_ARGUMENT, "lrt_open: checkpoint_path is NULL");
  try {
    auto m = std::make_unique<lrt_model>();
    m->m = lrt::runtime::open_decoding(path, {1, 0});  // a run's --out folder stands for its model.safetensors
    m->text = lrt::runtime::Text(m->m.bpe);
    *out = m.release();
    return LRT_OK;
  } catch (const lrt::runtime::VariantNotBuilt& e) {
    return fail(LRT_ERROR_UNSUPPORTED, std::string("lrt_open: ") + e.what());
  } catch (const std::bad_alloc&) {
    return fail(LRT_ERROR_INTERNAL, "lrt_open: out of memory");
  } catch (const std::exception& e) {
    return fail(LRT_ERROR_FILE, std::string("lrt_open: ") + e.what());
  }
}

int32_t lrt_vocab_size(const lrt_model* m) { return m ? static_cast<int32_t>(m->m.config.vocab_size) : 0; }
int32_t lrt_bos(const lrt_model* m) { return m ? static_cast<int32_t>(m->m.config.bos()) : -1; }
int64_t lrt_position(const lrt_model* m) { return m && m->started ? m->m.decoding->position(m->row) : 0; }

lrt_status lrt_prefill(lrt_model* m, const int32_t* tokens, size_t n) {
  if (!m || !tokens || n == 0) return fail(LRT_ERROR_ARGUMENT, "lrt_prefill: needs a model and n >= 1 tokens");
  try {
    m->ids.assign(tokens, tokens + n);
    m->started = false;
    if (m->row >= 0) lrt::throw_if_error(m->m.decoding->try_leave(m->row));  // a new prompt starts over
    m->row = -1;
    if (const lrt::Status s = m->m.decoding->try_join(m->ids, m->row); !s.ok())
      return fail(s.code() == lrt::StatusCode::state ? LRT_ERROR_STATE : LRT_ERROR_ARGUMENT,
                  std::string("lrt_prefill: ") + s.message());
    m->started = true;
    return LRT_OK;
  } catch (const std::exception& e) {
    return fail(LRT_ERROR_INTERNAL, std::string("lrt_prefill: ") + e.what());
  }
}

lrt_status lrt_step(lrt_model* m, int32_t token) {
  if (!m) return fail(LRT_ERROR_ARGUMENT, "lrt_step: model is NULL");
  if (!m->started) return fail(LRT_ERROR_STATE, "lrt_step: call lrt_prefill first");
  if (token < 0 || token >= lrt_vocab_size(m))
    return fail(LRT_ERROR_ARGUMENT, "lrt_step: token id " + std::to_string(token) + " outside the vocabulary [0, " +
                                        std::to_string(lrt_vocab_size(m)) + ")");
  const lrt::index_t tok = token;
  if (const lrt::Status s = m->m.decoding->try_step({&m->row, 1}, {&tok, 1}); !s.ok())
    return fail(LRT_ERROR_STATE, std::string("lrt_step: ") + s.message());
  return LRT_OK;
}

lrt_status lrt_encode(lrt_model* m, const char* text, size_t len, int32_t* ids, size_t cap, size_t* n) {
  if (!m || (!text && len > 0) || (!ids && cap > 0) || !n)
    return fail(LRT_ERROR_ARGUMENT, "lrt_encode: needs a model, text (or len 0), ids (or cap 0) and n");
  *n = 0;
  try {
    m->encoded.clear();
    m->text.encode(std::string_view(text ? text : "", len), m->encoded);
    *n = m->encoded.size();
    if (*n > cap)
      return fail(LRT_ERROR_ARGUMENT, "lrt_encode: the text has " + std::to_string(*n) + " ids, more than cap " +
                                          std::to_string(cap) + " (*n says how many)");
    for (std::size_t i = 0; i < *n; ++i) ids[i] = static_cast<int32_t>(m->encoded[i]);
    return LRT_OK;
  } catch (const std::bad_alloc&) {
    return fail(LRT_ERROR_INTERNAL, "lrt_encode: out of memory");
  } catch (const std::exception& e) {
    return fail(LRT_ERROR_INTERNAL, std::string("lrt_encode: ") + e.what());
  }
}

lrt_status lrt_token_text(const lrt_model* m, int32_t id, char* buf, size_t cap, size_t* n) {
  if (!m || (!buf && cap > 0) || !n)
    return fail(LRT_ERROR_ARGUMENT, "lrt_token_text: needs a model, buf (or cap 0) and n");
  *n = 0;
  if (id < 0 || id >= lrt_vocab_size(m))
    return fail(LRT_ERROR_ARGUMENT, "lrt_token_text: token id " + std::to_string(id) + " outside the vocabulary [0, " +
                                        std::to_string(lrt_vocab_size(m)) + ")");
  // The bytes of a byte id or a BPE rank, a BPE special's text; the byte BOS and padding ids: none.
  const std::string_view text = m->text.token_text(id);
  *n = text.size();
  if (text.size() > cap)
    return fail(LRT_ERROR_ARGUMENT, "lrt_token_text: token " + std::to_string(id) + " has " +
                                        std::to_string(text.size()) + " bytes, more than cap " + std::to_string(cap));
  if (!text.empty()) std::memcpy(buf, text.data(), text.size());
  return LRT_OK;
}

const float* lrt_logits(const lrt_model* m) { return m && m->started ? m->m.decoding->logits(m->row).data() : nullptr; }

lrt_status lrt_sample(const lrt_model* m, float temperature, int32_t top_k, float top_p, uint64_t seed,
                      int32_t* out_token) {
  if (!m || !out_token) return fail(LRT_ERROR_ARGUMENT, "lrt_sample: model or out_token is NULL");
  if (!m->started) return fail(LRT_ERROR_STATE, "lrt_sample: call lrt_prefill first");
  if (!(temperature >= 0) || top_k < 0 || !(top_p > 0 && top_p <= 1))
    return fail(LRT_ERROR_ARGUMENT, "lrt_sample: needs temperature >= 0, top_k >= 0 and top_p in (0, 1]");
  try {
    *out_token = static_cast<int32_t>(lrt::runtime::sample(
        m->m.decoding->logits(m->row), {.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = seed},
        lrt_position(m)));
    return LRT_OK;
  } catch (const std::exception& e) {
    return fail(LRT_ERROR_INTERNAL, std::string("lrt_sample: ") + e.what());
  }
}

void lrt_close(lrt_model* m) { delete m; }

const char* lrt_last_error(void) { return lrt::capi_detail::g_error.c_str(); }

}  // extern "C"

#endif  // LRT_C_IMPLEMENTATION
