// Python's integers in 64 bits: checked arithmetic, floor division and modulo, int()
// and float() of values, round() half to even.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

bool is_integral(const JinjaValue& v) { return v.is_int() || v.is_bool(); }

std::int64_t int_of(const JinjaValue& v) { return v.is_bool() ? v.as_bool() : v.as_int(); }

double float_of(const JinjaValue& v) { return v.is_float() ? v.as_float() : double(int_of(v)); }

[[noreturn]] void overflow() { throw JinjaError("integer overflow (looptrace computes with 64-bit integers)"); }

std::int64_t add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

std::int64_t floor_div(std::int64_t x, std::int64_t y) {
  if (y == 0) throw JinjaError("division by zero");
  if (x == std::numeric_limits<std::int64_t>::min() && y == -1) overflow();
  std::int64_t q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t x, std::int64_t y) {
  if (y == 0) throw JinjaError("division by zero");
  if (y == -1) return 0;  // x % -1 overflows for INT64_MIN in C++
  std::int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

std::int64_t int_pow(std::int64_t base, std::int64_t exp) {
  std::int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = mul(result, base);
    exp >>= 1;
    if (exp) base = mul(base, base);
  }
  return result;
}

// Python's int(): from bools, ints, floats (truncating) and integer text.
std::int64_t to_int(const JinjaValue& v, int base) {
  if (is_integral(v)) return int_of(v);
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d)) type_error("cannot convert " + v.str() + " to an integer");
    if (d >= 9.2233720368547758e18 || d < -9.2233720368547758e18) overflow();
    return static_cast<std::int64_t>(d);
  }
  if (v.is_string()) {
    std::string s = v.as_string();
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    std::size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    s = s.substr(b, e - b);
    errno = 0;
    char* end = nullptr;
    const long long r = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && end == s.c_str() + s.size()) {
      if (errno == ERANGE) overflow();
      return r;
    }
  }
  type_error("invalid literal for int(): " + v.repr());
}

double to_float(const JinjaValue& v) {
  if (v.is_number()) return float_of(v);
  if (v.is_string()) {
    const std::string& s = v.as_string();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return d;
  }
  type_error("could not convert " + v.repr() + " to float");
}

// Python's round(): half to even.
double round_half_even(double x, std::int64_t digits) {
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double y = x * scale;
  double r = std::nearbyint(y);  // the default rounding mode is to nearest, ties to even
  return r / scale;
}

}  // namespace looptrace::jinja
