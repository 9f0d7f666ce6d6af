/* lrt.h: lrt's C API. Decoding of one row with a checkpoint written by lrt-train (variants
 * baseline, lrt and lrt-release), through the lean decoder (lrt/decode/lean.hpp): plain C types,
 * token ids in and out (lrt_encode and lrt_token_text convert text with the checkpoint's
 * tokenizer, bytes or BPE), status values instead of exceptions. lrt_open checks the file as
 * every lrt program does (the one loader, lrt/model/checkpoint_file.hpp). The implementation is
 * the single-header library lrt/runtime/c_api.hpp, compiled by one C++ unit; a C program includes
 * this header and links the installed static library: CMake `lrt::c` (find_package(lrt)), or
 * `pkg-config --cflags --libs lrt-c` (which adds the C++ runtime).
 *
 *   lrt_model* m;
 *   if (lrt_open("runs/lrt/model.safetensors", &m) != LRT_OK) { puts(lrt_last_error()); return 1; }
 *   int32_t prompt[16] = {lrt_bos(m)};
 *   size_t n;
 *   lrt_encode(m, "The", 3, prompt + 1, 15, &n);  // bytes or the checkpoint's BPE
 *   lrt_prefill(m, prompt, 1 + n);
 *   int32_t tok;
 *   lrt_sample(m, 0.0f, 0, 1.0f, 0, &tok);  // greedy
 *   lrt_step(m, tok);
 *   lrt_close(m);
 *
 * Every call but lrt_close returns LRT_OK or an error status; lrt_last_error() then says what
 * failed (per thread, until the next failing call). Not thread-safe per model: one model, one
 * thread at a time. */
#ifndef LRT_H
#define LRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Exported from the library even where it is compiled with hidden visibility (lrt::c is). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(default)
#endif

typedef struct lrt_model lrt_model;

typedef enum lrt_status {
  LRT_OK = 0,
  LRT_ERROR_ARGUMENT = 1,    /* a null pointer, a token id outside the vocabulary, an empty prompt, a short buffer */
  LRT_ERROR_FILE = 2,        /* the checkpoint cannot be read, is not an lrt checkpoint, or is damaged */
  LRT_ERROR_UNSUPPORTED = 3, /* a variant this build of the C API does not decode */
  LRT_ERROR_STATE = 4,       /* lrt_step or lrt_sample before lrt_prefill; the context is full */
  LRT_ERROR_INTERNAL = 5     /* anything else (out of memory, ...) */
} lrt_status;

/* Opens a checkpoint (a model.safetensors, or a run's directory: its model.safetensors); *out is
 * the model, or NULL on error. */
lrt_status lrt_open(const char* checkpoint_path, lrt_model** out);
/* The vocabulary size V (logits have V entries) and the BOS id. */
int32_t lrt_vocab_size(const lrt_model* m);
int32_t lrt_bos(const lrt_model* m);
/* The position of the next token (the number of tokens fed since the last prefill). */
int64_t lrt_position(const lrt_model* m);
/* Starts a new context from n >= 1 token ids (exact prefill: token by token). */
lrt_status lrt_prefill(lrt_model* m, const int32_t* tokens, size_t n);
/* The ids of len bytes of text under the checkpoint's tokenizer (its bytes, or the BPE it records),
 * without a BOS: *n is their count, and up to cap of them are written to ids; more than cap is
 * LRT_ERROR_ARGUMENT (*n still says how many: a BPE gives at most len ids). Allocates inside the
 * model (a prompt's work), never in lrt_step. */
lrt_status lrt_encode(lrt_model* m, const char* text, size_t len, int32_t* ids, size_t cap, size_t* n);
/* The bytes token id stands for, as lrt-generate prints it: a byte, a BPE token's bytes or a
 * special's text; none for the byte tokenizer's BOS and for padding ids past the tokenizer. *n is
 * their count; they are written to buf (not NUL-terminated) when they fit in cap, else
 * LRT_ERROR_ARGUMENT. No allocation. */
lrt_status lrt_token_text(const lrt_model* m, int32_t id, char* buf, size_t cap, size_t* n);
/* Feeds one token at lrt_position(). */
lrt_status lrt_step(lrt_model* m, int32_t token);
/* The soft-capped logits (lrt_vocab_size entries) after the last prefill or step; NULL before. */
const float* lrt_logits(const lrt_model* m);
/* Draws the next token from lrt_logits() as lrt-generate does: temperature 0 is greedy; top_k 0
 * keeps all; top_p in (0, 1]; the draw is reproducible per (seed, position). */
lrt_status lrt_sample(const lrt_model* m, float temperature, int32_t top_k, float top_p, uint64_t seed,
                      int32_t* out_token);
/* Frees the model (NULL is fine). */
void lrt_close(lrt_model* m);
/* The message of the last failing call on this thread ("" if none). */
const char* lrt_last_error(void);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* LRT_H */
