#include "looptrace/frontend/concise_einsum.hpp"

#include <algorithm>
#include <cctype>

namespace looptrace {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool is_identifier(std::string_view s) {
  return !s.empty() && is_ident_start(s[0]) && std::all_of(s.begin(), s.end(), is_ident_char);
}

// Offsets of the first and one-past-last non-space characters of `s` (equal when blank).
std::pair<std::size_t, std::size_t> trimmed_span(std::string_view s) {
  std::size_t begin = 0;
  std::size_t end = s.size();
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return {begin, end};
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

class ConciseParser {
 public:
  explicit ConciseParser(std::string_view text) : text_(text) {}

  ConciseEinsum parse() {
    ConciseAccess output = tensor_ref();
    output.is_output = true;
    expect_assignment();
    ConciseEinsum einsum;
    einsum.name = output.tensor;
    do {
      skip_space();
      ConciseAccess input = tensor_ref();
      // AccelForge keys the accesses by tensor name (_parse_einsum_entry): a tensor
      // named again keeps its first place and takes the last entry, the output's
      // when it is the output.
      auto same = std::find_if(einsum.accesses.begin(), einsum.accesses.end(),
                               [&](const ConciseAccess& a) { return a.tensor == input.tensor; });
      if (input.tensor == output.tensor) {
        if (same == einsum.accesses.end()) {
          einsum.notes.push_back("tensor " + input.tensor +
                                 " is both the output and an input: AccelForge reads it as the output only "
                                 "(its read on the right is not traced)");
          einsum.accesses.push_back(input);  // its place; the output's entry comes at the end
        }
      } else if (same == einsum.accesses.end()) {
        einsum.accesses.push_back(std::move(input));
      } else if (same->ranks != input.ranks || same->projection != input.projection) {
        einsum.notes.push_back("tensor " + input.tensor +
                               " appears twice with different indices: AccelForge keeps the last (" + text_of(input) +
                               "), the read of " + text_of(*same) + " is not traced");
        *same = std::move(input);
      }
    } while (accept_operator());
    skip_space();
    if (pos_ < text_.size()) throw ExpressionError(pos_, unexpected("'*', '+' or the end"));
    auto place = std::find_if(einsum.accesses.begin(), einsum.accesses.end(),
                              [&](const ConciseAccess& a) { return a.tensor == output.tensor; });
    if (place != einsum.accesses.end()) *place = std::move(output);
    else einsum.accesses.push_back(std::move(output));
    return einsum;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  // "X[M, N]": a tensor reference by its ranks, for a note.
  static std::string text_of(const ConciseAccess& a) {
    std::string out = a.tensor + "[";
    for (std::size_t r = 0; r < a.ranks.size(); ++r) out += (r ? ", " : "") + a.ranks[r];
    return out + "]";
  }

  std::string unexpected(const std::string& wanted) const {
    if (pos_ >= text_.size()) return "expected " + wanted + " but the text ends";
    return "expected " + wanted + " but found '" + std::string(1, text_[pos_]) + "'";
  }

  void expect_assignment() {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != '=' ||
        (pos_ + 1 < text_.size() && text_[pos_ + 1] == '='))
      throw ExpressionError(pos_, unexpected("'=' after the output tensor"));
    ++pos_;
  }

  // The operator between two tensors: `*` (a product) or `+`, `-`, `/`; every tensor
  // on the right is read whatever joins them.
  bool accept_operator() {
    skip_space();
    if (pos_ >= text_.size() || std::string_view("*+-/").find(text_[pos_]) == std::string_view::npos)
      return false;
    ++pos_;
    return true;
  }

  // NAME or NAME[entry, ...]
  ConciseAccess tensor_ref() {
    skip_space();
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])))
      throw ExpressionError(pos_, "constant factors are not allowed; expected a tensor name");
    if (pos_ >= text_.size() || !is_ident_start(text_[pos_]))
      throw ExpressionError(pos_, unexpected("a tensor name"));
    const std::size_t start = pos_;
    while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    ConciseAccess access;
    access.tensor = std::string(text_.substr(start, pos_ - start));
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '[') brackets(access);
    return access;
  }

  void brackets(ConciseAccess& access) {
    const std::size_t open = pos_;
    const std::size_t close = text_.find(']', open);
    if (close == std::string_view::npos) throw ExpressionError(open, "unclosed '['");
    pos_ = close + 1;
    const std::string_view content = text_.substr(open + 1, close - open - 1);
    const auto [begin, end] = trimmed_span(content);
    if (begin == end) return;  // `S[]`: a scalar
    std::size_t offset = open + 1;
    for (;;) {
      const std::size_t comma = text_.find(',', offset);
      const std::size_t stop = comma < close ? comma : close;
      entry(access, offset, stop);
      if (stop == close) break;
      offset = stop + 1;
    }
  }

  // One index in [begin, end): `m` (rank M) or `RANK: affine-expr`.
  void entry(ConciseAccess& access, std::size_t begin, std::size_t end) {
    const std::string_view piece = text_.substr(begin, end - begin);
    const auto [first, last] = trimmed_span(piece);
    const std::size_t col = begin + first;
    if (first == last) throw ExpressionError(col, "empty index in tensor " + access.tensor);
    const std::size_t colon = piece.find(':');
    std::string rank;
    AffineExpr projection;
    if (colon == std::string_view::npos) {
      const std::string_view variable = piece.substr(first, last - first);
      if (!is_identifier(variable))
        throw ExpressionError(col, "index '" + std::string(variable) +
                                       "' is not a rank variable; write `RANK: expr` (e.g. `M: " +
                                       std::string(variable) + "`)");
      rank = upper(variable);
      projection.terms.emplace_back(std::string(variable), 1);
    } else {
      rank = rank_name(piece.substr(0, colon), begin);
      projection = offset_parse(piece.substr(colon + 1), begin + colon + 1);
    }
    if (std::find(access.ranks.begin(), access.ranks.end(), rank) != access.ranks.end())
      throw ExpressionError(col, "rank " + rank + " appears twice in tensor " + access.tensor);
    access.ranks.push_back(std::move(rank));
    access.projection.push_back(std::move(projection));
  }

  static std::string rank_name(std::string_view text, std::size_t offset) {
    const auto [first, last] = trimmed_span(text);
    const std::string_view name = text.substr(first, last - first);
    if (!is_identifier(name)) throw ExpressionError(offset + first, "expected a rank name before ':'");
    return std::string(name);
  }

  // parse_affine reports columns in its own substring; shift them into this text.
  static AffineExpr offset_parse(std::string_view text, std::size_t offset) {
    try {
      return parse_affine(text);
    } catch (const ExpressionError& e) {
      throw ExpressionError(offset + e.column(), e.what());
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

ConciseEinsum parse_concise_einsum(std::string_view text) { return ConciseParser(text).parse(); }

}  // namespace looptrace
