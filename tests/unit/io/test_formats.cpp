// lrt/io: strict JSON, bf16 rounding, safetensors round trips, atomic writes, and a generated
// corpus of damaged safetensors files that must fail with lrt::Error and nothing else.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <lrt/io.hpp>

namespace test_formats {

namespace fs = std::filesystem;
namespace json = lrt::json;
namespace st = lrt::st;

namespace {

// The message of the lrt::Error f throws, or "<no error>"; any other exception fails the test.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const lrt::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not an lrt::Error: " << e.what());
  } catch (...) {
    FAIL("not an lrt::Error (unknown exception)");
  }
  return "<no error>";
}

// A fresh directory under the system temporary directory, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("lrt_test_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // Names in the directory (to spot leftover temporaries).
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// A safetensors file from a header text and a data section (header not padded).
std::string make_file(const std::string& header, const std::string& data = "") {
  const std::uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

std::string u64_bytes(std::uint64_t n) { return std::string(reinterpret_cast<const char*>(&n), 8); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

TEST_CASE("json: parse values, kinds and member order") {
  const json::Value v = json::parse(R"( {"b": [1, -2, 3.5, true, false, null, "x"], "a": {}, "c": [], "d": -0.25e2} )");
  REQUIRE(v.is_object());
  REQUIRE(v.members().size() == 4);
  CHECK(v.members()[0].first == "b");  // insertion order, not sorted
  CHECK(v.members()[1].first == "a");
  const auto& b = v.at("b").items();
  REQUIRE(b.size() == 7);
  CHECK(b[0].is_integer());
  CHECK(b[0].as_int() == 1);
  CHECK(b[1].as_int() == -2);
  CHECK(!b[2].is_integer());
  CHECK(b[2].as_number() == 3.5);
  CHECK(b[3].as_bool());
  CHECK(!b[4].as_bool());
  CHECK(b[5].is_null());
  CHECK(b[6].as_string() == "x");
  CHECK(v.at("a").is_object());
  CHECK(v.at("a").members().empty());
  CHECK(v.at("c").items().empty());
  CHECK(v.at("d").as_number() == -25.0);
  CHECK(v.at("d").as_int() == -25);  // integral double: as_int accepts it
  CHECK(v.find("zz") == nullptr);
  CHECK(b[0].find("a") == nullptr);  // not an object
  CHECK(json::parse("\t\r\n 7 \n").as_int() == 7);
}

TEST_CASE("json: dump is compact and round-trips") {
  json::Value v = json::Value::object();
  v["name"] = "lrt";
  v["n"] = 3;
  v["pi"] = 3.141592653589793;
  v["tenth"] = 0.1;
  v["ok"] = true;
  v["none"] = nullptr;
  json::Value arr;
  arr.push_back(1);
  arr.push_back(json::Value::array());
  arr.push_back(json::Value::object());
  arr.push_back(-1e300);
  v["arr"] = arr;
  v["n"] = 4;  // operator[] on an existing key replaces in place
  const std::string text = v.dump();
  CHECK(text == R"({"name":"lrt","n":4,"pi":3.141592653589793,"tenth":0.1,"ok":true,"none":null,)"
                R"("arr":[1,[],{},-1e+300]})");
  CHECK(json::parse(text) == v);
  CHECK(json::parse(text).dump() == text);

  // Random doubles (all bit patterns of finite values) read back bit-exactly.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    double d = std::bit_cast<double>(rng());
    if (!std::isfinite(d)) continue;
    const double back = json::parse(json::Value(d).dump()).as_number();
    CHECK(std::bit_cast<std::uint64_t>(back) == std::bit_cast<std::uint64_t>(d));
  }
  CHECK(json::Value(5e-324).dump() == "5e-324");
  CHECK(json::parse("5e-324").as_number() == 5e-324);
}

TEST_CASE("json: integers keep int64 exactness") {
  const auto max = std::numeric_limits<std::int64_t>::max();
  const auto min = std::numeric_limits<std::int64_t>::min();
  CHECK(json::parse("9223372036854775807").as_int() == max);
  CHECK(json::parse("-9223372036854775808").as_int() == min);
  CHECK(json::parse("9007199254740993").as_int() == 9007199254740993LL);  // 2^53 + 1
  CHECK(json::Value(max).dump() == "9223372036854775807");
  CHECK(json::Value(min).dump() == "-9223372036854775808");
  CHECK(json::Value(9007199254740993LL).dump() == "9007199254740993");
  CHECK(json::Value(std::uint64_t{42}).as_int() == 42);
  CHECK(json::Value(std::uint64_t{42}).is_integer());
  CHECK(json::parse("9007199254740993") != json::parse("9007199254740992"));

  // Beyond int64: a double, and as_int refuses it.
  const json::Value big = json::parse("9223372036854775808");
  CHECK(big.is_number());
  CHECK(!big.is_integer());
  CHECK(big.as_number() == 9223372036854775808.0);
  CHECK(error_of([&] { (void)big.as_int(); }).find("not an integer in int64 range") != std::string::npos);
  const json::Value umax(std::numeric_limits<std::uint64_t>::max());
  CHECK(!umax.is_integer());
  CHECK(umax.dump() == "18446744073709551616");  // to_chars: exact digits in fixed form
  CHECK(json::parse(umax.dump()).as_number() == 18446744073709551616.0);
  CHECK(error_of([] { (void)json::parse("1.5").as_int(); }).find("1.5") != std::string::npos);
  CHECK(json::parse("1e3").as_int() == 1000);
  CHECK(!json::parse("1e3").is_integer());
  CHECK(json::parse("-9223372036854775808.0").as_int() == min);
}

TEST_CASE("json: huge and tiny numbers") {
  CHECK(error_of([] { json::parse("1e400"); }).find("number out of range at byte 0") != std::string::npos);
  CHECK(error_of([] { json::parse("[-123.4e999]"); }).find("number out of range at byte 1") != std::string::npos);
  CHECK(json::parse("1e-400").as_number() == 0.0);
  CHECK(std::signbit(json::parse("-1e-400").as_number()));
  CHECK(json::parse("0.00000000000000000001e-390").as_number() == 0.0);
  CHECK(json::parse("0e999999999999999999999").as_number() == 0.0);
  CHECK(json::parse("123456789012345678901234567890").as_number() == 1.2345678901234568e29);
}

TEST_CASE("json: string escapes and UTF-8") {
  CHECK(json::parse(R"("\"\\\/\b\f\n\r\t")").as_string() == "\"\\/\b\f\n\r\t");
  CHECK(json::parse(R"("\u0041\u00e9\u20AC")").as_string() == "A\xC3\xA9\xE2\x82\xAC");
  CHECK(json::parse(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");  // U+1F600
  CHECK(json::parse(R"("\uDBFF\uDFFF")").as_string() == "\xF4\x8F\xBF\xBF");  // U+10FFFF
  CHECK(json::parse(R"("\u0000")").as_string() == std::string(1, '\0'));
  CHECK(json::parse("\"raw \xC3\xA9 \xF0\x9F\x98\x80 \x7F\"").as_string() == "raw \xC3\xA9 \xF0\x9F\x98\x80 \x7F");

  const std::string s = std::string("q\"b\\n\nt\t\x01\x1f\x7f\xC3\xA9") + '\0';
  const std::string dumped = json::Value(s).dump();
  CHECK(dumped == "\"q\\\"b\\\\n\\nt\\t\\u0001\\u001f\x7f\xC3\xA9\\u0000\"");
  CHECK(json::parse(dumped).as_string() == s);
  // Keys are escaped too.
  json::Value o;
  o["a\"b"] = 1;
  CHECK(o.dump() == R"({"a\"b":1})");
}

TEST_CASE("json: every rejection names the reason and the byte") {
  struct Bad {
    std::string text, phrase;
  };
  const std::vector<Bad> cases = {
      {"", "unexpected end of input at byte 0"},
      {"   ", "unexpected end of input at byte 3"},
      {"[1,]", "unexpected character at byte 3"},
      {"[1 2]", "expected ',' or ']' at byte 3"},
      {"[1", "unterminated array"},
      {"[", "unexpected end of input"},
      {"{", "unterminated object"},
      {"{\"a\":", "unexpected end of input"},
      {"{\"a\":1,}", "expected a string key at byte 7"},
      {"{\"a\" 1}", "expected ':' at byte 5"},
      {"{a:1}", "expected a string key at byte 1"},
      {"{\"a\":1 \"b\":2}", "expected ',' or '}'"},
      {"{\"a\":1,\"b\":2,\"a\":3}", "duplicate key 'a' at byte 13"},
      {"01", "leading zero in number at byte 0"},
      {"-01", "leading zero"},
      {"-", "invalid number"},
      {"1.", "expected a digit after '.'"},
      {".5", "unexpected character"},
      {"1e", "expected a digit in exponent"},
      {"1e+", "expected a digit in exponent"},
      {"+1", "unexpected character"},
      {"0x10", "unexpected trailing characters at byte 1"},
      {"NaN", "unexpected character"},
      {"Infinity", "unexpected character"},
      {"-Infinity", "invalid number"},
      {"tru", "invalid literal"},
      {"nul", "invalid literal"},
      {"True", "unexpected character"},
      {"'a'", "unexpected character"},
      {"\"abc", "unterminated string at byte 0"},
      {"\"a\x01\"", "control character in string at byte 2"},
      {"\"a\nb\"", "control character in string"},
      {"\"\\x\"", "invalid escape at byte 1"},
      {"\"\\", "unterminated string"},
      {"\"\\u12\" ", "invalid \\u escape at byte 5"},
      {"\"\\u12", "truncated \\u escape"},
      {"\"\\u12G4\"", "invalid \\u escape at byte 5"},
      {"\"\\ud83d\"", "high surrogate without a low one at byte 1"},
      {"\"\\ud83dx\"", "high surrogate without a low one"},
      {"\"\\ud83d\\u0041\"", "high surrogate without a low one"},
      {"\"\\ude00\"", "lone low surrogate"},
      {"\"\xFF\"", "invalid UTF-8 in string at byte 1"},
      {"\"\xC3\"", "invalid UTF-8"},              // truncated sequence
      {"\"\xC0\xAF\"", "invalid UTF-8"},          // overlong
      {"\"\xE0\x80\xAF\"", "invalid UTF-8"},      // overlong
      {"\"\xED\xA0\x80\"", "invalid UTF-8"},      // encoded surrogate
      {"\"\xF4\x90\x80\x80\"", "invalid UTF-8"},  // > U+10FFFF
      {"\"\x80\"", "invalid UTF-8"},              // lone continuation byte
      {"[1] x", "unexpected trailing characters at byte 4"},
      {"{} {}", "unexpected trailing characters"},
      {"1 2", "unexpected trailing characters"},
      {std::string("1\0", 2), "unexpected trailing characters"},
      {"\xEF\xBB\xBF{}", "unexpected character at byte 0"},  // no BOM
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const std::string msg = error_of([&] { json::parse(c.text, "cfg.json"); });
    CHECK(msg.rfind("[json] cfg.json: ", 0) == 0);
    CHECK(msg.find(c.phrase) != std::string::npos);
    CHECK(msg.find(" at byte ") != std::string::npos);
  }
}

TEST_CASE("json: nesting is limited to 128 levels") {
  auto nested = [](int depth, char open, char close) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += open == '{' ? "{\"k\":" : "[";
    s += "0";
    for (int i = 0; i < depth; ++i) s += close;
    return s;
  };
  CHECK_NOTHROW(json::parse(nested(128, '[', ']')));
  CHECK_NOTHROW(json::parse(nested(128, '{', '}')));
  CHECK(error_of([&] { json::parse(nested(129, '[', ']')); }).find("nesting deeper than 128") != std::string::npos);
  CHECK(error_of([&] { json::parse(nested(129, '{', '}')); }).find("nesting deeper than 128") != std::string::npos);
  // Far deeper input fails fast instead of overflowing the stack.
  CHECK(error_of([] { json::parse(std::string(1000000, '[')); }).find("at byte 128") != std::string::npos);
}

TEST_CASE("json: accessors name expected and actual kinds") {
  const json::Value n = 3;
  CHECK(error_of([&] { (void)n.as_string(); }) == "[json] expected string, got number");
  CHECK(error_of([&] { (void)n.items(); }) == "[json] expected array, got number");
  CHECK(error_of([&] { (void)n.members(); }) == "[json] expected object, got number");
  CHECK(error_of([&] { (void)json::Value("s").as_bool(); }) == "[json] expected bool, got string");
  CHECK(error_of([&] { (void)json::Value().as_number(); }) == "[json] expected number, got null");
  CHECK(error_of([&] { (void)json::Value(true).as_int(); }) == "[json] expected number, got bool");
  const json::Value o = json::parse(R"({"x": 1})");
  CHECK(error_of([&] { (void)o.at("y"); }) == "[json] missing key 'y'");
  CHECK(error_of([&] { (void)n.at("y"); }) == "[json] expected object, got number");
  json::Value arr = json::Value::array();
  CHECK(error_of([&] { arr["k"] = 1; }) == "[json] expected object, got array");
  json::Value obj = json::Value::object();
  CHECK(error_of([&] { obj.push_back(1); }) == "[json] expected array, got object");
  arr.items().push_back(2);
  CHECK(arr.items().size() == 1);
  CHECK(error_of([] { (void)json::Value(std::nan("")).dump(); }) == "[json] cannot write a non-finite number");
  CHECK(error_of([] {
          json::Value v;
          v["a"].push_back(INFINITY);
          (void)v.dump();
        }) == "[json] cannot write a non-finite number");
  CHECK(json::Value(std::string_view("sv")).as_string() == "sv");
  CHECK(json::Value(2.5f).as_number() == 2.5);
  CHECK(json::Value(short{-3}).as_int() == -3);
}

// ---------------------------------------------------------------------------------------------
// bf16 / f16
// ---------------------------------------------------------------------------------------------

TEST_CASE("bf16: round to nearest even, NaN, infinities") {
  CHECK(st::f32_to_bf16(1.0f) == 0x3F80);
  CHECK(st::f32_to_bf16(-2.0f) == 0xC000);
  CHECK(st::f32_to_bf16(0.0f) == 0x0000);
  CHECK(st::f32_to_bf16(-0.0f) == 0x8000);
  // 1 + 2^-8 lies halfway between 0x3F80 (1) and 0x3F81 (1 + 2^-7): ties go to the even 0x3F80.
  CHECK(st::f32_to_bf16(1.00390625f) == 0x3F80);
  // 1 + 3 * 2^-8 lies halfway between 0x3F81 and 0x3F82: the even one is 0x3F82.
  CHECK(st::f32_to_bf16(1.01171875f) == 0x3F82);
  CHECK(st::f32_to_bf16(std::bit_cast<float>(0x3F808001u)) == 0x3F81);  // just above the tie
  CHECK(st::f32_to_bf16(std::bit_cast<float>(0x3F807FFFu)) == 0x3F80);  // just below
  CHECK(st::f32_to_bf16(-1.01171875f) == 0xBF82);
  CHECK(st::bf16_to_f32(0x3F82) == 1.015625f);
  CHECK(st::bf16_to_f32(0x3F80) == 1.0f);

  CHECK(st::f32_to_bf16(INFINITY) == 0x7F80);
  CHECK(st::f32_to_bf16(-INFINITY) == 0xFF80);
  CHECK(st::f32_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds past the max
  CHECK(std::isinf(st::bf16_to_f32(0x7F80)));
  // NaNs whose payload sits only in the low 16 bits must not truncate to infinity.
  CHECK(st::f32_to_bf16(std::bit_cast<float>(0x7F800001u)) == 0x7FC0);
  CHECK(st::f32_to_bf16(std::bit_cast<float>(0xFF800001u)) == 0xFFC0);
  CHECK(std::isnan(st::bf16_to_f32(st::f32_to_bf16(std::nanf("")))));
  CHECK(std::isnan(st::bf16_to_f32(st::f32_to_bf16(std::bit_cast<float>(0x7FFFFFFFu)))));

  // Every bf16 is a float and converts back to itself.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = st::bf16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      CHECK(std::isnan(st::bf16_to_f32(st::f32_to_bf16(f))));
    } else if (st::f32_to_bf16(f) != h) {
      FAIL("bf16 " << h << " does not round-trip");
    }
  }
  // Against a reference in double arithmetic: the nearest bf16, ties to the even pattern.
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (!std::isfinite(f) || std::fabs(f) >= 3.3e38f) continue;
    const std::uint32_t lo = bits(f) & 0xFFFF0000u;
    const double a = std::bit_cast<float>(lo), b = std::bit_cast<float>(lo + 0x10000u);
    const double da = std::fabs(f - a), db = std::fabs(b - f);
    const std::uint32_t want = (da < db || (da == db && !((lo >> 16) & 1))) ? lo : lo + 0x10000u;
    if (st::f32_to_bf16(f) != (want >> 16)) FAIL("bf16 rounding of bits " << bits(f));
  }
}

