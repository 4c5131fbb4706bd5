#include "postgres.h"
#include "worker/worker.h"
#include "api/start.h"
