// Training end to end on generated text: overfitting one batch, checkpoint round trips (float32
// bit-exact, bfloat16 as round-to-nearest-even), resume bit for bit, damaged checkpoints, the
// crash-safe checkpoint layout (step directories, latest, keep-last-N, the one-level layout, falling
// back from a damaged latest, errors that leave the previous checkpoint intact), bpb.
#include <lrt/tokenizer.hpp>
#include <lrt/train/time_plan.hpp>
#include <lrt/train/trainer.hpp>

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <random>

#include "../test_util.hpp"

namespace test_trainer {

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace fs = std::filesystem;

namespace {
lrt::ModelConfig micro_config() {
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 16, c.vocab_size = 257;
  c.window_pattern = "SL";
  c.ve_layout = lrt::VELayout::Alternating;
  return c;
}
std::string generated_text(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran.\n", "far "};
  std::string s;
  while (s.size() < n) s += words[rng() % 10];
  return s;
}
fs::path temp_dir(const char* name) {
  const fs::path p = fs::temp_directory_path() / (std::string("lrt_test_train_") + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}
/// Bitwise equality of all parameters.
bool same_weights(const lrt::GPT<float>& a, const lrt::GPT<float>& b) {
  std::vector<const float*> pa, pb;
  std::vector<index_t> n;
  a.for_each_param([&](auto& p) { pa.push_back(p.value().data()), n.push_back(p.value().numel()); });
  b.for_each_param([&](auto& p) { pb.push_back(p.value().data()); });
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (std::memcmp(pa[i], pb[i], sizeof(float) * static_cast<std::size_t>(n[i])) != 0) return false;
  return true;
}
}  // namespace

TEST_CASE("train: overfitting one batch drives the loss near zero") {
  lrt::ModelConfig c = micro_config();
  lrt::GPT<float> m(c, 3);
  // One row (BOS + 16 bytes): with several rows the first byte after BOS would be unpredictable.
  const auto one = lrt::data::TokenRows::build({{"d", generated_text(64, 1).substr(0, 16)}}, 16);
  REQUIRE(one.rows() == 1);
  lrt::TrainOptions o;
  o.batch_rows = 2;
  o.micro_rows = 1;  // two micro-batches per step: accumulation
  o.steps = 150;
  lrt::Trainer tr(m, one, o);
  double first = 0, last = 0;
  while (!tr.done()) {
    const auto s = tr.train_step();
    if (s.step == 0) first = s.loss;
    last = s.loss;
    REQUIRE(s.optimizer_seconds > 0);  // the AdamW + Muon part of the step's time
    REQUIRE(s.optimizer_seconds < s.seconds);
  }
  CHECK(first == doctest::Approx(std::log(257.0)).epsilon(0.01));  // uniform at init (lm_head ~ 0)
  CHECK(last < 0.01);
}

TEST_CASE("checkpoint: float32 round trip is bit-exact, bfloat16 rounds to nearest even, errors name file and tensor") {
  const fs::path dir = temp_dir("ckpt");
  lrt::GPT<float> m(micro_config(), 5);
  std::mt19937 rng(2);
  m.for_each_param([&](auto& p) { lrt_test::fill_random(p.value(), rng, -1, 1); });
  const std::string f32 = (dir / "m.safetensors").string(), b16 = (dir / "b.safetensors").string();
  lrt::save_model(m, f32, 42);
  const lrt::GPT<float> back = lrt::load_model(f32);
  CHECK(same_weights(m, back));
  CHECK(lrt::release_config_json(back.config()) == lrt::release_config_json(m.config()));
  const auto r = lrt::st::Reader::open(f32);
  CHECK(lrt::read_step(r) == 42);
  CHECK(r.meta("tokenizer") == std::optional<std::string>("bytes257"));
  // __metadata__ values are strings; model_config parses as the release's GPTConfig.
  const auto mc = lrt::json::parse(*r.meta("model_config"));
  CHECK(mc.at("n_embd").as_int() == 32);
  CHECK(mc.at("ve_every_layer").as_bool() == false);

  lrt::save_model(m, b16, 1, {}, lrt::st::DType::BF16);
  const lrt::GPT<float> hb = lrt::load_model(b16);
  const float* w = m.wte().value().data();
  const float* h = hb.wte().value().data();
  for (index_t i = 0; i < m.wte().value().numel(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &w[i], 4);
    const std::uint32_t rne = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;  // written out here
    float expect;
    std::memcpy(&expect, &rne, 4);
    REQUIRE(h[i] == expect);
  }

  // Damaged files: each gives an lrt::Error naming the file (and the tensor where there is one).
  const std::string bytes = lrt::read_file(f32, "test");
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string p = (dir / name).string();
    lrt::write_file_atomic(p, content);
    return p;
  };
  const std::string trunc = write("trunc.safetensors", bytes.substr(0, bytes.size() - 7));
  CHECK_THROWS_WITH_AS(lrt::load_model(trunc), doctest::Contains("trunc.safetensors"), lrt::Error);
  // A file without one tensor, one with an unknown extra tensor, one with a wrong shape.
  auto rewrite = [&](const std::string& name, auto&& edit) {
    lrt::st::Writer wr;
    const auto rd = lrt::st::Reader::open(f32);
    for (const auto& [k, v] : rd.metadata()) wr.set_metadata(k, v);
    for (const std::string& n : rd.names()) {
      auto shape = rd.shape(n);
      auto data = rd.read_f32(n, shape);
      if (edit(n, shape, data)) wr.add_f32(n, data, shape);
    }
    if (name == "missing.safetensors") wr.add_f32("dummy.keep", std::vector<float>{}, {0});
    const std::string p = (dir / name).string();
    wr.write(p);
    return p;
  };
  const std::string missing = rewrite(
      "missing.safetensors", [](const std::string& n, auto&, auto&) { return n != "transformer.h.1.attn.c_k.weight"; });
  CHECK_THROWS_WITH_AS(lrt::load_model(missing), doctest::Contains("transformer.h.1.attn.c_k.weight"), lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::load_model(missing), doctest::Contains("dummy.keep"), lrt::Error);  // unknown
  const std::string wrong = rewrite("wrong.safetensors", [](const std::string& n, auto& shape, auto& data) {
    if (n == "lm_head.weight") shape = {static_cast<std::int64_t>(data.size() / 16), 16};
    return true;
  });
  CHECK_THROWS_WITH_AS(lrt::load_model(wrong), doctest::Contains("lm_head.weight"), lrt::Error);
  // Metadata without a config, or with an invalid one.
  lrt::st::Writer bare;
  bare.add_f32("x", std::vector<float>{1.f}, {1});
  const std::string noconf = (dir / "noconf.safetensors").string();
  bare.write(noconf);
  CHECK_THROWS_WITH_AS(lrt::load_model(noconf), doctest::Contains("model_config"), lrt::Error);
  bare.set_metadata("model_config",
                    R"({"sequence_len": 16, "vocab_size": 257, "n_layer": 2, "n_head": 3, "n_embd": 32})");
  bare.write(noconf);
  CHECK_THROWS_WITH_AS(lrt::load_model(noconf), doctest::Contains("multiple of n_head"), lrt::Error);
  bare.set_metadata("model_config", R"({"sequence_len": 16, "vocab_size": 257)");
  bare.write(noconf);
  CHECK_THROWS_WITH_AS(lrt::load_model(noconf), doctest::Contains("noconf.safetensors"), lrt::Error);
  fs::remove_all(dir);
}

TEST_CASE("train: N steps == K steps, save, resume, N - K steps (bit for bit)") {
  const fs::path dir = temp_dir("resume");
  const std::vector<lrt::data::Document> docs{{"d", generated_text(3000, 7)}};
  const auto rows = lrt::data::TokenRows::build(docs, 16);
  lrt::TrainOptions o;
  o.batch_rows = 8, o.micro_rows = 4, o.steps = 7, o.seed = 9;
  lrt::GPT<float> a(micro_config(), 1);
  {
    lrt::Trainer t(a, rows, o);
    while (!t.done()) t.train_step();
  }
  lrt::GPT<float> b(micro_config(), 1);
  {
    lrt::Trainer t(b, rows, o);
    for (int i = 0; i < 3; ++i) t.train_step();
    t.save(dir.string());
  }
  CHECK_FALSE(same_weights(a, b));
  lrt::GPT<float> c(micro_config(), 99);  // another init: everything must come from the checkpoint
  {
    lrt::TrainOptions o2 = o;
    o2.steps = 0;  // the horizon comes from the checkpoint too
    lrt::Trainer t(c, rows, o2);
    t.resume(dir.string());
    CHECK(t.step() == 3);
    CHECK(t.horizon() == 7);
    while (!t.done()) t.train_step();
  }
  CHECK(same_weights(a, c));
  // A model/optimizer pair from different steps is refused (a directory of the one-level layout).
  const fs::path flat = dir / "flat";
  fs::create_directories(flat);
  fs::copy_file(dir / "checkpoints" / "step-000003" / "optim.safetensors", flat / "optim.safetensors");
  {
    lrt::Trainer t(b, rows, o);
    t.train_step();
    lrt::save_model(b, (flat / "model.safetensors").string(), 4);
  }
  lrt::Trainer t(c, rows, o);
  CHECK_THROWS_WITH_AS(t.resume(flat.string()), doctest::Contains("interrupted save"), lrt::Error);
  fs::remove_all(dir);
}

namespace {
std::string slurp(const fs::path& p) { return lrt::read_file(p.string(), "test"); }
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}
ino_t inode(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}
/// The fixture of the checkpoint-layout tests: rows of generated text and the options of a 9-step run.
struct Run {
  std::vector<lrt::data::Document> docs{{"d", generated_text(3000, 11)}};
  lrt::data::TokenRows rows = lrt::data::TokenRows::build(docs, 16);
  lrt::TrainOptions o = [] {
    lrt::TrainOptions x;
    x.batch_rows = 4, x.micro_rows = 4, x.steps = 9, x.seed = 5;
    return x;
  }();
  /// The weights after `steps` uninterrupted steps.
  lrt::GPT<float> reference(std::int64_t steps) {
    lrt::GPT<float> m(micro_config(), 1);
    lrt::Trainer t(m, rows, o);
    while (t.step() < steps) t.train_step();
    return m;
  }
  /// Resumes `from` into a freshly initialised model (another seed: everything must come from the
  /// checkpoint), trains to the horizon and returns the model.
  lrt::GPT<float> finish(const std::string& from, std::int64_t expect_step, std::string* note = nullptr) {
    lrt::GPT<float> m(micro_config(), 77);
    lrt::TrainOptions o2 = o;
    o2.steps = 0;
    lrt::Trainer t(m, rows, o2);
    const lrt::CheckpointLocation at = t.resume(from);
    CHECK(at.step == expect_step);
    CHECK(t.step() == expect_step);
    if (note)
      *note = at.note;
    else
      CHECK(at.note == "");
    while (!t.done()) t.train_step();
    return m;
  }
};
}  // namespace

