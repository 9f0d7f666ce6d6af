// lrt/tokenizer.hpp: the byte-level BPE tokenizer (tokenizer/): tiktoken's split patterns and
// encoding, its rank files, lrt's tokenizer file, and the trainer. Needs only the standard
// library and lrt's core.
//
//   #include <lrt/tokenizer.hpp>
//   lrt::tok::BpeTrainOptions o;
//   o.vocab_size = 4096;                                   // 4095 ranks + <|bos|>
//   lrt::tok::Tokenizer tok = lrt::tok::train_bpe(docs, o);  // docs: std::string_views of text
//   std::vector<lrt::tok::token_t> ids = tok.encode("Hello world");
//   tok.save("tokenizer.lrt");
#pragma once

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/train.hpp"
