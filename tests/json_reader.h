// A strict reader of the JSON that roost writes (roost_stats_json(),
// ROOST_STATS=json): objects, arrays, strings without escapes, unsigned
// integers; whitespace between tokens.  Anything else (true, false, null,
// signs, fractions, escapes, trailing text, a duplicate key) is an error,
// so a test that reads roost's output with it also checks that the output
// is one well-formed JSON value.  Test code: it allocates freely.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace roost_test::json {

struct Value {
  enum Kind { kNumber, kString, kArray, kObject } kind = kNumber;
  uint64_t number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;
  std::vector<std::string> keys;  // an object's keys in their order

  bool has(const std::string& key) const { return kind == kObject && object.count(key) != 0; }
  // The member `key` of an object (a default Value if there is none).
  const Value& operator[](const std::string& key) const {
    static const Value kNone;
    auto it = object.find(key);
    return it == object.end() ? kNone : it->second;
  }
};

class Reader {
 public:
  explicit Reader(const std::string& text) : s_(text) {}

  // The one value `text` holds; false (with error()) if it is not exactly one.
  bool read(Value* out) {
    skip_space();
    if (!value(out, 0)) return false;
    skip_space();
    if (pos_ != s_.size()) return fail("text after the value");
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at offset " + std::to_string(pos_);
    return false;
  }
  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      pos_++;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  bool string(std::string* out) {
    if (!eat('"')) return fail("expected a string");
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\' || static_cast<unsigned char>(s_[pos_]) < 0x20)
        return fail("escape or control character in a string");
      pos_++;
    }
    if (pos_ == s_.size()) return fail("unterminated string");
    *out = s_.substr(start, pos_ - start);
    pos_++;
    return true;
  }
  bool value(Value* out, int depth) {
    if (depth > 16) return fail("nested too deep");
    skip_space();
    if (pos_ == s_.size()) return fail("expected a value");
    char c = s_[pos_];
    if (c == '{') {
      pos_++;
      out->kind = Value::kObject;
      if (eat('}')) return true;
      do {
        std::string key;
        if (!string(&key)) return false;
        if (out->object.count(key) != 0) return fail("duplicate key " + key);
        if (!eat(':')) return fail("expected ':'");
        Value v;
        if (!value(&v, depth + 1)) return false;
        out->keys.push_back(key);
        out->object.emplace(key, std::move(v));
      } while (eat(','));
      return eat('}') || fail("expected ',' or '}'");
    }
    if (c == '[') {
      pos_++;
      out->kind = Value::kArray;
      if (eat(']')) return true;
      do {
        Value v;
        if (!value(&v, depth + 1)) return false;
        out->array.push_back(std::move(v));
      } while (eat(','));
      return eat(']') || fail("expected ',' or ']'");
    }
    if (c == '"') {
      out->kind = Value::kString;
      return string(&out->string);
    }
    if (c >= '0' && c <= '9') {
      if (c == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
        return fail("leading zero");
      uint64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        uint64_t digit = static_cast<uint64_t>(s_[pos_] - '0');
        if (v > (UINT64_MAX - digit) / 10) return fail("number past 64 bits");
        v = v * 10 + digit;
        pos_++;
      }
      if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
        return fail("not an unsigned integer");
      out->kind = Value::kNumber;
      out->number = v;
      return true;
    }
    return fail(std::string("unexpected '") + c + "'");
  }

  std::string s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace roost_test::json