TEST_CASE("train with BPE: the checkpoint records the tokenizer, resume refuses another, bpb counts its bytes") {
  const fs::path dir = temp_dir("bpe");
  const std::string text = generated_text(6000, 5);
  const std::vector<std::string_view> views{text};
  lrt::tok::BpeTrainOptions bo;
  bo.vocab_size = 270;
  const lrt::data::TextTokenizer tok(lrt::tok::train_bpe(views, bo));
  bo.pattern = "gpt2";
  const lrt::data::TextTokenizer other(lrt::tok::train_bpe(views, bo));
  REQUIRE(!(tok == other));
  REQUIRE(tok.vocab_size() == 270);  // the same size, so that only the resume can tell them apart
  REQUIRE(other.vocab_size() == 270);
  lrt::ModelConfig c = micro_config();
  c.vocab_size = tok.vocab_size(), c.bos_id = tok.bos();
  const std::vector<lrt::data::Document> docs{{"d", text}};
  const auto rows = lrt::data::TokenRows::build(docs, 16, tok);
  lrt::TrainOptions o;
  o.batch_rows = 4, o.steps = 3, o.seed = 2;
  lrt::GPT<float> m(c, 1);
  lrt::Trainer t(m, rows, o, tok);
  t.train_step();
  t.save(dir.string());
  const auto r = lrt::st::Reader::open((dir / "model.safetensors").string());
  CHECK(r.meta("tokenizer") == std::optional<std::string>(tok.name()));
  CHECK(lrt::data::TextTokenizer::from_metadata(r) == tok);
  {  // the same tokenizer resumes; another one, or bytes, is refused with both named
    lrt::GPT<float> m2(c, 7);
    lrt::Trainer t2(m2, rows, o, tok);
    CHECK_NOTHROW(t2.resume(dir.string()));
    lrt::Trainer t3(m2, rows, o, other);
    CHECK_THROWS_WITH_AS(t3.resume(dir.string()), doctest::Contains("was trained with tokenizer BPE"), lrt::Error);
  }
  // A tokenizer whose BOS is not the model's is refused at construction.
  lrt::ModelConfig c2 = c;
  c2.bos_id = 0;
  lrt::GPT<float> m3(c2, 1);
  CHECK_THROWS_WITH_AS(lrt::Trainer(m3, rows, o, tok), doctest::Contains("BOS"), lrt::Error);
  // evaluate() divides by the tokenizer's bytes: every validation row's targets stand for their text's bytes.
  const auto val = lrt::data::validation_batches(rows, 2, 64);
  const lrt::BpbResult b = t.evaluate(val);
  std::size_t bytes = 0;
  for (index_t i = 0; i < 4; ++i) bytes += rows.target_bytes(i);
  CHECK(b.bytes == static_cast<index_t>(bytes));
  CHECK(b.bytes > b.tokens);  // BPE ids stand for more than one byte each (1.8 here)
}

