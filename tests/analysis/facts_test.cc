// The ELF facts `run` and `collect` add to a trace (analysis/record_facts.h): the
// records made of files read while the traced programs run are byte for byte those of
// reading every file at the end; a file read during the run keeps its facts when it is
// deleted or changed before the end. And the files a report reads ahead on threads
// (Files::ReadAhead) answer as those read one by one.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <unordered_set>

#include "analysis/context.h"
#include "analysis/families.h"
#include "analysis/owners.h"
#include "analysis/pip_owner.h"
#include "analysis/record_facts.h"
#include "elf/elf_file.h"
#include "elf/facts.h"
#include "store/trace_file.h"
#include "support/test_support.h"
#include "text/strings.h"

namespace ldscope {
namespace {

namespace fs = std::filesystem;
using testing::RunCmd;

const std::string kFx = FIXTURES;
constexpr int kNoLimit = 600000;

std::vector<std::string> Bytes(const analysis::RecordedFacts& r) {
  std::vector<std::string> out;
  for (const auto& f : r.records) out.push_back(f.SerializeAsString());
  return out;
}

// The first path of each record and whether it says the file was unreadable.
std::string Summary(const analysis::RecordedFacts& r) {
  std::string out;
  for (const auto& f : r.records)
    out += f.paths(0) + (f.unreadable().empty() ? "" : " (unreadable)") + "\n";
  return out;
}

// Many files of every kind: the fixtures' libraries (the runtime families' among them), up to 300 of the machine's (their
// symbolic links too, which the records deduplicate by build-id), a copy without a
// build-id and a hard link to it (deduplicated by inode), a file that is not ELF and a
// path that does not exist (unreadable records).
std::set<std::string> ManyPaths(const std::string& dir) {
  std::set<std::string> paths;
  for (const auto& e : fs::directory_iterator(kFx + "/lib"))
    if (e.path().extension() == ".so") paths.insert(e.path().string());
  // The runtime families' fixtures: OpenMP and BLAS marker names, OpenBLAS's and MKL's
  // version strings searched for in the bytes.
  for (const auto& e : fs::recursive_directory_iterator(kFx + "/classes"))
    if (e.is_regular_file() && e.path().filename().string().find(".so") != std::string::npos)
      paths.insert(e.path().string());
  std::vector<std::string> system;
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      if (name.find(".so") != std::string::npos && e.is_regular_file(ec)) system.push_back(e.path().string());
    }
  }
  std::sort(system.begin(), system.end());
  if (system.size() > 300) system.resize(300);
  paths.insert(system.begin(), system.end());
  EXPECT_EQ(RunCmd({"/usr/bin/objcopy", "--remove-section", ".note.gnu.build-id", kFx + "/lib/libfix_b.so",
                    dir + "/libnoid.so"}).code, 0);
  fs::create_hard_link(dir + "/libnoid.so", dir + "/libnoid-link.so");
  testing::WriteFile(dir + "/libtext.so", "not an ELF file\n");
  paths.insert({dir + "/libnoid.so", dir + "/libnoid-link.so", dir + "/libtext.so", dir + "/libgone.so"});
  return paths;
}