TEST_CASE("f16 -> f32 conversion") {
  CHECK(st::f16_to_f32(0x3C00) == 1.0f);
  CHECK(st::f16_to_f32(0xC000) == -2.0f);
  CHECK(st::f16_to_f32(0x3555) == 0.333251953125f);
  CHECK(st::f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(st::f16_to_f32(0x0001) == std::ldexp(1.0f, -24));         // smallest subnormal
  CHECK(st::f16_to_f32(0x03FF) == 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  CHECK(st::f16_to_f32(0x0400) == std::ldexp(1.0f, -14));         // smallest normal
  CHECK(std::signbit(st::f16_to_f32(0x8000)));
  CHECK(st::f16_to_f32(0x7C00) == INFINITY);
  CHECK(st::f16_to_f32(0xFC00) == -INFINITY);
  CHECK(std::isnan(st::f16_to_f32(0x7E00)));
  CHECK(std::isnan(st::f16_to_f32(0x7C01)));
}

// ---------------------------------------------------------------------------------------------
// safetensors: round trips
// ---------------------------------------------------------------------------------------------

TEST_CASE("safetensors: F32 and BF16 round trips are bit-exact; metadata; header layout") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> a(6 * 5), b(7);
  for (float& x : a) x = normal(rng);
  a[0] = -0.0f;
  a[1] = std::numeric_limits<float>::denorm_min();
  a[2] = INFINITY;
  a[3] = std::bit_cast<float>(0x7FC01234u);  // NaN with a payload
  a[4] = 1.00390625f;
  for (float& x : b) x = normal(rng) * 100;
  const std::vector<double> c = {1.0 / 3, -1e300, 5e-324, 0.0};
  const std::vector<std::int64_t> d = {std::numeric_limits<std::int64_t>::min(), -1, 0,
                                       std::numeric_limits<std::int64_t>::max(), 42, 7};

  st::Writer w;
  w.set_metadata("format", "pt");
  w.set_metadata("note", "quotes \" and \\ and \xC3\xA9");
  w.add_f32("layer.0.w", a, {6, 5});
  w.add_f32("layer.0.b", a, {30}, st::DType::BF16);
  w.add_f32("odd", b, {7});
  w.add_f64("doubles", c, {2, 2});
  w.add_i64("ints", d, {3, 1, 2});
  w.add_f32("empty", std::span<const float>(), {0, 4});
  const float scalar = 2.5f;
  w.add_f32("scalar", std::span<const float>(&scalar, 1), {});
  w.set_metadata("format", "lrt");  // replaces, keeps its position
  const std::string file = w.serialize();

  // The layout, checked from the bytes: N is a multiple of 8, the padding is spaces, the
  // offsets tile the data section in the order the tensors were added.
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  CHECK(n % 8 == 0);
  const std::string header = file.substr(8, n);
  const std::string trimmed = header.substr(0, header.find_last_not_of(' ') + 1);
  CHECK(header.size() - trimmed.size() < 8);
  CHECK(trimmed.back() == '}');
  const json::Value h = json::parse(header);
  REQUIRE(h.members().size() == 8);
  CHECK(h.members()[0].first == "__metadata__");
  CHECK(h.at("__metadata__").dump() == R"({"format":"lrt","note":"quotes \" and \\ and )"
                                       "\xC3\xA9\"}");
  const std::vector<std::string> order = {"layer.0.w", "layer.0.b", "odd", "doubles", "ints", "empty", "scalar"};
  const std::vector<std::int64_t> sizes = {120, 60, 28, 32, 48, 0, 4};
  std::int64_t at = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    CAPTURE(order[i]);
    const json::Value& e = h.members()[i + 1].second;
    CHECK(h.members()[i + 1].first == order[i]);
    CHECK(e.members().size() == 3);
    const auto& off = e.at("data_offsets").items();
    CHECK(off[0].as_int() == at);
    CHECK(off[1].as_int() == at + sizes[i]);
    at += sizes[i];
  }
  CHECK(file.size() == 8 + n + static_cast<std::uint64_t>(at));
  CHECK(h.at("layer.0.b").at("dtype").as_string() == "BF16");
  CHECK(h.at("ints").at("shape").dump() == "[3,1,2]");
  CHECK(h.at("scalar").at("shape").dump() == "[]");

  const st::Reader r = st::Reader::from_bytes(file, "mem");
  CHECK(r.label() == "mem");
  CHECK(r.names() == order);
  CHECK(r.metadata().size() == 2);
  CHECK(r.metadata()[0].first == "format");
  CHECK(r.meta("format") == "lrt");
  CHECK(r.meta("note") == "quotes \" and \\ and \xC3\xA9");
  CHECK(!r.meta("missing"));
  CHECK(r.contains("odd"));
  CHECK(!r.contains("od"));
  CHECK(r.dtype("layer.0.b") == st::DType::BF16);
  CHECK(r.shape("ints") == std::vector<std::int64_t>{3, 1, 2});
  CHECK(r.raw("odd").size() == 28);

  const std::vector<float> a32 = r.read_f32("layer.0.w", {6, 5});
  const std::vector<float> a16 = r.read_f32("layer.0.b", {30});
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(bits(a32[i]) == bits(a[i]));
    CHECK(bits(a16[i]) == bits(st::bf16_to_f32(st::f32_to_bf16(a[i]))));
  }
  std::vector<float> bout(7);
  r.read_f32("odd", bout, {7});
  for (std::size_t i = 0; i < b.size(); ++i) CHECK(bits(bout[i]) == bits(b[i]));
  CHECK(r.read_f64("doubles", {2, 2}) == c);
  CHECK(r.read_i64("ints", {3, 1, 2}) == d);
  CHECK(r.read_f32("empty", {0, 4}).empty());
  CHECK(r.read_f32("scalar", {}) == std::vector<float>{2.5f});
  // Widening reads.
  const std::vector<double> b64 = r.read_f64("odd", {7});
  for (std::size_t i = 0; i < b.size(); ++i) CHECK(b64[i] == static_cast<double>(b[i]));
  CHECK(r.read_f64("layer.0.b", {30})[4] == 1.0);
  const std::vector<float> c32 = r.read_f32("doubles", {2, 2});
  CHECK(c32[0] == static_cast<float>(1.0 / 3));
  CHECK(c32[1] == -INFINITY);

  // An empty file is valid too.
  const std::string none = st::Writer().serialize();
  CHECK(none.size() == 16);
  CHECK(st::Reader::from_bytes(none, "none").names().empty());
}

