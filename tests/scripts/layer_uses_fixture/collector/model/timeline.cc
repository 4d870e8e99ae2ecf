#include "model/timeline.h"
#include "store/trace_file.h"
#include "render/json.h"