// Read in the background (in another order, some twice), in the background and at the
// end, or at the end only: the same records in the same order.
TEST(Facts, ReadWhileRunningGivesTheSameRecords) {
  const std::string dir = testing::ScratchDir("facts_same_records");
  const std::set<std::string> paths = ManyPaths(dir);
  ASSERT_GE(paths.size(), 20u);
  const analysis::RecordedFacts at_end = analysis::RecordFacts(paths, kNoLimit);
  EXPECT_EQ(at_end.files, paths.size());
  EXPECT_EQ(at_end.skipped, 0u);
  const std::string summary = Summary(at_end);
  EXPECT_NE(summary.find(dir + "/libtext.so (unreadable)\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find(dir + "/libgone.so (unreadable)\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find(dir + "/libnoid-link.so\n"), std::string::npos) << summary;
  EXPECT_EQ(summary.find(dir + "/libnoid.so\n"), std::string::npos) << "one record for both links";

  std::vector<std::string> shuffled(paths.begin(), paths.end());
  std::mt19937 rng(12);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  {
    analysis::FactsReader early;
    for (const auto& p : shuffled) early.Add(p);
    for (size_t i = 0; i < shuffled.size(); i += 3) early.Add(shuffled[i]);
    early.WaitIdle();
    const analysis::RecordedFacts r = early.Finish(paths, kNoLimit);
    EXPECT_EQ(r.files, at_end.files);
    EXPECT_EQ(r.skipped, 0u);
    EXPECT_EQ(Bytes(r), Bytes(at_end));
  }
  {
    // One at a time, each read and its record guessed before the next comes (as a
    // program's libraries, then its plugins): the guesses made before the files that
    // leave their names undefined were known are made again at the end.
    analysis::FactsReader one_by_one;
    for (const auto& p : shuffled) {
      one_by_one.Add(p);
      one_by_one.WaitIdle();
    }
    EXPECT_EQ(Bytes(one_by_one.Finish(paths, kNoLimit)), Bytes(at_end));
  }
  {
    // Half of them added, not waited for: Finish reads what the thread has not.
    analysis::FactsReader half;
    for (size_t i = 0; i < shuffled.size(); i += 2) half.Add(shuffled[i]);
    const analysis::RecordedFacts r = half.Finish(paths, kNoLimit);
    EXPECT_EQ(r.files, at_end.files);
    EXPECT_EQ(Bytes(r), Bytes(at_end));
  }
}

// The record made in two steps (PrepareFacts while the programs run, FinishFacts at the
// end) is ToFacts's, byte for byte, with the keep rule RecordFacts uses: marker names in
// full, other definitions by hash where some file leaves the name undefined.
TEST(Facts, PreparedThenFinishedIsToFacts) {
  const std::string dir = testing::ScratchDir("facts_prepared");
  std::vector<std::unique_ptr<elf::ElfInfo>> files;
  for (const auto& p : ManyPaths(dir))
    if (auto r = elf::ReadElf(p); r.ok()) files.push_back(std::move(r).value());
  ASSERT_GE(files.size(), 20u);
  std::unordered_set<uint64_t> wanted;
  for (const auto& e : files)
    e->ForEachSymbol(elf::ElfInfo::Which::kUndefined, [&](const elf::Symbol& s) { wanted.insert(elf::HashOf(s)); });
  const std::map<std::string, std::vector<std::string>> found = {{"NCCL version ", {"NCCL version 2.18.1"}}};
  size_t markers = 0, hashed = 0;
  for (const auto& e : files) {
    const v1::ObjectFacts whole = elf::ToFacts(*e, [&](const elf::Symbol& s) {
      if (analysis::IsMarkerSymbol(s.name)) return ++markers, elf::Keep::kName;
      if (wanted.count(elf::HashOf(s)) == 0) return elf::Keep::kDrop;
      return ++hashed, elf::Keep::kHash;
    }, found);
    const elf::PreparedFacts prepared =
        elf::PrepareFacts(*e, [](const elf::Symbol& s) { return analysis::IsMarkerSymbol(s.name); }, found);
    const v1::ObjectFacts two_steps =
        elf::FinishFacts(prepared, [&](uint64_t h) { return wanted.count(h) != 0; });
    EXPECT_EQ(two_steps.SerializeAsString(), whole.SerializeAsString()) << e->path;
    std::vector<uint64_t> undefined;
    e->ForEachSymbol(elf::ElfInfo::Which::kUndefined, [&](const elf::Symbol& s) { undefined.push_back(elf::HashOf(s)); });
    EXPECT_EQ(prepared.undefined, undefined) << e->path;
  }
  EXPECT_GT(markers, 0u) << "some file defines a marker name (libgomp's omp_get_num_threads, say)";
  EXPECT_GT(hashed, 1000u);
}

// Names left undefined only by a file read in the background but not asked for at the
// end (Finish's paths are the trace's): they do not keep the definitions of the others.
TEST(Facts, AFileNotAskedForChoosesNoDefinitions) {
  const std::string mpi = kFx + "/mpi/v5/libmpi.so.40";
  const std::string user = kFx + "/mpi/app/libmpiuser.so";  // needs MPI_Comm_create_from_group
  const std::set<std::string> paths = {mpi};
  const analysis::RecordedFacts at_end = analysis::RecordFacts(paths, kNoLimit);
  const analysis::RecordedFacts with_user = analysis::RecordFacts({mpi, user}, kNoLimit);
  ASSERT_EQ(Summary(with_user), user + "\n" + mpi + "\n");
  ASSERT_NE(Bytes(with_user)[1], Bytes(at_end)[0]) << "the user's name keeps a definition of libmpi's";
  analysis::FactsReader reader;
  reader.Add(user);
  reader.Add(mpi);
  reader.WaitIdle();
  EXPECT_EQ(Bytes(reader.Finish(paths, kNoLimit)), Bytes(at_end));
}

// A file read while the programs run, then deleted or replaced by another build before
// the end: its record is the file as it was read (what the program loaded). Read only at
// the end, the deleted one is unreadable.
TEST(Facts, AFileReadWhileRunningKeepsItsFacts) {
  const std::string dir = testing::ScratchDir("facts_read_early");
  fs::create_directories(dir + "/v4");
  fs::copy_file(kFx + "/lib/libfix_a.so", dir + "/libfix_a.so");
  fs::copy_file(kFx + "/mpi/v4/libmpi.so.40", dir + "/v4/libmpi.so.40");
  const std::set<std::string> paths = {dir + "/libfix_a.so", dir + "/v4/libmpi.so.40"};
  const analysis::RecordedFacts before = analysis::RecordFacts(paths, kNoLimit);
  ASSERT_EQ(Summary(before), dir + "/libfix_a.so\n" + dir + "/v4/libmpi.so.40\n");

  analysis::FactsReader reader;
  for (const auto& p : paths) reader.Add(p);
  reader.WaitIdle();
  fs::remove(dir + "/libfix_a.so");
  fs::copy_file(kFx + "/mpi/v5/libmpi.so.40", dir + "/v4/libmpi.so.40", fs::copy_options::overwrite_existing);
  EXPECT_EQ(Bytes(reader.Finish(paths, kNoLimit)), Bytes(before));

  const analysis::RecordedFacts after = analysis::RecordFacts(paths, kNoLimit);
  EXPECT_EQ(Summary(after), dir + "/libfix_a.so (unreadable)\n" + dir + "/v4/libmpi.so.40\n");
  EXPECT_NE(Bytes(after)[1], Bytes(before)[1]) << "v5 is another build";
}

// The ObjectFacts records of a trace file, as its bytes, and every path they name.
std::vector<std::string> TraceRecords(const std::string& trace, std::set<std::string>* paths) {
  const store::TraceFile t = store::ReadTraceFile(trace);
  EXPECT_TRUE(t.ok());
  for (const auto& bytes : t.facts) {
    v1::ObjectFacts f;
    EXPECT_TRUE(f.ParseFromString(bytes));
    for (const auto& p : f.paths()) paths->insert(p);
  }
  return t.facts;
}

// Through `ldscope run`, the collector reading each file as its objopen arrives: the
// trace's records are those of reading every file after the run, for a C program and
// for Python importing many extension modules (about a hundred objects).
TEST(FactsRun, TheRecordsAreThoseOfReadingAtTheEnd) {
  const std::string dir = testing::ScratchDir("facts_run_same");
  const std::vector<std::vector<std::string>> commands = {
      {DLPROBE, "open", kFx + "/mpi/app/libmpiuser.so"},
      {"/usr/bin/python3", "-c",
       "import numpy, numpy.linalg, numpy.fft, decimal, json, ssl, sqlite3, ctypes, hashlib, "
       "zlib, bz2, lzma, socket, select, array, math, uuid, csv, pyexpat, curses, readline, "
       "multiprocessing, asyncio, unicodedata, mmap"},
  };
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string trace = dir + "/t" + std::to_string(i) + ".ldscope";
    std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--"};
    cmd.insert(cmd.end(), commands[i].begin(), commands[i].end());
    const auto r = RunCmd(cmd, {"LD_LIBRARY_PATH=" + kFx + "/mpi/v4"});
    ASSERT_EQ(r.code, 0) << r.err;
    std::set<std::string> paths;
    const std::vector<std::string> records = TraceRecords(trace, &paths);
    EXPECT_GE(records.size(), i == 0 ? 4u : 40u);
    EXPECT_EQ(records, Bytes(analysis::RecordFacts(paths, kNoLimit))) << commands[i].back();
  }
}

