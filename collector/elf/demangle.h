// C++ symbol names as people read them, and the parts of them the missing-symbol
// diagnosis compares: a name with the same qualified name but other parameters is a
// near-miss (another version of the library), and one that differs only in the
// std::__cxx11 types is the other _GLIBCXX_USE_CXX11_ABI.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ldscope::elf {

// The demangled form of an Itanium C++ ABI name ("_ZN3c104cuda9SetDeviceEi" ->
// "c10::cuda::SetDevice(int)"); "" when name is not one, cannot be demangled, or is
// longer than kMaxMangled (names come from files and traces: untrusted input).
std::string Demangle(std::string_view name);
inline constexpr size_t kMaxMangled = 4096;

// A demangled function's qualified name without its parameters, qualifiers, return type
// and ABI tags: "c10::cuda::SetDevice(int)" -> "c10::cuda::SetDevice",
// "void ns::f<int>(int) const" -> "ns::f<int>". A name without parameters (a variable)
// is returned without its ABI tags.
std::string WithoutParameters(std::string_view demangled);

// The demangled name as the pre-C++11 library ABI spells it: std::__cxx11:: types lose
// their inline namespace, std::__cxx11::basic_string<char, ...> becomes std::string,
// [abi:cxx11] tags go. Two names that differ only by _GLIBCXX_USE_CXX11_ABI are equal
// after it.
std::string OldAbiSpelling(std::string_view demangled);

// Whether a demangled name uses the C++11 library ABI (std::__cxx11 types, [abi:cxx11]).
bool UsesCxx11Abi(std::string_view demangled);

// The mangled <source-name> of a qualified name's last component ("9SetDevice" for
// "c10::cuda::SetDevice", "3Bar" for the constructor "ns::Bar::Bar"): every mangled
// name of that entity contains it. "" for operators and names that have none.
std::string LastSourceName(std::string_view qualified);

// Every <length><identifier> run in a mangled name into *out (cleared first): candidates
// for LastSourceName's result (some are not source names; none that is one is left out).
// With lengths, only those whose identifier's length n has lengths[n] set (or is past
// its end): a caller looking for a few names skips the rest without a lookup.
void SourceNameCandidates(std::string_view mangled, std::vector<std::string_view>* out,
                          const std::vector<bool>* lengths = nullptr);

}  // namespace ldscope::elf
