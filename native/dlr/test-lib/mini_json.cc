#include "mini_json.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace kiln_conformance {

namespace {

// Deep enough for any graph file; bounds the recursion on hostile input.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  JsonValue Document() {
    JsonValue value = Value(0);
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) const {
    throw std::runtime_error("invalid JSON at offset " + std::to_string(pos_) + ": " + why);
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  bool Consume(const char* word) {
    size_t length = std::char_traits<char>::length(word);
    if (text_.compare(pos_, length, word) != 0) return false;
    pos_ += length;
    return true;
  }

  JsonValue Value(int depth) {
    if (depth > kMaxDepth) Fail("nesting is too deep");
    SkipSpace();
    if (pos_ >= text_.size()) Fail("unexpected end of input");
    JsonValue value;
    char c = text_[pos_];
    if (c == '{') {
      value.kind = JsonValue::Kind::kObject;
      ++pos_;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return value;
      }
      for (;;) {
        SkipSpace();
        if (pos_ >= text_.size() || text_[pos_] != '"') Fail("expected a member name");
        std::string key = String();
        SkipSpace();
        if (pos_ >= text_.size() || text_[pos_] != ':') Fail("expected ':'");
        ++pos_;
        value.object[key] = Value(depth + 1);
        SkipSpace();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < text_.size() && text_[pos_] == '}') {
          ++pos_;
          return value;
        }
        Fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      value.kind = JsonValue::Kind::kArray;
      ++pos_;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return value;
      }
      for (;;) {
        value.array.push_back(Value(depth + 1));
        SkipSpace();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < text_.size() && text_[pos_] == ']') {
          ++pos_;
          return value;
        }
        Fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      value.kind = JsonValue::Kind::kString;
      value.string = String();
      return value;
    }
    if (Consume("true")) {
      value.kind = JsonValue::Kind::kBool;
      value.boolean = true;
      return value;
    }
    if (Consume("false")) {
      value.kind = JsonValue::Kind::kBool;
      return value;
    }
    if (Consume("null")) return value;
    if (c == '-' || (c >= '0' && c <= '9')) {
      const char* start = text_.c_str() + pos_;
      char* end = nullptr;
      value.kind = JsonValue::Kind::kNumber;
      value.number = std::strtod(start, &end);
      if (end == start) Fail("malformed number");
      pos_ += static_cast<size_t>(end - start);
      return value;
    }
    Fail(std::string("unexpected character '") + c + "'");
  }

  std::string String() {
    ++pos_;  // opening quote
    std::string out;
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      char escape = text_[pos_++];
      switch (escape) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        default: Fail("unsupported escape in a string");
      }
    }
    Fail("unterminated string");
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

bool JsonValue::Has(const std::string& key) const {
  return kind == Kind::kObject && object.count(key) != 0;
}

const JsonValue& JsonValue::At(const std::string& key) const {
  if (kind != Kind::kObject) throw std::runtime_error("expected an object holding '" + key + "'");
  auto found = object.find(key);
  if (found == object.end()) throw std::runtime_error("missing '" + key + "'");
  return found->second;
}

const std::string& JsonValue::AsString(const std::string& what) const {
  if (kind != Kind::kString) throw std::runtime_error(what + " must be a string");
  return string;
}

int64_t JsonValue::AsInt(const std::string& what) const {
  if (kind != Kind::kNumber || std::floor(number) != number || std::fabs(number) > 9.0e15) {
    throw std::runtime_error(what + " must be an integer");
  }
  return static_cast<int64_t>(number);
}

bool JsonValue::AsBool(const std::string& what) const {
  if (kind != Kind::kBool) throw std::runtime_error(what + " must be true or false");
  return boolean;
}

const std::vector<JsonValue>& JsonValue::AsArray(const std::string& what) const {
  if (kind != Kind::kArray) throw std::runtime_error(what + " must be an array");
  return array;
}

JsonValue ParseJson(const std::string& text) { return Parser(text).Document(); }

}  // namespace kiln_conformance