TEST_CASE("safetensors: read errors name the file, the tensor and both shapes or dtypes") {
  st::Writer w;
  const std::vector<float> x(320 * 128, 0.5f);
  const std::vector<std::int64_t> ids = {1, 2, 3};
  w.add_f32("lm_head.weight", x, {320, 128});
  w.add_i64("ids", ids, {3});
  const st::Reader r = st::Reader::from_bytes(w.serialize(), "path/model.safetensors");
  CHECK(error_of([&] {
          r.read_f32("lm_head.weight", {257, 128});
        }) ==
        "[safetensors] 'path/model.safetensors': tensor 'lm_head.weight': shape (320, 128) "
        "expected (257, 128)");
  CHECK(error_of([&] { r.read_i64("ids", {4}); }) ==
        "[safetensors] 'path/model.safetensors': tensor 'ids': shape (3,) expected (4,)");
  CHECK(error_of([&] { r.read_f32("nope", {1}); }) == "[safetensors] 'path/model.safetensors': no tensor 'nope'");
  CHECK(error_of([&] { (void)r.shape("nope"); }).find("no tensor 'nope'") != std::string::npos);
  CHECK(error_of([&] {
          r.read_i64("lm_head.weight", {320, 128});
        }) ==
        "[safetensors] 'path/model.safetensors': tensor 'lm_head.weight': stored as F32, cannot be "
        "read as I64");
  CHECK(error_of([&] { r.read_f32("ids", {3}); }) ==
        "[safetensors] 'path/model.safetensors': tensor 'ids': stored as I64, cannot be read as "
        "F32");
  CHECK(error_of([&] { r.read_f64("ids", {3}); }).find("stored as I64, cannot be read as F64") != std::string::npos);
  std::vector<float> small(3);
  CHECK(error_of([&] {
          r.read_f32("lm_head.weight", small, {320, 128});
        }).find("destination holds 3 elements, tensor has 40960") != std::string::npos);

  CHECK_NOTHROW(r.expect_names({"ids", "lm_head.weight"}));
  CHECK(error_of([&] {
          r.expect_names({"ids", "wte", "wpe"});
        }) ==
        "[safetensors] 'path/model.safetensors': missing tensors 'wte', 'wpe'; unexpected tensors "
        "'lm_head.weight'");
  CHECK(error_of([&] { r.expect_names({"ids", "lm_head.weight", "x"}); }).ends_with("missing tensors 'x'"));
  CHECK(error_of([&] { r.expect_names({}); }).ends_with("unexpected tensors 'lm_head.weight', 'ids'"));
  std::vector<std::string> many;
  for (int i = 0; i < 25; ++i) many.push_back("t" + std::to_string(i));
  many.push_back("ids");
  many.push_back("lm_head.weight");
  CHECK(error_of([&] { r.expect_names(many); }).ends_with("'t19' and 5 more"));
}

