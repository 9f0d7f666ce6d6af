// Tests of the pre-tokenizer: Unicode tables and UTF-8 units (unicode.hpp), the regex engine
// (regex.hpp) and the built-in split patterns (patterns.hpp). The expected splits are written by
// hand from the patterns' semantics (Rust fancy-regex, as tiktoken uses it).
#include <doctest/doctest.h>

#include <lrt/tokenizer/patterns.hpp>
#include <lrt/tokenizer/regex.hpp>
#include <lrt/tokenizer/unicode.hpp>

#include <random>
#include <string>
#include <thread>
#include <vector>

namespace test_regex {

using lrt::tok::Category;
using lrt::tok::Regex;
using Pieces = std::vector<std::string>;

Pieces split(const Regex& re, const std::string& text) {
  Pieces out;
  std::size_t last = 0;
  re.split(text, [&](std::size_t b, std::size_t e) {
    REQUIRE(b == last);
    REQUIRE(b < e);
    REQUIRE(e <= text.size());
    out.push_back(text.substr(b, e - b));
    last = e;
  });
  REQUIRE(last == text.size());
  return out;
}

Pieces split(std::string_view name, const std::string& text) {
  return split(Regex::compile(lrt::tok::builtin_pattern(name)), text);
}

Pieces split_re(std::string_view pattern, const std::string& text) { return split(Regex::compile(pattern), text); }

// The lrt::Error message of compiling pattern ("" if it compiles).
std::string compile_error(std::string_view pattern) {
  try {
    (void)Regex::compile(pattern);
  } catch (const lrt::Error& e) {
    CHECK(e.op() == "regex");
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

TEST_CASE("unicode: general categories (ranges of UnicodeData.txt 15.0.0, First/Last pairs included)") {
  using lrt::tok::category;
  CHECK(std::string(lrt::tok::tables::kUnicodeVersion) == "15.0.0");
  CHECK(category('A') == Category::Lu);
  CHECK(category('z') == Category::Ll);
  CHECK(category('5') == Category::Nd);
  CHECK(category(' ') == Category::Other);
  CHECK(category('\'') == Category::Other);
  CHECK(category(0xAA) == Category::Lo);     // feminine ordinal
  CHECK(category(0xB2) == Category::No);     // superscript two
  CHECK(category(0xB5) == Category::Ll);     // micro sign
  CHECK(category(0xD7) == Category::Other);  // multiplication sign
  CHECK(category(0xE9) == Category::Ll);
  CHECK(category(0x01C5) == Category::Lt);  // Dž
  CHECK(category(0x02B0) == Category::Lm);
  CHECK(category(0x0301) == Category::Mn);
  CHECK(category(0x0903) == Category::Mc);
  CHECK(category(0x20DD) == Category::Me);
  CHECK(category(0x0663) == Category::Nd);  // Arabic-Indic three
  CHECK(category(0x2160) == Category::Nl);  // Roman numeral one
  CHECK(category(0x212A) == Category::Lu);  // Kelvin sign
  CHECK(category(0x3400) == Category::Lo);  // CJK Ext A <First>
  CHECK(category(0x4DBF) == Category::Lo);  // CJK Ext A <Last>
  CHECK(category(0x4E00) == Category::Lo);
  CHECK(category(0x9FFF) == Category::Lo);
  CHECK(category(0xAC00) == Category::Lo);  // Hangul syllables <First>
  CHECK(category(0xD7A3) == Category::Lo);  // Hangul syllables <Last>
  CHECK(category(0xD7A4) == Category::Other);
  CHECK(category(0xD800) == Category::Other);  // surrogates (Cs)
  CHECK(category(0x20000) == Category::Lo);    // CJK Ext B
  CHECK(category(0x2A6DF) == Category::Lo);
  CHECK(category(0x1F600) == Category::Other);  // emoji (So)
  CHECK(category(0x1F3FD) == Category::Other);  // skin tone modifier (Sk)
  CHECK(category(0xE0100) == Category::Mn);     // variation selector 17
  CHECK(category(0xF0000) == Category::Other);  // private use plane
  CHECK(category(0x10FFFF) == Category::Other);
  CHECK(category(0x110000) == Category::Other);
  for (char32_t c = 0; c < 0x80; ++c) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    CHECK(lrt::tok::is_letter(category(c)) == letter);
    CHECK(lrt::tok::is_number(category(c)) == (c >= '0' && c <= '9'));
  }
}

TEST_CASE("unicode: White_Space is exactly Unicode's property") {
  const std::vector<char32_t> ws = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,   0x1680,
                                    0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
                                    0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  std::size_t count = 0;
  for (char32_t c = 0; c < 0x11000; ++c) count += lrt::tok::is_white_space(c);
  CHECK(count == ws.size());
  for (char32_t c : ws) CHECK(lrt::tok::is_white_space(c));
  CHECK_FALSE(lrt::tok::is_white_space(0x180E));  // Mongolian vowel separator: not since Unicode 6.3
  CHECK_FALSE(lrt::tok::is_white_space(0x200B));  // zero width space
  CHECK_FALSE(lrt::tok::is_white_space(0xFEFF));
}

TEST_CASE("unicode: UTF-8 decoding, and every byte outside a well-formed sequence is a unit of its own") {
  auto units = [](const std::string& s) {
    std::vector<std::pair<int, bool>> out;  // (len, valid)
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    for (std::size_t i = 0; i < s.size();) {
      const auto u = lrt::tok::decode_utf8(p + i, s.size() - i);
      out.emplace_back(u.len, u.valid);
      if (!u.valid) CHECK(u.cp == p[i]);  // keeps its byte
      i += u.len;
    }
    return out;
  };
  using V = std::vector<std::pair<int, bool>>;
  CHECK(units("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") == V{{1, true}, {2, true}, {3, true}, {4, true}});
  CHECK(lrt::tok::decode_utf8(reinterpret_cast<const unsigned char*>("\xF0\x9F\x98\x80"), 4).cp == 0x1F600);
  CHECK(units("\xC0\x80") == V{{1, false}, {1, false}});                                  // overlong NUL
  CHECK(units("\xC1\xBF") == V{{1, false}, {1, false}});                                  // overlong
  CHECK(units("\xE0\x80\xAF") == V{{1, false}, {1, false}, {1, false}});                  // overlong 3-byte
  CHECK(units("\xF0\x8F\xBF\xBF") == V{{1, false}, {1, false}, {1, false}, {1, false}});  // overlong 4-byte
  CHECK(units("\xED\xA0\x80") == V{{1, false}, {1, false}, {1, false}});                  // surrogate D800
  CHECK(units("\xED\x9F\xBF") == V{{3, true}});                                           // U+D7FF
  CHECK(units("\x80") == V{{1, false}});                                                  // lone continuation
  CHECK(units("\xE2\x82") == V{{1, false}, {1, false}});                                  // truncated
  CHECK(units("\xE2\x82z") == V{{1, false}, {1, false}, {1, true}});
  CHECK(units("\xF4\x8F\xBF\xBF") == V{{4, true}});                                       // U+10FFFF
  CHECK(units("\xF4\x90\x80\x80") == V{{1, false}, {1, false}, {1, false}, {1, false}});  // above 10FFFF
  CHECK(units("\xF5\xF8\xFE\xFF") == V{{1, false}, {1, false}, {1, false}, {1, false}});
}

TEST_CASE("patterns: names, exact strings, default, unknown name") {
  const auto names = lrt::tok::builtin_pattern_names();
  REQUIRE(names.size() == 4);
  CHECK(names[0] == "gpt2");
  CHECK(names[3] == "nanochat");
  CHECK(lrt::tok::kDefaultPattern == "nanochat");
  CHECK(lrt::tok::builtin_pattern("gpt2") ==
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  CHECK(
      lrt::tok::builtin_pattern("nanochat") ==
      R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)");
  for (auto n : names) CHECK(Regex::compile(lrt::tok::builtin_pattern(n)).source() == lrt::tok::builtin_pattern(n));
  try {
    (void)lrt::tok::builtin_pattern("x");
    FAIL("no error");
  } catch (const lrt::Error& e) {
    CHECK(e.op() == "tokenizer");
    CHECK(std::string(e.what()) == "[tokenizer] unknown pattern 'x' (known: gpt2, cl100k, o200k, nanochat)");
  }
}

TEST_CASE("gpt2: contractions (case-sensitive), words, numbers, punctuation, whitespace runs") {
  CHECK(split("gpt2", "Hello world's") == Pieces{"Hello", " world", "'s"});
  CHECK(split("gpt2", "I'll he'd WE'RE") == Pieces{"I", "'ll", " he", "'d", " WE", "'", "RE"});
  CHECK(split("gpt2", "'S") == Pieces{"'", "S"});
  CHECK(split("gpt2", "a   b") == Pieces{"a", "  ", " b"});
  CHECK(split("gpt2", "  \n\n x") == Pieces{"  \n\n", " x"});
  CHECK(split("gpt2", "x   ") == Pieces{"x", "   "});
  CHECK(split("gpt2", "hello!!!\n\nworld") == Pieces{"hello", "!!!", "\n", "\n", "world"});
  CHECK(split("gpt2", "1234567 12") == Pieces{"1234567", " 12"});
  CHECK(split("gpt2", "\r\n") == Pieces{"\r\n"});
  CHECK(split("gpt2", "The/at Fulton/np-tl") == Pieces{"The", "/", "at", " Fulton", "/", "np", "-", "tl"});
}

TEST_CASE("cl100k: (?i) contractions incl. 'S and U+017F, numbers by three, newlines") {
  CHECK(split("cl100k", "Hello world's") == Pieces{"Hello", " world", "'s"});
  CHECK(split("cl100k", "'S") == Pieces{"'S"});
  CHECK(split("cl100k", "DON'T we'Ll") == Pieces{"DON", "'T", " we", "'Ll"});
  CHECK(split("cl100k", "don'\xC5\xBF") == Pieces{"don", "'\xC5\xBF"});  // 'ſ folds with 's
  CHECK(split("cl100k", " 'S") == Pieces{" '", "S"});
  CHECK(split("cl100k", "1234567") == Pieces{"123", "456", "7"});
  CHECK(split("cl100k", " 1 22 333") == Pieces{" ", "1", " ", "22", " ", "333"});
  CHECK(split("cl100k", "a   b") == Pieces{"a", "  ", " b"});
  CHECK(split("cl100k", "  \n\n x") == Pieces{"  \n\n", " x"});
  CHECK(split("cl100k", "x   ") == Pieces{"x", "   "});
  CHECK(split("cl100k", "\r\n") == Pieces{"\r\n"});
  CHECK(split("cl100k", "a\r\n\r\nb") == Pieces{"a", "\r\n\r\n", "b"});
  CHECK(split("cl100k", "hello!!!\n\nworld") == Pieces{"hello", "!!!\n\n", "world"});
  CHECK(split("cl100k", "The/at Fulton/np-tl") == Pieces{"The", "/at", " Fulton", "/np", "-tl"});
  CHECK(split("cl100k", "e\xCC\x81") == Pieces{"e", "\xCC\x81"});  // combining acute: not a letter
  CHECK(split("cl100k", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ok") == Pieces{"\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " ok"});
  CHECK(split("cl100k", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E and \xD1\x80\xD1\x83\xD1\x81") ==
        Pieces{"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", " and", " \xD1\x80\xD1\x83\xD1\x81"});
  CHECK(split("cl100k", "\xD9\xA1\xD9\xA2\xD9\xA3\xD9\xA4") ==
        Pieces{"\xD9\xA1\xD9\xA2\xD9\xA3", "\xD9\xA4"});       // Arabic-Indic digits are \p{N}
  CHECK(split("cl100k", "\xC2\xA0x") == Pieces{"\xC2\xA0x"});  // NBSP is white space, but [^\r\n\p{L}\p{N}]
}

TEST_CASE("o200k: CamelCase, contractions after words, marks inside words, '/' after punctuation") {
  CHECK(split("o200k", "CamelCaseHTTPServer") == Pieces{"Camel", "Case", "HTTPServer"});
  CHECK(split("o200k", "HELLO world") == Pieces{"HELLO", " world"});
  CHECK(split("o200k", "don't DON'T it'S") == Pieces{"don't", " DON'T", " it'S"});
  CHECK(split("o200k", "hello/world\n") == Pieces{"hello", "/world", "\n"});
  CHECK(split("o200k", "!!!/\n") == Pieces{"!!!/\n"});
  CHECK(split("o200k", "e\xCC\x81t\xC3\xA9") == Pieces{"e\xCC\x81t\xC3\xA9"});  // \p{M} is part of words
  CHECK(split("o200k", "1234567") == Pieces{"123", "456", "7"});
  CHECK(split("o200k", "a   b") == Pieces{"a", "  ", " b"});
  CHECK(split("o200k", "x   ") == Pieces{"x", "   "});
}

TEST_CASE("nanochat: numbers by two, single newlines, possessive classes") {
  CHECK(split("nanochat", "1234567") == Pieces{"12", "34", "56", "7"});
  CHECK(split("nanochat", "'S 'ſ") == Pieces{"'S", " '", "\xC5\xBF"});
  CHECK(split("nanochat", "'\xC5\xBF") == Pieces{"'\xC5\xBF"});
  CHECK(split("nanochat", "it's we'VE") == Pieces{"it", "'s", " we", "'VE"});
  CHECK(split("nanochat", "a   b") == Pieces{"a", "  ", " b"});
  CHECK(split("nanochat", "a\n\n\nb") == Pieces{"a", "\n\n\n", "b"});
  CHECK(split("nanochat", "a  \n\n b") == Pieces{"a", "  \n\n", " b"});
  CHECK(split("nanochat", "x   ") == Pieces{"x", "   "});
  CHECK(split("nanochat", "hello!!!\n\nworld") == Pieces{"hello", "!!!\n\n", "world"});
  CHECK(split("nanochat", " !!!a") == Pieces{" !!!", "a"});
  CHECK(split("nanochat", "!a !!") == Pieces{"!a", " !!"});
}

TEST_CASE("invalid UTF-8: each stray byte is a unit that only negated classes match; pieces cover every byte") {
  for (auto name : lrt::tok::builtin_pattern_names()) {
    CAPTURE(name);
    CHECK(split(name,
                "a\xC0\x80"
                "b") == Pieces{"a", "\xC0\x80", "b"});
    CHECK(split(name, "\x80") == Pieces{"\x80"});
    CHECK(split(name, "x\xE2\x82") == Pieces{"x", "\xE2\x82"});
    CHECK(split(name, "\xF5\xFF\xFE") == Pieces{"\xF5\xFF\xFE"});
    CHECK(split(name, "\xE2\x82\xAC") == Pieces{"\xE2\x82\xAC"});  // the euro sign, valid
  }
  CHECK(split("cl100k", " \xED\xA0\x80x") == Pieces{" \xED\xA0\x80", "x"});
  CHECK(split("nanochat", std::string("\xED\xA0\x80") + "abc") == Pieces{"\xED\xA0\x80", "abc"});
  CHECK(split_re(R"(\p{L}+)", "ab\xC3\x28") == Pieces{"ab", "\xC3("});  // not a letter: a gap
  CHECK(split_re(R"(\S+)", "\xFF\xFE x") == Pieces{"\xFF\xFE", " ", "x"});
  CHECK(split_re(R"(\s+)", "\xFF \xFF") == Pieces{"\xFF", " ", "\xFF"});
  CHECK(split_re(R"(.)", "\xFF\n") == Pieces{"\xFF", "\n"});
}

TEST_CASE("random byte strings: the pieces always cover the input exactly") {
  std::mt19937 rng(12345);
  const std::string pool[] = {"a",
                              "Z",
                              " ",
                              "  ",
                              "\n",
                              "\r\n",
                              "'",
                              "'s",
                              "1",
                              "9",
                              "!",
                              "/",
                              "\xC3\xA9",
                              "\xCC\x81",
                              "\xE6\x97\xA5",
                              "\xF0\x9F\x98\x80",
                              "\xC2\xA0",
                              "\xE2\x80\xAF",
                              "\xC5\xBF",
                              "\x80",
                              "\xC0",
                              "\xED\xA0\x80",
                              "\xF5",
                              "\xFF",
                              "\xE2\x82"};
  std::vector<Regex> res;
  for (auto n : lrt::tok::builtin_pattern_names()) res.push_back(Regex::compile(lrt::tok::builtin_pattern(n)));
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int len = int(rng() % 40);
    for (int k = 0; k < len; ++k) {
      if (rng() % 4 == 0)
        text += char(rng() % 256);
      else
        text += pool[rng() % std::size(pool)];
    }
    for (const Regex& re : res) {
      std::string joined;
      for (const auto& p : split(re, text)) joined += p;
      CHECK(joined == text);
    }
  }
}

TEST_CASE("regex: case-insensitive groups fold ASCII letters, U+017F with s and U+212A with k") {
  CHECK(split_re("(?i:k)+", "kK\xE2\x84\xAAx") == Pieces{"kK\xE2\x84\xAA", "x"});
  CHECK(split_re("(?i:s)+", "sS\xC5\xBF!") == Pieces{"sS\xC5\xBF", "!"});
  CHECK(split_re("(?i:\xC5\xBF)+", "sS\xC5\xBF!") == Pieces{"sS\xC5\xBF", "!"});
  CHECK(split_re("(?i)[a-c]+|x", "aBcX") == Pieces{"aBc", "X"});
  CHECK(split_re("(?i:ab)c", "ABcABC") == Pieces{"ABc", "ABC"});  // the second: a gap
  CHECK(split_re("(?i:[^k])+", "ab\xE2\x84\xAA") == Pieces{"ab", "\xE2\x84\xAA"});
  CHECK(split_re("k+", "kK") == Pieces{"k", "K"});
}

TEST_CASE("regex: quantifiers (greedy, lazy, possessive, counted) and groups") {
  CHECK(split_re("a+?", "aaa") == Pieces{"a", "a", "a"});
  CHECK(split_re("a{2}", "aaaaa") == Pieces{"aa", "aa", "a"});
  CHECK(split_re("a{2,}", "aaaaa") == Pieces{"aaaaa"});
  CHECK(split_re("a{1,3}", "aaaaa") == Pieces{"aaa", "aa"});
  CHECK(split_re("a{1,3}?", "aaa") == Pieces{"a", "a", "a"});
  CHECK(split_re("(?:ab){2}", "ababab") == Pieces{"abab", "ab"});
  CHECK(split_re("(?:ab|a)c", "acabc") == Pieces{"ac", "abc"});
  CHECK(split_re("(?:ab)+?c|.", "ababc") == Pieces{"ababc"});
  CHECK(split_re("(?:a|b)*c", "abbac") == Pieces{"abbac"});
  CHECK(split_re("(?:a|)*b", "aab") == Pieces{"aab"});  // a loop whose body may match empty
  CHECK(split_re("(?:a*)*b", "aab") == Pieces{"aab"});
  CHECK(split_re("a?ab|.", "ab") == Pieces{"ab"});
  CHECK(split_re("a?+ab|.", "ab") == Pieces{"a", "b"});  // possessive: no backing off
  CHECK(split_re("a*+a|b", "aab") == Pieces{"aa", "b"});
  CHECK(split_re("(?:ab)++b|.", "ababb") == Pieces{"ababb"});
  CHECK(split_re("(?:ab)*+ab|.", "abab") == Pieces{"a", "b", "a", "b"});
  CHECK(split_re("(?>a|ab)c|b", "abc") == Pieces{"a", "b", "c"});  // atomic group
  CHECK(split_re("(?:a|ab)c|b", "abc") == Pieces{"abc"});
  CHECK(split_re("(x)(?P<n>y)(?<m>z)", "xyz") == Pieces{"xyz"});
}

TEST_CASE("regex: look-ahead, anchors, word boundaries, dot, empty matches") {
  CHECK(split_re("a(?=b)", "abac") == Pieces{"a", "bac"});
  CHECK(split_re("a(?!b)", "abac") == Pieces{"ab", "a", "c"});
  CHECK(split_re("a$", "aaa") == Pieces{"aa", "a"});
  CHECK(split_re("^a", "aaa") == Pieces{"a", "aa"});
  CHECK(split_re("a$", "a\na") == Pieces{"a\n", "a"});  // $ is the end of the text only
  CHECK(split_re("(?m)a$", "a\na") == Pieces{"a", "\n", "a"});
  CHECK(split_re("\\bab", "ab cab ab") == Pieces{"ab", " cab ", "ab"});
  CHECK(split_re(".+", "ab\ncd") == Pieces{"ab", "\n", "cd"});
  CHECK(split_re("(?s).+", "ab\ncd") == Pieces{"ab\ncd"});
  CHECK(split_re("a*", "baac") == Pieces{"b", "aa", "c"});  // empty matches are skipped
  CHECK(split_re("", "abc") == Pieces{"abc"});
  CHECK(split_re("x*", "") == Pieces{});
  CHECK(split("gpt2", "") == Pieces{});
}

TEST_CASE("regex: classes and escapes") {
  CHECK(split_re("[a-c]+", "abcd") == Pieces{"abc", "d"});
  CHECK(split_re("[^a-c]+", "abcd") == Pieces{"abc", "d"});
  CHECK(split_re(R"([\p{Lu}\d]+)", "AB12cd") == Pieces{"AB12", "cd"});
  CHECK(split_re(R"(\P{L}+)", "ab12 !") == Pieces{"ab", "12 !"});
  CHECK(split_re(R"(\pL+)", "ab12") == Pieces{"ab", "12"});
  CHECK(split_re(R"(\p{Letter}+|\p{Nd}+)", "ab12") == Pieces{"ab", "12"});
  CHECK(split_re(R"(\p{Mn}+)", "e\xCC\x81") == Pieces{"e", "\xCC\x81"});
  CHECK(split_re(R"(\p{Nl}+)", "\xE2\x85\xA0x") == Pieces{"\xE2\x85\xA0", "x"});
  CHECK(split_re(R"(\w+)", "foo_bar baz") == Pieces{"foo_bar", " ", "baz"});
  CHECK(split_re(R"(\W+)", "a, b") == Pieces{"a", ", ", "b"});
  CHECK(split_re(R"(\d+)", "x\xD9\xA1\xD9\xA2") == Pieces{"x", "\xD9\xA1\xD9\xA2"});
  CHECK(split_re(R"([-a]+)", "a-b") == Pieces{"a-", "b"});
  CHECK(split_re(R"([]a]+)", "]a") == Pieces{"]a"});
  CHECK(split_re(R"(\x41\u{1F600}\')", "A\xF0\x9F\x98\x80'") == Pieces{"A\xF0\x9F\x98\x80'"});
  CHECK(split_re(R"([\x{E9}-\x{FF}]+)", "a\xC3\xA9\xC3\xBF") == Pieces{"a", "\xC3\xA9\xC3\xBF"});
  CHECK(split_re(R"([^\s\p{L}\p{N}]+)", "ab\xC3\x28") == Pieces{
                                                             "ab",
                                                             "\xC3(",
                                                         });
  CHECK(split_re("\\t\\r\\n\\\\", "\t\r\n\\") == Pieces{"\t\r\n\\"});
  CHECK(split_re("\xE6\x97\xA5+", "\xE6\x97\xA5\xE6\x97\xA5x") == Pieces{"\xE6\x97\xA5\xE6\x97\xA5", "x"});
}

TEST_CASE("regex: an alternation of more than 64 branches") {
  std::string pat;
  for (int k = 0; k < 100; ++k) pat += (k ? "|w" : "w") + std::to_string(k) + "x";
  const Regex re = Regex::compile(pat);
  CHECK(split(re, "w99xw0xw64xw63x") == Pieces{"w99x", "w0x", "w64x", "w63x"});
  CHECK(split(re, "w100x") == Pieces{"w100x"});
}

TEST_CASE("regex: bad patterns throw lrt::Error naming the pattern and the position") {
  std::string e = compile_error("(ab");
  CHECK(contains(e, "position 0"));
  CHECK(contains(e, "'(ab'"));
  CHECK(contains(e, "never closed"));
  CHECK(contains(compile_error("ab)"), "position 2"));
  e = compile_error(R"(x\p{Xx})");
  CHECK(contains(e, "position 1"));
  CHECK(contains(e, "\\p{Xx}"));
  e = compile_error(R"((a)\1)");
  CHECK(contains(e, "position 3"));
  CHECK(contains(e, "back-reference"));
  CHECK(contains(compile_error(R"(\k<n>)"), "back-reference"));
  CHECK(contains(compile_error("(?P=n)"), "back-reference"));
  CHECK(contains(compile_error("(?<=a)b"), "look-behind"));
  CHECK(contains(compile_error("a(?<!a)b"), "position 1"));
  CHECK(contains(compile_error("[a-"), "unclosed character class"));
  CHECK(contains(compile_error("[z-a]"), "position 1"));
  CHECK(contains(compile_error("a{2,1}"), "position 1"));
  CHECK(contains(compile_error("*a"), "position 0"));
  CHECK(contains(compile_error("a**"), "position 2"));
  CHECK(contains(compile_error("[[:alpha:]]"), "POSIX"));
  CHECK(contains(compile_error("[a&&b]"), "set operations"));
  CHECK(contains(compile_error("(?x)a"), "flag"));
  CHECK(contains(compile_error(R"(\q)"), "escape"));
  CHECK(contains(compile_error("a\\"), "trailing backslash"));
  CHECK(contains(compile_error("\xFF"), "UTF-8"));
  CHECK(compile_error(R"(\')").empty());
  for (auto n : lrt::tok::builtin_pattern_names()) CHECK(compile_error(lrt::tok::builtin_pattern(n)).empty());
}

TEST_CASE("regex: split is thread-safe and reentrant") {
  const Regex re = Regex::compile(lrt::tok::builtin_pattern("cl100k"));
  std::string text;
  for (int k = 0; k < 2000; ++k) text += "Hello world's 123456  \n\n \xC3\xA9t\xC3\xA9 !! ";
  const Pieces want = split(re, text);
  std::vector<std::size_t> counts(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        std::size_t count = 0, last = 0;
        bool ok = true;
        re.split(text, [&](std::size_t b, std::size_t e) {
          ok = ok && b == last && text.compare(b, e - b, want[count]) == 0;
          last = e;
          ++count;
        });
        if (ok && count == want.size()) ++counts[t];
      }
    });
  for (auto& th : threads) th.join();
  for (auto c : counts) CHECK(c == 5);
  // A callback that splits again (the inner call gets its own scratch).
  Pieces outer;
  const std::string t2 = "ab cd";
  re.split(t2, [&](std::size_t b, std::size_t e) {
    const std::string piece = t2.substr(b, e - b);
    CHECK(split(re, piece + " x") == Pieces{piece, " x"});
    outer.push_back(piece);
  });
  CHECK(outer == Pieces{"ab", " cd"});
}

}  // namespace test_regex