TEST_CASE("checkpoints: step directories, latest, the links for eval, keep the last N, bit-for-bit resume from each") {
  const fs::path dir = temp_dir("layout");
  Run run;
  lrt::GPT<float> m(micro_config(), 1);
  lrt::Trainer t(m, run.rows, run.o);
  CHECK(t.keep_checkpoints() == 3);
  CHECK_THROWS_AS(t.set_keep_checkpoints(0), lrt::Error);
  std::vector<std::string> returned;
  for (int i = 0; i < 6; ++i) {
    t.train_step();
    returned.push_back(t.save(dir.string(), {{"log.csv", "rows up to step " + std::to_string(t.step()) + "\n"}}));
  }
  CHECK(returned.back() == (dir / "checkpoints" / "step-000006").string());
  CHECK(listing(dir) == std::vector<std::string>{"checkpoints", "latest", "model.safetensors", "optim.safetensors"});
  CHECK(listing(dir / "checkpoints") == std::vector<std::string>{"step-000004", "step-000005", "step-000006"});
  CHECK(listing(dir / "checkpoints" / "step-000005") ==
        std::vector<std::string>{"log.csv", "model.safetensors", "optim.safetensors"});
  CHECK(slurp(dir / "checkpoints" / "step-000005" / "log.csv") == "rows up to step 5\n");
  CHECK(slurp(dir / "latest") == "checkpoints/step-000006\n");
  // DIR/model.safetensors is the latest model (a hard link to it), for lrt-eval and lrt-generate.
  const fs::path last = dir / "checkpoints" / "step-000006";
  CHECK(inode(dir / "model.safetensors") == inode(last / "model.safetensors"));
  CHECK(inode(dir / "optim.safetensors") == inode(last / "optim.safetensors"));
  CHECK(lrt::read_step(lrt::st::Reader::open((dir / "model.safetensors").string())) == 6);
  const lrt::CheckpointLocation found = lrt::find_checkpoint(dir.string());
  CHECK(found.dir == last.string());
  CHECK(found.step == 6);
  CHECK(found.note == "");
  // Each kept checkpoint continues bit for bit: from the run directory (latest) and from a step directory.
  const lrt::GPT<float> ref = run.reference(9);
  CHECK(same_weights(ref, run.finish(dir.string(), 6)));
  CHECK(same_weights(ref, run.finish((dir / "checkpoints" / "step-000004").string(), 4)));
  // Saving the same step again replaces its directory (nothing temporary left behind).
  t.save(dir.string());
  CHECK(listing(last) == std::vector<std::string>{"model.safetensors", "optim.safetensors"});
  CHECK(listing(dir / "checkpoints") == std::vector<std::string>{"step-000004", "step-000005", "step-000006"});
  // keep_checkpoints(1): only the newest survives the next save.
  t.set_keep_checkpoints(1);
  t.train_step();
  t.save(dir.string());
  CHECK(listing(dir / "checkpoints") == std::vector<std::string>{"step-000007"});
  CHECK(same_weights(ref, run.finish(dir.string(), 7)));
  fs::remove_all(dir);
}

