// The collector's one error convention. A function that can fail returns Status (no
// value) or Result<T> (a value, or the failure). The failure is one line of text for
// the user that names what failed (a file, a URL) and why. Both types are
// [[nodiscard]]: a caller reports the failure, counts it, or, where ignoring it is
// right, says why in a comment and calls IgnoreError().
//
// (std::expected is C++23; g++ 12 lacks it.) The audit library keeps its own
// conventions: no allocation, return values that change nothing (ARCHITECTURE.md).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ldscope {

// What a failing function returns: `return Error{fmt::format("cannot read {}", path)};`
struct Error {
  std::string message;
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  Status(Error e) : failed_(true), error_(std::move(e.message)) {}  // NOLINT: implicit on purpose
  static Status Ok() { return Status(); }

  bool ok() const { return !failed_; }
  // The failure's text ("" on success).
  const std::string& error() const { return error_; }
  // The caller decided that this failure changes nothing (say why where it is called).
  void IgnoreError() const {}

 private:
  bool failed_ = false;
  std::string error_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}          // NOLINT
  Result(Error e) : v_(std::in_place_index<1>, std::move(e.message)) {}      // NOLINT

  bool ok() const { return v_.index() == 0; }
  // The value; only when ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  // The failure's text ("" on success).
  const std::string& error() const {
    static const std::string kNone;
    return ok() ? kNone : std::get<1>(v_);
  }
  Status status() const { return ok() ? Status() : Status(Error{std::get<1>(v_)}); }
  void IgnoreError() const {}

 private:
  std::variant<T, std::string> v_;
};

}  // namespace ldscope
