// Which package installed a file, looked up when a trace is taken (events.proto's
// OwnerFacts): a conda package (the prefix's conda-meta/*.json "files" lists), a pip
// distribution (the *.dist-info/RECORD beside it, analysis/pip_owner.h), a Debian
// package (dpkg's /var/lib/dpkg/info/*.list and status), an RPM package (rpm -qf, where
// an rpm program and its database are found), or none. Where no rpm program is found
// but an RPM database directory exists, a file no other database lists has an unknown
// owner. Readers take owners from the trace only (analysis/context.h's
// Context::OwnerOf), never from the machine they run on.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "text/shown.h"
#include "ldscope_proto/events.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::analysis {

// Bounds on what one lookup of a trace's files reads: the conda-meta JSON files of a
// prefix and their bytes, dpkg's .list files and their bytes, its status file.
inline constexpr size_t kMaxCondaRecords = 4096;
inline constexpr size_t kMaxCondaBytes = 256u << 20;
inline constexpr size_t kMaxDpkgLists = 20000;
inline constexpr size_t kMaxDpkgBytes = 128u << 20;
// What one `rpm -qf` may print (a batch of 256 files); beyond it, the files it did not
// answer for have an unknown owner.
inline constexpr size_t kMaxRpmOutput = 4u << 20;

// Where the package databases are (the defaults: the machine's own).
struct OwnerDatabases {
  std::string dpkg = "/var/lib/dpkg";  // its info/*.list and status
  // The rpm asked about files no pip, conda or dpkg record lists ("": the first rpm on
  // PATH, else /usr/bin/rpm), in the environment ldscope runs in (its ~/.rpmmacros
  // choose the database, rpm --eval %_dbpath), within rpm_timeout in all.
  std::string rpm_program;
  std::chrono::milliseconds rpm_timeout{10000};
  // Where no rpm is found: the databases whose existence makes such a file's owner
  // unknown rather than none.
  std::vector<std::string> rpm = {"/var/lib/rpm", "/usr/lib/sysimage/rpm"};
};

// The owner of each path (raw bytes, as loaded), one record per path, in path order.
// Each database is read at most once.
std::vector<v1::OwnerFacts> RecordOwners(const std::set<std::string>& paths,
                                         const OwnerDatabases& db = OwnerDatabases());

// What a finding says of a file's owner (o: Context::OwnerOf's): "pip distribution
// torch 2.5.1", "conda package openblas 0.3.21=h1234_0 (prefix /opt/conda)", "Debian
// package libgomp1 12.2.0-14 (amd64)", "RPM package zlib 1.2.11-40.el9 (x86_64)", "not
// owned by any package", "unknown (why)".
std::string OwnerText(const v1::Owner* o);

// The command that installs that version of the package again, over whatever is there
// ("" when the file has no known package): pip install --force-reinstall torch==2.5.1,
// conda install -p PREFIX --force-reinstall openblas=0.3.21=h1234_0, apt-get install
// --reinstall libgomp1=12.2.0-14, dnf reinstall zlib-1.2.11-40.el9.x86_64.
text::Shown ReinstallCommand(const v1::Owner* o);

// The command that installs that version (pip install torch==2.5.1, conda install -p
// PREFIX openblas=0.3.21=h1234_0, apt-get install libgomp1=12.2.0-14): a pin others can
// follow; "" when the file has no known package.
text::Shown PinCommand(const v1::Owner* o);

}  // namespace ldscope::analysis