TEST_CASE("checkpoints: resuming from an earlier step into the same directory drops the later steps") {
  const fs::path dir = temp_dir("rewind");
  Run run;
  {
    lrt::GPT<float> m(micro_config(), 1);
    lrt::Trainer t(m, run.rows, run.o);
    for (int i = 0; i < 6; ++i) t.train_step(), t.save(dir.string());
  }
  lrt::GPT<float> m(micro_config(), 2);
  lrt::Trainer t(m, run.rows, run.o);
  CHECK(t.resume((dir / "checkpoints" / "step-000004").string()).step == 4);
  t.train_step();
  t.save(dir.string());
  CHECK(listing(dir / "checkpoints") == std::vector<std::string>{"step-000004", "step-000005"});
  CHECK(slurp(dir / "latest") == "checkpoints/step-000005\n");
  CHECK(same_weights(run.reference(9), run.finish(dir.string(), 5)));
  fs::remove_all(dir);
}

TEST_CASE("checkpoints: a run written in the one-level layout resumes, and its next save moves to step directories") {
  const fs::path dir = temp_dir("flat"), scratch = temp_dir("flat_scratch");
  Run run;
  {
    lrt::GPT<float> m(micro_config(), 1);
    lrt::Trainer t(m, run.rows, run.o);
    for (int i = 0; i < 3; ++i) t.train_step();
    t.save(scratch.string());
  }
  // The layout of earlier versions: DIR/model.safetensors + DIR/optim.safetensors (the same files).
  for (const char* f : {"model.safetensors", "optim.safetensors"})
    fs::copy_file(scratch / "checkpoints" / "step-000003" / f, dir / f);
  CHECK(lrt::find_checkpoint(dir.string()).dir == dir.string());
  const lrt::GPT<float> ref = run.reference(9);
  CHECK(same_weights(ref, run.finish(dir.string(), 3)));
  {
    lrt::GPT<float> m(micro_config(), 2);
    lrt::Trainer t(m, run.rows, run.o);
    t.resume(dir.string());
    t.train_step();
    t.save(dir.string());
  }
  CHECK(listing(dir) == std::vector<std::string>{"checkpoints", "latest", "model.safetensors", "optim.safetensors"});
  CHECK(lrt::find_checkpoint(dir.string()).dir == (dir / "checkpoints" / "step-000004").string());
  CHECK(same_weights(ref, run.finish(dir.string(), 4)));
  fs::remove_all(dir);
  fs::remove_all(scratch);
}

