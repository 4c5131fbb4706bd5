#include "postgres.h"
#include "common/base64.h"
#include "common/json.h"
#include "common/jsn.h"