// A program that loads a library and deletes it before it exits: `run` read the file
// while it ran (the program waits until some other process has opened it too),
// so the trace has its facts, not "unreadable", and neither run's report nor a later
// one says it could not be read.
TEST(FactsRun, AFileDeletedBeforeTheEndKeepsItsFacts) {
  const std::string dir = testing::ScratchDir("facts_run_deleted");
  const std::string lib = dir + "/libfix_libc.so";
  fs::copy_file(kFx + "/lib/libfix_libc.so", lib);
  const analysis::RecordedFacts expected = analysis::RecordFacts({lib}, kNoLimit);
  ASSERT_EQ(expected.records.size(), 1u);
  const std::string trace = dir + "/t.ldscope";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--report", dir + "/report.txt", "--",
                         "/usr/bin/python3", std::string(SCENARIOS_DIR) + "/load_then_delete.py", lib, "60"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "opened 2 times\n");
  EXPECT_FALSE(fs::exists(lib));
  // The report made by run (from the files its collector read) and the one made of the
  // trace afterwards (from the trace's facts) both know the file: no "could not be read".
  EXPECT_EQ(testing::ReadFile(dir + "/report.txt"), "no findings\n");
  const auto later = RunCmd({LDSCOPE_BIN, "report", trace});
  EXPECT_EQ(later.out, "no findings\n");
  std::set<std::string> paths;
  bool found = false;
  for (const auto& bytes : TraceRecords(trace, &paths)) {
    v1::ObjectFacts f;
    ASSERT_TRUE(f.ParseFromString(bytes));
    if (f.paths(0) != lib) continue;
    found = true;
    EXPECT_EQ(f.unreadable(), "");
    EXPECT_EQ(f.build_id(), expected.records[0].build_id());
    EXPECT_EQ(f.size(), expected.records[0].size());
    EXPECT_GT(f.symbols_size(), 0u);
  }
  EXPECT_TRUE(found) << "a record for " << lib;
}

