// Unicode normalization (NFC, NFD, NFKC, NFKD) by utf8proc, Debian's libutf8proc: the
// decompositions, the canonical ordering of combining marks and the compositions of the Unicode
// Character Database, Hangul included.
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>

#include <fmt/format.h>
#include <utf8proc.h>

#include "model/tokenizer_parts.h"

namespace exactq::tok {

std::string unicode_normalize(std::string_view s, NormForm form) {
  if (s.empty()) return {};
  // UTF8PROC_STABLE: the forms as Unicode defines them for every version (no unassigned code
  // point takes part in a composition). Without UTF8PROC_NULLTERM a U+0000 is a character.
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormForm::nfc: options |= UTF8PROC_COMPOSE; break;
    case NormForm::nfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormForm::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormForm::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()),
                                          &out, static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, void (*)(void*)> owned(out, std::free);
  if (n == UTF8PROC_ERROR_NOMEM) throw std::bad_alloc();
  if (n < 0)
    throw std::invalid_argument(fmt::format("tokenizer: Unicode normalization failed: {}", utf8proc_errmsg(n)));
  return std::string(reinterpret_cast<const char*>(out), std::size_t(n));
}

}  // namespace exactq::tok
