#include "text/escape.h"