// What the passes read of a file, as text: its dynamic section's names, versions,
// build-id, and every symbol (undefined ones through the index ReadAhead makes), each
// undefined one also looked up in the file itself.
std::string Describe(const elf::ElfInfo* e) {
  if (e == nullptr) return "(none)\n";
  std::string out = e->path + " soname " + e->soname + " build-id " + text::Hex(e->build_id) + "\n";
  for (const auto& n : e->needed) out += " needed " + n + "\n";
  for (const auto& v : e->verdefs) out += " verdef " + v + "\n";
  e->ForEachUndefined([&](const elf::Symbol& s, const elf::SymbolQuery& q) {
    out += " undefined " + std::string(s.name) + "@" + std::string(s.version) + (s.weak ? " weak" : "") +
           (e->Find(q).named ? " named-here" : "") + "\n";
  });
  e->ForEachSymbol(elf::ElfInfo::Which::kDefined, [&](const elf::Symbol& s) {
    out += " defined " + std::string(s.name) + "@" + std::string(s.version) + (s.hidden ? " hidden" : "") + "\n";
  });
  return out;
}

// Files read ahead (on threads: several hundred paths) answer every question as files
// read one by one; unreadable ones are errors only once asked for, as those are.
TEST(Files, ReadAheadAnswersAsReadingOneByOne) {
  const std::string dir = testing::ScratchDir("files_read_ahead");
  const std::set<std::string> set = ManyPaths(dir);
  const std::vector<std::string> paths(set.begin(), set.end());
  ASSERT_GE(paths.size(), 64u) << "too few to read on two threads";
  analysis::Files ahead, one_by_one;
  ahead.ReadAhead(paths);
  ahead.ReadAhead(paths);  // again, as the context of a second host would: read already
  EXPECT_TRUE(ahead.errors().empty());
  for (const auto& p : paths) {
    const std::string a = Describe(ahead.Get(p)), b = Describe(one_by_one.Get(p));
    const size_t at = std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first - a.begin();
    EXPECT_TRUE(a == b) << p << " differs at byte " << at << ": read ahead '" << a.substr(at, 120)
                        << "', one by one '" << b.substr(at, 120) << "'";
  }
  EXPECT_EQ(ahead.errors(), one_by_one.errors());
  EXPECT_EQ(ahead.errors().count(dir + "/libtext.so"), 1u);
  EXPECT_EQ(ahead.errors().count(dir + "/libgone.so"), 1u);
}

