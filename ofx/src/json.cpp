#include "json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ff {
namespace {

const Json kNull;

void bad(const char* what, size_t at) {
  throw std::runtime_error(std::string("malformed JSON: ") + what + " at byte " + std::to_string(at));
}

void put_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | cp >> 6));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | cp >> 12));
    out.push_back(char(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | cp >> 18));
    out.push_back(char(0x80 | (cp >> 12 & 0x3F)));
    out.push_back(char(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

struct Parser {
  const std::string& t;
  size_t i = 0;
  int depth = 0;

  void ws() {
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  }
  bool lit(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (t.compare(i, n, word) == 0) {
      i += n;
      return true;
    }
    return false;
  }
  unsigned hex4() {
    if (i + 4 > t.size())
      bad("short \\u escape", i);
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = t[i++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= unsigned(c - 'A' + 10);
      else
        bad("bad \\u escape", i);
    }
    return v;
  }
  std::string str() {
    ++i;  // the opening quote
    std::string out;
    while (true) {
      if (i >= t.size())
        bad("unterminated string", i);
      char c = t[i++];
      if (c == '"')
        return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i >= t.size())
        bad("unterminated escape", i);
      char e = t[i++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && lit("\\u")) {
            unsigned lo = hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          bad("unknown escape", i);
      }
    }
  }
  Json value() {
    ws();
    if (i >= t.size())
      bad("unexpected end", i);
    if (++depth > 200)
      bad("nested too deeply", i);
    Json out;
    char c = t[i];
    if (c == '{') {
      ++i;
      Json::Object obj;
      ws();
      if (i < t.size() && t[i] == '}') {
        ++i;
      } else {
        while (true) {
          ws();
          if (i >= t.size() || t[i] != '"')
            bad("expected a key", i);
          std::string key = str();
          ws();
          if (i >= t.size() || t[i++] != ':')
            bad("expected ':'", i);
          obj[key] = value();
          ws();
          if (i < t.size() && t[i] == ',') {
            ++i;
            continue;
          }
          if (i < t.size() && t[i] == '}') {
            ++i;
            break;
          }
          bad("expected ',' or '}'", i);
        }
      }
      out = Json(std::move(obj));
    } else if (c == '[') {
      ++i;
      Json::Array arr;
      ws();
      if (i < t.size() && t[i] == ']') {
        ++i;
      } else {
        while (true) {
          arr.push_back(value());
          ws();
          if (i < t.size() && t[i] == ',') {
            ++i;
            continue;
          }
          if (i < t.size() && t[i] == ']') {
            ++i;
            break;
          }
          bad("expected ',' or ']'", i);
        }
      }
      out = Json(std::move(arr));
    } else if (c == '"') {
      out = Json(str());
    } else if (lit("true")) {
      out = Json(true);
    } else if (lit("false")) {
      out = Json(false);
    } else if (lit("null")) {
      out = Json();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const char* start = t.c_str() + i;
      char* end = nullptr;
      double v = std::strtod(start, &end);
      if (end == start)
        bad("bad number", i);
      i += size_t(end - start);
      out = Json(v);
    } else {
      bad("unexpected character", i);
    }
    --depth;
    return out;
  }
};

void dump_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(char(c));
        }
    }
  }
  out.push_back('"');
}

void dump_to(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::Type::Null:
      out += "null";
      break;
    case Json::Type::Bool:
      out += v.as_bool() ? "true" : "false";
      break;
    case Json::Type::Number: {
      double n = v.as_number();
      if (!std::isfinite(n)) {
        out += "null";  // JSON has no NaN/Infinity (as engine/protocol/messages.py)
      } else if (n == std::floor(n) && std::fabs(n) < 9007199254740992.0) {
        out += std::to_string((long long)n);
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", n);
        out += buf;
      }
      break;
    }
    case Json::Type::String:
      dump_string(out, v.as_string());
      break;
    case Json::Type::Array: {
      out.push_back('[');
      bool first = true;
      for (const Json& item : v.as_array()) {
        if (!first)
          out.push_back(',');
        first = false;
        dump_to(out, item);
      }
      out.push_back(']');
      break;
    }
    case Json::Type::Object: {
      out.push_back('{');
      bool first = true;
      for (const auto& kv : v.as_object()) {
        if (!first)
          out.push_back(',');
        first = false;
        dump_string(out, kv.first);
        out.push_back(':');
        dump_to(out, kv.second);
      }
      out.push_back('}');
      break;
    }
  }
}

}  // namespace

bool Json::as_bool() const {
  if (type_ != Type::Bool)
    throw std::runtime_error("JSON value is not true or false");
  return b_;
}
double Json::as_number() const {
  if (type_ != Type::Number)
    throw std::runtime_error("JSON value is not a number");
  return n_;
}
long long Json::as_int() const {
  return (long long)as_number();
}
const std::string& Json::as_string() const {
  if (type_ != Type::String)
    throw std::runtime_error("JSON value is not a string");
  return s_;
}
const Json::Array& Json::as_array() const {
  if (type_ != Type::Array)
    throw std::runtime_error("JSON value is not a list");
  return *a_;
}
const Json::Object& Json::as_object() const {
  if (type_ != Type::Object)
    throw std::runtime_error("JSON value is not an object");
  return *o_;
}
const Json& Json::operator[](const std::string& key) const {
  if (type_ != Type::Object)
    return kNull;
  auto it = o_->find(key);
  return it == o_->end() ? kNull : it->second;
}
bool Json::has(const std::string& key) const {
  return type_ == Type::Object && o_->count(key) > 0;
}
Json& Json::set(const std::string& key, Json value) {
  if (type_ == Type::Null) {
    type_ = Type::Object;
    o_ = std::make_shared<Object>();
  }
  if (type_ != Type::Object)
    throw std::runtime_error("JSON value is not an object");
  if (o_.use_count() > 1)
    o_ = std::make_shared<Object>(*o_);  // copies share until written
  (*o_)[key] = std::move(value);
  return *this;
}
std::string Json::dump() const {
  std::string out;
  dump_to(out, *this);
  return out;
}
Json Json::parse(const std::string& text) {
  Parser p{text};
  Json v = p.value();
  p.ws();
  if (p.i != text.size())
    bad("trailing characters", p.i);
  return v;
}

}  // namespace ff