TEST_CASE("safetensors: writer rejects inconsistent input") {
  st::Writer w;
  const std::vector<float> x(6);
  const std::vector<std::int64_t> i(6);
  CHECK(error_of([&] {
          w.add_f32("a", x, {2, 2});
        }) == "[safetensors] tensor 'a': shape (2, 2) has 4 elements, data has 6");
  CHECK(error_of([&] { w.add_f32("a", x, {-2, -3}); }).find("invalid shape (-2, -3)") != std::string::npos);
  CHECK(error_of([&] { w.add_f32("a", x, {6}, st::DType::I64); }).find("stored as F32 or BF16, not I64") !=
        std::string::npos);
  w.add_f32("a", x, {2, 3});
  CHECK(error_of([&] { w.add_i64("a", i, {6}); }) == "[safetensors] tensor 'a' added twice");
  CHECK(error_of([&] { w.add_i64("__metadata__", i, {6}); }).find("reserved") != std::string::npos);
}

TEST_CASE("safetensors: F16, I32 and U8 tensors from other writers") {
  // F16 [1, -2, 2^-24, inf], I32 [-5, 7], U8 [255, 0] written by hand.
  const std::uint16_t halves[] = {0x3C00, 0xC000, 0x0001, 0x7C00};
  const std::int32_t i32[] = {-5, 7};
  std::string data(reinterpret_cast<const char*>(halves), 8);
  data.append(reinterpret_cast<const char*>(i32), 8);
  data += "\xFF";
  data += '\0';
  const std::string header = R"({"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
                             R"("i":{"data_offsets":[8,16],"shape":[2],"dtype":"I32"},)"
                             R"("u":{"dtype":"U8","shape":[2],"data_offsets":[16,18]}})";
  const st::Reader r = st::Reader::from_bytes(make_file(header, data), "hand");
  const std::vector<float> h = r.read_f32("h", {2, 2});
  CHECK(h == std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), INFINITY});
  CHECK(r.read_f64("h", {2, 2})[2] == std::ldexp(1.0, -24));
  CHECK(r.read_i64("i", {2}) == std::vector<std::int64_t>{-5, 7});
  CHECK(r.read_i64("u", {2}) == std::vector<std::int64_t>{255, 0});
  CHECK(r.dtype("u") == st::DType::U8);
  CHECK(error_of([&] { r.read_f32("u", {2}); }).find("stored as U8, cannot be read as F32") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

TEST_CASE("files: atomic write replaces, failures keep the old file and leave no temporary") {
  TempDir dir;
  const std::string p = dir / "model.safetensors";
  lrt::write_file_atomic(p, "first");
  CHECK(lrt::read_file(p, "test") == "first");
  lrt::write_file_atomic(p, std::string("second\0bytes", 12));
  CHECK(lrt::read_file(p, "test") == std::string("second\0bytes", 12));
  lrt::write_file_atomic(p, "");
  CHECK(lrt::read_file(p, "test").empty());
  lrt::write_file_atomic(p, "kept");
  CHECK(dir.list() == std::vector<std::string>{"model.safetensors"});

  // Target is a directory: rename fails after the temporary was written.
  const std::string d = dir / "adir";
  fs::create_directory(d);
  std::string msg = error_of([&] { lrt::write_file_atomic(d, "x"); });
  CHECK(msg.rfind("[write] '" + d + "': cannot replace: ", 0) == 0);
  CHECK(fs::is_directory(d));

  // The temporary cannot be created (its name is taken by a directory): the old file is intact.
  const std::string blocker = p + ".tmp." + std::to_string(::getpid());
  fs::create_directory(blocker);
  msg = error_of([&] { lrt::write_file_atomic(p, "new content"); });
  CHECK(msg.find("cannot create temporary file") != std::string::npos);
  CHECK(lrt::read_file(p, "test") == "kept");
  fs::remove(blocker);

  // Missing parent directory.
  msg = error_of([&] { lrt::write_file_atomic(dir / "no/such/dir/f", "x"); });
  CHECK(msg.find("No such file or directory") != std::string::npos);

  // A read-only directory (meaningless as root, who may write anyway).
  const std::string ro = dir / "ro";
  fs::create_directory(ro);
  lrt::write_file_atomic(ro + "/f", "old");
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(ro.c_str(), W_OK) != 0) {
    CHECK(error_of([&] { lrt::write_file_atomic(ro + "/f", "new"); }).find("Permission denied") != std::string::npos);
    CHECK(lrt::read_file(ro + "/f", "test") == "old");
  }
  fs::permissions(ro, fs::perms::owner_all);

  CHECK(dir.list() == std::vector<std::string>{"adir", "model.safetensors", "ro"});
  CHECK(fs::directory_iterator(ro) != fs::directory_iterator());
  CHECK(std::distance(fs::directory_iterator(ro), fs::directory_iterator()) == 1);

  // Writer::write and Reader::open go through the same functions.
  st::Writer w;
  const std::vector<float> v = {1, 2, 3};
  w.add_f32("v", v, {3});
  w.write(p);
  CHECK(st::Reader::open(p).read_f32("v", {3}) == v);
  CHECK(st::Reader::open(p).label() == p);
}