// Owners from dpkg's database (a made one: its info/*.list and status): a file a list
// names is that package's, at the version status gives; one no list names is owned by
// no package, unless an RPM database exists and no rpm program is found to read it:
// then its owner is unknown, never guessed.
TEST(Owners, DpkgAndRpm) {
  const std::string dir = testing::ScratchDir("owners_dpkg");
  const std::string admin = dir + "/dpkg", listed = dir + "/lib/libfoo.so.1", loose = dir + "/lib/libbar.so.1";
  fs::create_directories(admin + "/info");
  fs::create_directories(dir + "/rpm");
  testing::WriteFile(listed, "");
  testing::WriteFile(loose, "");
  testing::WriteFile(admin + "/info/libfoo1:amd64.list", "/.\n" + dir + "/lib\n" + listed + "\n");
  testing::WriteFile(admin + "/info/other.list", "/usr/bin/other\n");
  testing::WriteFile(admin + "/status",
                     "Package: other\nStatus: install ok installed\nArchitecture: all\nVersion: 3\n\n"
                     "Package: libfoo1\nStatus: install ok installed\nArchitecture: amd64\nMulti-Arch: same\n"
                     "Version: 1.2-3\n\n");
  auto owners = [&](std::vector<std::string> rpm) {
    analysis::OwnerDatabases db;
    db.dpkg = admin;
    db.rpm_program = dir + "/no-such-rpm";
    db.rpm = rpm;
    std::string out;
    for (const auto& o : analysis::RecordOwners({listed, loose}, db))
      out += o.paths(0).substr(dir.size()) + ": " + v1::OwnerFacts::Manager_Name(o.manager()) + " " + o.name() + " " +
             o.version() + " " + o.arch() + " " + o.record().substr(o.record().empty() ? 0 : dir.size()) + " " +
             (o.unknown().empty() ? "" : o.unknown().substr(0, o.unknown().find('('))) + "\n";
    return out;
  };
  EXPECT_EQ(owners({dir + "/no-rpm"}),
            "/lib/libbar.so.1: MANAGER_NONE     \n"
            "/lib/libfoo.so.1: MANAGER_DPKG libfoo1 1.2-3 amd64 /dpkg/info/libfoo1:amd64.list \n");
  EXPECT_EQ(owners({dir + "/rpm"}),
            "/lib/libbar.so.1: MANAGER_UNKNOWN     no pip, conda or dpkg record lists it, and the RPM database \n"
            "/lib/libfoo.so.1: MANAGER_DPKG libfoo1 1.2-3 amd64 /dpkg/info/libfoo1:amd64.list \n");
}

// Two loaded paths that dpkg may list under one spelling (a symlink and its target, or
// /lib and /usr/lib under a merged /usr) are each looked up: both are the package's.
TEST(Owners, PathsSharingASpellingAreEachLookedUp) {
  const std::string dir = testing::ScratchDir("owners_shared_spelling");
  const std::string admin = dir + "/dpkg", real = dir + "/lib/libfoo.so.1", link = dir + "/lib/libfoo.so";
  fs::create_directories(admin + "/info");
  fs::create_directories(dir + "/lib");
  testing::WriteFile(real, "");
  fs::create_symlink("libfoo.so.1", link);
  testing::WriteFile(admin + "/info/libfoo1.list", real + "\n");
  testing::WriteFile(admin + "/status", "Package: libfoo1\nStatus: install ok installed\nVersion: 1.2-3\n\n");
  analysis::OwnerDatabases db;
  db.dpkg = admin;
  db.rpm_program = dir + "/no-such-rpm";
  std::string out;
  for (const auto& o : analysis::RecordOwners({link, real}, db))
    out += o.paths(0).substr(dir.size()) + ": " + v1::OwnerFacts::Manager_Name(o.manager()) + " " + o.name() + "\n";
  EXPECT_EQ(out, "/lib/libfoo.so: MANAGER_DPKG libfoo1\n/lib/libfoo.so.1: MANAGER_DPKG libfoo1\n");
}

