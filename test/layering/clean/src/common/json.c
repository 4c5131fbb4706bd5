#include "postgres.h"
#include "common/json.h"
#include "common/base64.h"		/* PostgreSQL's common/, not ours */
#include <string.h>
