// lrt/data.hpp: text data for training and evaluation: the byte tokenizer, corpus loading and
// the train/validation split, rows of T+1 tokens and the resumable shuffled loader.
//
//   #include <lrt/data.hpp>
//   auto corpus = lrt::data::load_corpus(path);                  // Brown folder, folder or file
//   auto rows = lrt::data::TokenRows::build(corpus.train, 256);  // rows of 257 tokens
//   lrt::data::Loader loader(rows, 32, /*seed=*/1);
//   auto batch = loader.next();                                  // inputs, targets: [32, 256]
#pragma once

#include "data/corpus.hpp"
#include "data/loader.hpp"
#include "data/text_tokenizer.hpp"
#include "data/tokenizer.hpp"