// The commands a fix names are shell words: a name, version or prefix from a package
// manager's files (or a trace) that holds what a shell would act on is quoted.
TEST(Owners, CommandsAreShellWords) {
  v1::Owner o;
  o.set_manager(v1::OwnerFacts::MANAGER_PIP);
  o.set_name("torch");
  o.set_version("2.5.1");
  EXPECT_EQ(analysis::PinCommand(&o).str(), "pip install torch==2.5.1");
  EXPECT_EQ(analysis::ReinstallCommand(&o).str(), "pip install --force-reinstall torch==2.5.1");
  o.set_name("x;touch p");
  EXPECT_EQ(analysis::PinCommand(&o).str(), "pip install 'x;touch p==2.5.1'");
  o.set_manager(v1::OwnerFacts::MANAGER_CONDA);
  o.set_name("numpy");
  o.set_version("1.26.4=py311");
  o.set_root("/opt/my env");
  EXPECT_EQ(analysis::PinCommand(&o).str(), "conda install -p '/opt/my env' numpy=1.26.4=py311");
  o.set_manager(v1::OwnerFacts::MANAGER_DPKG);
  o.set_name("libfoo1");
  o.set_arch("amd64");
  o.set_version("1.2-3");
  EXPECT_EQ(analysis::ReinstallCommand(&o).str(), "apt-get install --reinstall libfoo1:amd64=1.2-3");
}

// A package manager's file is read only when it is a regular file, never past the size
// it had when opened nor past the limit: a FIFO named like one does not block the
// reader, and a /proc file (size 0) gives nothing.
TEST(Owners, PackageFilesAreReadBounded) {
  const std::string dir = testing::ScratchDir("owners_read_bounded");
  testing::WriteFile(dir + "/RECORD", "0123456789");
  EXPECT_EQ(analysis::ReadPackageFile(dir + "/RECORD", 4), "0123");
  EXPECT_EQ(analysis::ReadPackageFile(dir + "/RECORD", 100), "0123456789");
  ASSERT_EQ(mkfifo((dir + "/x.json").c_str(), 0600), 0);
  EXPECT_EQ(analysis::ReadPackageFile(dir + "/x.json", 100), "");
  EXPECT_EQ(analysis::ReadPackageFile("/proc/self/status", 1 << 20), "");
  EXPECT_EQ(analysis::ReadPackageFile(dir + "/none", 100), "");
}

// Where rpm is found but does not answer in time, or fails, a file no other database
// lists has an unknown owner that says so (a slow rpm, and what it started, are killed at
// the deadline); where rpm's own database path (rpm --eval %_dbpath) does not exist, the
// file is owned by no package, whatever other RPM directories exist. The rpm here is a
// script that behaves like each (the real rpm: tests/e2e/classes_test.cc).
TEST(Owners, RpmFailures) {
  const std::string dir = testing::ScratchDir("owners_rpm_failures");
  const std::string loose = dir + "/lib/libbar.so.1", database = dir + "/rpmdb";
  fs::create_directories(database);
  fs::create_directories(dir + "/dpkg/info");
  testing::WriteFile(loose, "");
  auto script = [&](const std::string& name, const std::string& eval, const std::string& query) {
    const std::string path = dir + "/" + name;
    testing::WriteFile(path, "#!/bin/sh\nif [ \"$1\" = --eval ]; then echo " + eval + "; exit 0; fi\n" + query + "\n");
    fs::permissions(path, fs::perms::owner_all);
    return path;
  };
  auto owner = [&](const std::string& program) {
    analysis::OwnerDatabases db;
    db.dpkg = dir + "/dpkg";
    db.rpm_program = program;
    db.rpm_timeout = std::chrono::milliseconds(300);
    db.rpm = {database};
    const auto o = analysis::RecordOwners({loose}, db).at(0);
    return v1::OwnerFacts::Manager_Name(o.manager()) + " " + testing::ReplaceAll(o.unknown(), dir, "DIR");
  };
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(owner(script("slow-rpm", database, "sleep 30")),
            "MANAGER_UNKNOWN no pip or conda record lists it, and rpm (DIR/slow-rpm, database DIR/rpmdb) "
            "did not answer within 0.3 s");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(owner(script("failing-rpm", database,
                         "echo 'error: cannot open Packages index using sqlite - No such file or directory (2)' >&2; "
                         "exit 1")),
            "MANAGER_UNKNOWN no pip or conda record lists it, and rpm (DIR/failing-rpm, database DIR/rpmdb) "
            "did not answer: error: cannot open Packages index using sqlite - No such file or directory (2)");
  EXPECT_EQ(owner(script("no-database-rpm", dir + "/none", "exit 1")), "MANAGER_NONE ");
  // rpm runs in the C locale, without the loader's variables or ldscope's socket.
  setenv("LD_AUDIT", "/x/libldscope_audit.so", 1);
  setenv("LD_DEBUG", "files", 1);
  setenv("LD_LIBRARY_PATH", "/nonexistent", 1);
  setenv("LDSCOPE_SOCKET", "/x/socket", 1);
  setenv("LC_ALL", "de_DE.UTF-8", 1);
  owner(script("env-rpm", database, "env > " + dir + "/env.txt; exit 1"));
  unsetenv("LD_AUDIT");
  unsetenv("LD_DEBUG");
  unsetenv("LD_LIBRARY_PATH");
  unsetenv("LDSCOPE_SOCKET");
  unsetenv("LC_ALL");
  const std::string env = "\n" + testing::ReadFile(dir + "/env.txt");
  EXPECT_EQ(env.find("\nLD_AUDIT="), std::string::npos) << env;
  EXPECT_EQ(env.find("\nLD_DEBUG="), std::string::npos) << env;
  EXPECT_EQ(env.find("\nLD_LIBRARY_PATH="), std::string::npos) << env;
  EXPECT_EQ(env.find("\nLDSCOPE_SOCKET="), std::string::npos) << env;
  EXPECT_NE(env.find("\nLC_ALL=C\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nPATH="), std::string::npos) << env;
}