TEST_CASE("files: read_file and ensure_directory errors") {
  TempDir dir;
  const std::string missing = dir / "missing.safetensors";
  CHECK(error_of([&] { lrt::read_file(missing, "load"); }) ==
        "[load] '" + missing + "': cannot open: No such file or directory");
  CHECK(error_of([&] { st::Reader::open(missing); }) ==
        "[safetensors] '" + missing + "': cannot open: No such file or directory");
  CHECK(error_of([&] { lrt::read_file(dir.path.string(), "load"); }).find("Is a directory") != std::string::npos);

  const std::string nested = dir / "a/b/c";
  lrt::ensure_directory(nested);
  CHECK(fs::is_directory(nested));
  lrt::ensure_directory(nested);  // already there: fine
  lrt::write_file_atomic(dir / "file", "x");
  CHECK(error_of([&] { lrt::ensure_directory(dir / "file"); }).rfind("[mkdir] '", 0) == 0);
  CHECK(error_of([&] { lrt::ensure_directory(dir / "file/sub"); }).rfind("[mkdir] '", 0) == 0);
}

// ---------------------------------------------------------------------------------------------
// safetensors: a generated corpus of damaged files
// ---------------------------------------------------------------------------------------------

namespace {

// The valid base file: 3 tensors + metadata.
std::string base_file() {
  st::Writer w;
  w.set_metadata("format", "lrt");
  w.set_metadata("step", "12");
  const std::vector<float> a = {0.5f, -1, 2, 3.25f, -4, 5e-3f};
  const std::vector<float> b = {1, 2, 3, 4};
  const std::vector<std::int64_t> c = {7, -8, 9};
  w.add_f32("embed.weight", a, {2, 3});
  w.add_f32("norm.scale", b, {4}, st::DType::BF16);
  w.add_i64("positions", c, {3});
  return w.serialize();
}

// Opens bytes and reads every tensor both as float and as int. Returns whether the open
// succeeded; anything but lrt::Error fails the test. `reads_ok` counts reads that succeeded.
bool open_and_read_all(const std::string& bytes, int* reads_ok = nullptr) {
  std::optional<st::Reader> r;
  try {
    r.emplace(st::Reader::from_bytes(bytes, "corpus"));
  } catch (const lrt::Error& e) {
    if (std::string_view(e.what()).rfind("[safetensors] 'corpus': ", 0) != 0) FAIL("unexpected message: " << e.what());
    return false;
  } catch (const std::exception& e) {
    FAIL("open threw a non-lrt exception: " << e.what());
  } catch (...) {
    FAIL("open threw a non-lrt exception");
  }
  for (const std::string& name : r->names()) {
    const std::vector<std::int64_t> shape = r->shape(name);
    auto attempt = [&](auto&& read) {
      try {
        read();
        if (reads_ok) ++*reads_ok;
      } catch (const lrt::Error&) {
      } catch (...) {
        FAIL("read of '" << name << "' threw a non-lrt exception");
      }
    };
    attempt([&] { (void)r->read_f32(name, shape); });
    attempt([&] { (void)r->read_f64(name, shape); });
    attempt([&] { (void)r->read_i64(name, shape); });
  }
  return true;
}

}  // namespace