TEST_CASE("checkpoints: a damaged or missing latest falls back to the newest complete step directory") {
  const fs::path dir = temp_dir("fallback");
  Run run;
  {
    lrt::GPT<float> m(micro_config(), 1);
    lrt::Trainer t(m, run.rows, run.o);
    for (int i = 0; i < 5; ++i) t.train_step(), t.save(dir.string());
  }
  const lrt::GPT<float> ref = run.reference(9);
  const fs::path ck = dir / "checkpoints";
  std::string note;
  // latest names a directory that is not there.
  lrt::write_file_atomic((dir / "latest").string(), "checkpoints/step-000042\n");
  CHECK(same_weights(ref, run.finish(dir.string(), 5, &note)));
  CHECK(note.find("step-000042") != std::string::npos);
  CHECK(note.find("newest complete checkpoint") != std::string::npos);
  // latest is empty, or missing (a kill between the directory's rename and the first latest).
  lrt::write_file_atomic((dir / "latest").string(), "");
  CHECK(lrt::find_checkpoint(dir.string()).step == 5);
  CHECK(lrt::find_checkpoint(dir.string()).note.find("is empty") != std::string::npos);
  fs::remove(dir / "latest");
  CHECK(lrt::find_checkpoint(dir.string()).step == 5);
  // The newest step directory is damaged: a truncated model, then a pair from two steps.
  lrt::write_file_atomic((dir / "latest").string(), "checkpoints/step-000005\n");
  const std::string good = slurp(ck / "step-000005" / "model.safetensors");
  lrt::write_file_atomic((ck / "step-000005" / "model.safetensors").string(), good.substr(0, good.size() / 2));
  CHECK(same_weights(ref, run.finish(dir.string(), 4, &note)));
  CHECK(note.find("step-000005") != std::string::npos);
  fs::copy_file(ck / "step-000003" / "model.safetensors", ck / "step-000005" / "model.safetensors",
                fs::copy_options::overwrite_existing);
  CHECK(lrt::find_checkpoint(dir.string()).step == 4);
  CHECK(lrt::find_checkpoint(dir.string()).note.find("interrupted save") != std::string::npos);
  // An explicitly named damaged directory is an error, not a silent fallback.
  CHECK_THROWS_WITH_AS(lrt::find_checkpoint((ck / "step-000005").string()), doctest::Contains("interrupted save"),
                       lrt::Error);
  // Nothing complete at all: the error says what was tried.
  fs::remove_all(ck);
  fs::remove(dir / "model.safetensors");
  CHECK_THROWS_WITH_AS(lrt::find_checkpoint(dir.string()), doctest::Contains("no complete checkpoint"), lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::find_checkpoint((dir / "nowhere").string()), doctest::Contains("no such checkpoint"),
                       lrt::Error);
  fs::remove_all(dir);
}

