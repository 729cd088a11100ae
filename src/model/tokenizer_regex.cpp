// The pre-tokenizer's regular expressions, on PCRE2 in UTF mode with Unicode properties (UCP):
// \p{L}, \p{N}, \s and \w then mean what the patterns of tokenizer.json expect.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq::tok {

namespace {

// Bounds on one match attempt, so that a pattern that backtracks without end (a hostile file)
// fails the encode instead of hanging it.
constexpr std::uint32_t kMatchLimit = 10'000'000;
constexpr std::uint32_t kDepthLimit = 100'000;  // KiB of backtracking memory (heap)

pcre2_code* code_of(const std::shared_ptr<void>& p) { return static_cast<pcre2_code*>(p.get()); }

}  // namespace

Regex::Regex(std::string_view pattern, bool literal, const Where& where) {
  if (utf8_invalid_at(pattern)) where.fail(fmt::format("pattern '{}' is not UTF-8", printable(pattern)));
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL takes no PCRE2_UCP (nothing of a literal depends on Unicode properties).
  const std::uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                                   &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    where.fail(fmt::format("pattern '{}' is not a valid regular expression: {} at offset {}", printable(pattern),
                           reinterpret_cast<const char*>(message), std::size_t(offset)));
  }
  // JIT where the platform has it; matching falls back to the interpreter otherwise.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
}

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  pcre2_code* code = code_of(code_);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(pcre2_match_data_create_from_pattern(code, nullptr),
                                                                      pcre2_match_data_free);
  std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)> context(pcre2_match_context_create(nullptr),
                                                                              pcre2_match_context_free);
  if (!data || !context) throw std::bad_alloc();
  pcre2_set_match_limit(context.get(), kMatchLimit);
  pcre2_set_depth_limit(context.get(), kDepthLimit);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t at = 0;
  std::uint32_t jit = 0;
  while (at <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), at, PCRE2_NO_UTF_CHECK | jit, data.get(), context.get());
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      jit = PCRE2_NO_JIT;  // the interpreter keeps its backtracking on the heap, bounded above
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::invalid_argument(fmt::format("tokenizer: the pre-tokenizer's pattern failed at byte {} of the text: {}",
                                              at, reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* v = pcre2_get_ovector_pointer(data.get());
    const std::size_t begin = v[0], end = v[1];
    if (end > begin) {
      out.emplace_back(begin, end);
      at = end;
    } else {
      // An empty match makes no piece; the search goes on from the next character.
      if (begin >= text.size()) break;
      std::size_t next = begin;
      utf8_next(text, next);
      at = next;
    }
  }
  return out;
}

bool is_word_char(char32_t cp) {
  static const Regex word("^[\\p{L}\\p{M}\\p{N}\\p{Pc}]$", false, Where{nullptr, ""});
  std::string s;
  append_utf8(s, cp);
  return !word.find_all(s).empty();
}

}  // namespace exactq::tok