TEST_CASE("safetensors corpus: truncations, byte damage, random mutations") {
  const std::string base = base_file();
  std::uint64_t n = 0;
  std::memcpy(&n, base.data(), 8);
  const std::size_t data_start = 8 + n;
  int reads = 0;
  REQUIRE(open_and_read_all(base, &reads));
  CHECK(reads == 5);  // F32 and BF16 read as float and double, I64 as int

  SUBCASE("every truncation is an error") {
    for (std::size_t len = 0; len < base.size(); ++len) {
      CAPTURE(len);
      CHECK(!open_and_read_all(base.substr(0, len)));
    }
  }

  SUBCASE("damage to any header byte: lrt::Error or a file that reads") {
    const unsigned char replacements[] = {'"', '{', '}',  '[', ']', ',', ':',  '0', '9',
                                          '-', ' ', '\\', 'e', '.', 0,   0x80, 0xFF};
    int opened = 0, total = 0;
    for (std::size_t i = 0; i < data_start; ++i) {
      CAPTURE(i);
      std::string bad = base;
      for (unsigned x : {0x01u, 0x20u, 0x80u, 0xFFu}) {
        bad[i] = static_cast<char>(static_cast<unsigned char>(base[i]) ^ x);
        opened += open_and_read_all(bad);
        ++total;
      }
      for (unsigned char c : replacements) {
        bad[i] = static_cast<char>(c);
        opened += open_and_read_all(bad);
        ++total;
      }
    }
    CHECK(opened < total / 2);
  }

  SUBCASE("damage to data bytes never breaks the file") {
    for (std::size_t i = data_start; i < base.size(); ++i) {
      CAPTURE(i);
      std::string bad = base;
      bad[i] = static_cast<char>(static_cast<unsigned char>(base[i]) ^ 0xFF);
      int ok = 0;
      CHECK(open_and_read_all(bad, &ok));
      CHECK(ok == 5);
    }
  }

  SUBCASE("random multi-byte mutations, insertions and deletions") {
    std::mt19937 rng(1234);
    for (int iter = 0; iter < 3000; ++iter) {
      std::string bad = base;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !bad.empty(); ++e) {
        const std::size_t at = rng() % bad.size();
        switch (rng() % 3) {
          case 0:
            bad[at] = static_cast<char>(rng());
            break;
          case 1:
            bad.insert(at, 1, static_cast<char>(rng()));
            break;
          default:
            bad.erase(at, 1);
        }
      }
      CAPTURE(iter);
      open_and_read_all(bad);
    }
  }
}

