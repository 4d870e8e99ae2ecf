// Which pip distribution installed a file: the *.dist-info directory beside it in its
// site-packages whose RECORD lists it, with the name and version its METADATA gives
// and the tags its WHEEL gives, looked up when a trace is taken. Findings name "torch
// 2.5.1" rather than a path, and fixes say what to reinstall.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ldscope::analysis {

struct PipDistribution {
  std::string name, version;               // METADATA's Name: and Version:
  std::string dist_info;                   // the .dist-info directory
  std::vector<std::string> tags;           // WHEEL's Tag: lines ("cp312-abi3-linux_x86_64")
  std::vector<std::string> requires_dist;  // METADATA's Requires-Dist: lines
};

// Bounds on what one lookup reads: .dist-info directories listed, bytes of RECORD files.
inline constexpr size_t kMaxDistInfos = 4096;
inline constexpr size_t kMaxRecordBytes = 256u << 20;

class Context;

// Up to limit bytes of the regular file at path (a package manager's record: RECORD,
// METADATA, conda-meta JSON, dpkg's lists); "" when it cannot be read or is no regular
// file.
std::string ReadPackageFile(const std::string& path, size_t limit);

// The pip distributions a trace recorded (Context::OwnerOf: looked up where the trace
// was taken, never on the reading machine), once per path.
class PipOwners {
 public:
  explicit PipOwners(Context& ctx) : ctx_(ctx) {}
  // nullopt when the trace records no pip distribution for it.
  const std::optional<PipDistribution>& Of(const std::string& path);

 private:
  Context& ctx_;
  std::map<std::string, std::optional<PipDistribution>> known_;
};

// The distribution whose RECORD lists the file on this machine (analysis/owners.h's
// RecordOwners, when a trace is taken). nullopt when it is not under a site-packages
// or dist-packages directory, or no RECORD there lists it.
std::optional<PipDistribution> PipOwner(const std::string& path);

// "torch 2.5.1"; "" for none.
std::string PipLabel(const std::optional<PipDistribution>& d);

}  // namespace ldscope::analysis
