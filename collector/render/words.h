// The words for the schema's enums that every output shares (show, report, diff,
// export, the findings' text): the one table of them. Layers below render keep the
// enums and never spell these words themselves; analysis writes findings' text with
// these functions.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/generated_enum_reflection.h>

#include "ldscope_proto/events.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::render {

// The word of an enum value, derived from its name: without the prefix that every other
// value of its enum shares, in lower case, '-' for '_' (FindingKind's RUNTIME_FAMILY is
// "runtime-family", MissingCause's CAUSE_CXX_ABI "cxx-abi", StartReason's START_FORK
// "fork"); a value 0 named *_UNSPECIFIED is "unspecified". JSON prints every enum so, and
// --fail-on takes FindingKind's and Severity's words.
inline std::string EnumWord(const google::protobuf::EnumValueDescriptor* v) {
  const std::string_view name = v->name();
  const bool unspecified = v->number() == 0 && name.size() >= 12 && name.substr(name.size() - 12) == "_UNSPECIFIED";
  if (unspecified) return "unspecified";
  // The prefix the enum's other named values share, up to an underscore.
  const google::protobuf::EnumDescriptor* e = v->type();
  std::string_view prefix;
  int others = 0;
  for (int i = 0; i < e->value_count(); ++i) {
    const std::string_view n = e->value(i)->name();
    if (e->value(i)->number() == 0 && n.size() >= 12 && n.substr(n.size() - 12) == "_UNSPECIFIED") continue;
    if (others++ == 0) {
      prefix = n;
      continue;
    }
    size_t k = 0;
    while (k < prefix.size() && k < n.size() && prefix[k] == n[k]) ++k;
    prefix = prefix.substr(0, k);
  }
  prefix = others < 2 ? std::string_view() : prefix.substr(0, prefix.rfind('_') + 1);
  if (prefix.size() >= name.size()) prefix = {};
  std::string out(name.substr(prefix.size()));
  for (char& c : out) c = c == '_' ? '-' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// The same of a value of a generated enum; a number the schema does not name (from a
// newer writer) is printed as a number.
template <class E>
std::string EnumWord(E value) {
  const auto* v = google::protobuf::GetEnumDescriptor<E>()->FindValueByNumber(static_cast<int>(value));
  return v == nullptr ? std::to_string(static_cast<int>(value)) : EnumWord(v);
}

// libtree's naming of glibc's search steps (docs/LOADER.md section 2). STEP_UNKNOWN has
// no word: TriedWord prints its flag.
inline const char* StepWord(v1::CandidateStep s) {
  switch (s) {
    case v1::STEP_AS_GIVEN: return "as given";
    case v1::STEP_RPATH: return "RPATH";
    case v1::STEP_LD_LIBRARY_PATH: return "LD_LIBRARY_PATH";
    case v1::STEP_RUNPATH: return "RUNPATH";
    case v1::STEP_LD_SO_CACHE: return "ld.so.cache";
    case v1::STEP_DEFAULT_DIRS: return "default dirs";
    default: return "";
  }
}

// A candidate's step as `show` prints it: the word, or "flag 0x…" for a flag ldscope
// does not know.
inline std::string CandidateWord(const v1::Candidate& c) {
  if (c.step() == v1::STEP_UNKNOWN) return fmt::format("flag {:#x}", c.flag());
  return StepWord(c.step());
}

// The step that found a load: its last candidate's ("" when it tried none).
inline v1::CandidateStep FoundBy(const v1::Load& l) {
  return l.tried_size() > 0 ? l.tried(l.tried_size() - 1).step() : v1::STEP_UNKNOWN;
}
inline std::string FoundByWord(const v1::Load& l) {
  return l.tried_size() > 0 ? CandidateWord(l.tried(l.tried_size() - 1)) : std::string();
}

// "exec", "fork", "reconnect", "snapshot of a running process"; "" when no start
// event was read.
inline std::string StartWord(v1::StartReason r) {
  if (r == v1::START_SNAPSHOT) return "snapshot of a running process";
  return r == v1::START_REASON_UNSPECIFIED ? std::string() : EnumWord(r);
}

}  // namespace ldscope::render