TEST_CASE("safetensors corpus: each validation rule has its own message") {
  struct Bad {
    std::string file, phrase, tensor;  // tensor: a name the message must mention, or ""
  };
  const std::string f4(4, '\0'), f8(8, '\0'), f12(12, '\0');
  auto entry = [](const std::string& body) { return "{\"w\":{" + body + "}}"; };
  const std::vector<Bad> cases = {
      {"", "file too short (0 bytes)", ""},
      {"abcdefg", "file too short (7 bytes)", ""},
      {u64_bytes(1000) + "{}", "header length 1000 exceeds the file size (10 bytes)", ""},
      {u64_bytes(200'000'000) + "{}", "header length 200000000 exceeds the limit", ""},
      {u64_bytes(~0ull) + "{}", "exceeds the limit", ""},
      {make_file(""), "invalid JSON header: unexpected end of input at byte 0", ""},
      {make_file("{\"w\":"), "invalid JSON header", ""},
      {make_file("{} x"), "unexpected trailing characters", ""},
      {make_file("[1,2]"), "header is a JSON array, not an object", ""},
      {make_file("{\"w\":5}"), "entry is a JSON number, not an object", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1])"), f4), "missing field 'data_offsets'", "w"},
      {make_file(entry(R"("dtype":"F32","data_offsets":[0,4])"), f4), "missing field 'shape'", "w"},
      {make_file(entry(R"("shape":[1],"data_offsets":[0,4])"), f4), "missing field 'dtype'", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1)"), f4), "unexpected field 'extra'",
       "w"},
      {make_file(entry(R"("dtype":"F8","shape":[1],"data_offsets":[0,1])"), "x"), "unsupported dtype 'F8'", "w"},
      {make_file(entry(R"("dtype":"f32","shape":[1],"data_offsets":[0,4])"), f4), "unsupported dtype 'f32'", "w"},
      {make_file(entry(R"("dtype":4,"shape":[1],"data_offsets":[0,4])"), f4), "dtype is not a string", "w"},
      {make_file(entry(R"("dtype":"F32","shape":4,"data_offsets":[0,4])"), f4), "shape is not an array", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"), f4),
       "shape must hold non-negative integers, got -1", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])"), f4), "non-negative integers, got 1.5",
       "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1.0],"data_offsets":[0,4])"), f4), "non-negative integers, got 1",
       "w"},
      {make_file(entry(R"("dtype":"F32","shape":["1"],"data_offsets":[0,4])"), f4), "non-negative integers, got string",
       "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1e30],"data_offsets":[0,4])"), f4), "non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4])"), f4),
       "shape (4294967296, 4294967296) overflows", "w"},
      {make_file(entry(R"("dtype":"U8","shape":[4611686018427387904,4,0],"data_offsets":[0,0])")), "overflows", "w"},
      {make_file(entry(R"("dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0])")), "overflows", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":4)"), f4),
       "data_offsets must be two non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4,8])"), f4),
       "data_offsets must be two non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0])"), f4),
       "data_offsets must be two non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":["0","4"])"), f4),
       "data_offsets must be two non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])"), f4),
       "data_offsets must be two non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4.0])"), f4),
       "data_offsets must be two non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[0],"data_offsets":[0,18446744073709551616])")),
       "data_offsets must be two non-negative integers", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[0],"data_offsets":[8,4])"), f8),
       "data_offsets [8, 4] end before they begin", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"), f4),
       "data_offsets [0, 4] span 4 bytes, but F32 (2,) needs 8", "w"},
      {make_file(entry(R"("dtype":"BF16","shape":[2,3],"data_offsets":[0,8])"), f8), "but BF16 (2, 3) needs 12", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), f4),
       "data_offsets [0, 8] exceed the data section (4 bytes)", "w"},
      {make_file(entry(R"("dtype":"I64","shape":[1],)"
                       R"("data_offsets":[9223372036854775800,9223372036854775807])")),
       "but I64 (1,) needs 8", "w"},
      {make_file(entry(R"("dtype":"I64","shape":[1],)"
                       R"("data_offsets":[9223372036854775799,9223372036854775807])")),
       "exceed the data section (0 bytes)", "w"},
      {make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 f12),
       "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]", "b"},
      {make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 f8),
       "overlap tensor", "a"},
      {make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                 f8),
       "tensor 'z': data_offsets [4, 4] overlap tensor 'a'", "z"},
      {make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                 f12),
       "tensor 'b': data_offsets [8, 12] leave a gap of 4 bytes after tensor 'a'", "b"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":[4,8])"), f8),
       "tensor 'w': data_offsets [4, 8] leave a gap of 4 bytes at the start", "w"},
      {make_file(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])"), f4 + "ab"),
       "data section has 2 trailing bytes after the last tensor", ""},
      {make_file("{}", "x"), "data section has 1 trailing bytes", ""},
      {make_file(R"({"__metadata__":"x"})"), "__metadata__ is a JSON string, not an object", ""},
      {make_file(R"({"__metadata__":{"k":"v","n":1}})"), "__metadata__ 'n' is a JSON number", ""},
      {make_file(R"({"__metadata__":{"k":null}})"), "__metadata__ 'k' is a JSON null", ""},
      {make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 f8),
       "duplicate key 'w'", "w"},
      {make_file(R"({"__metadata__":{},"__metadata__":{}})"), "duplicate key '__metadata__'", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.phrase);
    CHECK(!open_and_read_all(c.file));
    const std::string msg = error_of([&] { st::Reader::from_bytes(c.file, "bad.safetensors"); });
    CHECK(msg.rfind("[safetensors] 'bad.safetensors': ", 0) == 0);
    CHECK(msg.find(c.phrase) != std::string::npos);
    if (!c.tensor.empty()) CHECK(msg.find("'" + c.tensor + "'") != std::string::npos);
  }

  // Valid edge cases: unpadded header, zero-size tensors at any boundary, metadata only.
  const std::vector<std::string> good = {
      make_file("{}"),
      make_file(R"({"__metadata__":{}})"),
      make_file(R"({"__metadata__":{"a":"b"}})"),
      make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("z":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]},)"
                R"("y":{"dtype":"I64","shape":[0],"data_offsets":[0,0]}})",
                f4),
      make_file(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                f8),
      make_file(entry(R"("dtype":"U8","shape":[0,4611686018427387904],"data_offsets":[0,0])")),
  };
  for (const auto& g : good) {
    int reads = 0;
    CHECK(open_and_read_all(g, &reads));
  }
  const st::Reader r = st::Reader::from_bytes(good[4], "g");
  CHECK(r.names() == std::vector<std::string>{"b", "a"});  // header order
}