TEST_CASE(
    "checkpoints: a save that cannot be written (file size limit, EFBIG) is a clear error and keeps the previous one") {
  const fs::path dir = temp_dir("efbig");
  Run run;
  lrt::GPT<float> m(micro_config(), 1);
  lrt::Trainer t(m, run.rows, run.o);
  for (int i = 0; i < 3; ++i) t.train_step();
  t.save(dir.string());
  const std::string before = slurp(dir / "checkpoints" / "step-000003" / "model.safetensors");
  t.train_step();
  // As `ulimit -f` with SIGXFSZ ignored: writes beyond the limit fail with EFBIG.
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string message;
  try {
    t.save(dir.string());
  } catch (const lrt::Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  INFO(message);
  CHECK(message.find("[save] '" + dir.string() + "': the checkpoint of step 4 was not saved") == 0);
  CHECK(message.find("optim.safetensors': cannot write: " + std::string(std::strerror(EFBIG))) != std::string::npos);
  CHECK(message.find("latest' still names checkpoints/step-000003, which is unchanged") != std::string::npos);
  CHECK(listing(dir / "checkpoints") == std::vector<std::string>{"step-000003"});  // the temporary is gone
  CHECK(slurp(dir / "checkpoints" / "step-000003" / "model.safetensors") == before);
  CHECK(slurp(dir / "model.safetensors") == before);
  CHECK(same_weights(run.reference(9), run.finish(dir.string(), 3)));
  // With room again, the same trainer saves step 4.
  t.save(dir.string());
  CHECK(lrt::find_checkpoint(dir.string()).step == 4);
  fs::remove_all(dir);
}

TEST_CASE("eval: bits per byte = nats / (ln 2 * bytes), BOS targets count zero bytes") {
  lrt::GPT<float> m(micro_config(), 4);  // lm_head ~ 0 at init: every byte costs ~ln(257) nats
  const std::vector<lrt::data::Document> docs{{"d", generated_text(2000, 3)}};
  const auto rows = lrt::data::TokenRows::build(docs, 16);
  const auto batches = lrt::data::validation_batches(rows, 4, 1000);
  const lrt::BpbResult r = lrt::evaluate_bpb(m, batches);
  index_t targets = 0, bos = 0;
  for (const auto& b : batches)
    for (index_t i = 0; i < b.targets.numel(); ++i) ++targets, bos += b.targets.data()[i] == 256;
  CHECK(r.tokens == targets - bos);
  CHECK(r.bytes == r.tokens);
  CHECK(r.bpb() == doctest::Approx(std::log(257.0) / std::numbers::ln2).epsilon(0.002));
}

// --- lrt-train --time: the planner, with made-up costs -------------------------------------------

TEST_CASE("time plan: a short budget trains most of the time; evaluations shrink in size, then in number") {
  // The issue's case: tiny at 0.906 s/step, 60 s, 11 default evaluations of 65,536 tokens costing
  // 53 s in all, and an LRT's sequential score at the end.
  lrt::TimePlanCosts c;
  c.budget = 60, c.elapsed = 4, c.step = 0.906, c.reserve = 1;
  c.eval_per_token = 53.0 / 11 / 65536, c.final_per_token = 2 * c.eval_per_token;
  c.eval_tokens = 65536, c.min_eval_tokens = 4096;
  const lrt::TimePlan p = lrt::plan_time_budget(c);
  CHECK(p.left == doctest::Approx(55));
  CHECK(p.steps >= 50);                     // the old plan gave 1
  CHECK(p.train_seconds >= 0.85 * p.left);  // most of the time trains
  CHECK(p.eval_seconds + p.final_seconds <= 0.1 * p.left + 1e-9);
  CHECK(p.eval_tokens < 65536);
  CHECK(p.eval_tokens >= 4096);
  CHECK(p.evaluations >= 2);
  CHECK(p.evaluations == (p.steps + p.eval_every - 1) / p.eval_every);
  CHECK(p.warning.find("give --time") != std::string::npos);  // under 100 steps: a warning with the numbers
  CHECK(p.warning.find(std::to_string(p.steps) + " steps at 0.906 s/step") != std::string::npos);
}

TEST_CASE("time plan: a long budget keeps the default evaluations and warns of nothing") {
  lrt::TimePlanCosts c;
  c.budget = 3600, c.elapsed = 5, c.step = 0.9, c.eval_per_token = 53.0 / 11 / 65536;
  const lrt::TimePlan p = lrt::plan_time_budget(c);
  CHECK(p.eval_tokens == 65536);
  CHECK(p.eval_every == (p.steps + 9) / 10);  // as lrt-train's default, N/10 (rounded up)
  CHECK(p.evaluations >= 10);
  CHECK(p.evaluations <= 11);
  CHECK(p.warning.empty());
  CHECK(p.train_seconds + p.eval_seconds <= p.left);
  // Nothing idle but rounding: a step, and the 11th evaluation the plan paid for when N/10 divides N.
  CHECK(p.train_seconds + p.eval_seconds > p.left - c.step - 65536 * c.eval_per_token);
}

TEST_CASE("time plan: what the user set is kept and paid for; a tiny budget still gives one step and a warning") {
  lrt::TimePlanCosts c;
  c.budget = 100, c.step = 0.5, c.eval_per_token = 1e-4, c.eval_tokens = 20000, c.eval_tokens_fixed = true,
  c.eval_every = 10;  // each evaluation costs 2 s, four steps' worth
  lrt::TimePlan p = lrt::plan_time_budget(c);
  CHECK(p.eval_tokens == 20000);
  CHECK(p.eval_every == 10);
  CHECK(p.train_seconds + p.eval_seconds <= p.left + 1e-9);
  CHECK(p.steps == 140);  // 140 steps (70 s) and 14 evaluations (28 s) fit in 100 s; 141 and 15 (100.5 s) do not
  CHECK(p.evaluations == 14);

  c = {};
  c.budget = 3, c.elapsed = 2.5, c.step = 2, c.eval_per_token = 1e-3;
  p = lrt::plan_time_budget(c);
  CHECK(p.steps == 1);
  CHECK(p.evaluations == 1);
  CHECK(p.eval_tokens == c.min_eval_tokens);
  CHECK(!p.warning.empty());
}

TEST_CASE("time plan: over many made-up costs the parts never exceed the time left") {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    lrt::TimePlanCosts c;
    const auto u = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
    c.budget = 10 + 5000 * u(), c.elapsed = c.budget * 0.2 * u(), c.step = 0.01 + 3 * u();
    c.eval_per_token = 1e-6 + 1e-3 * u(), c.final_per_token = u() < 0.5 ? 0 : 1e-3 * u();
    c.eval_tokens = 1 + static_cast<std::int64_t>(100000 * u()), c.min_eval_tokens = 4096;
    c.eval_every = u() < 0.5 ? 0 : 1 + static_cast<std::int64_t>(50 * u());
    c.eval_tokens_fixed = u() < 0.3;
    CAPTURE(c.budget);
    CAPTURE(c.elapsed);
    CAPTURE(c.step);
    CAPTURE(c.eval_per_token);
    CAPTURE(c.eval_tokens);
    CAPTURE(c.eval_every);
    const lrt::TimePlan p = lrt::plan_time_budget(c);
    REQUIRE(p.steps >= 1);
    REQUIRE(p.eval_tokens >= 1);
    REQUIRE(p.eval_tokens <= c.eval_tokens);
    if (c.eval_tokens_fixed || c.eval_every > 0) REQUIRE(p.eval_tokens == c.eval_tokens);
    REQUIRE(p.evaluations == static_cast<int>((p.steps + p.eval_every - 1) / p.eval_every));
    if (p.steps > 1) REQUIRE(p.train_seconds + p.eval_seconds + p.final_seconds <= p.left * (1 + 1e-12));
    if (c.eval_every == 0 && p.steps > 1 && p.evaluations > 1)  // the default's evaluations stay within their share
      REQUIRE(p.eval_seconds + p.final_seconds <= c.eval_share * p.left * (1 + 1e-12));
  }
  CHECK_THROWS_AS(lrt::plan_time_budget(lrt::TimePlanCosts{.budget = 10, .step = NAN}), lrt::Error);
  CHECK_THROWS_AS(lrt::plan_time_budget(lrt::TimePlanCosts{.budget = 10, .step = 0}), lrt::Error);
}

}  // namespace test_trainer
