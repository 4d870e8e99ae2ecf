// The audit library writes the event schema by hand (audit/encode.h's field numbers)
// and cannot include libprotobuf's headers: here, where both are visible, every number
// it writes is checked against the generated one at compile time. A field renumbered in
// proto/events.proto and not in encode.h fails the build of conformance_test.
#include "encode.h"
#include "ldscope_proto/events.pb.h"

namespace ldscope::audit {
namespace {

#define LDSCOPE_SAME(ours, Message, Name) \
  static_assert(static_cast<int>(ours) == v1::Message::k##Name##FieldNumber, #Message "." #Name)

LDSCOPE_SAME(field::kPid, Event, Pid);
LDSCOPE_SAME(field::kTid, Event, Tid);
LDSCOPE_SAME(field::kSeq, Event, Seq);
LDSCOPE_SAME(field::kMonoNs, Event, MonoNs);
LDSCOPE_SAME(field::kDropped, Event, Dropped);
LDSCOPE_SAME(field::kTruncated, Event, Truncated);
LDSCOPE_SAME(field::kOffsetNs, Event, OffsetNs);
LDSCOPE_SAME(field::kProcessStart, Event, ProcessStart);
LDSCOPE_SAME(field::kSearch, Event, Search);
LDSCOPE_SAME(field::kObjOpen, Event, Objopen);
LDSCOPE_SAME(field::kObjClose, Event, Objclose);
LDSCOPE_SAME(field::kActivity, Event, Activity);
LDSCOPE_SAME(field::kPreinit, Event, Preinit);
LDSCOPE_SAME(field::kExit, Event, Exit);

LDSCOPE_SAME(field::trace_header::kFormatVersion, TraceHeader, FormatVersion);
LDSCOPE_SAME(field::trace_header::kHost, TraceHeader, Host);
LDSCOPE_SAME(field::trace_header::kGlibcVersion, TraceHeader, GlibcVersion);
LDSCOPE_SAME(field::trace_header::kStartUnixNs, TraceHeader, StartUnixNs);
LDSCOPE_SAME(field::trace_header::kWriter, TraceHeader, Writer);
LDSCOPE_SAME(field::trace_header::kPidNamespace, TraceHeader, PidNamespace);

LDSCOPE_SAME(field::process_start::kReason, ProcessStart, Reason);
LDSCOPE_SAME(field::process_start::kPpid, ProcessStart, Ppid);
LDSCOPE_SAME(field::process_start::kExe, ProcessStart, Exe);
LDSCOPE_SAME(field::process_start::kArgv, ProcessStart, Argv);
LDSCOPE_SAME(field::process_start::kCwd, ProcessStart, Cwd);
LDSCOPE_SAME(field::process_start::kGlibcVersion, ProcessStart, GlibcVersion);
LDSCOPE_SAME(field::process_start::kEnv, ProcessStart, Env);
LDSCOPE_SAME(field::process_start::kImageStartNs, ProcessStart, ImageStartNs);
LDSCOPE_SAME(field::process_start::kParentPid, ProcessStart, ParentPid);
LDSCOPE_SAME(field::process_start::kParentImageStartNs, ProcessStart, ParentImageStartNs);
LDSCOPE_SAME(field::process_start::kParentSeqAtFork, ProcessStart, ParentSeqAtFork);
LDSCOPE_SAME(field::process_start::kLavVersion, ProcessStart, LavVersion);
LDSCOPE_SAME(field::process_start::kSecure, ProcessStart, Secure);
LDSCOPE_SAME(field::process_start::kPidNamespace, ProcessStart, PidNamespace);
LDSCOPE_SAME(field::process_start::kNotTraced, ProcessStart, NotTraced);
LDSCOPE_SAME(field::process_start::kFdLimit, ProcessStart, FdLimit);

LDSCOPE_SAME(field::env_var::kName, EnvVar, Name);
LDSCOPE_SAME(field::env_var::kValue, EnvVar, Value);
LDSCOPE_SAME(field::env_var::kRedacted, EnvVar, Redacted);

LDSCOPE_SAME(field::search::kName, Search, Name);
LDSCOPE_SAME(field::search::kCandidate, Search, Candidate);
LDSCOPE_SAME(field::search::kFlag, Search, Flag);
LDSCOPE_SAME(field::search::kRequester, Search, Requester);
LDSCOPE_SAME(field::search::kDirRef, Search, DirRef);
LDSCOPE_SAME(field::search::kDir, Search, Dir);
LDSCOPE_SAME(field::search::kBase, Search, Base);

LDSCOPE_SAME(field::obj_open::kId, ObjOpen, Id);
LDSCOPE_SAME(field::obj_open::kPath, ObjOpen, Path);
LDSCOPE_SAME(field::obj_open::kLmid, ObjOpen, Lmid);
LDSCOPE_SAME(field::obj_open::kBase, ObjOpen, Base);
LDSCOPE_SAME(field::obj_open::kDev, ObjOpen, Dev);
LDSCOPE_SAME(field::obj_open::kIno, ObjOpen, Ino);
LDSCOPE_SAME(field::obj_open::kSoname, ObjOpen, Soname);
LDSCOPE_SAME(field::obj_open::kNeeded, ObjOpen, Needed);
LDSCOPE_SAME(field::obj_open::kRpath, ObjOpen, Rpath);
LDSCOPE_SAME(field::obj_open::kRunpath, ObjOpen, Runpath);
LDSCOPE_SAME(field::obj_open::kBuildId, ObjOpen, BuildId);
LDSCOPE_SAME(field::obj_open::kFlags1, ObjOpen, Flags1);
LDSCOPE_SAME(field::obj_open::kIsMain, ObjOpen, IsMain);
LDSCOPE_SAME(field::obj_open::kIsVdso, ObjOpen, IsVdso);
LDSCOPE_SAME(field::obj_open::kIsLdso, ObjOpen, IsLdso);
LDSCOPE_SAME(field::obj_open::kCwd, ObjOpen, Cwd);

LDSCOPE_SAME(field::obj_close::kId, ObjClose, Id);
LDSCOPE_SAME(field::obj_close::kUnrelocated, ObjClose, Unrelocated);

LDSCOPE_SAME(field::activity::kKind, Activity, Kind);
LDSCOPE_SAME(field::activity::kId, Activity, Id);

LDSCOPE_SAME(field::event_batch::kEvent, EventBatch, Event);

#undef LDSCOPE_SAME

}  // namespace
}  // namespace ldscope::audit
