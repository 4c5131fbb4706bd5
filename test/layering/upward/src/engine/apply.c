#include "postgres.h"
#include "common/json.h"
#include "api/cancel.h"
