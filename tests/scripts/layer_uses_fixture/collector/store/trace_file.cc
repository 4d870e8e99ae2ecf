#include "ldscope_proto/events.pb.h"
#include "store/trace_file.h"
#include "text/escape.h"
#include "wire.h"