TEST_CASE("int8 quantization: scales and values by hand, tails, zero groups, the error bound") {
  // Two rows of 5 in groups of 2 (the last group of one value): max |w| / 127 per group.
  const std::vector<float> w{1, -3, 0.5f, 4, -0.1f, 0, 0, 0, 0, 2};
  std::vector<std::int8_t> q(10);
  std::vector<float> s(6);
  lrt::quantize_int8(w, 2, 5, 2, q, s);
  CHECK(q == std::vector<std::int8_t>{42, -127, 16, 127, -127, 0, 0, 0, 0,
                                      127});  // 1 / (3/127) = 42.33, 0.5 / (4/127) = 15.9
  CHECK(s == std::vector<float>{3.0f / 127.0f, 4.0f / 127.0f, 0.1f / 127.0f, 0, 0, 2.0f / 127.0f});
  std::vector<float> back(10);
  lrt::dequantize_int8(q, s, 2, 5, 2, back);
  CHECK(back[1] == -3.0f / 127.0f * 127.0f);
  CHECK(back[5] == 0.0f);
  // Random rows: every value within half a step of its group's scale.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const std::int64_t rows = 7, cols = 45, group = 8, ng = lrt::quant_groups(cols, group);
  CHECK(ng == 6);
  std::vector<float> x(rows * cols), xs(rows * ng), xb(x.size());
  std::vector<std::int8_t> xq(x.size());
  for (auto& v : x) v = u(rng);
  lrt::quantize_int8(x, rows, cols, group, xq, xs);
  lrt::dequantize_int8(xq, xs, rows, cols, group, xb);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < cols; ++i) {
      const float sc = xs[r * ng + i / group];
      CHECK(std::fabs(x[r * cols + i] - xb[r * cols + i]) <= 0.5f * sc * 1.0001f);
      CHECK(std::abs(int(xq[r * cols + i])) <= 127);
    }
  CHECK(error_of([&] { lrt::quantize_int8(w, 2, 5, 0, q, s); }).find("group 0") != std::string::npos);
  CHECK(error_of([&] {
          lrt::quantize_int8(w, 2, 5, 3, q, s);
        }).find("needs 10 floats, 10 int8 values and 4 scales; got 10, 10 and 6") != std::string::npos);
  std::vector<float> bad = w;
  bad[7] = std::numeric_limits<float>::infinity();
  CHECK(error_of([&] { lrt::quantize_int8(bad, 2, 5, 2, q, s); }).find("at row 1, column 2 is not finite") !=
        std::string::npos);
}

TEST_CASE("quantized checkpoints: I8 tensors with scales, metadata, which matrices, refusals") {
  st::Writer w;
  const std::vector<float> head{1, -3, 0.5f, 4, -0.1f, 0, 0, 0, 0, 2}, table{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
      lam{0.5f, 2};
  w.add_f32("lm_head.weight", head, {2, 5});
  w.add_f32("transformer.wte.weight", table, {2, 5});
  w.add_f32("transformer.h.0.attn.ve_gate.weight", table, {2, 5});
  w.add_f32("resid_lambdas", lam, {2});
  w.set_metadata("step", "7");
  const st::Reader r = st::Reader::from_bytes(w.serialize(), "f32");
  // The matrices to pack (a model's come from its parameter table: tests/unit/model/test_weight_table.cpp).
  const lrt::PackableNames packable{"lm_head.weight", "transformer.h.9.attn.c_q.weight"};
  lrt::QuantizeReport rep;
  const st::Reader q =
      st::Reader::from_bytes(lrt::quantize_checkpoint(r, lrt::WeightFormat::Int8, 2, packable, &rep).serialize(), "q");
  CHECK(rep.packed == 1);
  CHECK(rep.kept == 3);
  CHECK(rep.bytes_in == 4 * (10 + 10 + 10 + 2));
  CHECK(rep.bytes_out == 10 + 6 * 4 + 4 * (10 + 10 + 2));
  CHECK(q.meta("weights") == "int8");
  CHECK(q.meta("quant_group") == "2");
  CHECK(q.meta("step") == "7");
  CHECK(q.dtype("lm_head.weight") == st::DType::I8);
  CHECK(q.shape("lm_head.weight.scales") == std::vector<std::int64_t>{2, 3});
  CHECK(q.read_i8("lm_head.weight", {2, 5}) == std::vector<std::int8_t>{42, -127, 16, 127, -127, 0, 0, 0, 0, 127});
  CHECK(q.dtype("transformer.wte.weight") == st::DType::F32);  // tables and gates as they were
  CHECK(q.dtype("transformer.h.0.attn.ve_gate.weight") == st::DType::F32);
  const lrt::WeightInfo info = lrt::weight_info(q);
  CHECK(info.format == lrt::WeightFormat::Int8);
  CHECK(info.group == 2);
  std::vector<float> back(10);
  lrt::read_weight_f32(q, info, "lm_head.weight", back, {2, 5});
  CHECK(back[2] == 16 * (4.0f / 127.0f));
  CHECK(back[3] == 4.0f / 127.0f * 127.0f);
  CHECK(lrt::stored_names(q, {"lm_head.weight", "resid_lambdas"}) ==
        std::vector<std::string>{"lm_head.weight", "resid_lambdas", "lm_head.weight.scales"});
  const lrt::PackedWeights pw = lrt::PackedWeights::read(q, packable);
  REQUIRE(pw.find("lm_head.weight") != nullptr);
  CHECK(pw.matrices.size() == 1);
  CHECK(pw.find("lm_head.weight")->scales.size() == 6);
  CHECK(error_of([&] {
          q.read_f32("lm_head.weight", back, {2, 5});
        }).find("stored as I8, cannot be read as F32") != std::string::npos);
  CHECK(error_of([&] {
          r.read_i8("lm_head.weight", {2, 5});
        }).find("stored as F32, cannot be read as I8") != std::string::npos);
  CHECK(error_of([&] {
          lrt::quantize_checkpoint(q, lrt::WeightFormat::Int8, 2, packable);
        }).find("already holds int8 weights") != std::string::npos);
  // bf16: the matrix stored BF16 (rounded to nearest even), the rest as it was.
  const st::Reader b =
      st::Reader::from_bytes(lrt::quantize_checkpoint(r, lrt::WeightFormat::BF16, 0, packable).serialize(), "b");
  CHECK(b.meta("weights") == "bf16");
  CHECK(!b.meta("quant_group"));
  CHECK(b.dtype("lm_head.weight") == st::DType::BF16);
  CHECK(b.dtype("transformer.wte.weight") == st::DType::F32);
  CHECK(lrt::PackedWeights::read(b, packable).find("lm_head.weight")->bf16.size() == 10);
  CHECK(lrt::PackedWeights::read(b, {}).matrices.empty());  // BF16 tensors not named are not packed
  // Damaged metadata is refused with the file's name.
  st::Writer bad;
  bad.add_f32("lm_head.weight", head, {2, 5});
  bad.set_metadata("weights", "int8");
  CHECK(error_of([&] {
          lrt::weight_info(st::Reader::from_bytes(bad.serialize(), "nogroup"));
        }).find("'nogroup': int8 weights without 'quant_group'") != std::string::npos);
  bad.set_metadata("quant_group", "0x");
  CHECK(error_of([&] { lrt::weight_info(st::Reader::from_bytes(bad.serialize(), "g")); }).find("quant_group '0x'") !=
        std::string::npos);
  bad.set_metadata("weights", "int4");
  CHECK(error_of([&] { lrt::weight_info(st::Reader::from_bytes(bad.serialize(), "f")); }).find("'weights' is 'int4'") !=
        std::string::npos);
}

}  // namespace test_formats
