#include "ldscope_proto/events.pb.h"
