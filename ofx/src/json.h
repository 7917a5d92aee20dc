// The JSON of the engine's control messages (engine/protocol): one object per send_bytes frame. Small on purpose:
// numbers are doubles (ids stay below 2^53, as the protocol requires), objects keep their keys sorted.
#pragma once
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ff {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::Bool), b_(b) {}
  Json(int n) : type_(Type::Number), n_(n) {}
  Json(long n) : type_(Type::Number), n_(double(n)) {}
  Json(long long n) : type_(Type::Number), n_(double(n)) {}
  Json(double n) : type_(Type::Number), n_(n) {}
  Json(const char* s) : type_(Type::String), s_(s) {}
  Json(std::string s) : type_(Type::String), s_(std::move(s)) {}
  Json(Array a) : type_(Type::Array), a_(std::make_shared<Array>(std::move(a))) {}
  Json(Object o) : type_(Type::Object), o_(std::make_shared<Object>(std::move(o))) {}

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_object() const { return type_ == Type::Object; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_string() const { return type_ == Type::String; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_bool() const { return type_ == Type::Bool; }

  bool as_bool() const;
  double as_number() const;
  long long as_int() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Object access: a missing key (or a non-object) gives null, so optional fields read plainly.
  const Json& operator[](const std::string& key) const;
  bool has(const std::string& key) const;
  Json& set(const std::string& key, Json value);  // makes this an object if it is null

  std::string dump() const;
  static Json parse(const std::string& text);  // throws std::runtime_error naming the problem

 private:
  Type type_ = Type::Null;
  bool b_ = false;
  double n_ = 0;
  std::string s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
};

}  // namespace ff
