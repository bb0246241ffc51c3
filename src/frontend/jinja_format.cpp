// Python's printf-style formatting with `%`.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

// printf-style formatting: `"%d items" % n`, `"%s-%s" % (a, b)`, `"%(x)s" % d`.
std::string printf_format(const std::string& format, const JinjaValue& args_) {
  const JinjaValue& args = defined(args_);
  const bool by_name = args.is_dict();
  std::vector<JinjaValue> items = args.is_tuple() ? args.list() : std::vector<JinjaValue>{args};
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) type_error("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const JinjaValue* value = nullptr;
    if (format[i] == '(') {
      const std::size_t close = format.find(')', i);
      if (close == std::string::npos || !by_name) type_error("format requires a mapping");
      value = args.find(format.substr(i + 1, close - i - 1));
      if (!value) type_error("no key '" + format.substr(i + 1, close - i - 1) + "' for the format");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < format.size() && std::strchr("-+ #0", format[i])) spec += format[i++];
    while (i < format.size() && (is_digit(format[i]) || format[i] == '.')) spec += format[i++];
    if (i >= format.size()) type_error("incomplete format");
    const char conv = format[i];
    if (!value) {
      if (next >= items.size()) type_error("not enough arguments for the format string");
      value = &items[next++];
    }
    defined(*value);
    char buf[512];
    if (std::strchr("diu", conv)) {
      spec += "lld";
      std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(is_integral(*value) ? int_of(*value) : to_int(*value)));
      out += buf;
    } else if (std::strchr("xXo", conv)) {
      spec += std::string("ll") + conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(to_int(*value)));
      out += buf;
    } else if (std::strchr("eEfFgG", conv)) {
      spec += conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), to_float(*value));
      out += buf;
    } else if (conv == 's' || conv == 'r' || conv == 'a') {
      const std::string s = conv == 's' ? value->str() : value->repr();
      spec += 's';
      if (spec == "%s") out += s;
      else {
        std::snprintf(buf, sizeof buf, spec.c_str(), s.c_str());
        out += buf;
      }
    } else {
      type_error(std::string("unsupported format character '") + conv + "'");
    }
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  if (!by_name && next < items.size() && args.is_tuple())
    type_error("not all arguments converted during string formatting");
  return out;
}

}  // namespace looptrace::jinja