// The real rpm, with an empty database that ~/.rpmmacros names: more files than one
// `rpm -qf` is given (each batch's answers are matched with its files), one spelled with
// "/./" (rpm answers with the path cleaned), each owned by no package; a file that no
// longer exists has an unknown owner that gives rpm's complaint. (Packages in the
// database: tests/e2e/classes_test.cc's Owners.RpmDatabase.)
TEST(Owners, RpmAnswersEachFile) {
  ASSERT_TRUE(fs::exists("/usr/bin/rpm")) << "rpm is not installed (scripts/setup)";
  const std::string dir = testing::ScratchDir("owners_rpm_each");
  fs::create_directories(dir + "/home");
  fs::create_directories(dir + "/lib");
  testing::WriteFile(dir + "/home/.rpmmacros", "%_dbpath " + dir + "/rpmdb\n");
  const auto init = RunCmd({"/usr/bin/rpm", "--dbpath", dir + "/rpmdb", "--initdb"});
  ASSERT_EQ(init.code, 0) << init.err;
  std::set<std::string> paths = {dir + "/gone.so", dir + "/lib/./libdot.so"};
  testing::WriteFile(dir + "/lib/libdot.so", "");
  for (int i = 0; i < 300; ++i) {
    const std::string p = dir + "/lib/lib" + std::to_string(i) + ".so";
    testing::WriteFile(p, "");
    paths.insert(p);
  }
  const char* home = getenv("HOME");
  const std::string saved = home == nullptr ? "" : home;
  setenv("HOME", (dir + "/home").c_str(), 1);
  analysis::OwnerDatabases db;
  db.dpkg = dir + "/no-dpkg";
  db.rpm_program = "/usr/bin/rpm";
  const auto owners = analysis::RecordOwners(paths, db);
  if (home == nullptr)
    unsetenv("HOME");
  else
    setenv("HOME", saved.c_str(), 1);
  ASSERT_EQ(owners.size(), paths.size());
  size_t none = 0;
  for (const auto& o : owners) {
    if (o.paths(0) == dir + "/gone.so") {
      EXPECT_EQ(testing::ReplaceAll(o.unknown(), dir, "DIR"),
                "no pip or conda record lists it, and rpm (/usr/bin/rpm, database DIR/rpmdb) did not answer for it: "
                "error: file DIR/gone.so: No such file or directory");
      continue;
    }
    EXPECT_EQ(v1::OwnerFacts::Manager_Name(o.manager()), "MANAGER_NONE") << o.paths(0) << ": " << o.unknown();
    ++none;
  }
  EXPECT_EQ(none, 301u);
}

}  // namespace
}  // namespace ldscope
