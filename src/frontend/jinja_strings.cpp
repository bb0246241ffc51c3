// Python's string operations on UTF-8 text: case, strip, replace, split, repetition,
// HTML escapes and str.format.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

std::string repeat(const std::string& s, std::int64_t n) {
  if (n <= 0 || s.empty()) return {};
  if (static_cast<std::size_t>(n) > kMaxString / s.size()) throw JinjaError("string too long");
  std::string out;
  out.reserve(s.size() * static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out += s;
  return out;
}

// The strings of a list of UTF-8 code points.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto strippable = [&](char c) { return chars ? chars->find(c) != std::string::npos : is_space(c); };
  std::size_t b = 0, e = s.size();
  if (left)
    while (b < e && strippable(s[b])) ++b;
  if (right)
    while (e > b && strippable(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) {
    // Python inserts `to` around every character.
    std::string out;
    std::int64_t n = 0;
    for (const auto& ch : characters(s)) {
      if (count < 0 || n++ < count) out += to;
      out += ch;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  std::size_t pos = 0;
  std::int64_t n = 0;
  for (std::size_t hit; (count < 0 || n < count) && (hit = s.find(from, pos)) != std::string::npos; ++n) {
    out += s.substr(pos, hit - pos) + to;
    if (out.size() > kMaxString) throw JinjaError("string too long");
    pos = hit + from.size();
  }
  return out + s.substr(pos);
}

std::vector<std::string> split(const std::string& s, const JinjaValue& sep, std::int64_t max_split) {
  std::vector<std::string> out;
  if (sep.is_none()) {
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && std::int64_t(out.size()) == max_split) {
        std::size_t e = s.size();
        while (e > i && is_space(s[e - 1])) --e;
        out.push_back(s.substr(i, e - i));
        break;
      }
      std::size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = defined(sep).is_string() ? sep.as_string() : (type_error("split() needs a string separator"), sep.as_string());
  if (d.empty()) type_error("empty separator");
  std::size_t pos = 0;
  for (std::size_t hit; (max_split < 0 || std::int64_t(out.size()) < max_split) &&
                        (hit = s.find(d, pos)) != std::string::npos;) {
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

JinjaValue string_list(const std::vector<std::string>& items) {
  JinjaList out;
  for (const auto& s : items) out.emplace_back(s);
  return JinjaValue(std::move(out));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

// str.format with {}, {0} and {name} fields (no format specs).
std::string python_format(const std::string& f, const std::vector<JinjaValue>& args, const Kwargs& kwargs) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
    if (f[i] != '{') { out += f[i]; continue; }
    const std::size_t close = f.find('}', i);
    if (close == std::string::npos) type_error("format(): a '{' is not closed");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) type_error("format(): format specs are not supported");
    const JinjaValue* v = nullptr;
    if (field.empty()) {
      if (auto_index < args.size()) v = &args[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), is_digit)) {
      const std::size_t k = std::stoul(field);
      if (k < args.size()) v = &args[k];
    } else {
      v = kwarg(kwargs, field);
    }
    if (!v) type_error("format(): no argument for {" + field + "}");
    out += defined(*v).str();
    i = close;
  }
  return out;
}

}  // namespace looptrace::jinja
