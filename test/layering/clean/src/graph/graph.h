#include "common/json.h"
