#include "text/escape.h"
#include <string>
