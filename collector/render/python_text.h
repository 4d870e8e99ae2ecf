// Python attribution in words: where an import or a ctypes dlopen happened, for the
// text report, the timeline and the findings' headlines (model/python.cc computes the
// causes; this file only says them).
#pragma once

#include <string>

#include "ldscope_proto/timeline.pb.h"

namespace ldscope::render {

// "ctypes.CDLL('libnccl.so.2.16.2') at cupy/_environment.py:12, during import cupy at
// train.py:3", "import torch._C at torch/__init__.py:5, during import torch at
// train.py:4". Files under site-packages are shown from there, files under cwd
// relative to it. "" when the cause is empty.
std::string PyCauseText(const v1::PyCause& c, const std::string& cwd);
std::string PyFrameText(const v1::SourceLine& f, const std::string& cwd);

}  // namespace ldscope::render
